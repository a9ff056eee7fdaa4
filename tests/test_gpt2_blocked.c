/* GPT-2's fast CPU paths (examples/gpt2): the blocked attention (gpt2_attention.c), GELU keeping its
 * derivative and the vectorised exponentials (gpt2_vecmath.h, every instance this CPU runs) against float64
 * references written here from the definitions, within 2e-5 absolute + 2e-4 relative (the attention's
 * gradients added into pre-filled buffers, GELU's written over them); then every layer's outputs bit for bit equal on the calling thread and on engines of 1, 2 and 3
 * threads (the model's fp32 results must not depend on --threads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_layers.h"
#include "gpt2_vecmath.h"
#include "zt.h"

static uint64_t rng;
static zinc_engine *E; /* whose threads run the layers' loops (NULL: the calling thread) */

static float *rnd(int64_t n, double scale) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(zt_rand_normal(&rng) * scale);
    return x;
}
static float *copyf(const float *x, int64_t n) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    memcpy(d, x, (size_t)n * sizeof *d);
    return d;
}
static int close_to(const float *got, const float *before, const double *want, int64_t n, const char *what) {
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++) {
        double g = (double)got[i] - (before ? (double)before[i] : 0.0);
        if (!zt_near(g, want[i], 2e-5, 2e-4)) {
            zt_fail_at(__FILE__, __LINE__, "%s[%lld]: %.9g, reference %.9g", what, (long long)i, g, want[i]);
            bad++;
        }
    }
    if (!bad) zt_passed++;
    return bad;
}

/* Attention in float64: out, each row's log-sum-exp of the scaled scores, and dqkv for upstream dout. */
static void attention_ref(const float *qkv, const float *dout, int B, int T, int C, int H, double *ro, double *rlse,
                          double *rd) {
    int hs = C / H;
    double *a = calloc((size_t)T, 8), *da = calloc((size_t)T, 8), scale = 1 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
#define Q(tt, i) qkv[((int64_t)b * T + (tt)) * 3 * C + h * hs + (i)]
#define K(tt, i) qkv[((int64_t)b * T + (tt)) * 3 * C + C + h * hs + (i)]
#define VV(tt, i) qkv[((int64_t)b * T + (tt)) * 3 * C + 2 * C + h * hs + (i)]
#define D(tt, part, i) rd[((int64_t)b * T + (tt)) * 3 * C + (part)*C + h * hs + (i)]
                double mx = -1e300, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += (double)Q(t, i) * K(u, i);
                    a[u] = s * scale;
                    mx = a[u] > mx ? a[u] : mx;
                }
                for (int u = 0; u <= t; u++) sum += (a[u] = exp(a[u] - mx));
                rlse[((int64_t)b * H + h) * T + t] = mx + log(sum);
                for (int u = 0; u <= t; u++) a[u] /= sum;
                const float *dor = dout + ((int64_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++) s += a[u] * VV(u, i);
                    ro[((int64_t)b * T + t) * C + h * hs + i] = s;
                }
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    da[u] = 0;
                    for (int i = 0; i < hs; i++) {
                        da[u] += dor[i] * (double)VV(u, i);
                        D(u, 2, i) += a[u] * dor[i];
                    }
                    dot += a[u] * da[u];
                }
                for (int u = 0; u <= t; u++) {
                    double ds = a[u] * (da[u] - dot) * scale;
                    for (int i = 0; i < hs; i++) {
                        D(t, 0, i) += ds * K(u, i);
                        D(u, 1, i) += ds * Q(t, i);
                    }
                }
            }
    free(a), free(da);
}

static void test_attention_blocked(int B, int T, int C, int H, double qscale) {
    int64_t n3 = (int64_t)B * T * 3 * C, nout = (int64_t)B * T * C, nlse = (int64_t)B * H * T;
    float *qkv = rnd(n3, 1), *dout = rnd(nout, 1), *out = malloc(nout * 4), *lse = malloc(nlse * 4);
    for (int64_t i = 0; i < n3; i++)
        if (i % (3 * C) < C) qkv[i] *= (float)qscale; /* large scores: the online softmax must rescale */
    double *ro = calloc(nout, 8), *rlse = calloc(nlse, 8), *rd = calloc(n3, 8);
    attention_ref(qkv, dout, B, T, C, H, ro, rlse, rd);
    gpt2_attention_forward_blocked(E, out, lse, qkv, B, T, C, H);
    close_to(out, NULL, ro, nout, "blocked attention out");
    close_to(lse, NULL, rlse, nlse, "blocked attention lse");
    float *dqkv = rnd(n3, 1), *dqkv0 = copyf(dqkv, n3);
    gpt2_attention_backward_blocked(E, dqkv, dout, out, qkv, lse, B, T, C, H);
    close_to(dqkv, dqkv0, rd, n3, "blocked attention dqkv");
    free(qkv), free(dout), free(out), free(lse), free(ro), free(rlse), free(rd), free(dqkv), free(dqkv0);
}

