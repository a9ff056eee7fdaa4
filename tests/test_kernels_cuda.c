/* The CUDA kernels (kernels/cuda_kernels.h) against their CPU references, on fresh random inputs.
 * Exits 77 without a GPU.
 *
 * Every output is poisoned first (all bytes 0xFF: a NaN in fp32, fp16 and bf16), so an element the kernel
 * forgets to write fails. Sizes 1, 3, 7 and 1000003 (not multiples of the 4-wide vector); pointers
 * aligned, all shifted by the same element count (vector path after a peeled head), and shifted by
 * different counts (scalar fallback). Tolerances:
 *   Adam m, v:          |gpu - ref| <= 1e-12 + 1e-6 |ref|   (same operations, same order; expected exact)
 *   Adam master:        |gpu - ref| <= 2e-7 + 2e-6 |ref|
 *   Adam param_out:     bit-exact with the host conversion of the GPU's own master, and within 1e-3 (fp16)
 *                       / 8e-3 (bf16) relative of the CPU's param_out
 *   grad stats sumsq:   1e-10 relative (double sums in a different order); the flag exactly; two runs
 *                       bitwise equal
 *   finalize:           factor within 1e-6 relative of the host formula in double; flags exact
 *   casts, axpy, scale, fill: bit-exact with the scalar host conversions (zinc_f32_to_fp16/bf16) and with
 *                       zcast_from_f32; NaN must stay NaN. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"
#include "zt_cuda.h"

static uint64_t g_rng;

/* The large sizes (the CPU-thread harness, tests/cuda_threads/run_lib.sh, builds this with smaller ones:
 * there every CUDA thread is a fiber on one CPU). */
#ifndef ZT_CUDA_BIG
#define ZT_CUDA_BIG 1000003
#define ZT_CUDA_BIGGER 5000001
#endif

#define LAUNCH(call)                                                                                       \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        ZT_CHECK(rc_ == 0, "%s -> %d (%s)", #call, rc_, zcu_error_string(rc_));                            \
    } while (0)

static const zinc_dtype k_dtypes[3] = {ZINC_FP32, ZINC_FP16, ZINC_BF16};

static void *dalloc(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    CU(cudaMemset(p, 0xFF, bytes ? bytes : 1));
    return p;
}
static void *halloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}
static void h2d(void *d, const void *h, size_t b) { CU(cudaMemcpy(d, h, b, cudaMemcpyHostToDevice)); }
static void d2h(void *h, const void *d, size_t b) { CU(cudaMemcpy(h, d, b, cudaMemcpyDeviceToHost)); }
static void sync_dev(void) { CU(cudaDeviceSynchronize()); }

static uint16_t to_half(float f, zinc_dtype t) { return t == ZINC_FP16 ? zinc_f32_to_fp16(f) : zinc_f32_to_bf16(f); }
static float from_half(uint16_t h, zinc_dtype t) { return t == ZINC_FP16 ? zinc_fp16_to_f32(h) : zinc_bf16_to_f32(h); }

/* Writes n random values (normal * sigma) in dtype t into host buffer h. */
static void fill_host(void *h, zinc_dtype t, size_t n, double sigma) {
    for (size_t i = 0; i < n; i++) {
        float f = (float)(zt_rand_normal(&g_rng) * sigma);
        if (t == ZINC_FP32) ((float *)h)[i] = f;
        else ((uint16_t *)h)[i] = to_half(f, t);
    }
}
static float hget(const void *h, zinc_dtype t, size_t i) {
    return t == ZINC_FP32 ? ((const float *)h)[i] : from_half(((const uint16_t *)h)[i], t);
}
static uint32_t hbits(const void *h, zinc_dtype t, size_t i) {
    if (t == ZINC_FP32) {
        uint32_t u;
        memcpy(&u, (const float *)h + i, 4);
        return u;
    }
    return ((const uint16_t *)h)[i];
}

/* ------------------------------------------------------------------ Adam */

