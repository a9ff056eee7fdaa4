// Elementwise helpers (see cuda_kernels.h): accumulate, casts, scale, fill, random fill. Each is one
// grid-stride launch with 4-wide accesses when the arrays share their alignment.
#include <string.h>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"

namespace {

using namespace zcu;

template <class T> struct AxpyOp {
    float *dst;
    const T *src;
    float scale;
    int acc;
    __device__ __forceinline__ float f(float d, float s) const {
        return __fadd_rn(acc ? d : 0.0f, __fmul_rn(scale, s));
    }
    __device__ __forceinline__ void scalar(size_t i) { dst[i] = f(acc ? dst[i] : 0.0f, ld1(src, i)); }
    __device__ __forceinline__ void vec(size_t i) {
        float d[4] = {0, 0, 0, 0}, s[4];
        if (acc) ld4(dst, i, d);
        ld4(src, i, s);
#pragma unroll
        for (int k = 0; k < 4; k++) d[k] = f(d[k], s[k]);
        st4(dst, i, d);
    }
};

template <class TD, class TS> struct CastOp {
    TD *dst;
    const TS *src;
    __device__ __forceinline__ void scalar(size_t i) { st1(dst, i, ld1(src, i)); }
    __device__ __forceinline__ void vec(size_t i) {
        float r[4];
        ld4(src, i, r);
        st4(dst, i, r);
    }
};

template <class T> struct ScaleOp {
    T *x;
    float scale;
    __device__ __forceinline__ void scalar(size_t i) { st1(x, i, __fmul_rn(ld1(x, i), scale)); }
    __device__ __forceinline__ void vec(size_t i) {
        float r[4];
        ld4(x, i, r);
#pragma unroll
        for (int k = 0; k < 4; k++) r[k] = __fmul_rn(r[k], scale);
        st4(x, i, r);
    }
};

template <class T> struct FillOp {
    T *x;
    float value;
    __device__ __forceinline__ void scalar(size_t i) { st1(x, i, value); }
    __device__ __forceinline__ void vec(size_t i) {
        const float r[4] = {value, value, value, value};
        st4(x, i, r);
    }
};

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <class T> struct RandomOp {
    T *x;
    uint64_t seed;
    float lo, span;
    __device__ __forceinline__ float at(size_t i) const {
        const uint64_t h = mix64(seed ^ mix64((uint64_t)i));
        const float u = (float)(h >> 40) * (1.0f / 16777216.0f); // [0, 1), 24 bits
        return lo + span * u;
    }
    __device__ __forceinline__ void scalar(size_t i) { st1(x, i, at(i)); }
    __device__ __forceinline__ void vec(size_t i) {
        float r[4];
#pragma unroll
        for (int k = 0; k < 4; k++) r[k] = at(i + k);
        st4(x, i, r);
    }
};

template <class Op> __global__ void __launch_bounds__(kThreads) ew_kernel(Op op, Plan pl) { run_plan(op, pl); }

template <class Op> int launch_op(const Op &op, const Plan &pl, void *stream) {
    const size_t work = pl.vec ? pl.nvec : pl.n;
    ew_kernel<Op><<<grid_for(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(op, pl);
    return launch_rc();
}

} // namespace

extern "C" int zcu_axpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate,
                            void *stream) {
    if (n == 0) return 0;
    if (!dst || !src || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        AxpyOp<T> op{dst, static_cast<const T *>(src), scale, accumulate ? 1 : 0};
        Plan pl = make_plan(n, {{dst, head_for<float>(dst)}, {src, head_for<T>(src)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_cast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n, void *stream) {
    if (n == 0) return 0;
    if (!dst || !src || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        CastOp<T, float> op{static_cast<T *>(dst), src};
        Plan pl = make_plan(n, {{dst, head_for<T>(dst)}, {src, head_for<float>(src)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_cast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n, void *stream) {
    if (n == 0) return 0;
    if (!dst || !src || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        CastOp<float, T> op{dst, static_cast<const T *>(src)};
        Plan pl = make_plan(n, {{dst, head_for<float>(dst)}, {src, head_for<T>(src)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_scale_inplace(void *x, zinc_dtype t, float scale, size_t n, void *stream) {
    if (n == 0) return 0;
    if (!x || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        ScaleOp<T> op{static_cast<T *>(x), scale};
        Plan pl = make_plan(n, {{x, head_for<T>(x)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_fill(void *x, zinc_dtype t, float value, size_t n, void *stream) {
    if (n == 0) return 0;
    if (!x || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        FillOp<T> op{static_cast<T *>(x), value};
        Plan pl = make_plan(n, {{x, head_for<T>(x)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_fill_random(void *x, zinc_dtype t, size_t n, uint64_t seed, float lo, float hi, void *stream) {
    if (n == 0) return 0;
    if (!x || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    return dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        RandomOp<T> op{static_cast<T *>(x), seed, lo, hi - lo};
        Plan pl = make_plan(n, {{x, head_for<T>(x)}});
        return launch_op(op, pl, stream);
    });
}

extern "C" int zcu_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n < 0 ? 0 : n;
}

extern "C" const char *zcu_error_string(int rc) { return cudaGetErrorString(static_cast<cudaError_t>(rc)); }
