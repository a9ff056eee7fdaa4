// LAMB's two passes over one piece of a parameter tensor (see cuda_kernels.h; the math of zlamb_sums_ref and
// zlamb_apply_ref in kernels/lamb_cpu.c). The element update follows zk_lamb_update (kernels/adam_scalar.h)
// operation by operation with round-to-nearest intrinsics, so nvcc does not contract it into FMAs: the
// apply pass matches the CPU reference bit for bit. The sums pass is deterministic as zcu_grad_stats is: a
// fixed grid of ZCU_STATS_BLOCKS x ZCU_STATS_THREADS threads, each summing its grid-stride elements in
// double in index order, a fixed shared-memory tree per block, one partial pair per block, and one block
// reducing the partials with a fixed tree; no atomics (values agree with the reference to ~1e-12
// relative, the order of the sum differs).
#include "kernels/cuda_common.cuh"
#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

namespace {

using namespace zcu;

static_assert(ZCU_STATS_THREADS == kThreads, "LAMB sums block size");

struct LambScalars {
    float gf, b1, omb1, b2, omb2, eps, wd, sc;
    int inside, decay;
};

struct LambPartials {
    double w[ZCU_STATS_BLOCKS];
    double u[ZCU_STATS_BLOCKS];
};
// zdev_lamb_workspace_bytes (base/device/device.c) sizes it without CUDA.
static_assert(sizeof(LambPartials) == ZCU_STATS_BLOCKS * 2 * sizeof(double), "LambPartials has padding");

// The new moments and the update u of one element (zk_lamb_update).
__device__ __forceinline__ float lamb_u(const LambScalars &s, float p, float &m, float &v, float graw, bool decayed) {
    const float g = __fmul_rn(graw, s.gf);
    const float mm = ema(s.b1, s.omb1, m, g);
    const float vv = ema(s.b2, s.omb2, v, __fmul_rn(g, g));
    const float denom = s.inside ? __fsqrt_rn(__fadd_rn(vv, s.eps)) : __fadd_rn(__fsqrt_rn(vv), s.eps);
    float u = __fdiv_rn(mm, denom);
    if (s.decay && decayed) u = __fadd_rn(u, __fmul_rn(s.wd, p));
    m = mm;
    v = vv;
    return u;
}

template <class GT> struct SumsOp {
    const float *master, *m, *v;
    const GT *grad;
    const uint8_t *mask;
    LambScalars s;
    double w, u;

    __device__ __forceinline__ void add(size_t i, float p, float mi, float vi, float g) {
        const double du = (double)lamb_u(s, p, mi, vi, g, decayed_at(mask, i));
        const double dp = (double)p;
        w = __dadd_rn(w, __dmul_rn(dp, dp));
        u = __dadd_rn(u, __dmul_rn(du, du));
    }
    __device__ __forceinline__ void scalar(size_t i) { add(i, master[i], m[i], v[i], ld1(grad, i)); }
    __device__ __forceinline__ void vec(size_t i) {
        float p[4], g[4], mi[4], vi[4];
        ld4(master, i, p);
        ld4(grad, i, g);
        ld4(m, i, mi);
        ld4(v, i, vi);
#pragma unroll
        for (int k = 0; k < 4; k++) add(i + k, p[k], mi[k], vi[k], g[k]);
    }
};

template <class GT, class PT> struct ApplyOp {
    float *master, *m, *v;
    const GT *grad;
    PT *pout;
    const uint8_t *mask;
    LambScalars s;

    __device__ __forceinline__ float update(size_t i, float p, float &mi, float &vi, float g) const {
        const float u = lamb_u(s, p, mi, vi, g, decayed_at(mask, i));
        return __fsub_rn(p, __fmul_rn(s.sc, u));
    }
    __device__ __forceinline__ void scalar(size_t i) {
        float mi = m[i], vi = v[i];
        const float p = update(i, master[i], mi, vi, ld1(grad, i));
        master[i] = p;
        m[i] = mi;
        v[i] = vi;
        if constexpr (!std::is_same<PT, NoOut>::value) st1(pout, i, p);
    }
    __device__ __forceinline__ void vec(size_t i) {
        float p[4], g[4], mi[4], vi[4];
        ld4(master, i, p);
        ld4(grad, i, g);
        ld4(m, i, mi);
        ld4(v, i, vi);
#pragma unroll
        for (int k = 0; k < 4; k++) p[k] = update(i + k, p[k], mi[k], vi[k], g[k]);
        st4(master, i, p);
        st4(m, i, mi);
        st4(v, i, vi);
        if constexpr (!std::is_same<PT, NoOut>::value) st4(pout, i, p);
    }
};

// Fixed-order tree over COUNT (a power of two) pairs in shared memory.
template <int COUNT> __device__ __forceinline__ void tree_reduce2(double *a, double *b) {
#pragma unroll 1
    for (int w = COUNT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            a[threadIdx.x] = __dadd_rn(a[threadIdx.x], a[threadIdx.x + w]);
            b[threadIdx.x] = __dadd_rn(b[threadIdx.x], b[threadIdx.x + w]);
        }
        __syncthreads();
    }
}