/* Pointer offsets in elements: all equal (vector path after a head) or different (scalar path). */
typedef struct { size_t master, m, v, g, p; } offsets;
static const offsets k_offsets[3] = {{0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {1, 0, 3, 2, 1}};

static int check_adam_case(size_t n, zinc_dtype gdt, int pdt_i, int adamw, int use_mask, const offsets *o,
                           int device_params) {
    const int has_out = pdt_i < 3;
    const zinc_dtype pdt = has_out ? k_dtypes[pdt_i] : ZINC_FP32;
    const size_t gs = zinc_dtype_size(gdt), ps = zinc_dtype_size(pdt), pad = 8;
    const int failed_before = zt_failed;
    float *hm = halloc(n * 4), *hmm = halloc(n * 4), *hv = halloc(n * 4);
    void *hg = halloc(n * gs), *hp = halloc(n * ps), *gp = halloc(n * ps);
    float *gm = halloc(n * 4), *gmm = halloc(n * 4), *gv = halloc(n * 4);
    size_t ngroups = (n + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP;
    uint8_t *mask = halloc(ngroups);
    fill_host(hm, ZINC_FP32, n, 1.0);
    fill_host(hmm, ZINC_FP32, n, 0.01);
    for (size_t i = 0; i < n; i++) hv[i] = (float)(zt_rand_uniform(&g_rng) * 1e-4);
    fill_host(hg, gdt, n, 0.5);
    for (size_t i = 0; i < ngroups; i++) mask[i] = (uint8_t)(zt_rand_u64(&g_rng) & 1);

    zadam_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                       .bias_correction1 = 1.0f - powf(0.9f, 7), .bias_correction2 = 1.0f - powf(0.999f, 7),
                       .grad_factor = 0.37f, .adamw = adamw};

    char *dm = dalloc((n + pad) * 4), *dmm = dalloc((n + pad) * 4), *dv = dalloc((n + pad) * 4);
    char *dg = dalloc((n + pad) * gs), *dp = dalloc((n + pad) * ps);
    uint8_t *dmask = dalloc(ngroups);
    zadam_device_params *dpar = dalloc(sizeof *dpar);
    float *m_ = (float *)(dm + o->master * 4), *mm_ = (float *)(dmm + o->m * 4), *v_ = (float *)(dv + o->v * 4);
    void *g_ = dg + o->g * gs, *p_ = has_out ? (void *)(dp + o->p * ps) : NULL;
    h2d(m_, hm, n * 4);
    h2d(mm_, hmm, n * 4);
    h2d(v_, hv, n * 4);
    h2d(g_, hg, n * gs);
    h2d(dmask, mask, ngroups);

    if (device_params) {
        zadam_device_params par = {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.bias_correction1,
                                   h.bias_correction2, h.grad_factor, h.adamw, 0, 0.0f, 1.0f};
        h2d(dpar, &par, sizeof par);
        LAUNCH(zcu_adam_step(dpar, n, m_, mm_, v_, g_, gdt, p_, pdt, use_mask ? dmask : NULL, NULL));
    } else {
        LAUNCH(zcu_adam_step_host(&h, n, m_, mm_, v_, g_, gdt, p_, pdt, use_mask ? dmask : NULL, NULL));
    }
    sync_dev();
    d2h(gm, m_, n * 4);
    d2h(gmm, mm_, n * 4);
    d2h(gv, v_, n * 4);
    if (has_out) d2h(gp, p_, n * ps);

    zadam_step_ref(&h, n, hm, hmm, hv, hg, gdt, has_out ? hp : NULL, pdt, use_mask ? mask : NULL);
    size_t bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        int ok = zt_near(gmm[i], hmm[i], 1e-12, 1e-6) && zt_near(gv[i], hv[i], 1e-12, 1e-6) &&
                 zt_near(gm[i], hm[i], 2e-7, 2e-6);
        if (has_out) {
            uint32_t want = pdt == ZINC_FP32 ? 0 : to_half(gm[i], pdt);
            if (pdt == ZINC_FP32) memcpy(&want, &gm[i], 4);
            ok = ok && hbits(gp, pdt, i) == want &&
                 zt_near(hget(gp, pdt, i), hget(hp, pdt, i), 1e-6, pdt == ZINC_BF16 ? 8e-3 : 1e-3);
        }
        if (!ok) {
            bad++;
            zt_fail_at(__FILE__, __LINE__,
                       "adam n=%zu gdt=%s pdt=%s adamw=%d mask=%d dev=%d i=%zu: master %.9g/%.9g m %.9g/%.9g v %.9g/%.9g",
                       n, zinc_dtype_name(gdt), has_out ? zinc_dtype_name(pdt) : "none", adamw, use_mask,
                       device_params, i, gm[i], hm[i], gmm[i], hmm[i], gv[i], hv[i]);
        }
    }
    if (!bad) zt_passed++;

    /* skip flag: nothing may change, the poisoned output stays poisoned. */
    if (device_params && n > 1) {
        zadam_device_params par = {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.bias_correction1,
                                   h.bias_correction2, h.grad_factor, h.adamw, 1, 0.0f, 1.0f};
        h2d(dpar, &par, sizeof par);
        if (has_out) CU(cudaMemset(p_, 0xFF, n * ps));
        LAUNCH(zcu_adam_step(dpar, n, m_, mm_, v_, g_, gdt, p_, pdt, use_mask ? dmask : NULL, NULL));
        sync_dev();
        float *am = halloc(n * 4), *av = halloc(n * 4);
        d2h(am, m_, n * 4);
        d2h(av, v_, n * 4);
        int same = !memcmp(am, gm, n * 4) && !memcmp(av, gv, n * 4);
        if (has_out) {
            d2h(gp, p_, n * ps);
            for (size_t i = 0; i < n; i++) same &= hbits(gp, pdt, i) == (pdt == ZINC_FP32 ? 0xFFFFFFFFu : 0xFFFFu);
        }
        ZT_CHECK(same, "adam skip flag ignored (n=%zu)", n);
        free(am);
        free(av);
    }

    cudaFree(dm); cudaFree(dmm); cudaFree(dv); cudaFree(dg); cudaFree(dp); cudaFree(dmask); cudaFree(dpar);
    free(hm); free(hmm); free(hv); free(hg); free(hp); free(gp); free(gm); free(gmm); free(gv); free(mask);
    return zt_failed == failed_before;
}