/* GELU's output and its derivative, in double. */
static void gelu_ref(const float *x, int64_t n, double *ro, double *rderiv) {
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], k = sqrt(2 / M_PI), u = k * (v + 0.044715 * v * v * v), th = tanh(u);
        ro[i] = 0.5 * v * (1 + th);
        rderiv[i] = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v);
    }
}

/* Through the layers (the engine's threads, the chosen instance); the derivative written over x, as the
 * model does, bit for bit the one written beside it. (Backward multiplies by it inside the product's
 * pieces: gpt2_layers's matmul_set checks.) */
static void test_gelu_deriv(int64_t n) {
    float *x = rnd(n, 2.5), *out = malloc(n * 4), *deriv = malloc(n * 4), *inplace = copyf(x, n);
    float *out2 = malloc(n * 4);
    double *ro = malloc(n * 8), *rderiv = malloc(n * 8);
    gelu_ref(x, n, ro, rderiv);
    gpt2_gelu_forward_deriv(E, out, deriv, x, n);
    close_to(out, NULL, ro, n, "gelu out");
    close_to(deriv, NULL, rderiv, n, "gelu derivative");
    gpt2_gelu_forward_deriv(E, out2, inplace, inplace, n);
    ZT_CHECK(!memcmp(out, out2, (size_t)n * 4) && !memcmp(deriv, inplace, (size_t)n * 4),
             "gelu with the derivative written over x differs from the one beside it (n %lld)", (long long)n);
    free(x), free(out), free(deriv), free(inplace), free(out2), free(ro), free(rderiv);
}

/* One instance directly, with odd lengths (partial vectors) and extreme inputs. */
static void test_instance(const gpt2_vecmath *vm) {
    for (int64_t n = 1; n <= 41; n += 8) {
        float *x = rnd(n, 3), *out = malloc(n * 4), *deriv = malloc(n * 4), *e = malloc(n * 4);
        x[0] = n == 1 ? 0.0f : 30.0f; /* tanh saturates: the GELU is x, its derivative 1 */
        if (n > 1) x[1] = -30.0f;
        double *ro = malloc(n * 8), *rderiv = malloc(n * 8), *re = malloc(n * 8);
        gelu_ref(x, n, ro, rderiv);
        vm->gelu_fwd(out, deriv, x, n);
        close_to(out, NULL, ro, n, vm->name);
        close_to(deriv, NULL, rderiv, n, vm->name);
        double mx = x[0], sum = 0;
        for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
        ZT_CHECK(vm->max(x, n) == (float)mx, "%s max of %lld", vm->name, (long long)n);
        for (int64_t i = 0; i < n; i++)
            sum += (re[i] = exp((double)(x[i] - 2.0f))); /* the shift in float, as the code */
        double got = vm->exp_shift(e, x, n, 2.0f), got_nostore = vm->exp_shift(NULL, x, n, 2.0f);
        ZT_NEAR(got, sum, 1e-30, 1e-6, "%s exp_shift sum %.9g, reference %.9g (n %lld)", vm->name, got, sum,
                (long long)n);
        ZT_CHECK(got == got_nostore, "%s exp_shift: the sum depends on storing", vm->name);
        float *ef = malloc(n * 4);
        double gotf = vm->exp_shift_f32(ef, x, n, 2.0f);
        ZT_NEAR(gotf, sum, 1e-30, 1e-5, "%s exp_shift_f32 sum %.9g, reference %.9g (n %lld)", vm->name, gotf, sum,
                (long long)n);
        int badf = 0;
        for (int64_t i = 0; i < n; i++) badf += fabs((double)ef[i] / exp((double)(x[i] - 2.0f)) - 1.0) > 1e-6;
        ZT_CHECK(!badf, "%s exp_shift_f32: %d of %lld exponentials off by more than 1e-6 relative", vm->name, badf,
                 (long long)n);
        free(ef);
        for (int64_t i = 0; i < n; i++) re[i] = (double)e[i] / re[i] - 1.0; /* relative error */
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += fabs(re[i]) > 1e-6;
        ZT_CHECK(!bad, "%s exp_shift: %d of %lld exponentials off by more than 1e-6 relative", vm->name, bad,
                 (long long)n);
        free(x), free(out), free(deriv), free(e), free(ro), free(rderiv);
        free(re);
    }
}

