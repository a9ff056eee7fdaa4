/* examples/gpt2's layers (gpt2_layers.c, float, OpenBLAS) against float64 references written here from the
 * definitions, forward and backward, on random inputs. Backward references are the analytic derivatives
 * in double; the float layers must agree within 2e-5 absolute + 2e-4 relative (float rounding over sums
 * of up to a few hundred terms; products' also 4e-7 of their terms' magnitudes, for cancellation), after
 * ADDING into pre-filled gradient buffers (they accumulate; the _set products write dx). Each
 * runs twice: on an engine's 3 threads (zinc_parallel_for, as the model runs them) and on the caller. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_layers.h"
#include "zt.h"

static uint64_t rng;
static zinc_engine *E; /* whose threads run the layers' loops (NULL: the calling thread) */

static float *rnd(int64_t n, double scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(zt_rand_normal(&rng) * scale);
    return x;
}
static float *copyf(const float *x, int64_t n) {
    float *d = malloc((size_t)n * sizeof *d);
    memcpy(d, x, (size_t)n * sizeof *d);
    return d;
}
/* the float buffer after accumulation minus what it held before, against the reference */
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
/* The same for sums of products, where cancellation can leave a small result of large terms: the absolute
 * slack also grows with mag[i], the sum of the terms' magnitudes (float rounding is relative to the terms,
 * not to what is left of them; 4e-7 is about 7 float ulps of it). */
static int close_to_dot(const float *got, const float *before, const double *want, const double *mag, int64_t n,
                        const char *what) {
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++) {
        double g = (double)got[i] - (before ? (double)before[i] : 0.0);
        if (!zt_near(g, want[i], 2e-5 + 4e-7 * mag[i], 2e-4)) {
            zt_fail_at(__FILE__, __LINE__, "%s[%lld]: %.9g, reference %.9g (terms' magnitudes sum to %.3g)", what,
                       (long long)i, g, want[i], mag[i]);
            bad++;
        }
    }
    if (!bad) zt_passed++;
    return bad;
}