template <class GT>
__global__ void __launch_bounds__(ZCU_STATS_THREADS)
    sums_pass1(LambScalars s, Plan pl, const float *master, const float *m, const float *v, const GT *grad,
               const uint8_t *mask, LambPartials *ws) {
    __shared__ double a[ZCU_STATS_THREADS];
    __shared__ double b[ZCU_STATS_THREADS];
    SumsOp<GT> op{master, m, v, grad, mask, s, 0.0, 0.0};
    run_plan(op, pl);
    a[threadIdx.x] = op.w;
    b[threadIdx.x] = op.u;
    __syncthreads();
    tree_reduce2<ZCU_STATS_THREADS>(a, b);
    if (threadIdx.x == 0) {
        ws->w[blockIdx.x] = a[0];
        ws->u[blockIdx.x] = b[0];
    }
}

__global__ void __launch_bounds__(ZCU_STATS_BLOCKS) sums_pass2(const LambPartials *ws, double *out, int accumulate) {
    __shared__ double a[ZCU_STATS_BLOCKS];
    __shared__ double b[ZCU_STATS_BLOCKS];
    a[threadIdx.x] = ws->w[threadIdx.x];
    b[threadIdx.x] = ws->u[threadIdx.x];
    __syncthreads();
    tree_reduce2<ZCU_STATS_BLOCKS>(a, b);
    if (threadIdx.x == 0) {
        out[0] = accumulate ? __dadd_rn(out[0], a[0]) : a[0];
        out[1] = accumulate ? __dadd_rn(out[1], b[0]) : b[0];
    }
}

__global__ void sums_zero(double *out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = out[1] = 0.0;
}

template <class GT, class PT>
__global__ void __launch_bounds__(kThreads) apply_kernel(LambScalars s, Plan pl, float *master, float *m, float *v,
                                                        const GT *grad, PT *pout, const uint8_t *mask) {
    ApplyOp<GT, PT> op{master, m, v, grad, pout, mask, s};
    run_plan(op, pl);
}

// The scalars as zk_lamb_consts_make forms them on the host (the same roundings: 1 - beta in float, the
// step in double rounded once), and sc = step * coeff as zlamb_apply_ref forms it.
LambScalars scalars_of(const zlamb_hparams *h, float coeff) {
    LambScalars s;
    s.gf = h->grad_factor;
    s.b1 = h->beta1;
    s.omb1 = 1.0f - h->beta1;
    s.b2 = h->beta2;
    s.omb2 = 1.0f - h->beta2;
    s.eps = h->eps;
    s.wd = h->weight_decay;
    const float step = (float)((double)h->lr * sqrt(h->bias_correction2) / h->bias_correction1);
    s.sc = step * coeff;
    s.inside = h->eps_inside_sqrt;
    s.decay = h->weight_decay != 0.0f;
    return s;
}

