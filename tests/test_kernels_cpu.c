/* CPU kernels (kernels/cpu_kernels.h): Adam/AdamW, gradient statistics, casts, axpy and scale.
 *
 * - zadam_step_ref against a float64 implementation of the same formulas written here, in every mode
 *   (AdamW on/off x weight decay 0/0.1 x bias correction on/off x grad fp32/fp16/bf16 x param_out
 *   fp32/fp16/bf16/NULL x decay mask none/random x grad_factor 1/0.37), sizes 1, 7, 8, 9, 31, 100003 and
 *   3*65536+123, three steps in a row on fresh random gradients (one of them with gradients ~1e-3, where eps
 *   and tiny v matter). Tolerance on master, m and v vs float64: |d| <= 1e-6*|ref| + 5e-7*S, where S is the
 *   accumulated size of the terms the value was summed from (computed alongside the float64 reference):
 *   where b1*m + (1-b1)*g, g*gf + wd*p or p - update cancel, fp32 rounding is relative to the terms, not
 *   to the result, and it carries from step to step. 5e-7 is about 4 ulps of the terms.
 * - Each SIMD path (scalar, avx2, avx512 where this CPU has it; others are skipped and said so) through
 *   zadam_step, with 1-4 threads, against zadam_step_ref: master/m/v within 2 ulp (the design aims at
 *   bit-identical; the number of non-identical elements is printed), param_out bit-equal to the cast of
 *   that path's own master, and every param_out element written (it is poisoned with 0xff bytes first).
 * - zgrad_stats: bit-equal to zgrad_stats_ref (same summation order), sumsq within 1e-12 of a compensated
 *   sum, non-finite count and first index with inf/nan injected at random positions, and bit-identical
 *   results for 1, 2 and 4 threads.
 * - Casts bit-equal to zinc_f32_to_fp16/bf16 and zinc_fp16/bf16_to_f32 over random bit patterns
 *   (subnormals, overflow, NaN included; a fp16 NaN read to fp32 must be a NaN, payload bits may differ
 *   because F16C quiets signalling NaNs), zscale_inplace and zaxpy_f32 (accumulate and overwrite)
 *   bit-equal to the scalar formula.
 * Seed: ZT_SEED (printed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/adam_scalar.h"
#include "kernels/cpu_kernels.h"
#include "zt.h"

static uint64_t rng;

static const char *const paths[] = {"scalar", "avx2", "avx512"};
static int have_path[3];

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Distance in units in the last place (0 for equal values, both NaN, or +0 vs -0). */
static int64_t ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    if (a == b) return 0;
    int64_t ia = (int32_t)f2u(a), ib = (int32_t)f2u(b);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return ia > ib ? ia - ib : ib - ia;
}

static void store(void *buf, zinc_dtype t, size_t i, float x) {
    if (t == ZINC_FP32)
        ((float *)buf)[i] = x;
    else if (t == ZINC_FP16)
        ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x);
    else
        ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x);
}

/* ---------------------------------------------------------------- Adam */
typedef struct adam_case {
    int adamw, bc, masked, pdt; /* pdt 3: no param_out */
    float wd, gf;
    zinc_dtype gdt;
} adam_case;

typedef struct fstate {
    float *p, *m, *v;
    void *po;
} fstate;

static void fstate_alloc(fstate *s, size_t n) {
    s->p = malloc(n * 4);
    s->m = malloc(n * 4);
    s->v = malloc(n * 4);
    s->po = malloc(n * 4);
}
static void fstate_free(fstate *s) {
    free(s->p);
    free(s->m);
    free(s->v);
    free(s->po);
}

static zadam_hparams hparams_at(const adam_case *c, int t) {
    zadam_hparams h;
    h.lr = 1e-3f * (float)(1.0 + 0.25 * t);
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = c->wd;
    h.bias_correction1 = c->bc ? 1.0 - pow(0.9f, t) : 1.0;
    h.bias_correction2 = c->bc ? 1.0 - pow(0.999f, t) : 1.0;
    h.grad_factor = c->gf;
    h.adamw = c->adamw;
    return h;
}

