// Private device helpers shared by kernels/*.cu: typed 4-element loads and stores, the grid-stride
// driver with head peel / vector body / scalar tail, and launch sizing. Not part of any public API.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <initializer_list>
#include <string.h>
#include <type_traits>
#include <utility>

#include "zinc.h"
#include "kernels/cpu_kernels.h"

namespace zcu {

constexpr int kThreads = 256;
constexpr int kVec = 4;

// A "no output" storage type for the Adam kernel's optional param_out.
struct NoOut {};

template <class T> struct F4 { float x, y, z, w; };

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// The optimizers' shared element operations (adam.cu, lion.cu, lamb.cu), each rounded as their C
// references round them (kernels/adam_scalar.h, lion_cpu.c, lamb_cpu.c): the moving average
// b * m + (1 - b) * x, and whether element i takes weight decay (one mask byte per ZADAM_MASK_GROUP
// elements; no mask: all do).
__device__ __forceinline__ float ema(float b, float omb, float m, float x) {
    return __fadd_rn(__fmul_rn(b, m), __fmul_rn(omb, x));
}
__device__ __forceinline__ bool decayed_at(const uint8_t *mask, size_t i) {
    return mask == nullptr || mask[i / ZADAM_MASK_GROUP] != 0;
}

// Scalar element access.
template <class T> __device__ __forceinline__ float ld1(const T *p, size_t i) { return to_f(p[i]); }
template <class T> __device__ __forceinline__ void st1(T *p, size_t i, float x) { p[i] = from_f<T>(x); }

// Four elements starting at p + i (i a multiple of 4 from an aligned base: the caller guarantees
// 16-byte alignment for float, 8-byte for 16-bit types).
__device__ __forceinline__ void ld4(const float *p, size_t i, float r[4]) {
    float4 q = *reinterpret_cast<const float4 *>(p + i);
    r[0] = q.x; r[1] = q.y; r[2] = q.z; r[3] = q.w;
}
__device__ __forceinline__ void st4(float *p, size_t i, const float r[4]) {
    *reinterpret_cast<float4 *>(p + i) = make_float4(r[0], r[1], r[2], r[3]);
}
template <class H> __device__ __forceinline__ void ld4_half(const H *p, size_t i, float r[4]) {
    uint2 q = *reinterpret_cast<const uint2 *>(p + i);
    H h[4];
    memcpy(h, &q, sizeof q);
#pragma unroll
    for (int k = 0; k < 4; k++) r[k] = to_f(h[k]);
}
template <class H> __device__ __forceinline__ void st4_half(H *p, size_t i, const float r[4]) {
    H h[4];
#pragma unroll
    for (int k = 0; k < 4; k++) h[k] = from_f<H>(r[k]);
    uint2 q;
    memcpy(&q, h, sizeof q);
    *reinterpret_cast<uint2 *>(p + i) = q;
}
__device__ __forceinline__ void ld4(const __half *p, size_t i, float r[4]) { ld4_half(p, i, r); }
__device__ __forceinline__ void ld4(const __nv_bfloat16 *p, size_t i, float r[4]) { ld4_half(p, i, r); }
__device__ __forceinline__ void st4(__half *p, size_t i, const float r[4]) { st4_half(p, i, r); }
__device__ __forceinline__ void st4(__nv_bfloat16 *p, size_t i, const float r[4]) { st4_half(p, i, r); }

// Bytes a 4-element access of T covers, hence the alignment it needs.
template <class T> constexpr size_t vec_bytes() { return 4 * sizeof(T); }

// How many leading elements to peel so that p + head is aligned for 4-wide access; -1 if it never is.
template <class T> inline long head_for(const void *p) {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a % sizeof(T)) return -1;
    size_t mis = a % vec_bytes<T>();
    return mis ? (long)((vec_bytes<T>() - mis) / sizeof(T)) : 0;
}

// The layout one launch uses: scalar for [0, head), 4-wide for [head, head + 4*nvec), scalar after.
struct Plan {
    size_t n, head, nvec;
    int vec; // 0: everything scalar
};

// All pointers must agree on the head for the vector path. Pass pairs of (pointer, head_for<T>(pointer));
// NULL pointers (optional arrays) are skipped.
inline Plan make_plan(size_t n, std::initializer_list<std::pair<const void *, long>> ptrs) {
    Plan pl{n, 0, 0, 0};
    long head = -2;
    for (auto &pr : ptrs) {
        if (!pr.first) continue;
        if (pr.second < 0 || (head != -2 && pr.second != head)) return pl;
        head = pr.second;
    }
    if (head < 0) head = 0;
    if ((size_t)head >= n) return pl;
    pl.head = (size_t)head;
    pl.nvec = (n - pl.head) / kVec;
    pl.vec = pl.nvec > 0;
    return pl;
}

// Drives op.scalar(i) / op.vec(i) over a plan with a grid-stride loop.
template <class Op> __device__ __forceinline__ void run_plan(Op &op, const Plan &pl) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    if (!pl.vec) {
        for (size_t i = tid; i < pl.n; i += stride) op.scalar(i);
        return;
    }
    if (tid < pl.head) op.scalar(tid);
    for (size_t j = tid; j < pl.nvec; j += stride) op.vec(pl.head + (size_t)kVec * j);
    const size_t tail = pl.head + (size_t)kVec * pl.nvec;
    if (tail + tid < pl.n) op.scalar(tail + tid); // at most 3 tail elements
}

// Blocks for a grid-stride launch over `work` items: enough to fill the device (8 blocks of 256 threads
// per SM), never more than the work needs.
inline int grid_for(size_t work) {
    static std::atomic<int> sm_cache[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) dev = 0;
    int sms = (dev >= 0 && dev < 64) ? sm_cache[dev].load(std::memory_order_relaxed) : 0;
    if (sms <= 0) {
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) sms = 132;
        if (dev >= 0 && dev < 64) sm_cache[dev].store(sms, std::memory_order_relaxed);
    }
    size_t need = (work + kThreads - 1) / kThreads;
    size_t cap = (size_t)sms * 8;
    size_t g = need < cap ? need : cap;
    return g < 1 ? 1 : (int)g;
}

inline bool valid_dtype(zinc_dtype t) { return t == ZINC_FP32 || t == ZINC_FP16 || t == ZINC_BF16; }

// Calls f(T{}) with the storage type of dtype t.
template <class F> inline int dispatch_dtype(zinc_dtype t, F &&f) {
    switch (t) {
    case ZINC_FP32: return f(float{});
    case ZINC_FP16: return f(__half{});
    case ZINC_BF16: return f(__nv_bfloat16{});
    }
    return (int)cudaErrorInvalidValue;
}

// The launch error of the last kernel (does not synchronize).
inline int launch_rc() { return (int)cudaGetLastError(); }

} // namespace zcu