/* ---------------------------------------------------------------- no AVX upper state left behind */

#if defined(__x86_64__)
#include <cpuid.h>
#define XINUSE_DIRTY ((1u << 2) | (1u << 6)) /* ymm0-15 upper halves, zmm0-15 upper halves */
static uint64_t xinuse(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return ((uint64_t)hi << 32) | lo;
}
static int have_xinuse(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && ((a >> 2) & 1);
}
/* After each function of a SIMD instance returns (full and partial vectors), the caller's SSE code must not
 * pay for dirty upper halves: XINUSE bits 2 and 6 clear (the vzeroupper at every exit). */
static void test_upper_state(const gpt2_vecmath *vm) {
    if (!have_xinuse()) return;
    float x[40], y[40], t[40];
    for (int i = 0; i < 40; i++) x[i] = (float)i * 0.1f - 2.0f, y[i] = 0.0f;
    for (int n = 37; n <= 40; n += 3) {
        const char *what[] = {"gelu_fwd", "exp_shift", "exp_shift_f32", "max"};
        for (int f = 0; f < 4; f++) {
            __asm__ volatile("vpcmpeqd %%ymm1, %%ymm1, %%ymm1" ::: "xmm1"); /* dirty on purpose ... */
            __asm__ volatile("vzeroupper" ::: "memory");                    /* ... and clean: a known start */
            switch (f) {
            case 0: vm->gelu_fwd(y, t, x, n); break;
            case 1: (void)vm->exp_shift(y, x, n, 1.0f); break;
            case 2: (void)vm->exp_shift_f32(y, x, n, 1.0f); break;
            default: (void)vm->max(x, n); break;
            }
            uint64_t st = xinuse() & XINUSE_DIRTY;
            ZT_CHECK(!st, "%s %s (n %d): XINUSE 0x%llx after return: AVX upper state left in use", vm->name, what[f], n,
                     (unsigned long long)st);
        }
    }
}
#endif

/* ---------------------------------------------------------------- independent of the thread count */

typedef struct outputs {
    float *buf[32];
    int64_t n[32];
    int count;
} outputs;

static float *keep(outputs *o, float *p, int64_t n) {
    o->buf[o->count] = p, o->n[o->count++] = n;
    return p;
}

/* Every layer on fixed inputs (seeded the same each call), into o. */
static void run_layers(zinc_engine *e, outputs *o) {
    uint64_t saved = rng;
    rng = 12345;
    int B = 3, T = 70, C = 96, H = 3, V = 203;
    int64_t N = (int64_t)B * T, NC = N * C;
    float *x = rnd(NC, 1), *w = rnd(C, 1), *b = rnd(C, 1), *W = rnd(3 * C * C, 0.2), *bias = rnd(3 * C, 1);
    float *dout3 = rnd(3 * NC, 1), *dout = rnd(NC, 1), *logits = rnd(N * V, 2), *dbig = rnd(4 * NC, 1);
    int32_t *tg = malloc(N * 4), *inp = malloc(N * 4);
    for (int64_t i = 0; i < N; i++) tg[i] = (int32_t)(i * 7 % V), inp[i] = (int32_t)(i * 5 % V);
    float *ln = keep(o, malloc(NC * 4), NC), *m = keep(o, malloc(N * 4), N), *r = keep(o, malloc(N * 4), N);
    gpt2_layernorm_forward(e, ln, m, r, x, w, b, N, C);
    float *dx = keep(o, calloc(NC, 4), NC), *dw = keep(o, calloc(C, 4), C), *db = keep(o, calloc(C, 4), C);
    gpt2_layernorm_backward(e, dx, dw, db, dout, x, w, m, r, N, C);
    float *qkv = keep(o, malloc(3 * NC * 4), 3 * NC);
    gpt2_matmul_forward(e, qkv, ln, W, bias, N, C, 3 * C);
    float *dln = keep(o, calloc(NC, 4), NC), *dW = keep(o, calloc(3 * C * C, 4), 3 * C * C);
    float *dbias = keep(o, calloc(3 * C, 4), 3 * C);
    gpt2_matmul_backward(e, dln, dW, dbias, dout3, ln, W, N, C, 3 * C);
    float *att = keep(o, malloc(NC * 4), NC), *lse = keep(o, malloc(B * H * T * 4), B * H * T);
    gpt2_attention_forward_blocked(e, att, lse, qkv, B, T, C, H);
    float *dqkv = keep(o, calloc(3 * NC, 4), 3 * NC);
    gpt2_attention_backward_blocked(e, dqkv, dout, att, qkv, lse, B, T, C, H);
    float *g = keep(o, malloc(4 * NC * 4), 4 * NC), *deriv = keep(o, malloc(4 * NC * 4), 4 * NC);
    gpt2_gelu_forward_deriv(e, g, deriv, dbig, 4 * NC);
    float *dg = keep(o, malloc(NC * 4), NC), *dWg = keep(o, calloc(3 * C * C, 4), 3 * C * C);
    gpt2_matmul_backward_set(e, dg, deriv, dWg, NULL, dout3, ln, W, N, C, 3 * C); /* times deriv's first N x C */
    double *rows = malloc(N * 8);
    float *loss = keep(o, malloc(4), 1);
    *loss = (float)gpt2_crossentropy(e, logits, logits, tg, N, V, 0.5f, rows);
    keep(o, logits, N * V);
    float *dwte = keep(o, calloc((size_t)V * C, 4), (int64_t)V * C), *dwpe = keep(o, calloc(T * C, 4), T * C);
    gpt2_embed_backward(e, dwte, dwpe, dout, inp, B, T, C);
    free(x), free(w), free(b), free(W), free(bias), free(dout3), free(dout), free(dbig), free(tg), free(inp);
    free(rows);
    rng = saved;
}