template <class GT, class PT>
int apply_typed(const LambScalars &s, size_t n, float *master, float *m, float *v, const void *grad, void *pout,
                const uint8_t *mask, cudaStream_t st) {
    long hp = 0;
    if constexpr (!std::is_same<PT, NoOut>::value) hp = head_for<PT>(pout);
    Plan pl = make_plan(n, {{master, head_for<float>(master)},
                            {m, head_for<float>(m)},
                            {v, head_for<float>(v)},
                            {grad, head_for<GT>(grad)},
                            {std::is_same<PT, NoOut>::value ? nullptr : pout, hp}});
    const size_t work = pl.vec ? pl.nvec : n;
    apply_kernel<GT, PT><<<grid_for(work), kThreads, 0, st>>>(s, pl, master, m, v, static_cast<const GT *>(grad),
                                                             static_cast<PT *>(pout), mask);
    return launch_rc();
}

template <class GT>
int apply_pdt(const LambScalars &s, size_t n, float *master, float *m, float *v, const void *grad, void *pout,
              zinc_dtype pdt, const uint8_t *mask, cudaStream_t st) {
    if (!pout) return apply_typed<GT, NoOut>(s, n, master, m, v, grad, nullptr, mask, st);
    switch (pdt) {
    case ZINC_FP32: return apply_typed<GT, float>(s, n, master, m, v, grad, pout, mask, st);
    case ZINC_FP16: return apply_typed<GT, __half>(s, n, master, m, v, grad, pout, mask, st);
    case ZINC_BF16: return apply_typed<GT, __nv_bfloat16>(s, n, master, m, v, grad, pout, mask, st);
    }
    return (int)cudaErrorInvalidValue;
}

} // namespace

extern "C" size_t zcu_lamb_sums_workspace_bytes(void) { return sizeof(LambPartials); }

extern "C" int zcu_lamb_sums(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                             const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, void *workspace,
                             double *out, int accumulate, void *stream) {
    if (!h || !out || !valid_dtype(gdt)) return (int)cudaErrorInvalidValue;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (n == 0) {
        if (!accumulate) sums_zero<<<1, 32, 0, st>>>(out);
        return accumulate ? 0 : launch_rc();
    }
    if (!master || !m || !v || !grad || !workspace) return (int)cudaErrorInvalidValue;
    const LambScalars s = scalars_of(h, 1.0f);
    LambPartials *ws = static_cast<LambPartials *>(workspace);
    int rc = dispatch_dtype(gdt, [&](auto tag) {
        using GT = decltype(tag);
        Plan pl = make_plan(n, {{master, head_for<float>(master)},
                                {m, head_for<float>(m)},
                                {v, head_for<float>(v)},
                                {grad, head_for<GT>(grad)}});
        sums_pass1<GT><<<ZCU_STATS_BLOCKS, ZCU_STATS_THREADS, 0, st>>>(s, pl, master, m, v,
                                                                       static_cast<const GT *>(grad), decay_mask, ws);
        return launch_rc();
    });
    if (rc) return rc;
    sums_pass2<<<1, ZCU_STATS_BLOCKS, 0, st>>>(ws, out, accumulate);
    return launch_rc();
}

extern "C" int zcu_lamb_apply(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v,
                              const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                              const uint8_t *decay_mask, void *stream) {
    if (n == 0) return 0;
    if (!h || !master || !m || !v || !grad || !valid_dtype(gdt) || (param_out && !valid_dtype(pdt)))
        return (int)cudaErrorInvalidValue;
    const LambScalars s = scalars_of(h, coeff);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (gdt) {
    case ZINC_FP32: return apply_pdt<float>(s, n, master, m, v, grad, param_out, pdt, decay_mask, st);
    case ZINC_FP16: return apply_pdt<__half>(s, n, master, m, v, grad, param_out, pdt, decay_mask, st);
    case ZINC_BF16: return apply_pdt<__nv_bfloat16>(s, n, master, m, v, grad, param_out, pdt, decay_mask, st);
    }
    return (int)cudaErrorInvalidValue;
}
