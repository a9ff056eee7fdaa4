/* The LAMB kernels (kernels/lamb_cpu.c) on one tensor against a float64 LAMB written here from the formulas
 * of cpu_kernels.h: 3 steps, gradients fp32/fp16/bf16, param_out fp32/fp16/bf16/none, weight decay 0 and
 * 0.01, bias correction on and off, eps outside and inside the square root, a tight clamp (the coefficient
 * clipped) and a loose one. Tolerances: the norms within 1e-6 relative of float64 (fp32 elements summed in
 * double); v within 1e-6 relative + 1e-12 absolute; m within 1e-6 relative + 5e-9 absolute (m = b1*m + (1-b1)*g
 * cancels: its terms are ~5e-3 here, a few fp32 roundings of those); p within 1e-6 relative + 5e-8
 * absolute (parameters ~0.3 and updates of that size nearly cancelling with the tight clamp: a few fp32
 * roundings of 0.3). Also: the
 * fast versions on every SIMD path this CPU has (scalar, avx2, avx512; the others are skipped and said so),
 * threaded (1-4 threads, sizes across the thread chunks and vector tails), without and with a random decay
 * mask, give the same apply bits as the reference and sums within 1e-12 relative (regrouped double sums),
 * the sums pass leaves the state as it is, the coefficient is 1 for a zero tensor, and the clamp holds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "zt.h"

static uint64_t rng;

static void store(void *buf, zinc_dtype t, size_t i, float x) {
    if (t == ZINC_FP32) ((float *)buf)[i] = x;
    else if (t == ZINC_FP16) ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x);
    else ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x);
}

static int rel_ok(double a, double b, double rtol, double atol) { return fabs(a - b) <= rtol * fabs(b) + atol; }

typedef struct lcase {
    zinc_dtype gdt;
    int pdt; /* 3: none */
    float wd;
    int bc, inside, tight;
} lcase;

static const char *const paths[] = {"scalar", "avx2", "avx512"};
static int have_path[3];

/* From the state (p0, m0, v0), which it leaves as it is: the reference passes, then zlamb_sums / zlamb_apply
 * on every SIMD path this CPU has: apply bit-equal to the reference (master, m, v and every param_out element,
 * poisoned first), sums within 1e-12 relative (per-lane and per-chunk regrouping of a double sum). */
static void check_paths(const zlamb_hparams *h, float coeff, size_t n, const float *p0, const float *m0,
                        const float *v0, const void *g, zinc_dtype gdt, void *po_buf, zinc_dtype pdt,
                        const uint8_t *mask, const char *name, int t) {
    size_t psz = zinc_dtype_size(pdt);
    float *rp = malloc(n * 4), *rm = malloc(n * 4), *rv = malloc(n * 4), *rpo = malloc(n * 4);
    float *xp = malloc(n * 4), *xm = malloc(n * 4), *xv = malloc(n * 4);
    memcpy(rp, p0, n * 4), memcpy(rm, m0, n * 4), memcpy(rv, v0, n * 4);
    double w, u;
    zlamb_sums_ref(h, n, rp, rm, rv, g, gdt, mask, &w, &u);
    zlamb_apply_ref(h, coeff, n, rp, rm, rv, g, gdt, po_buf ? rpo : NULL, pdt, mask);
    for (int k = 0; k < 3; k++) {
        if (!have_path[k]) continue;
        zkernels_set_simd(paths[k]);
        memcpy(xp, p0, n * 4), memcpy(xm, m0, n * 4), memcpy(xv, v0, n * 4);
        double fw, fu;
        zlamb_sums(h, n, xp, xm, xv, g, gdt, mask, &fw, &fu);
        ZT_CHECK(!memcmp(xp, p0, n * 4) && !memcmp(xm, m0, n * 4) && !memcmp(xv, v0, n * 4),
                 "%s step %d %s mask=%d: the sums pass wrote the state", name, t, paths[k], mask != NULL);
        ZT_CHECK(rel_ok(fw, w, 1e-12, 0) && rel_ok(fu, u, 1e-12, 0),
                 "%s step %d %s mask=%d: sums %.17g %.17g vs the reference's %.17g %.17g", name, t, paths[k],
                 mask != NULL, fw, fu, w, u);
        if (po_buf) memset(po_buf, 0xff, n * psz);
        zlamb_apply(h, coeff, n, xp, xm, xv, g, gdt, po_buf, pdt, mask);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += xp[i] != rp[i] || xm[i] != rm[i] || xv[i] != rv[i];
        ZT_CHECK(bad == 0 && (!po_buf || !memcmp(po_buf, rpo, n * psz)),
                 "%s step %d %s mask=%d: apply differs from the reference (%zu of %zu elements; param_out %s)",
                 name, t, paths[k], mask != NULL, bad, n, po_buf && memcmp(po_buf, rpo, n * psz) ? "differs" : "ok");
    }
    zkernels_set_simd(NULL);
    free(rp), free(rm), free(rv), free(rpo), free(xp), free(xm), free(xv);
}