static void test_thread_independence(zinc_engine *const *engines, const int *threads, int count) {
    outputs ref = {0};
    run_layers(NULL, &ref);
    for (int k = 0; k < count; k++) {
        outputs o = {0};
        run_layers(engines[k], &o);
        for (int i = 0; i < ref.count; i++) {
            int64_t j = 0;
            while (j < ref.n[i] && !memcmp(o.buf[i] + j, ref.buf[i] + j, 4)) j++;
            if (j < ref.n[i])
                printf("  output %d: first difference at %lld: %.9g vs %.9g\n", i, (long long)j, o.buf[i][j],
                       ref.buf[i][j]);
            ZT_CHECK(o.n[i] == ref.n[i] && !memcmp(o.buf[i], ref.buf[i], (size_t)ref.n[i] * 4),
                     "output %d of the layers differs on %d threads from the calling thread's", i, threads[k]);
        }
        for (int i = 0; i < o.count; i++) free(o.buf[i]);
    }
    for (int i = 0; i < ref.count; i++) free(ref.buf[i]);
}

int main(void) {
    zt_name = "gpt2_blocked";
    rng = zt_seed();
    gpt2_layers_init();
    printf("vector math: %s\n", gpt2_vecmath_get()->name);
    test_instance(&gpt2_vecmath_scalar);
#if defined(__x86_64__)
    if (gpt2_vecmath_avx512_ptr && __builtin_cpu_supports("avx512f")) {
        test_instance(gpt2_vecmath_avx512_ptr);
        test_upper_state(gpt2_vecmath_avx512_ptr);
    }
    if (gpt2_vecmath_avx2_ptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        test_instance(gpt2_vecmath_avx2_ptr);
        test_upper_state(gpt2_vecmath_avx2_ptr);
    }
#endif
    int threads[] = {1, 2, 3};
    zinc_engine *engines[3] = {0};
    for (int k = 0; k < 3; k++) {
        zinc_options o = zinc_default_options();
        o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";
        o.log_level = ZINC_LOG_WARN;
        o.cpu_threads = threads[k];
        ZT_OK(zinc_create(&o, &engines[k]));
    }
    zinc_engine *run_on[] = {engines[2], NULL};
    for (int r = 0; r < 2; r++) {
        E = run_on[r];
        test_attention_blocked(2, 9, 12, 3, 1);
        test_attention_blocked(1, 1, 8, 2, 1);
        test_attention_blocked(2, 150, 16, 2, 1); /* three query and key blocks, the last partial */
        test_attention_blocked(1, 129, 32, 1, 6); /* large scores */
        test_gelu_deriv(1001);
        test_gelu_deriv(5);
    }
    test_thread_independence(engines, threads, 3);
    for (int k = 0; k < 3; k++) zinc_destroy(engines[k]);
    zinc_finalize();
    return zt_finish();
}
