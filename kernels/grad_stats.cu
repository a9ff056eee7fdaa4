// Deterministic gradient statistics (see cuda_kernels.h): sum of squares in double and an inf/nan flag.
// Pass 1: a fixed grid of ZCU_STATS_BLOCKS x ZCU_STATS_THREADS threads; each thread accumulates its
// grid-stride elements in index order (4-wide loads when aligned), each block reduces with a fixed
// shared-memory tree and writes one partial. Pass 2: one block reduces the partials with a fixed tree.
// No atomics anywhere, so the same input gives the same bits on every run and every GPU.
#include <string.h>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"

namespace {

using namespace zcu;

static_assert(ZCU_STATS_THREADS == kThreads, "stats block size");
static_assert((ZCU_STATS_BLOCKS & (ZCU_STATS_BLOCKS - 1)) == 0, "stats blocks must be a power of two");

struct Partials {
    double sum[ZCU_STATS_BLOCKS];
    int bad[ZCU_STATS_BLOCKS];
};
// base/device/device.c's zdev_cuda_fixed_bytes (what the memory estimate counts) assumes this size.
static_assert(sizeof(Partials) == ZCU_STATS_BLOCKS * (sizeof(double) + sizeof(int)), "Partials has padding");

template <class T> struct StatsOp {
    const T *x;
    double acc;
    int bad;
    __device__ __forceinline__ void add(float f) {
        bad |= !isfinite(f);
        const double d = (double)f;
        acc = __dadd_rn(acc, __dmul_rn(d, d));
    }
    __device__ __forceinline__ void scalar(size_t i) { add(ld1(x, i)); }
    __device__ __forceinline__ void vec(size_t i) {
        float r[4];
        ld4(x, i, r);
#pragma unroll
        for (int k = 0; k < 4; k++) add(r[k]);
    }
};

// Fixed-order tree over `count` (a power of two) values in shared memory.
template <int COUNT> __device__ __forceinline__ void tree_reduce(double *s, int *b) {
#pragma unroll 1
    for (int w = COUNT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            s[threadIdx.x] = __dadd_rn(s[threadIdx.x], s[threadIdx.x + w]);
            b[threadIdx.x] |= b[threadIdx.x + w];
        }
        __syncthreads();
    }
}

template <class T> __global__ void __launch_bounds__(ZCU_STATS_THREADS) stats_pass1(const T *x, Plan pl, Partials *ws) {
    __shared__ double s[ZCU_STATS_THREADS];
    __shared__ int b[ZCU_STATS_THREADS];
    StatsOp<T> op{x, 0.0, 0};
    run_plan(op, pl);
    s[threadIdx.x] = op.acc;
    b[threadIdx.x] = op.bad;
    __syncthreads();
    tree_reduce<ZCU_STATS_THREADS>(s, b);
    if (threadIdx.x == 0) {
        ws->sum[blockIdx.x] = s[0];
        ws->bad[blockIdx.x] = b[0];
    }
}

__global__ void __launch_bounds__(ZCU_STATS_BLOCKS) stats_pass2(const Partials *ws, zcu_grad_stats_result *out,
                                                               int accumulate) {
    __shared__ double s[ZCU_STATS_BLOCKS];
    __shared__ int b[ZCU_STATS_BLOCKS];
    s[threadIdx.x] = ws->sum[threadIdx.x];
    b[threadIdx.x] = ws->bad[threadIdx.x];
    __syncthreads();
    tree_reduce<ZCU_STATS_BLOCKS>(s, b);
    if (threadIdx.x == 0) {
        zcu_grad_stats_result r;
        r.sumsq = accumulate ? __dadd_rn(out->sumsq, s[0]) : s[0];
        r.nonfinite = (accumulate ? out->nonfinite != 0 : 0) | (b[0] != 0);
        r.pad_ = 0;
        *out = r;
    }
}

__global__ void stats_zero(zcu_grad_stats_result *out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        zcu_grad_stats_result r;
        r.sumsq = 0.0;
        r.nonfinite = 0;
        r.pad_ = 0;
        *out = r;
    }
}

} // namespace

extern "C" size_t zcu_grad_stats_workspace_bytes(void) { return sizeof(Partials); }

extern "C" int zcu_grad_stats(const void *x, zinc_dtype t, size_t n, void *workspace, zcu_grad_stats_result *out,
                              int accumulate, void *stream) {
    if (!out || !valid_dtype(t)) return (int)cudaErrorInvalidValue;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (n == 0) {
        if (!accumulate) stats_zero<<<1, 32, 0, st>>>(out);
        return accumulate ? 0 : launch_rc();
    }
    if (!x || !workspace) return (int)cudaErrorInvalidValue;
    Partials *ws = static_cast<Partials *>(workspace);
    int rc = dispatch_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        const T *xp = static_cast<const T *>(x);
        Plan pl = make_plan(n, {{x, head_for<T>(x)}});
        stats_pass1<T><<<ZCU_STATS_BLOCKS, ZCU_STATS_THREADS, 0, st>>>(xp, pl, ws);
        return launch_rc();
    });
    if (rc) return rc;
    stats_pass2<<<1, ZCU_STATS_BLOCKS, 0, st>>>(ws, out, accumulate);
    return launch_rc();
}
