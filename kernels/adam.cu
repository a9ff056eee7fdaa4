// Fused Adam/AdamW over a flat fp32 shard (see cuda_kernels.h). One launch; the step's scalars are read
// from a device parameter block so the engine's step needs no host round trip.
//
// Traffic per element: read master, m, v (12 B) + grad (2 or 4 B); write master, m, v (12 B) + param_out
// (0, 2 or 4 B): 28 B for half grad + half param_out. Accesses are 4 elements wide (float4 for the fp32
// arrays, 8 bytes for the 16-bit ones) when the arrays share their alignment; a grid-stride loop of
// 256-thread blocks, 8 blocks per SM.
//
// The arithmetic follows zadam_step_ref operation by operation with round-to-nearest intrinsics
// (__fmul_rn, __fadd_rn, ...) so that nvcc does not contract it into FMAs: results match the CPU
// reference to the last bit or within an ulp.
#include <string.h>

#include "kernels/cuda_common.cuh"
#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

namespace {

using namespace zcu;

struct AdamScalars {
    float lr, b1, b2, eps, wd, factor;
    double bc1, bc2; /* the step's constants are derived from them in double and rounded once */
    int adamw, skip;
};

__device__ __forceinline__ AdamScalars load_scalars(const zadam_device_params *dp, const zadam_device_params &hv) {
    zadam_device_params p;
    if (dp) p = *dp;
    else p = hv;
    AdamScalars s;
    s.lr = p.lr;
    s.b1 = p.beta1;
    s.b2 = p.beta2;
    s.eps = p.eps;
    s.wd = p.weight_decay;
    s.bc1 = p.bias_correction1;
    s.bc2 = p.bias_correction2;
    s.factor = p.grad_factor;
    s.adamw = p.adamw;
    s.skip = p.skip;
    return s;
}

template <class GT, class PT> struct AdamOp {
    float *master, *m, *v;
    const GT *grad;
    PT *pout;
    const uint8_t *mask;
    // derived per-thread constants
    float lr, b1, b2, omb1, omb2, eps, wd, factor, sqrt_bc2, step_size, lr_wd;
    int adamw;

    __device__ __forceinline__ float update(size_t i, float p, float g_raw, float &mi, float &vi) const {
        const bool decay = wd != 0.0f && decayed_at(mask, i);
        float g = __fmul_rn(g_raw, factor);
        if (!adamw && decay) g = __fadd_rn(g, __fmul_rn(wd, p));
        mi = ema(b1, omb1, mi, g);
        vi = ema(b2, omb2, vi, __fmul_rn(g, g));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), sqrt_bc2), eps);
        if (adamw && decay) p = __fsub_rn(p, __fmul_rn(lr_wd, p));
        p = __fsub_rn(p, __fdiv_rn(__fmul_rn(step_size, mi), denom));
        return p;
    }

    __device__ __forceinline__ void scalar(size_t i) {
        float mi = m[i], vi = v[i];
        const float p = update(i, master[i], ld1(grad, i), mi, vi);
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
        for (int k = 0; k < 4; k++) p[k] = update(i + k, p[k], g[k], mi[k], vi[k]);
        st4(master, i, p);
        st4(m, i, mi);
        st4(v, i, vi);
        if constexpr (!std::is_same<PT, NoOut>::value) st4(pout, i, p);
    }
};

template <class GT, class PT>
__global__ void __launch_bounds__(kThreads) adam_kernel(const zadam_device_params *dparams, zadam_device_params hv,
                                                       Plan pl, float *master, float *m, float *v, const GT *grad,
                                                       PT *pout, const uint8_t *mask) {
    const AdamScalars s = load_scalars(dparams, hv);
    if (s.skip) return;
    AdamOp<GT, PT> op;
    op.master = master;
    op.m = m;
    op.v = v;
    op.grad = grad;
    op.pout = pout;
    op.mask = mask;
    op.lr = s.lr;
    op.b1 = s.b1;
    op.b2 = s.b2;
    op.omb1 = __fsub_rn(1.0f, s.b1);
    op.omb2 = __fsub_rn(1.0f, s.b2);
    op.eps = s.eps;
    op.wd = s.wd;
    op.factor = s.factor;
    op.sqrt_bc2 = (float)sqrt(s.bc2);
    op.step_size = (float)((double)s.lr / s.bc1);
    op.lr_wd = __fmul_rn(s.lr, s.wd);
    op.adamw = s.adamw;
    run_plan(op, pl);
}

template <class GT, class PT>
int launch_typed(const zadam_device_params *dparams, const zadam_device_params &hv, size_t n, float *master,
                 float *m, float *v, const void *grad, void *pout, const uint8_t *mask, cudaStream_t st) {
    const GT *g = static_cast<const GT *>(grad);
    PT *po = static_cast<PT *>(pout);
    long hp = 0;
    if constexpr (std::is_same<PT, NoOut>::value) hp = 0;
    else hp = head_for<PT>(pout);
    Plan pl = make_plan(n, {{master, head_for<float>(master)},
                            {m, head_for<float>(m)},
                            {v, head_for<float>(v)},
                            {grad, head_for<GT>(grad)},
                            {std::is_same<PT, NoOut>::value ? nullptr : pout, hp}});
    const size_t work = pl.vec ? pl.nvec : n;
    adam_kernel<GT, PT><<<grid_for(work), kThreads, 0, st>>>(dparams, hv, pl, master, m, v, g, po, mask);
    return launch_rc();
}