static void test_layernorm(int64_t N, int C) {
    float *x = rnd(N * C, 1.5), *w = rnd(C, 1), *b = rnd(C, 1), *dout = rnd(N * C, 1);
    for (int64_t i = 0; i < N * C; i++) x[i] += 0.7f; /* a non-zero mean */
    float *out = malloc(N * C * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    gpt2_layernorm_forward(E, out, mean, rstd, x, w, b, N, C);
    double *ro = malloc(N * C * 8), *rdx = calloc(N * C, 8), *rdw = calloc(C, 8), *rdb = calloc(C, 8);
    for (int64_t n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
        v /= C;
        double s = 1 / sqrt(v + 1e-5), a = 0, bsum = 0;
        for (int c = 0; c < C; c++) {
            double xh = (x[n * C + c] - m) * s;
            ro[n * C + c] = xh * w[c] + b[c];
            rdw[c] += dout[n * C + c] * xh;
            rdb[c] += dout[n * C + c];
            a += dout[n * C + c] * w[c];
            bsum += dout[n * C + c] * w[c] * xh;
        }
        for (int c = 0; c < C; c++) {
            double xh = (x[n * C + c] - m) * s;
            rdx[n * C + c] = s * (dout[n * C + c] * w[c] - a / C - xh * bsum / C);
        }
    }
    close_to(out, NULL, ro, N * C, "layernorm out");
    float *dx = rnd(N * C, 1), *dw = rnd(C, 1), *db = rnd(C, 1);
    float *dx0 = copyf(dx, N * C), *dw0 = copyf(dw, C), *db0 = copyf(db, C);
    gpt2_layernorm_backward(E, dx, dw, db, dout, x, w, mean, rstd, N, C);
    close_to(dx, dx0, rdx, N * C, "layernorm dx");
    close_to(dw, dw0, rdw, C, "layernorm dw");
    close_to(db, db0, rdb, C, "layernorm db");
    free(x), free(w), free(b), free(dout), free(out), free(mean), free(rstd), free(ro), free(rdx), free(rdw), free(rdb);
    free(dx), free(dw), free(db), free(dx0), free(dw0), free(db0);
}

static void test_matmul(int64_t N, int IC, int OC, int with_bias) {
    float *x = rnd(N * IC, 1), *W = rnd((int64_t)OC * IC, 0.3), *b = with_bias ? rnd(OC, 1) : NULL;
    float *dout = rnd(N * OC, 1), *out = malloc(N * OC * 4);
    gpt2_matmul_forward(E, out, x, W, b, N, IC, OC);
    double *ro = calloc(N * OC, 8), *rdx = calloc(N * IC, 8), *rdW = calloc((size_t)OC * IC, 8), *rdb = calloc(OC, 8);
    double *mdx = calloc(N * IC, 8), *mdW = calloc((size_t)OC * IC, 8); /* the terms' magnitudes */
    for (int64_t n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < IC; i++) {
                s += (double)x[n * IC + i] * W[(int64_t)o * IC + i];
                rdx[n * IC + i] += (double)dout[n * OC + o] * W[(int64_t)o * IC + i];
                rdW[(int64_t)o * IC + i] += (double)dout[n * OC + o] * x[n * IC + i];
                mdx[n * IC + i] += fabs((double)dout[n * OC + o] * W[(int64_t)o * IC + i]);
                mdW[(int64_t)o * IC + i] += fabs((double)dout[n * OC + o] * x[n * IC + i]);
            }
            ro[n * OC + o] = s;
            rdb[o] += dout[n * OC + o];
        }
    close_to(out, NULL, ro, N * OC, "matmul out");
    /* with a residual: the product, then the add, bit for bit */
    float *res = rnd(N * OC, 1), *outr = malloc(N * OC * 4);
    gpt2_matmul_forward_res(E, outr, x, W, b, res, N, IC, OC);
    int diff = 0;
    for (int64_t i = 0; i < N * OC; i++) diff += outr[i] != res[i] + out[i];
    ZT_CHECK(!diff, "matmul_forward_res: %d of %lld outputs differ from the product plus the residual", diff,
             (long long)(N * OC));
    free(res), free(outr);
    float *dx = rnd(N * IC, 1), *dW = rnd((int64_t)OC * IC, 1), *db = rnd(OC, 1);
    float *dx0 = copyf(dx, N * IC), *dW0 = copyf(dW, (int64_t)OC * IC), *db0 = copyf(db, OC);
    gpt2_matmul_backward(E, dx, dW, b ? db : NULL, dout, x, W, N, IC, OC);
    close_to_dot(dx, dx0, rdx, mdx, N * IC, "matmul dx");
    close_to_dot(dW, dW0, rdW, mdW, (int64_t)OC * IC, "matmul dW");
    if (b) close_to(db, db0, rdb, OC, "matmul db");
    /* _set writes dx over what was there (random here) and still adds to dW and db; with dx_mul, dx is the
     * product times it, element by element */
    float *dxs = rnd(N * IC, 1), *dWs = copyf(dW0, (int64_t)OC * IC), *dbs = copyf(db0, OC);
    gpt2_matmul_backward_set(E, dxs, NULL, dWs, b ? dbs : NULL, dout, x, W, N, IC, OC);
    close_to_dot(dxs, NULL, rdx, mdx, N * IC, "matmul_set dx");
    close_to_dot(dWs, dW0, rdW, mdW, (int64_t)OC * IC, "matmul_set dW");
    if (b) close_to(dbs, db0, rdb, OC, "matmul_set db");
    float *mul = rnd(N * IC, 2);
    for (int64_t i = 0; i < N * IC; i++) rdx[i] *= mul[i], mdx[i] *= fabs((double)mul[i]);
    gpt2_matmul_backward_set(E, dxs, mul, NULL, NULL, dout, x, W, N, IC, OC);
    close_to_dot(dxs, NULL, rdx, mdx, N * IC, "matmul_set dx times dx_mul");
    free(mul), free(mdx), free(mdW);
    free(x), free(W), free(b), free(dout), free(out), free(ro), free(rdx), free(rdW), free(rdb), free(dx), free(dW);
    free(db), free(dx0), free(dW0), free(db0), free(dxs), free(dWs), free(dbs);
}