/* Besides the float64 state, es (3 per element: m, v, p) accumulates the size of the terms each value was
 * summed from over all steps so far. Rounding is relative to those terms, not to the result, when they
 * cancel (b1*m + (1-b1)*g, g*gf + wd*p, p - update), and errors carry over from step to step; the checks
 * allow a small multiple of these sizes. */
static void adam_f64(const zadam_hparams *h, size_t n, double *p, double *m, double *v, const void *g, zinc_dtype gdt,
                     const uint8_t *mask, double *es) {
    double b1 = h->beta1, b2 = h->beta2, wd = h->weight_decay, lr = h->lr;
    double step = lr / (double)h->bias_correction1;
    for (size_t i = 0; i < n; i++) {
        int dec = !mask || mask[i / ZADAM_MASK_GROUP];
        double gi = (double)zinc_load_f32(g, gdt, i) * (double)h->grad_factor, gabs = fabs(gi);
        if (!h->adamw && wd != 0 && dec) {
            gi += wd * p[i];
            gabs += fabs(wd * p[i]);
        }
        double *e = es + 3 * i;
        e[0] = b1 * e[0] + fabs(b1 * m[i]) + (1 - b1) * gabs;
        e[1] = b2 * e[1] + b2 * v[i] + (1 - b2) * gabs * gabs;
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        double denom = sqrt(v[i]) / sqrt((double)h->bias_correction2) + (double)h->eps;
        e[2] += fabs(p[i]);
        if (h->adamw && wd != 0 && dec) p[i] -= lr * wd * p[i];
        double upd = step * m[i] / denom;
        /* the update's error: m's absolute error over denom, plus m/denom's relative rounding */
        e[2] += step * (e[0] + fabs(m[i])) / denom + fabs(upd);
        p[i] -= upd;
    }
}

/* Counts elements of param_out that differ from the cast of master. */
static size_t check_param_out(const fstate *s, size_t n, int pdt) {
    if (pdt == 3) return 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (pdt == ZINC_FP32)
            bad += f2u(((float *)s->po)[i]) != f2u(s->p[i]);
        else if (pdt == ZINC_FP16)
            bad += ((uint16_t *)s->po)[i] != zinc_f32_to_fp16(s->p[i]);
        else
            bad += ((uint16_t *)s->po)[i] != zinc_f32_to_bf16(s->p[i]);
    }
    return bad;
}

static const char *case_name(const adam_case *c, size_t n, char *buf, size_t len) {
    static const char *pd[] = {"fp32", "fp16", "bf16", "none"};
    snprintf(buf, len, "n=%zu %s wd=%g bc=%d grad=%s out=%s mask=%d gf=%g", n, c->adamw ? "adamw" : "adam-l2",
             (double)c->wd, c->bc, zinc_dtype_name(c->gdt), pd[c->pdt], c->masked, (double)c->gf);
    return buf;
}

static size_t total_nonbitwise, total_compared;

