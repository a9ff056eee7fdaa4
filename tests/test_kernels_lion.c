/* The Lion kernels (kernels/lion_cpu.c):
 * - zlion_step_ref against a float64 Lion written here from the formulas of cpu_kernels.h, over 3 steps,
 *   every gradient dtype (fp32, fp16, bf16), param_out dtype (fp32, fp16, bf16, none), with and without a
 *   decay mask, weight decay 0 and 0.1, grad_factor 1 and 0.37. Tolerance: m within 1e-6 relative + 1e-7
 *   absolute of float64 (a handful of fp32 roundings); p within 1e-6 relative + 1e-7 absolute wherever
 *   the float64 momentum interpolation c is not within 1e-5 of 0 (there float rounding may legitimately
 *   pick the other sign; such elements are counted and must be rare, and p must move by exactly +-lr or 0
 *   around its decayed value);
 * - sign(0) = 0: an element with zero gradient and zero momentum does not move (only its decay applies);
 * - zlion_step (every SIMD path this CPU has, 1-4 threads, sizes that cross the thread chunks and the mask
 *   groups) bitwise equal to zlion_step_ref, param_out equal to the cast of the master;
 * - zadam_step / zadam_step_ref with h.lion set run Lion and leave v untouched. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "zt.h"

static uint64_t rng;
static const char *const paths[] = {"scalar", "avx2", "avx512"};

static void store(void *buf, zinc_dtype t, size_t i, float x) {
    if (t == ZINC_FP32) ((float *)buf)[i] = x;
    else if (t == ZINC_FP16) ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x);
    else ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x);
}

typedef struct lcase {
    zinc_dtype gdt;
    int pdt; /* 3: no param_out */
    int masked;
    float wd, gf;
} lcase;

static zadam_hparams hp(const lcase *c) {
    zadam_hparams h;
    memset(&h, 0, sizeof h);
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.99f;
    h.weight_decay = c->wd;
    h.grad_factor = c->gf;
    h.bias_correction1 = h.bias_correction2 = 1.0;
    h.lion = 1;
    return h;
}

static size_t near_zero_total, compared_total;

/* The float64 Lion of the header comment; cz[i] gets |c| of this step. */
static void lion_f64(const zadam_hparams *h, size_t n, double *p, double *m, const void *g, zinc_dtype gdt,
                     const uint8_t *mask, double *cz) {
    double lr = h->lr, b1 = h->beta1, b2 = h->beta2, wd = h->weight_decay;
    for (size_t i = 0; i < n; i++) {
        double gi = (double)zinc_load_f32(g, gdt, i) * (double)h->grad_factor;
        double c = b1 * m[i] + (1 - b1) * gi;
        cz[i] = fabs(c);
        int dec = !mask || mask[i / ZADAM_MASK_GROUP];
        if (wd != 0 && dec) p[i] *= 1 - lr * wd;
        p[i] -= lr * (c > 0 ? 1 : c < 0 ? -1 : 0);
        m[i] = b2 * m[i] + (1 - b2) * gi;
    }
}

static int param_out_ok(const float *p, const void *po, int pdt, size_t n) {
    if (pdt == 3) return 1;
    for (size_t i = 0; i < n; i++) {
        float want = p[i];
        if (pdt == ZINC_FP16) want = zinc_fp16_to_f32(zinc_f32_to_fp16(want));
        if (pdt == ZINC_BF16) want = zinc_bf16_to_f32(zinc_f32_to_bf16(want));
        if (zinc_load_f32(po, (zinc_dtype)pdt, i) != want) return 0;
    }
    return 1;
}