static void test_attention(int B, int T, int C, int H) {
    int hs = C / H;
    int64_t n3 = (int64_t)B * T * 3 * C, nout = (int64_t)B * T * C, natt = (int64_t)B * H * T * T;
    float *qkv = rnd(n3, 1), *dout = rnd(nout, 1), *out = malloc(nout * 4), *att = malloc(natt * 4);
    gpt2_attention_forward(E, out, att, qkv, B, T, C, H);
    double *ro = calloc(nout, 8), *rd = calloc(n3, 8), *a = calloc((size_t)T, 8), *da = calloc((size_t)T, 8);
    double scale = 1 / sqrt((double)hs);
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
    close_to(out, NULL, ro, nout, "attention out");
    float *dqkv = rnd(n3, 1), *dqkv0 = copyf(dqkv, n3), *datt = malloc(natt * 4);
    gpt2_attention_backward(E, dqkv, datt, dout, qkv, att, B, T, C, H);
    close_to(dqkv, dqkv0, rd, n3, "attention dqkv");
    free(qkv), free(dout), free(out), free(att), free(ro), free(rd), free(a), free(da), free(dqkv), free(dqkv0);
    free(datt);
}

static void test_gelu(int64_t n) {
    float *x = rnd(n, 2.5), *dout = rnd(n, 1), *out = malloc(n * 4), *dx = rnd(n, 1), *dx0 = copyf(dx, n);
    double *ro = malloc(n * 8), *rdx = malloc(n * 8);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], k = sqrt(2 / M_PI), u = k * (v + 0.044715 * v * v * v), th = tanh(u);
        ro[i] = 0.5 * v * (1 + th);
        rdx[i] = dout[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v));
    }
    gpt2_gelu_forward(E, out, x, n);
    gpt2_gelu_backward(E, dx, x, dout, n);
    close_to(out, NULL, ro, n, "gelu out");
    close_to(dx, dx0, rdx, n, "gelu dx");
    free(x), free(dout), free(out), free(dx), free(dx0), free(ro), free(rdx);
}

static void test_crossentropy(int64_t N, int V) {
    float *z = rnd(N * V, 3), *d = malloc(N * V * 4);
    int32_t *tg = malloc(N * 4);
    for (int64_t n = 0; n < N; n++) tg[n] = (int32_t)(zt_rand_u64(&rng) % (uint64_t)V);
    double *rd = malloc(N * V * 8), loss = 0, scale = 0.37;
    for (int64_t n = 0; n < N; n++) {
        double s = 0;
        for (int k = 0; k < V; k++) s += exp((double)z[n * V + k]);
        loss += log(s) - z[n * V + tg[n]];
        for (int k = 0; k < V; k++) rd[n * V + k] = (exp((double)z[n * V + k]) / s - (k == tg[n])) * scale;
    }
    double *rows = malloc(N * 8);
    double got = gpt2_crossentropy(E, d, z, tg, N, V, (float)scale, rows);
    ZT_NEAR(got, loss, 1e-6, 1e-6, "cross-entropy sum %.12g, reference %.12g", got, loss);
    close_to(d, NULL, rd, N * V, "cross-entropy dlogits");
    /* in place, as the model calls it */
    double got2 = gpt2_crossentropy(E, z, z, tg, N, V, (float)scale, rows);
    ZT_NEAR(got2, loss, 1e-6, 1e-6, "in-place cross-entropy sum");
    close_to(z, NULL, rd, N * V, "in-place dlogits");
    free(z), free(d), free(tg), free(rd), free(rows);
}

int main(void) {
    zt_name = "gpt2_layers";
    rng = zt_seed();
    gpt2_layers_init();
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = 3; /* more threads than some loops have items */
    zinc_engine *engine = NULL;
    ZT_OK(zinc_create(&o, &engine));
    zinc_engine *run_on[] = {engine, NULL};
    for (int r = 0; r < 2; r++) {
        E = run_on[r];
        test_layernorm(37, 48);
        test_layernorm(5, 1);
        test_layernorm(20, 100); /* 16-lane partial sums with a tail */
        test_matmul(37, 24, 72, 1);
        test_matmul(64, 96, 24, 1);
        test_matmul(3, 5, 7, 0);
        test_matmul(300, 40, 200, 1); /* several pieces of rows and of output features */
        test_matmul(20, 150, 700, 1); /* cut by outputs (forward, dW) and by dx's columns */
        test_matmul(50, 600, 130, 1); /* dW cut by input features */
        test_attention(2, 9, 12, 3);
        test_attention(1, 1, 8, 2);
        test_attention(3, 16, 16, 1);
        test_gelu(1001);
        test_crossentropy(19, 37);
    }
    zinc_destroy(engine);
    zinc_finalize();
    return zt_finish();
}