static void run_adam_case(const adam_case *c, size_t n, int threads) {
    char name[160];
    case_name(c, n, name, sizeof name);
    fstate ref, fast[3];
    fstate_alloc(&ref, n);
    for (int k = 0; k < 3; k++)
        if (have_path[k]) fstate_alloc(&fast[k], n);
    double *dp = malloc(n * 8), *dm = malloc(n * 8), *dv = malloc(n * 8), *ms = malloc(n * 24);
    void *g = malloc(n * 4);
    uint8_t *mask = malloc(n / ZADAM_MASK_GROUP + 1);
    for (size_t i = 0; i < n / ZADAM_MASK_GROUP + 1; i++) mask[i] = (zt_rand_u64(&rng) & 3) ? 1 : 0;
    if (!c->masked) {
        free(mask);
        mask = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        ref.p[i] = (float)zt_rand_normal(&rng);
        ref.m[i] = (float)(0.1 * zt_rand_normal(&rng));
        ref.v[i] = (float)(0.01 * fabs(zt_rand_normal(&rng)));
        dp[i] = ref.p[i];
        dm[i] = ref.m[i];
        dv[i] = ref.v[i];
        ms[3 * i] = ms[3 * i + 1] = ms[3 * i + 2] = 0;
    }
    for (int k = 0; k < 3; k++)
        if (have_path[k]) {
            memcpy(fast[k].p, ref.p, n * 4);
            memcpy(fast[k].m, ref.m, n * 4);
            memcpy(fast[k].v, ref.v, n * 4);
        }
    zinc_dtype pdt = c->pdt == 3 ? ZINC_FP32 : (zinc_dtype)c->pdt;
    zkernels_set_threads(threads);
    for (int t = 1; t <= 3; t++) {
        double gs = t == 2 ? 1e-3 : 1.0; /* one step with small gradients: eps and v matter */
        for (size_t i = 0; i < n; i++) store(g, c->gdt, i, (float)(gs * zt_rand_normal(&rng)));
        zadam_hparams h = hparams_at(c, t);
        memset(ref.po, 0xff, n * 4);
        zadam_step_ref(&h, n, ref.p, ref.m, ref.v, g, c->gdt, c->pdt == 3 ? NULL : ref.po, pdt, mask);
        adam_f64(&h, n, dp, dm, dv, g, c->gdt, mask, ms);
        size_t bad = 0, first = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            const double *e = ms + 3 * i;
            int ok = fabs(ref.p[i] - dp[i]) <= 1e-6 * fabs(dp[i]) + 5e-7 * e[2] &&
                     fabs(ref.m[i] - dm[i]) <= 1e-6 * fabs(dm[i]) + 5e-7 * e[0] &&
                     fabs(ref.v[i] - dv[i]) <= 1e-6 * fabs(dv[i]) + 5e-7 * e[1];
            if (!ok && bad++ == 0) first = i;
        }
        ZT_CHECK(bad == 0, "ref vs float64, %s step %d: %zu bad, first %zu: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g", name,
                 t, bad, first, bad ? (double)ref.p[first] : 0, bad ? dp[first] : 0, bad ? (double)ref.m[first] : 0,
                 bad ? dm[first] : 0, bad ? (double)ref.v[first] : 0, bad ? dv[first] : 0);
        ZT_CHECK(check_param_out(&ref, n, c->pdt) == 0, "ref param_out != cast(master), %s step %d", name, t);
        for (int k = 0; k < 3; k++) {
            if (!have_path[k]) continue;
            zkernels_set_simd(paths[k]);
            memset(fast[k].po, 0xff, n * 4);
            zadam_step(&h, n, fast[k].p, fast[k].m, fast[k].v, g, c->gdt, c->pdt == 3 ? NULL : fast[k].po, pdt, mask);
            int64_t worst = 0;
            size_t nb = 0;
            for (size_t i = 0; i < n; i++) {
                int64_t u = ulps(fast[k].p[i], ref.p[i]), um = ulps(fast[k].m[i], ref.m[i]),
                        uv = ulps(fast[k].v[i], ref.v[i]);
                if (um > u) u = um;
                if (uv > u) u = uv;
                if (u > worst) worst = u;
                nb += u != 0;
            }
            total_nonbitwise += nb;
            total_compared += n;
            ZT_CHECK(worst <= 2, "%s path vs ref, %s step %d threads %d: worst %lld ulp", paths[k], name, t, threads,
                     (long long)worst);
            ZT_CHECK(check_param_out(&fast[k], n, c->pdt) == 0, "%s path param_out != cast(master), %s step %d",
                     paths[k], name, t);
        }
        zkernels_set_simd(NULL);
    }
    zkernels_set_threads(0);
    fstate_free(&ref);
    for (int k = 0; k < 3; k++)
        if (have_path[k]) fstate_free(&fast[k]);
    free(dp);
    free(dm);
    free(dv);
    free(ms);
    free(g);
    free(mask);
}