static void test_adam(void) {
    const size_t sizes[4] = {1, 3, 7, ZT_CUDA_BIG};
    for (int si = 0; si < 4; si++)
        for (int gi = 0; gi < 3; gi++)
            for (int pi = 0; pi < 4; pi++)
                for (int adamw = 0; adamw < 2; adamw++)
                    for (int oi = 0; oi < 3; oi++) {
                        int use_mask = (oi + adamw + pi) & 1;
                        int dev = (gi + pi + oi) & 1;
                        if (sizes[si] > 1000 && oi == 2 && pi != 1) continue; /* keep the big cases few */
                        check_adam_case(sizes[si], k_dtypes[gi], pi, adamw, use_mask, &k_offsets[oi], dev);
                    }
    /* The L2 (adamw=0) path with no weight decay, and both masks, on an odd size. */
    check_adam_case(1001, ZINC_BF16, 2, 0, 1, &k_offsets[1], 1);
}

/* ------------------------------------------------------------------ Lion */
/* zcu_lion_step_host against zlion_step_ref: master, m and param_out bit for bit (the same operations in
 * the same order), every gradient and output dtype, with and without the decay mask, vector and scalar
 * paths. */
static void test_lion(void) {
    const size_t sizes[4] = {1, 3, 7, ZT_CUDA_BIG};
    for (int si = 0; si < 4; si++)
        for (int gi = 0; gi < 3; gi++)
            for (int pi = 0; pi < 4; pi++)
                for (int oi = 0; oi < 3; oi++) {
                    size_t n = sizes[si], gs = zinc_dtype_size(k_dtypes[gi]);
                    zinc_dtype pdt = pi < 3 ? k_dtypes[pi] : ZINC_FP32;
                    size_t ps = zinc_dtype_size(pdt), ngroups = (n + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP;
                    const offsets *o = &k_offsets[oi];
                    int use_mask = (pi + oi) & 1;
                    float *hm = halloc(n * 4), *hmm = halloc(n * 4), *gm = halloc(n * 4), *gmm = halloc(n * 4);
                    void *hg = halloc(n * gs), *hp = halloc(n * ps), *gp = halloc(n * ps);
                    uint8_t *mask = halloc(ngroups);
                    fill_host(hm, ZINC_FP32, n, 1.0);
                    fill_host(hmm, ZINC_FP32, n, 0.01);
                    fill_host(hg, k_dtypes[gi], n, 0.5);
                    for (size_t i = 0; i < ngroups; i++) mask[i] = (uint8_t)(zt_rand_u64(&g_rng) & 1);
                    float *dm = dalloc((n + 8) * 4), *dmm = dalloc((n + 8) * 4);
                    char *dg = dalloc((n + 8) * gs), *dp = dalloc((n + 8) * ps);
                    uint8_t *dmask = dalloc(ngroups);
                    h2d(dm + o->master, hm, n * 4);
                    h2d(dmm + o->m, hmm, n * 4);
                    h2d(dg + o->g * gs, hg, n * gs);
                    h2d(dmask, mask, ngroups);
                    zadam_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .weight_decay = 0.1f,
                                       .grad_factor = 0.5f, .adamw = 1, .lion = 1};
                    LAUNCH(zcu_lion_step_host(&h, n, dm + o->master, dmm + o->m, dg + o->g * gs, k_dtypes[gi],
                                              pi < 3 ? dp + o->p * ps : NULL, pdt, use_mask ? dmask : NULL, NULL));
                    sync_dev();
                    zlion_step_ref(&h, n, hm, hmm, hg, k_dtypes[gi], pi < 3 ? hp : NULL, pdt, use_mask ? mask : NULL);
                    d2h(gm, dm + o->master, n * 4);
                    d2h(gmm, dmm + o->m, n * 4);
                    if (pi < 3) d2h(gp, dp + o->p * ps, n * ps);
                    ZT_CHECK(!memcmp(gm, hm, n * 4) && !memcmp(gmm, hmm, n * 4) && (pi > 2 || !memcmp(gp, hp, n * ps)),
                             "lion n=%zu grad %s out %s offsets %d mask %d: GPU != zlion_step_ref bitwise", n,
                             zinc_dtype_name(k_dtypes[gi]), pi < 3 ? zinc_dtype_name(pdt) : "none", oi, use_mask);
                    cudaFree(dm); cudaFree(dmm); cudaFree(dg); cudaFree(dp); cudaFree(dmask);
                    free(hm); free(hmm); free(gm); free(gmm); free(hg); free(hp); free(gp); free(mask);
                }
}