static void run_case(const lcase *c, size_t n, int threads) {
    char name[160];
    snprintf(name, sizeof name, "n=%zu grad=%s out=%s wd=%g bc=%d inside=%d tight=%d threads=%d", n,
             zinc_dtype_name(c->gdt), c->pdt == 3 ? "none" : zinc_dtype_name((zinc_dtype)c->pdt), c->wd, c->bc,
             c->inside, c->tight, threads);
    float *p = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4), *po = malloc(n * 4);
    float *fp = malloc(n * 4), *fm = calloc(n, 4), *fv = calloc(n, 4), *fpo = malloc(n * 4);
    double *dp = malloc(n * 8), *dm = calloc(n, 8), *dv = calloc(n, 8), *du = malloc(n * 8);
    void *g = malloc(n * 4);
    uint8_t *mask = malloc((n + 7) / 8);
    for (size_t i = 0; i < n; i++) dp[i] = fp[i] = p[i] = (float)(0.3 * zt_rand_normal(&rng));
    zinc_dtype pdt = c->pdt == 3 ? ZINC_FP32 : (zinc_dtype)c->pdt;
    zkernels_set_threads(threads);
    for (int t = 1; t <= 3; t++) {
        for (size_t i = 0; i < n; i++) store(g, c->gdt, i, (float)(0.1 * zt_rand_normal(&rng)));
        zlamb_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = c->wd,
                           .grad_factor = 0.5f, .bias_correction1 = c->bc ? 1 - pow(0.9f, t) : 1,
                           .bias_correction2 = c->bc ? 1 - pow(0.999f, t) : 1,
                           .max_coeff = c->tight ? 2.0f : 10.0f, .min_coeff = c->tight ? 1.0f : 0.01f,
                           .eps_inside_sqrt = c->inside};
        /* float64 */
        double W = 0, U = 0;
        for (size_t i = 0; i < n; i++) {
            double gi = (double)zinc_load_f32(g, c->gdt, i) * 0.5;
            double b1 = h.beta1, b2 = h.beta2; /* the float betas, exactly */
            dm[i] = b1 * dm[i] + (1 - b1) * gi;
            dv[i] = b2 * dv[i] + (1 - b2) * gi * gi;
            double den = c->inside ? sqrt(dv[i] + (double)h.eps) : sqrt(dv[i]) + (double)h.eps;
            du[i] = dm[i] / den + (double)c->wd * dp[i];
            W += dp[i] * dp[i];
            U += du[i] * du[i];
        }
        double r = sqrt(W) / sqrt(U);
        if (r > h.max_coeff) r = h.max_coeff;
        if (r < h.min_coeff) r = h.min_coeff;
        double step = (double)h.lr * (c->bc ? sqrt(h.bias_correction2) / h.bias_correction1 : 1.0);
        for (size_t i = 0; i < n; i++) dp[i] -= step * r * du[i];
        /* reference */
        double w, u;
        zlamb_sums_ref(&h, n, p, m, v, g, c->gdt, NULL, &w, &u);
        ZT_CHECK(rel_ok(w, W, 1e-6, 0) && rel_ok(u, U, 1e-6, 0), "%s step %d: sums %.12g %.12g vs %.12g %.12g", name,
                 t, w, u, W, U);
        float coeff = zlamb_coeff(&h, w, u);
        ZT_CHECK(coeff >= h.min_coeff && coeff <= h.max_coeff, "%s: coeff %g outside the clamp", name, (double)coeff);
        ZT_CHECK(rel_ok(coeff, r, 1e-5, 0), "%s step %d: coeff %.9g vs %.9g", name, t, (double)coeff, r);
        zlamb_apply_ref(&h, coeff, n, p, m, v, g, c->gdt, c->pdt == 3 ? NULL : po, pdt, NULL);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (!(rel_ok(p[i], dp[i], 1e-6, 5e-8) && rel_ok(m[i], dm[i], 1e-6, 5e-9) && rel_ok(v[i], dv[i], 1e-6, 1e-12)) &&
                bad++ == 0)
                first = i;
        ZT_CHECK(bad == 0, "%s step %d: %zu elements off float64, first %zu: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g",
                 name, t, bad, first, (double)p[first], dp[first], (double)m[first], dm[first], (double)v[first],
                 dv[first]);
        /* every SIMD path, threaded, from the same state, without and with a decay mask */
        check_paths(&h, coeff, n, fp, fm, fv, g, c->gdt, c->pdt == 3 ? NULL : fpo, pdt, NULL, name, t);
        for (size_t i = 0; i < (n + 7) / 8; i++) mask[i] = (uint8_t)(zt_rand_u64(&rng) % 3 != 0);
        check_paths(&h, coeff, n, fp, fm, fv, g, c->gdt, c->pdt == 3 ? NULL : fpo, pdt, mask, name, t);
        memcpy(fp, p, n * 4), memcpy(fm, m, n * 4), memcpy(fv, v, n * 4);
    }
    zkernels_set_threads(0);
    free(p), free(m), free(v), free(po), free(fp), free(fm), free(fv), free(fpo);
    free(dp), free(dm), free(dv), free(du), free(g), free(mask);
}