static void run_case(const lcase *c, size_t n, int threads) {
    char name[128];
    snprintf(name, sizeof name, "n=%zu grad=%s out=%s mask=%d wd=%g gf=%g threads=%d", n,
             zinc_dtype_name(c->gdt), c->pdt == 3 ? "none" : zinc_dtype_name((zinc_dtype)c->pdt), c->masked,
             c->wd, c->gf, threads);
    float *p = malloc(n * 4), *m = malloc(n * 4), *po = malloc(n * 4);
    float *fp = malloc(n * 4), *fm = malloc(n * 4), *fpo = malloc(n * 4);
    double *dp = malloc(n * 8), *dm = malloc(n * 8), *cz = malloc(n * 8);
    /* An element whose c came within 1e-5 of 0 at any step may take the other sign in float than in float64
     * there, and its p then differs by 2 lr from that step on: its p is not compared again (m still is). */
    uint8_t *near0 = calloc(n, 1);
    void *g = malloc(n * 4);
    uint8_t *mask = c->masked ? malloc(n / ZADAM_MASK_GROUP + 1) : NULL;
    if (mask)
        for (size_t i = 0; i < n / ZADAM_MASK_GROUP + 1; i++) mask[i] = (zt_rand_u64(&rng) & 3) ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)zt_rand_normal(&rng);
        m[i] = (float)(0.1 * zt_rand_normal(&rng));
        if (i % 97 == 5) m[i] = 0; /* with a zero gradient below: c == 0, sign 0 */
        dp[i] = p[i];
        dm[i] = m[i];
    }
    memcpy(fp, p, n * 4);
    memcpy(fm, m, n * 4);
    zadam_hparams h = hp(c);
    zinc_dtype pdt = c->pdt == 3 ? ZINC_FP32 : (zinc_dtype)c->pdt;
    zkernels_set_threads(threads);
    for (int t = 1; t <= 3; t++) {
        for (size_t i = 0; i < n; i++) store(g, c->gdt, i, (t == 1 && i % 97 == 5) ? 0.0f : (float)zt_rand_normal(&rng));
        float before5 = n > 5 ? p[5] : 0;
        zlion_step_ref(&h, n, p, m, g, c->gdt, c->pdt == 3 ? NULL : po, pdt, mask);
        lion_f64(&h, n, dp, dm, g, c->gdt, mask, cz);
        if (t == 1 && n > 5) { /* c == 0: only the decay applies */
            int dec = c->wd != 0 && (!mask || mask[0]);
            float want = dec ? before5 * (1.0f - h.lr * h.weight_decay) : before5;
            ZT_CHECK(p[5] == want, "sign(0) must be 0: %s: p %.9g, want %.9g", name, (double)p[5], (double)want);
        }
        size_t bad = 0, first = SIZE_MAX, nz = 0;
        for (size_t i = 0; i < n; i++) {
            int ok = fabs(m[i] - dm[i]) <= 1e-6 * fabs(dm[i]) + 1e-7;
            if (cz[i] <= 1e-5) {
                near0[i] = 1;
                nz += cz[i] != 0; /* the deliberate c == 0 elements are not a weakness */
            }
            if (!near0[i]) ok = ok && fabs(p[i] - dp[i]) <= 1e-6 * fabs(dp[i]) + 1e-7;
            if (!ok && bad++ == 0) first = i;
        }
        near_zero_total += nz;
        compared_total += n;
        ZT_CHECK(bad == 0, "ref vs float64, %s step %d: %zu bad, first %zu: p %.9g/%.9g m %.9g/%.9g", name, t, bad,
                 first, bad ? (double)p[first] : 0, bad ? dp[first] : 0, bad ? (double)m[first] : 0,
                 bad ? dm[first] : 0);
        ZT_CHECK(param_out_ok(p, po, c->pdt, n), "ref param_out != cast(master), %s step %d", name, t);
        /* Every path from the same inputs: bitwise equal to the reference. */
        float *sp = malloc(n * 4), *sm = malloc(n * 4);
        for (int k = 0; k < 3; k++) {
            if (zkernels_set_simd(paths[k]) != 0) continue;
            memcpy(sp, fp, n * 4);
            memcpy(sm, fm, n * 4);
            memset(fpo, 0xff, n * 4);
            zlion_step(&h, n, sp, sm, g, c->gdt, c->pdt == 3 ? NULL : fpo, pdt, mask);
            ZT_CHECK(memcmp(sp, p, n * 4) == 0 && memcmp(sm, m, n * 4) == 0,
                     "%s path differs from the reference: %s step %d", paths[k], name, t);
            ZT_CHECK(c->pdt == 3 || memcmp(fpo, po, n * zinc_dtype_size(pdt)) == 0,
                     "%s path param_out differs from the reference: %s step %d", paths[k], name, t);
        }
        zkernels_set_simd(NULL);
        memcpy(fp, p, n * 4);
        memcpy(fm, m, n * 4);
        free(sp);
        free(sm);
    }
    zkernels_set_threads(0);
    free(p), free(m), free(po), free(fp), free(fm), free(fpo), free(dp), free(dm), free(cz), free(near0), free(g), free(mask);
}

