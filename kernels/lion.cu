// Fused Lion over a flat fp32 shard (see cuda_kernels.h): one launch, grid-stride, 4-wide accesses where
// the arrays share their alignment. The arithmetic follows zlion_step_ref operation by operation with
// round-to-nearest intrinsics, so nvcc does not contract it into FMAs and the result matches the CPU
// reference bit for bit. Traffic per element: read master, m (8 B) + grad; write master, m + param_out.
#include "kernels/cuda_common.cuh"
#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

namespace {

using namespace zcu;

struct LionScalars {
    float gf, b1, omb1, b2, omb2, lr, after_decay;
    int decay;
};

template <class GT, class PT> struct LionOp {
    float *master, *m;
    const GT *grad;
    PT *pout;
    const uint8_t *mask;
    LionScalars s;

    __device__ __forceinline__ float update(size_t i, float p, float g_raw, float &mi) const {
        const bool decayed = s.decay && decayed_at(mask, i);
        const float g = __fmul_rn(g_raw, s.gf);
        const float c = ema(s.b1, s.omb1, mi, g);
        const float sgn = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
        if (decayed) p = __fmul_rn(p, s.after_decay);
        p = __fsub_rn(p, __fmul_rn(s.lr, sgn));
        mi = ema(s.b2, s.omb2, mi, g);
        return p;
    }

    __device__ __forceinline__ void scalar(size_t i) {
        float mi = m[i];
        const float p = update(i, master[i], ld1(grad, i), mi);
        master[i] = p;
        m[i] = mi;
        if constexpr (!std::is_same<PT, NoOut>::value) st1(pout, i, p);
    }

    __device__ __forceinline__ void vec(size_t i) {
        float p[4], g[4], mi[4];
        ld4(master, i, p);
        ld4(grad, i, g);
        ld4(m, i, mi);
#pragma unroll
        for (int k = 0; k < 4; k++) p[k] = update(i + k, p[k], g[k], mi[k]);
        st4(master, i, p);
        st4(m, i, mi);
        if constexpr (!std::is_same<PT, NoOut>::value) st4(pout, i, p);
    }
};

template <class GT, class PT>
__global__ void __launch_bounds__(kThreads) lion_kernel(LionScalars s, Plan pl, float *master, float *m,
                                                       const GT *grad, PT *pout, const uint8_t *mask) {
    LionOp<GT, PT> op;
    op.master = master;
    op.m = m;
    op.grad = grad;
    op.pout = pout;
    op.mask = mask;
    op.s = s;
    run_plan(op, pl);
}

template <class GT, class PT>
int launch_typed(const LionScalars &s, size_t n, float *master, float *m, const void *grad, void *pout,
                 const uint8_t *mask, cudaStream_t st) {
    long hp = 0;
    if constexpr (!std::is_same<PT, NoOut>::value) hp = head_for<PT>(pout);
    Plan pl = make_plan(n, {{master, head_for<float>(master)},
                            {m, head_for<float>(m)},
                            {grad, head_for<GT>(grad)},
                            {std::is_same<PT, NoOut>::value ? nullptr : pout, hp}});
    const size_t work = pl.vec ? pl.nvec : n;
    lion_kernel<GT, PT><<<grid_for(work), kThreads, 0, st>>>(s, pl, master, m, static_cast<const GT *>(grad),
                                                            static_cast<PT *>(pout), mask);
    return launch_rc();
}

template <class GT>
int launch_pdt(const LionScalars &s, size_t n, float *master, float *m, const void *grad, void *pout,
               zinc_dtype pdt, const uint8_t *mask, cudaStream_t st) {
    if (!pout) return launch_typed<GT, NoOut>(s, n, master, m, grad, nullptr, mask, st);
    switch (pdt) {
    case ZINC_FP32: return launch_typed<GT, float>(s, n, master, m, grad, pout, mask, st);
    case ZINC_FP16: return launch_typed<GT, __half>(s, n, master, m, grad, pout, mask, st);
    case ZINC_BF16: return launch_typed<GT, __nv_bfloat16>(s, n, master, m, grad, pout, mask, st);
    }
    return (int)cudaErrorInvalidValue;
}

} // namespace

extern "C" int zcu_lion_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m,
                                  const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                                  const uint8_t *decay_mask, void *stream) {
    if (n == 0) return 0;
    if (!h || !master || !m || !grad || !valid_dtype(gdt) || (param_out && !valid_dtype(pdt)))
        return (int)cudaErrorInvalidValue;
    LionScalars s;
    s.gf = h->grad_factor;
    s.b1 = h->beta1;
    s.omb1 = 1.0f - h->beta1; // on the host, as zlion_step_ref rounds them
    s.b2 = h->beta2;
    s.omb2 = 1.0f - h->beta2;
    s.lr = h->lr;
    s.after_decay = 1.0f - h->lr * h->weight_decay;
    s.decay = h->weight_decay != 0.0f;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (gdt) {
    case ZINC_FP32: return launch_pdt<float>(s, n, master, m, grad, param_out, pdt, decay_mask, st);
    case ZINC_FP16: return launch_pdt<__half>(s, n, master, m, grad, param_out, pdt, decay_mask, st);
    case ZINC_BF16: return launch_pdt<__nv_bfloat16>(s, n, master, m, grad, param_out, pdt, decay_mask, st);
    }
    return (int)cudaErrorInvalidValue;
}