static void test_adam(void) {
    static const size_t small[] = {1, 7, 8, 9, 31, 1000};
    static const size_t big[] = {100003, 3 * 65536 + 123};
    int ncase = 0, nbig = 0;
    for (int combo = 0; combo < 2 * 2 * 2 * 3 * 4 * 2 * 2; combo++) {
        int r = combo;
        adam_case c;
        c.adamw = r % 2, r /= 2;
        c.wd = r % 2 ? 0.1f : 0.0f, r /= 2;
        c.bc = r % 2, r /= 2;
        c.gdt = (zinc_dtype)(r % 3), r /= 3;
        c.pdt = r % 4, r /= 4;
        c.masked = r % 2, r /= 2;
        c.gf = r % 2 ? 0.37f : 1.0f;
        for (size_t s = 0; s < sizeof small / sizeof small[0]; s++) run_adam_case(&c, small[s], 1);
        ncase++;
        /* The large sizes (thread splitting, chunk boundaries) on every (grad, param_out) pair with the
         * other flags varied: 1 in 8 combinations, all 12 dtype pairs and both decay modes among them. */
        if (combo % 8 == (combo / 96) % 8 || combo % 29 == 0) {
            run_adam_case(&c, big[nbig % 2], 1 + nbig % 4);
            nbig++;
        }
    }
    fprintf(stderr,
            "adam: %d mode combinations x %zu small sizes, %d large runs; %zu of %zu fast-path "
            "elements not bit-identical to the reference\n",
            ncase, sizeof small / sizeof small[0], nbig, total_nonbitwise, total_compared);
}

/* ---------------------------------------------------------------- gradient statistics */
static void fill_grads(void *x, zinc_dtype t, size_t n) {
    for (size_t i = 0; i < n; i++) store(x, t, i, (float)(zt_rand_normal(&rng) * (i % 3 ? 1.0 : 100.0)));
}