int main(void) {
    zt_name = "test_kernels_lamb";
    rng = zt_seed();
    for (int k = 0; k < 3; k++) {
        have_path[k] = zkernels_set_simd(paths[k]) == 0;
        if (!have_path[k]) fprintf(stderr, "SIMD path %s: not on this CPU, skipped\n", paths[k]);
    }
    zkernels_set_simd(NULL);
    int nbig = 0;
    for (int combo = 0; combo < 3 * 4 * 2 * 2 * 2 * 2; combo++) {
        int r = combo;
        lcase c;
        c.gdt = (zinc_dtype)(r % 3), r /= 3;
        c.pdt = r % 4, r /= 4;
        c.wd = r % 2 ? 0.01f : 0.0f, r /= 2;
        c.bc = r % 2, r /= 2;
        c.inside = r % 2, r /= 2;
        c.tight = r % 2;
        run_case(&c, 1000, 1);
        run_case(&c, 9, 1);
        if (combo % 8 == 0) run_case(&c, 3 * 65536 + 77, 1 + nbig++ % 4);
    }
    zlamb_hparams h = {.max_coeff = 10, .min_coeff = 0.01f};
    ZT_CHECK(zlamb_coeff(&h, 0, 4) == 1.0f && zlamb_coeff(&h, 4, 0) == 1.0f, "a zero norm must give coefficient 1");
    ZT_CHECK(zlamb_coeff(&h, 1e6, 1) == 10.0f && zlamb_coeff(&h, 1, 1e6) == 0.01f, "the clamp");
    return zt_finish();
}