template <class GT>
int launch_pdt(const zadam_device_params *dparams, const zadam_device_params &hv, size_t n, float *master,
               float *m, float *v, const void *grad, void *pout, zinc_dtype pdt, const uint8_t *mask,
               cudaStream_t st) {
    if (!pout) return launch_typed<GT, NoOut>(dparams, hv, n, master, m, v, grad, nullptr, mask, st);
    switch (pdt) {
    case ZINC_FP32: return launch_typed<GT, float>(dparams, hv, n, master, m, v, grad, pout, mask, st);
    case ZINC_FP16: return launch_typed<GT, __half>(dparams, hv, n, master, m, v, grad, pout, mask, st);
    case ZINC_BF16: return launch_typed<GT, __nv_bfloat16>(dparams, hv, n, master, m, v, grad, pout, mask, st);
    }
    return (int)cudaErrorInvalidValue;
}

int launch(const zadam_device_params *dparams, const zadam_device_params &hv, size_t n, float *master, float *m,
           float *v, const void *grad, zinc_dtype gdt, void *pout, zinc_dtype pdt, const uint8_t *mask,
           void *stream) {
    if (n == 0) return 0;
    if (!master || !m || !v || !grad || !valid_dtype(gdt) || (pout && !valid_dtype(pdt)))
        return (int)cudaErrorInvalidValue;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (gdt) {
    case ZINC_FP32: return launch_pdt<float>(dparams, hv, n, master, m, v, grad, pout, pdt, mask, st);
    case ZINC_FP16: return launch_pdt<__half>(dparams, hv, n, master, m, v, grad, pout, pdt, mask, st);
    case ZINC_BF16: return launch_pdt<__nv_bfloat16>(dparams, hv, n, master, m, v, grad, pout, pdt, mask, st);
    }
    return (int)cudaErrorInvalidValue;
}

// ------------------------------------------------------------------ finalize

__global__ void finalize_kernel(const zcu_grad_stats_result *stats, const float *loss_scale, zcu_finalize_args a,
                                zadam_device_params *out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const double scale = loss_scale ? (double)*loss_scale : 1.0;
    const double inv_total_scale = (double)a.base_factor / scale;
    const double true_norm = sqrt(stats->sumsq) * inv_total_scale;
    double clip_coef = 1.0;
    if (a.clip > 0.0f && true_norm + 1e-6 > (double)a.clip) clip_coef = (double)a.clip / (true_norm + 1e-6);
    zadam_device_params p;
    p.lr = a.lr;
    p.beta1 = a.beta1;
    p.beta2 = a.beta2;
    p.eps = a.eps;
    p.weight_decay = a.weight_decay;
    p.bias_correction1 = a.bias_correction1;
    p.bias_correction2 = a.bias_correction2;
    p.grad_factor = (float)(inv_total_scale * clip_coef);
    p.adamw = a.adamw;
    p.skip = stats->nonfinite != 0;
    p.true_norm = (float)true_norm;
    p.clip_coef = (float)clip_coef;
    *out = p;
}

} // namespace

extern "C" int zcu_adam_step(const zadam_device_params *dparams, size_t n, float *master, float *m, float *v,
                             const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                             const uint8_t *decay_mask, void *stream) {
    if (!dparams) return n ? (int)cudaErrorInvalidValue : 0;
    zadam_device_params unused;
    memset(&unused, 0, sizeof unused);
    return launch(dparams, unused, n, master, m, v, grad, gdt, param_out, pdt, decay_mask, stream);
}

extern "C" int zcu_adam_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m, float *v,
                                  const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                                  const uint8_t *decay_mask, void *stream) {
    if (!h) return n ? (int)cudaErrorInvalidValue : 0;
    if (h->lion) return zcu_lion_step_host(h, n, master, m, grad, gdt, param_out, pdt, decay_mask, stream);
    zadam_device_params p;
    memset(&p, 0, sizeof p);
    p.lr = h->lr;
    p.beta1 = h->beta1;
    p.beta2 = h->beta2;
    p.eps = h->eps;
    p.weight_decay = h->weight_decay;
    p.bias_correction1 = h->bias_correction1;
    p.bias_correction2 = h->bias_correction2;
    p.grad_factor = h->grad_factor;
    p.adamw = h->adamw;
    p.skip = 0;
    p.clip_coef = 1.0f;
    return launch(nullptr, p, n, master, m, v, grad, gdt, param_out, pdt, decay_mask, stream);
}

extern "C" int zcu_adam_finalize(const zcu_grad_stats_result *stats, const float *loss_scale, zcu_finalize_args a,
                                 zadam_device_params *dparams, void *stream) {
    if (!stats || !dparams) return (int)cudaErrorInvalidValue;
    finalize_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(stats, loss_scale, a, dparams);
    return launch_rc();
}