static void test_stats(void) {
    static const size_t sizes[] = {0, 1, 4095, 4096, 4097, 100003, 8 * 65536 + 4097};
    for (int ti = 0; ti < 3; ti++) {
        zinc_dtype t = (zinc_dtype)ti;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            void *x = malloc(n * 4 + 4);
            fill_grads(x, t, n);
            for (int inject = 0; inject < 3; inject++) {
                size_t want_count = 0, want_first = SIZE_MAX;
                if (inject && n) {
                    int k = inject == 1 ? 1 : 7;
                    for (int j = 0; j < k; j++) {
                        size_t pos = zt_rand_u64(&rng) % n;
                        float bad = j % 3 == 0 ? INFINITY : j % 3 == 1 ? -INFINITY : NAN;
                        store(x, t, pos, bad);
                    }
                }
                double kahan = 0, comp = 0;
                for (size_t i = 0; i < n; i++) {
                    float f = zinc_load_f32(x, t, i);
                    if (!isfinite(f)) {
                        if (!want_count) want_first = i;
                        want_count++;
                        continue;
                    }
                    double y = (double)f * f - comp, s = kahan + y;
                    comp = (s - kahan) - y;
                    kahan = s;
                }
                zgrad_stats ref, got[3];
                zgrad_stats_ref(x, t, n, &ref);
                ZT_CHECK(ref.nonfinite == want_count && ref.first_nonfinite == want_first,
                         "stats ref %s n=%zu: nonfinite %zu first %zu, want %zu %zu", zinc_dtype_name(t), n,
                         ref.nonfinite, ref.first_nonfinite, want_count, want_first);
                if (want_count)
                    ZT_CHECK(!isfinite(ref.sumsq), "stats ref sumsq finite with non-finite input");
                else
                    ZT_NEAR(ref.sumsq, kahan, 0, 1e-12, "stats ref %s n=%zu: %.17g vs %.17g", zinc_dtype_name(t), n,
                            ref.sumsq, kahan);
                static const int thr[] = {1, 2, 4};
                for (int k = 0; k < 3; k++) {
                    if (!have_path[k]) continue;
                    zkernels_set_simd(paths[k]);
                    for (int j = 0; j < 3; j++) {
                        zkernels_set_threads(thr[j]);
                        zgrad_stats(x, t, n, &got[j]);
                        ZT_CHECK(got[j].nonfinite == want_count && got[j].first_nonfinite == want_first,
                                 "stats %s %s n=%zu threads %d: nonfinite %zu first %zu, want %zu %zu", paths[k],
                                 zinc_dtype_name(t), n, thr[j], got[j].nonfinite, got[j].first_nonfinite, want_count,
                                 want_first);
                        ZT_CHECK(memcmp(&got[j].sumsq, &ref.sumsq, sizeof(double)) == 0 ||
                                     (isnan(got[j].sumsq) && isnan(ref.sumsq)),
                                 "stats %s %s n=%zu threads %d: sumsq %.17g not bit-equal to ref %.17g", paths[k],
                                 zinc_dtype_name(t), n, thr[j], got[j].sumsq, ref.sumsq);
                        /* the block sums, added in block order from 0, are zgrad_stats' sum; each is the
                         * statistic of its block alone; a block with a non-finite element has a non-finite sum */
                        size_t nb = (n + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK;
                        double *bs = malloc((nb ? nb : 1) * sizeof *bs), total = 0;
                        zgrad_block_sums(x, t, n, bs);
                        int bad = 0;
                        for (size_t b = 0; b < nb; b++) {
                            size_t len = n - b * ZSTATS_BLOCK < ZSTATS_BLOCK ? n - b * ZSTATS_BLOCK : ZSTATS_BLOCK;
                            zgrad_stats one;
                            zgrad_stats((const char *)x + b * ZSTATS_BLOCK * zinc_dtype_size(t), t, len, &one);
                            bad += memcmp(&one.sumsq, &bs[b], 8) != 0 && !(isnan(one.sumsq) && isnan(bs[b]));
                            bad += (one.nonfinite > 0) == (isfinite(bs[b]) != 0);
                            total += bs[b];
                        }
                        ZT_CHECK(!bad && (!memcmp(&total, &got[j].sumsq, 8) || (isnan(total) && isnan(got[j].sumsq))),
                                 "block sums %s %s n=%zu threads %d: %d blocks differ, total %.17g vs %.17g", paths[k],
                                 zinc_dtype_name(t), n, thr[j], bad, total, got[j].sumsq);
                        free(bs);
                    }
                    ZT_CHECK(!memcmp(&got[0].sumsq, &got[1].sumsq, 8) && !memcmp(&got[0].sumsq, &got[2].sumsq, 8),
                             "stats %s n=%zu: sumsq differs across 1/2/4 threads", zinc_dtype_name(t), n);
                }
                zkernels_set_simd(NULL);
                zkernels_set_threads(0);
            }
            free(x);
        }
    }
}

/* ---------------------------------------------------------------- casts, axpy, scale */
/* Random floats that reach every interesting range: raw bit patterns (NaN, inf, subnormals), values
 * around the fp16 overflow and subnormal thresholds, exact halfway cases, log-uniform magnitudes. */
static float interesting_float(void) {
    uint64_t r = zt_rand_u64(&rng);
    float sign = (r >> 63) ? -1.0f : 1.0f;
    switch (r % 8) {
    case 0: return u2f((uint32_t)(r >> 16));
    case 1: return sign * (float)(65504.0 + (double)((r >> 8) % 64)); /* fp16 max .. overflow */
    case 2: return sign * ldexpf((float)((r >> 8) % 4096), -36);      /* fp16 subnormal range */
    case 3: { /* halfway between two bf16 / fp16 values: ties to even */
        uint32_t u = (uint32_t)(r >> 20) & 0x7fffe000u;
        return u2f(u | ((r >> 8) & 1 ? 0x8000u : 0x1000u));
    }
    case 4: return sign * INFINITY;
    case 5: return u2f(0x7f800000u | (uint32_t)((r >> 8) & 0x7fffffu) | 1u) * sign; /* NaN, payloads */
    default: return sign * (float)ldexp(zt_rand_uniform(&rng) + 0.5, (int)((r >> 8) % 80) - 40);
    }
}