/* ------------------------------------------------------------------ grad stats + finalize */

static void test_grad_stats(void) {
    const size_t sizes[5] = {1, 3, 7, ZT_CUDA_BIG, ZT_CUDA_BIGGER};
    void *ws = dalloc(zcu_grad_stats_workspace_bytes());
    zcu_grad_stats_result *dres = dalloc(sizeof *dres);
    for (int si = 0; si < 5; si++)
        for (int ti = 0; ti < 3; ti++)
            for (int off = 0; off < 2; off++)
                for (int bad = 0; bad < 2; bad++) {
                    size_t n = sizes[si];
                    zinc_dtype t = k_dtypes[ti];
                    size_t es = zinc_dtype_size(t);
                    void *h = halloc(n * es);
                    fill_host(h, t, n, 3.0);
                    if (bad) {
                        size_t at = zt_rand_u64(&g_rng) % n;
                        float f = (at & 1) ? INFINITY : NAN;
                        if (t == ZINC_FP32) ((float *)h)[at] = f;
                        else ((uint16_t *)h)[at] = to_half(f, t);
                    }
                    char *d = dalloc((n + 8) * es);
                    h2d(d + off * es, h, n * es);
                    CU(cudaMemset(dres, 0xFF, sizeof *dres));
                    LAUNCH(zcu_grad_stats(d + off * es, t, n, ws, dres, 0, NULL));
                    zcu_grad_stats_result r1, r2;
                    d2h(&r1, dres, sizeof r1);
                    LAUNCH(zcu_grad_stats(d + off * es, t, n, ws, dres, 0, NULL));
                    d2h(&r2, dres, sizeof r2);
                    zgrad_stats ref;
                    zgrad_stats_ref(h, t, n, &ref);
                    ZT_CHECK(r1.nonfinite == (ref.nonfinite != 0), "stats flag n=%zu t=%s: %d vs %zu", n,
                             zinc_dtype_name(t), r1.nonfinite, ref.nonfinite);
                    if (!bad) {
                        ZT_NEAR(r1.sumsq, ref.sumsq, 0.0, 1e-10, "stats sumsq n=%zu t=%s off=%d: %.17g vs %.17g",
                                n, zinc_dtype_name(t), off, r1.sumsq, ref.sumsq);
                        ZT_CHECK(!memcmp(&r1.sumsq, &r2.sumsq, sizeof r1.sumsq), "stats not deterministic n=%zu", n);
                    }
                    /* accumulate: a second pass over the same data doubles the sum */
                    if (!bad) {
                        LAUNCH(zcu_grad_stats(d + off * es, t, n, ws, dres, 1, NULL));
                        d2h(&r2, dres, sizeof r2);
                        ZT_NEAR(r2.sumsq, 2 * ref.sumsq, 0.0, 1e-10, "stats accumulate n=%zu", n);
                        ZT_CHECK(r2.nonfinite == 0, "stats accumulate flag");
                    }
                    cudaFree(d);
                    free(h);
                }
    /* n = 0 clears */
    CU(cudaMemset(dres, 0xFF, sizeof *dres));
    LAUNCH(zcu_grad_stats(NULL, ZINC_FP32, 0, ws, dres, 0, NULL));
    zcu_grad_stats_result r0;
    d2h(&r0, dres, sizeof r0);
    ZT_CHECK(r0.sumsq == 0.0 && r0.nonfinite == 0, "stats n=0 should clear the result");
    cudaFree(ws);
    cudaFree(dres);
}