/* The Adam entry points with h.lion run Lion, and v is neither read nor written. */
static void test_dispatch(void) {
    enum { N = 1000 };
    lcase c = {ZINC_FP32, ZINC_BF16, 0, 0.1f, 1.0f};
    zadam_hparams h = hp(&c);
    float p0[N], m0[N], g[N], p1[N], m1[N], v1[N], p2[N], m2[N], v2[N];
    uint16_t o1[N], o2[N], o0[N];
    for (int i = 0; i < N; i++) {
        p0[i] = (float)zt_rand_normal(&rng);
        m0[i] = (float)zt_rand_normal(&rng);
        g[i] = (float)zt_rand_normal(&rng);
        v1[i] = v2[i] = NAN;
    }
    memcpy(p1, p0, sizeof p0), memcpy(m1, m0, sizeof m0), memcpy(p2, p0, sizeof p0), memcpy(m2, m0, sizeof m0);
    zlion_step_ref(&h, N, p0, m0, g, ZINC_FP32, o0, ZINC_BF16, NULL);
    zadam_step_ref(&h, N, p1, m1, v1, g, ZINC_FP32, o1, ZINC_BF16, NULL);
    zadam_step(&h, N, p2, m2, v2, g, ZINC_FP32, o2, ZINC_BF16, NULL);
    ZT_CHECK(!memcmp(p0, p1, sizeof p0) && !memcmp(m0, m1, sizeof m0) && !memcmp(o0, o1, sizeof o0),
             "zadam_step_ref with lion set is not zlion_step_ref");
    ZT_CHECK(!memcmp(p0, p2, sizeof p0) && !memcmp(m0, m2, sizeof m0) && !memcmp(o0, o2, sizeof o0),
             "zadam_step with lion set is not zlion_step_ref");
    int vnan = 1;
    for (int i = 0; i < N; i++) vnan &= isnan(v1[i]) && isnan(v2[i]);
    ZT_CHECK(vnan, "Lion wrote exp_avg_sq");
    /* And v may be NULL. */
    zadam_step(&h, N, p2, m2, NULL, g, ZINC_FP32, NULL, ZINC_FP32, NULL);
}

int main(void) {
    zt_name = "test_kernels_lion";
    rng = zt_seed();
    static const size_t small[] = {1, 7, 8, 9, 31, 1000};
    static const size_t big[] = {100003, 3 * 65536 + 123};
    int nbig = 0;
    for (int combo = 0; combo < 3 * 4 * 2 * 2 * 2; combo++) {
        int r = combo;
        lcase c;
        c.gdt = (zinc_dtype)(r % 3), r /= 3;
        c.pdt = r % 4, r /= 4;
        c.masked = r % 2, r /= 2;
        c.wd = r % 2 ? 0.1f : 0.0f, r /= 2;
        c.gf = r % 2 ? 0.37f : 1.0f;
        for (size_t s = 0; s < sizeof small / sizeof small[0]; s++) run_case(&c, small[s], 1);
        if (combo % 4 == 0) {
            run_case(&c, big[nbig % 2], 1 + nbig % 4);
            nbig++;
        }
    }
    test_dispatch();
    fprintf(stderr, "lion: %zu elements compared with float64, %zu with |c| below 1e-5 (sign not compared)\n",
            compared_total, near_zero_total);
    ZT_CHECK(near_zero_total * 1000 < compared_total, "too many near-zero momentum elements: the test is too weak");
    return zt_finish();
}