static void test_casts(void) {
    const size_t n = 3 * 65536 + 77;
    float *f = malloc(n * 4), *back = malloc(n * 4), *dst = malloc(n * 4), *dst0 = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *h2 = malloc(n * 2);
    for (size_t i = 0; i < n; i++) f[i] = interesting_float();
    for (int k = 0; k < 3; k++) {
        if (!have_path[k]) continue;
        zkernels_set_simd(paths[k]);
        zkernels_set_threads(1 + k);
        for (int ti = 1; ti < 3; ti++) {
            zinc_dtype t = (zinc_dtype)ti;
            /* f32 -> 16-bit, bit for bit with the scalar converters */
            memset(h, 0xab, n * 2);
            zcast_from_f32(h, t, f, n);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
                uint16_t want = t == ZINC_FP16 ? zinc_f32_to_fp16(f[i]) : zinc_f32_to_bf16(f[i]);
                if (h[i] != want && bad++ == 0) first = i;
            }
            ZT_CHECK(bad == 0, "%s cast f32->%s: %zu differ, first %08x -> %04x want %04x", paths[k],
                     zinc_dtype_name(t), bad, bad ? f2u(f[first]) : 0, bad ? h[first] : 0,
                     bad ? (t == ZINC_FP16 ? zinc_f32_to_fp16(f[first]) : zinc_f32_to_bf16(f[first])) : 0);
            /* 16-bit -> f32 over every 16-bit pattern (and repeats), bit for bit; fp16 NaNs only NaN */
            for (size_t i = 0; i < n; i++) h2[i] = (uint16_t)(i < 65536 ? i : zt_rand_u64(&rng));
            zcast_to_f32(back, h2, t, n);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                float want = t == ZINC_FP16 ? zinc_fp16_to_f32(h2[i]) : zinc_bf16_to_f32(h2[i]);
                int ok = f2u(back[i]) == f2u(want) || (t == ZINC_FP16 && isnan(want) && isnan(back[i]));
                if (!ok && bad++ == 0) first = i;
            }
            ZT_CHECK(bad == 0, "%s cast %s->f32: %zu differ, first %04x", paths[k], zinc_dtype_name(t), bad,
                     bad ? h2[first] : 0);
            /* round trip of representable values */
            zcast_from_f32(h, t, f, n);
            zcast_to_f32(back, h, t, n);
            zcast_from_f32(h2, t, back, n);
            ZT_CHECK(memcmp(h, h2, n * 2) == 0, "%s %s round trip changed bits", paths[k], zinc_dtype_name(t));
            /* scale in place */
            for (size_t i = 0; i < n; i++) h2[i] = h[i];
            zscale_inplace(h2, t, 0.3f, n);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                uint16_t want = t == ZINC_FP16 ? zinc_f32_to_fp16(zinc_fp16_to_f32(h[i]) * 0.3f)
                                               : zinc_f32_to_bf16(zinc_bf16_to_f32(h[i]) * 0.3f);
                if (h2[i] != want && bad++ == 0) first = i;
            }
            ZT_CHECK(bad == 0, "%s scale %s: %zu differ, first %04x -> %04x", paths[k], zinc_dtype_name(t), bad,
                     bad ? h[first] : 0, bad ? h2[first] : 0);
        }
        /* fp32 casts are copies; fp32 scale */
        zcast_from_f32(dst, ZINC_FP32, f, n);
        ZT_CHECK(memcmp(dst, f, n * 4) == 0, "%s fp32 cast_from is not a copy", paths[k]);
        zcast_to_f32(back, dst, ZINC_FP32, n);
        ZT_CHECK(memcmp(back, f, n * 4) == 0, "%s fp32 cast_to is not a copy", paths[k]);
        zscale_inplace(dst, ZINC_FP32, -1.5f, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += f2u(dst[i]) != f2u(f[i] * -1.5f) && !(isnan(dst[i]) && isnan(f[i]));
        ZT_CHECK(bad == 0, "%s fp32 scale: %zu differ", paths[k], bad);
        /* axpy: accumulate and overwrite, every source dtype; sources are finite normals */
        for (int ti = 0; ti < 3; ti++) {
            zinc_dtype t = (zinc_dtype)ti;
            void *src = malloc(n * 4);
            for (size_t i = 0; i < n; i++) {
                store(src, t, i, (float)zt_rand_normal(&rng));
                dst0[i] = (float)zt_rand_normal(&rng);
            }
            for (int acc = 0; acc < 2; acc++) {
                memcpy(dst, dst0, n * 4);
                zaxpy_f32(dst, src, t, 0.7f, n, acc);
                bad = 0;
                for (size_t i = 0; i < n; i++) {
                    float want = acc ? dst0[i] + 0.7f * zinc_load_f32(src, t, i) : 0.7f * zinc_load_f32(src, t, i);
                    bad += f2u(dst[i]) != f2u(want);
                }
                ZT_CHECK(bad == 0, "%s axpy %s accumulate=%d: %zu differ", paths[k], zinc_dtype_name(t), acc, bad);
            }
            free(src);
        }
    }
    zkernels_set_simd(NULL);
    zkernels_set_threads(0);
    free(f);
    free(back);
    free(dst);
    free(dst0);
    free(h);
    free(h2);
}