static void check_finalize(double sumsq, int nonfinite, float clip, float base, const float *scale_or_null) {
    zcu_grad_stats_result s = {sumsq, nonfinite, 0};
    zcu_grad_stats_result *ds = dalloc(sizeof s);
    zadam_device_params *dp = dalloc(sizeof *dp);
    float *dscale = NULL;
    h2d(ds, &s, sizeof s);
    if (scale_or_null) {
        dscale = dalloc(sizeof(float));
        h2d(dscale, scale_or_null, sizeof(float));
    }
    zcu_finalize_args a = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .bias_correction1 = 0.1f, .bias_correction2 = 0.05f, .adamw = 1, .clip = clip,
                           .base_factor = base};
    LAUNCH(zcu_adam_finalize(ds, dscale, a, dp, NULL));
    zadam_device_params p;
    d2h(&p, dp, sizeof p);
    double inv = (double)base / (scale_or_null ? (double)*scale_or_null : 1.0);
    double norm = sqrt(sumsq) * inv;
    double coef = (clip > 0 && norm + 1e-6 > clip) ? clip / (norm + 1e-6) : 1.0;
    ZT_NEAR(p.grad_factor, inv * coef, 0.0, 1e-6, "finalize factor %.9g vs %.9g (clip %g)", p.grad_factor,
            inv * coef, clip);
    ZT_NEAR(p.true_norm, norm, 0.0, 1e-6, "finalize norm");
    ZT_NEAR(p.clip_coef, coef, 0.0, 1e-6, "finalize clip coef");
    ZT_CHECK(p.skip == (nonfinite != 0), "finalize skip %d", p.skip);
    ZT_CHECK(p.lr == a.lr && p.beta1 == a.beta1 && p.beta2 == a.beta2 && p.eps == a.eps &&
                 p.weight_decay == a.weight_decay && p.bias_correction1 == a.bias_correction1 &&
                 p.bias_correction2 == a.bias_correction2 && p.adamw == 1,
             "finalize copies the hyperparameters");
    cudaFree(ds);
    cudaFree(dp);
    cudaFree(dscale);
}