/* ---------------------------------------------------------------- dispatch */
static void test_dispatch(void) {
    const char *def = zkernels_simd_name();
    const char *env = getenv("ZINC_SIMD");
    fprintf(stderr, "default SIMD path: %s (ZINC_SIMD=%s), threads %d\n", def, env ? env : "", zkernels_threads());
    if (env && (!strcmp(env, "scalar") || !strcmp(env, "avx2") || !strcmp(env, "avx512"))) {
        int lvl_env = !strcmp(env, "scalar") ? 0 : !strcmp(env, "avx2") ? 1 : 2;
        int lvl_def = !strcmp(def, "scalar") ? 0 : !strcmp(def, "avx2") ? 1 : 2;
        ZT_CHECK(lvl_def <= lvl_env, "ZINC_SIMD=%s not honoured: default path %s", env, def);
    }
    for (int k = 0; k < 3; k++) {
        have_path[k] = zkernels_set_simd(paths[k]) == 0;
        if (have_path[k])
            ZT_CHECK(!strcmp(zkernels_simd_name(), paths[k]), "set_simd(%s) -> %s", paths[k], zkernels_simd_name());
        else
            fprintf(stderr, "skipping the %s path: this CPU lacks it\n", paths[k]);
    }
    ZT_CHECK(have_path[0], "the scalar path must always be available");
    ZT_CHECK(zkernels_set_simd("sse9") == -1, "unknown path name accepted");
    zkernels_set_simd(NULL);
    ZT_CHECK(!strcmp(zkernels_simd_name(), def), "set_simd(NULL) does not restore the default");
    zkernels_set_threads(3);
    ZT_CHECK(zkernels_threads() == 3, "set_threads(3) -> %d", zkernels_threads());
    zkernels_set_threads(0);
    ZT_CHECK(zkernels_threads() >= 1, "default threads %d", zkernels_threads());
}

/* The step's constants (lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)) are formed in double and rounded to float
 * once, as torch and DeepSpeed's CPU Adam do: exactly the float nearest the float64 value, at every step. The
 * scalar path, the SIMD paths and their tails all read them from zk_adam_consts_make. */