static void test_finalize(void) {
    float scale = 65536.0f;
    check_finalize(1e6, 0, 1.0f, 1.0f / (65536.0f * 4), NULL); /* norm ~0.0038: not clipped */
    check_finalize(1e14, 0, 1.0f, 1.0f / (65536.0f * 4), NULL); /* clipped */
    check_finalize(1e14, 0, 0.0f, 1.0f / (65536.0f * 4), NULL); /* clipping off */
    check_finalize(1e14, 1, 1.0f, 1.0f / 4, &scale);           /* overflow: skip; scale on the device */
    check_finalize(4e12, 0, 1.0f, 1.0f / 4, &scale);
}

/* ------------------------------------------------------------------ elementwise */

static float special(size_t i) {
    static const float s[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 1e-40f,
                              1.0009765625f + 0.00048828125f /* fp16 tie */, 1.00390625f /* bf16 tie */,
                              3.4e38f, INFINITY, -INFINITY, NAN};
    return s[i % (sizeof s / sizeof s[0])];
}

static int same_value(uint32_t a, uint32_t b, zinc_dtype t) {
    if (t == ZINC_FP32) {
        float x, y;
        memcpy(&x, &a, 4);
        memcpy(&y, &b, 4);
        return a == b || (isnan(x) && isnan(y));
    }
    float x = from_half((uint16_t)a, t), y = from_half((uint16_t)b, t);
    return a == b || (isnan(x) && isnan(y));
}