static void test_bias_correction_precision(void) {
    static const struct { double lr, b1, b2; } hp[] = {{1e-3, 0.9, 0.999}, {3e-4, 0.9, 0.95}, {5e-5, 0.8, 0.9999}};
    static const int64_t steps[] = {1, 2, 3, 10, 77, 1000, 4321, 100000};
    int worse = 0;
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++)
        for (size_t j = 0; j < sizeof steps / sizeof steps[0]; j++) {
            float b1 = (float)hp[i].b1, b2 = (float)hp[i].b2, lr = (float)hp[i].lr;
            double bc1 = 1.0 - pow(b1, (double)steps[j]), bc2 = 1.0 - pow(b2, (double)steps[j]);
            zadam_hparams h = {.lr = lr,
                               .beta1 = b1,
                               .beta2 = b2,
                               .eps = 1e-8f,
                               .bias_correction1 = bc1,
                               .bias_correction2 = bc2,
                               .grad_factor = 1.0f,
                               .adamw = 1};
            zk_adam_consts c = zk_adam_consts_make(&h);
            float want_ibc2 = (float)(1.0 / sqrt(bc2)), want_step = (float)((double)lr / bc1);
            ZT_CHECK(c.ibc2 == want_ibc2, "beta2 %g t %lld: 1/sqrt(bc2) %.9g, want %.9g", hp[i].b2, (long long)steps[j],
                     c.ibc2, want_ibc2);
            ZT_CHECK(c.step == want_step, "t %lld: lr/bc1 %.9g, want %.9g", (long long)steps[j], c.step, want_step);
            /* rounding bc2 to float first, as zinc did before, misses the nearest float in some of these */
            float old_ibc2 = 1.0f / sqrtf((float)bc2);
            worse += old_ibc2 != want_ibc2;
        }
    printf("bias corrections: %d of %zu cases would round differently through a float 1 - beta2^t\n", worse,
           (sizeof hp / sizeof hp[0]) * (sizeof steps / sizeof steps[0]));
}

/* zk_copy_stream (the checkpoint snapshot's copy): the bytes of memcpy and the reference's non-finite flag on
 * every path, for lengths around the vector widths, destinations aligned and not (the reference's path),
 * and a NaN, +inf or -inf in the head, the vectors or the tail. */
static void test_copy_stream(void) {
    const size_t cap = 4096 + 77;
    float *src = malloc(cap * 4), *want = malloc(cap * 4);
    unsigned char *dmem = aligned_alloc(64, cap * 4 + 128);
    const size_t lens[] = {0, 1, 7, 8, 15, 16, 17, 33, 64, 1000, cap};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        if (!have_path[k]) continue;
        zkernels_set_simd(paths[k]);
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (size_t shift = 0; shift < 8; shift += 4) /* 0: aligned to 64; 4: not */
                for (int at = -1; at < 3; at++) {
                    size_t n = lens[li];
                    for (size_t i = 0; i < cap; i++) src[i] = interesting_float();
                    for (size_t i = 0; i < n; i++)
                        if (!isfinite(src[i])) src[i] = 1.5f; /* finite unless planted below */
                    size_t pos = at < 0 || !n ? SIZE_MAX : at == 0 ? 0 : at == 1 ? n / 2 : n - 1;
                    if (pos != SIZE_MAX) src[pos] = bad[(size_t)at % 3];
                    float *dst = (float *)(dmem + shift);
                    memset(dmem, 0x5a, cap * 4 + 128);
                    int ref = zk_copy_stream_ref(want, src, n * 4, 1);
                    int got = zk_copy_stream(dst, src, n * 4, 1);
                    ZT_CHECK(got == ref && ref == (pos != SIZE_MAX),
                             "%s: copy_stream's non-finite flag %d, the reference's %d (n %zu, shift %zu, at %zu)",
                             paths[k], got, ref, n, shift, pos);
                    ZT_CHECK(!memcmp(dst, src, n * 4), "%s: copy_stream's bytes differ (n %zu, shift %zu)", paths[k], n,
                             shift);
                    ZT_CHECK(dmem[shift + n * 4] == 0x5a, "%s: copy_stream wrote past %zu bytes", paths[k], n * 4);
                    /* bytes (not floats): any length, never a flag */
                    ZT_CHECK(zk_copy_stream(dst, src, n * 4 + (n & 3), 0) == 0 && !memcmp(dst, src, n * 4 + (n & 3)),
                             "%s: copy_stream of %zu bytes", paths[k], n * 4 + (n & 3));
                }
    }
    zkernels_set_simd(NULL);
    free(src);
    free(want);
    free(dmem);
}

int main(void) {
    zt_name = "test_kernels_cpu";
    test_bias_correction_precision();
    rng = zt_seed();
    test_dispatch();
    test_casts();
    test_copy_stream();
    test_stats();
    test_adam();
    return zt_finish();
}