static void test_elementwise(void) {
    const size_t sizes[4] = {1, 3, 7, ZT_CUDA_BIG};
    for (int si = 0; si < 4; si++)
        for (int ti = 0; ti < 3; ti++)
            for (int oi = 0; oi < 3; oi++) {
                size_t n = sizes[si];
                zinc_dtype t = k_dtypes[ti];
                size_t es = zinc_dtype_size(t), od = oi == 0 ? 0 : 1, os = oi == 1 ? 1 : (oi == 2 ? 2 : 0);
                float *f = halloc(n * 4), *f2 = halloc(n * 4), *back = halloc(n * 4);
                void *hx = halloc(n * es), *hy = halloc(n * es), *ref = halloc(n * es);
                for (size_t i = 0; i < n; i++)
                    f[i] = (i % 5 == 0) ? special(i / 5) : (float)(zt_rand_normal(&g_rng) * 100.0);
                char *df = dalloc((n + 8) * 4), *dx = dalloc((n + 8) * es);
                float *F = (float *)(df + od * 4);
                void *X = dx + os * es;
                h2d(F, f, n * 4);

                /* cast from f32 */
                LAUNCH(zcu_cast_from_f32(X, t, F, n, NULL));
                d2h(hx, X, n * es);
                zcast_from_f32(ref, t, f, n);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++) {
                    uint32_t want;
                    if (t == ZINC_FP32) memcpy(&want, &f[i], 4);
                    else want = to_half(f[i], t);
                    if (!same_value(hbits(hx, t, i), want, t) || !same_value(hbits(hx, t, i), hbits(ref, t, i), t))
                        if (bad++ < 3)
                            zt_fail_at(__FILE__, __LINE__, "cast_from_f32 %s n=%zu i=%zu: %.9g -> %#x, want %#x",
                                       zinc_dtype_name(t), n, i, f[i], hbits(hx, t, i), want);
                }
                ZT_CHECK(bad == 0, "cast_from_f32 %s n=%zu off=%d", zinc_dtype_name(t), n, oi);

                /* cast to f32 (from the values just written) */
                CU(cudaMemset(F, 0xFF, n * 4));
                LAUNCH(zcu_cast_to_f32(F, X, t, n, NULL));
                d2h(back, F, n * 4);
                bad = 0;
                for (size_t i = 0; i < n; i++) {
                    float w = hget(hx, t, i);
                    if (!(back[i] == w || (isnan(back[i]) && isnan(w)))) bad++;
                }
                ZT_CHECK(bad == 0, "cast_to_f32 %s n=%zu: %zu wrong", zinc_dtype_name(t), n, bad);

                /* axpy, both modes, from X (finite random values) */
                fill_host(hy, t, n, 2.0);
                h2d(X, hy, n * es);
                for (size_t i = 0; i < n; i++) f2[i] = (float)zt_rand_normal(&g_rng);
                for (int acc = 0; acc < 2; acc++) {
                    h2d(F, f2, n * 4);
                    if (!acc) CU(cudaMemset(F, 0xFF, n * 4));
                    LAUNCH(zcu_axpy_f32(F, X, t, 0.3f, n, acc, NULL));
                    d2h(back, F, n * 4);
                    bad = 0;
                    for (size_t i = 0; i < n; i++) {
                        float prod = 0.3f * hget(hy, t, i);
                        float w = (acc ? f2[i] : 0.0f) + prod;
                        if (memcmp(&w, &back[i], 4)) bad++;
                    }
                    ZT_CHECK(bad == 0, "axpy %s acc=%d n=%zu: %zu wrong", zinc_dtype_name(t), acc, n, bad);
                }

                /* scale in place */
                LAUNCH(zcu_scale_inplace(X, t, 1.0f / 1024.0f * 3.0f, n, NULL));
                d2h(hx, X, n * es);
                bad = 0;
                for (size_t i = 0; i < n; i++) {
                    float w = hget(hy, t, i) * (1.0f / 1024.0f * 3.0f);
                    uint32_t wb;
                    if (t == ZINC_FP32) memcpy(&wb, &w, 4);
                    else wb = to_half(w, t);
                    if (hbits(hx, t, i) != wb) bad++;
                }
                ZT_CHECK(bad == 0, "scale %s n=%zu: %zu wrong", zinc_dtype_name(t), n, bad);

                /* fill and random fill */
                LAUNCH(zcu_fill(X, t, 1.5f, n, NULL));
                d2h(hx, X, n * es);
                bad = 0;
                for (size_t i = 0; i < n; i++) bad += hget(hx, t, i) != 1.5f;
                ZT_CHECK(bad == 0, "fill %s n=%zu", zinc_dtype_name(t), n);
                LAUNCH(zcu_fill_random(X, t, n, 42, -2.0f, 3.0f, NULL));
                d2h(hx, X, n * es);
                bad = 0;
                for (size_t i = 0; i < n; i++) bad += !(hget(hx, t, i) >= -2.0f && hget(hx, t, i) <= 3.0f);
                ZT_CHECK(bad == 0 && (n < 3 || hget(hx, t, 0) != hget(hx, t, 1) || hget(hx, t, 1) != hget(hx, t, 2)),
                         "fill_random %s n=%zu", zinc_dtype_name(t), n);

                cudaFree(df);
                cudaFree(dx);
                free(f); free(f2); free(back); free(hx); free(hy); free(ref);
            }
}

static void test_bad_args(void) {
    ZT_CHECK(zcu_adam_step(NULL, 5, NULL, NULL, NULL, NULL, ZINC_FP32, NULL, ZINC_FP32, NULL, NULL) != 0,
             "adam without params must fail");
    ZT_CHECK(zcu_cast_from_f32(NULL, (zinc_dtype)9, NULL, 3, NULL) != 0, "unknown dtype must fail");
    ZT_CHECK(zcu_fill(NULL, ZINC_FP32, 0.0f, 0, NULL) == 0, "n=0 is a no-op");
}

int main(void) {
    zt_name = "kernels_cuda";
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) return zt_skip("no CUDA device");
    ZT_CHECK(zcu_device_count() == ndev, "zcu_device_count");
    g_rng = zt_seed();
    /* ZT_CUDA_ONLY=adam,lion runs those parts alone (by hand, when working on one kernel). */
    const char *only = getenv("ZT_CUDA_ONLY");
#define PART(name) if (!only || strstr(only, #name)) test_##name()
    PART(bad_args);
    PART(elementwise);
    PART(grad_stats);
    PART(finalize);
    PART(adam);
    PART(lion);
#undef PART
    return zt_finish();
}
