/* GPT-2's own CUDA kernels (examples/gpt2/gpt2_kernels.cu) against their plain-C reference, gpt2_layers.c run
 * on the calling thread (e = NULL), on random inputs. The argument contract (empty shapes succeed without a
 * launch, bad arguments return cudaErrorInvalidValue) is checked first and needs no GPU; then the test exits
 * 77 without a CUDA device.
 *
 * Outputs that are written (not accumulated) are poisoned first (all bytes 0xFF, a NaN), so an element the
 * kernel forgets fails; accumulated outputs start from random values, so "adds into" is checked. Shapes
 * include C not a multiple of 32, T = 1, odd N, T not a multiple of the 32-row attention tile, a head size
 * needing more than 48 KB of shared memory, N above the embedding kernel's 2048-position vote, a vocabulary
 * padded beyond the token ids (wte has more rows than ids in use) and rows of V = 50257.
 *
 * Tolerances (|gpu - host| <= a * max|host| + r * |host| over the buffer):
 *   to_f32, grad_add (fp32/bf16/fp16), add, bias forward, embedding forward and backward: bit-exact (the
 *     same operations in the same order; grad_add is one rounded product, one rounded sum, one rounding);
 *   GELU forward/backward: a = 1e-6, r = 1e-5 (tanhf of CUDA and glibc differ by ulps);
 *   LayerNorm out/mean/rstd/dx, bias and LayerNorm column sums, attention out/att/dqkv:
 *     a = 1e-5, r = 1e-4 (float sums split differently from the host's sequential loops, and contracted
 *     multiply-adds);
 *   cross-entropy row losses: r = 1e-9 (double sums in another order), dlogits a = 1e-6, r = 1e-5
 *     (expf differs by ulps; the target entry p - 1 can cancel).
 * Determinism: every kernel runs twice on the same inputs and the two results must be bitwise equal.
 * Without a GPU, tests/cuda_threads/run.sh runs this file with the kernels on CPU threads under a sanitizer. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_kernels.h"
#include "gpt2_layers.h"
#include "zt_cuda.h"

static uint64_t rng;
static cudaStream_t S;

#define LAUNCH(call)                                                                                                   \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        ZT_CHECK(e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorString(e_));                                        \
    } while (0)

static void *halloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}
static float *rnd(int64_t n, double sigma) {
    float *x = halloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(zt_rand_normal(&rng) * sigma);
    return x;
}
static float *copyf(const float *x, int64_t n) {
    float *d = halloc((size_t)n * sizeof *d);
    memcpy(d, x, (size_t)n * sizeof *d);
    return d;
}
static int32_t *tokens(int64_t n, int V) {
    int32_t *t = halloc((size_t)n * sizeof *t);
    for (int64_t i = 0; i < n; i++) t[i] = (int32_t)(zt_rand_u64(&rng) % (uint64_t)V);
    return t;
}
/* device copies: poisoned (every byte 0xFF), or of a host buffer */
static void *dpoison(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    CU(cudaMemset(p, 0xFF, bytes ? bytes : 1));
    return p;
}
static void *dput(const void *h, size_t bytes) {
    void *p = dpoison(bytes);
    CU(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}
static void *dgetf(const void *d, size_t bytes) { /* a host copy, after the stream's work */
    void *h = halloc(bytes);
    CU(cudaStreamSynchronize(S));
    CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}
static void dfree(void *d) { CU(cudaFree(d)); }
static void dset(void *d, const void *h, size_t bytes) { CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }

/* |got - want| <= a * max|want| + r * |want| for every element (NaN fails unless both are NaN). */
static void close_to(const float *got, const float *want, int64_t n, double a, double r, const char *what) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(want[i]) > mx) mx = fabs(want[i]);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!zt_near(got[i], want[i], a * mx, r)) {
            if (bad < 3)
                zt_fail_at(__FILE__, __LINE__, "%s[%lld]: gpu %.9g, host %.9g (max |host| %.3g)", what, (long long)i,
                           (double)got[i], (double)want[i], mx);
            bad++;
        }
    if (!bad)
        zt_passed++;
    else
        printf("  %s: %d of %lld elements out of tolerance\n", what, bad, (long long)n);
}
static void same_bits(const void *a, const void *b, size_t bytes, const char *what) {
    const unsigned char *x = a, *y = b;
    size_t i = 0;
    while (i < bytes && x[i] == y[i]) i++;
    ZT_CHECK(i == bytes, "%s: differs at byte %zu of %zu", what, i, bytes);
}

/* ------------------------------------------------------------------ the contract, no GPU needed */

static void test_contract(void) {
    const cudaError_t ok = cudaSuccess, bad = cudaErrorInvalidValue;
    float f = 0;
    float *p = &f; /* never dereferenced: every call below returns before launching */
    const int32_t *ip = (const int32_t *)p;
    double *dp = (double *)p;
    /* empty shapes: success, nothing launched, NULL buffers allowed */
    ZT_CHECK(gpt2_cu_to_f32(NULL, NULL, ZINC_BF16, 0, 0) == ok, "to_f32 n=0");
    ZT_CHECK(gpt2_cu_to_f32(NULL, NULL, (zinc_dtype)9, 0, 0) == ok, "to_f32 n=0, any dtype");
    ZT_CHECK(gpt2_cu_grad_add(NULL, ZINC_FP16, NULL, 1.0f, 0, 0) == ok, "grad_add n=0");
    ZT_CHECK(gpt2_cu_add(NULL, NULL, NULL, 0, 0) == ok, "add n=0");
    ZT_CHECK(gpt2_cu_embed_forward(NULL, NULL, NULL, NULL, 0, 4, 8, 0) == ok, "embed_forward B=0");
    ZT_CHECK(gpt2_cu_embed_forward(NULL, NULL, NULL, NULL, 2, 0, 8, 0) == ok, "embed_forward T=0");
    ZT_CHECK(gpt2_cu_embed_forward(NULL, NULL, NULL, NULL, 2, 4, 0, 0) == ok, "embed_forward C=0");
    ZT_CHECK(gpt2_cu_embed_backward(NULL, NULL, NULL, NULL, 2, 4, 8, 0) == ok, "embed_backward, no gradients");
    ZT_CHECK(gpt2_cu_embed_backward(p, p, NULL, NULL, 2, 0, 8, 0) == ok, "embed_backward T=0");
    ZT_CHECK(gpt2_cu_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, 0) == ok, "layernorm_forward N=0");
    ZT_CHECK(gpt2_cu_layernorm_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 3, 0, 0) == ok,
             "layernorm_backward C=0");
    ZT_CHECK(gpt2_cu_bias_forward(NULL, NULL, 0, 5, 0) == ok, "bias_forward N=0");
    ZT_CHECK(gpt2_cu_bias_backward(NULL, NULL, 5, 0, 0) == ok, "bias_backward OC=0");
    ZT_CHECK(gpt2_cu_attention_forward(NULL, NULL, NULL, 0, 4, 8, 2, 0) == ok, "attention_forward B=0");
    ZT_CHECK(gpt2_cu_attention_backward(NULL, NULL, NULL, NULL, NULL, 1, 0, 8, 2, 0) == ok, "attention_backward T=0");
    ZT_CHECK(gpt2_cu_gelu_forward(NULL, NULL, 0, 0) == ok, "gelu_forward n=0");
    ZT_CHECK(gpt2_cu_gelu_backward(NULL, NULL, NULL, 0, 0) == ok, "gelu_backward n=0");
    ZT_CHECK(gpt2_cu_crossentropy(NULL, NULL, NULL, 0, 7, 1.0f, NULL, 0) == ok, "crossentropy N=0");
    /* bad arguments */
    ZT_CHECK(gpt2_cu_to_f32(p, p, ZINC_FP32, -1, 0) == bad, "to_f32 n<0");
    ZT_CHECK(gpt2_cu_to_f32(p, p, (zinc_dtype)9, 4, 0) == bad, "to_f32 unknown dtype");
    ZT_CHECK(gpt2_cu_to_f32(NULL, p, ZINC_FP32, 4, 0) == bad, "to_f32 NULL dst");
    ZT_CHECK(gpt2_cu_grad_add(p, (zinc_dtype)3, p, 1.0f, 4, 0) == bad, "grad_add unknown dtype");
    ZT_CHECK(gpt2_cu_grad_add(p, ZINC_FP32, NULL, 1.0f, 4, 0) == bad, "grad_add NULL add");
    ZT_CHECK(gpt2_cu_add(p, NULL, p, 4, 0) == bad, "add NULL a");
    ZT_CHECK(gpt2_cu_embed_forward(p, ip, p, p, -1, 4, 8, 0) == bad, "embed_forward B<0");
    ZT_CHECK(gpt2_cu_embed_forward(p, NULL, p, p, 1, 4, 8, 0) == bad, "embed_forward NULL inp");
    ZT_CHECK(gpt2_cu_embed_backward(p, NULL, p, NULL, 1, 4, 8, 0) == bad, "embed_backward dwte without inp");
    ZT_CHECK(gpt2_cu_embed_backward(NULL, p, NULL, NULL, 1, 4, 8, 0) == bad, "embed_backward NULL dout");
    ZT_CHECK(gpt2_cu_layernorm_forward(p, p, NULL, p, p, p, 3, 8, 0) == bad, "layernorm_forward NULL rstd");
    ZT_CHECK(gpt2_cu_layernorm_forward(p, p, p, p, p, p, 3, -8, 0) == bad, "layernorm_forward C<0");
    ZT_CHECK(gpt2_cu_layernorm_backward(p, NULL, p, p, p, p, p, p, 3, 8, 0) == bad, "layernorm_backward NULL dw");
    ZT_CHECK(gpt2_cu_bias_forward(p, NULL, 3, 8, 0) == bad, "bias_forward NULL b");
    ZT_CHECK(gpt2_cu_bias_backward(p, p, -3, 8, 0) == bad, "bias_backward N<0");
    ZT_CHECK(gpt2_cu_attention_forward(p, p, p, 1, 4, 10, 3, 0) == bad, "attention_forward C not a multiple of H");
    ZT_CHECK(gpt2_cu_attention_forward(p, p, p, 1, 4, 8, 0, 0) == bad, "attention_forward H=0");
    ZT_CHECK(gpt2_cu_attention_forward(p, NULL, p, 1, 4, 8, 2, 0) == bad, "attention_forward NULL att");
    ZT_CHECK(gpt2_cu_attention_backward(p, NULL, p, p, p, 1, 4, 8, 2, 0) == bad, "attention_backward NULL datt");
    ZT_CHECK(gpt2_cu_gelu_forward(p, NULL, 4, 0) == bad, "gelu_forward NULL x");
    ZT_CHECK(gpt2_cu_gelu_backward(p, p, NULL, 4, 0) == bad, "gelu_backward NULL dout");
    ZT_CHECK(gpt2_cu_crossentropy(p, p, ip, 3, 0, 1.0f, dp, 0) == bad, "crossentropy V=0");
    ZT_CHECK(gpt2_cu_crossentropy(p, p, ip, 3, 7, 1.0f, NULL, 0) == bad, "crossentropy NULL row_loss");
}

/* ------------------------------------------------------------------ elementwise */

static void test_to_f32_grad_add(int64_t n) {
    static const zinc_dtype dts[3] = {ZINC_FP32, ZINC_FP16, ZINC_BF16};
    const float scale = 1024.0f;
    float *add = rnd(n, 1e-3), *g0 = rnd(n, 1.0);
    float *dadd = dput(add, (size_t)n * 4);
    for (int k = 0; k < 3; k++) {
        zinc_dtype t = dts[k];
        size_t es = zinc_dtype_size(t);
        void *hg = halloc((size_t)n * es), *want = halloc((size_t)n * es);
        float *wide = halloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            float sum = g0[i];
            if (t == ZINC_FP32)
                ((float *)hg)[i] = g0[i];
            else
                ((uint16_t *)hg)[i] = t == ZINC_FP16 ? zinc_f32_to_fp16(g0[i]) : zinc_f32_to_bf16(g0[i]);
            if (t != ZINC_FP32)
                sum = t == ZINC_FP16 ? zinc_fp16_to_f32(((uint16_t *)hg)[i]) : zinc_bf16_to_f32(((uint16_t *)hg)[i]);
            wide[i] = sum;
            float prod = scale * add[i];
            sum = sum + prod; /* C11 without contraction: one rounded product, one rounded sum */
            if (t == ZINC_FP32)
                ((float *)want)[i] = sum;
            else
                ((uint16_t *)want)[i] = t == ZINC_FP16 ? zinc_f32_to_fp16(sum) : zinc_f32_to_bf16(sum);
        }
        void *dg = dput(hg, (size_t)n * es);
        float *dw = dpoison((size_t)n * 4);
        LAUNCH(gpt2_cu_to_f32(dw, dg, t, n, S));
        float *got = dgetf(dw, (size_t)n * 4);
        same_bits(got, wide, (size_t)n * 4, "to_f32");
        LAUNCH(gpt2_cu_grad_add(dg, t, dadd, scale, n, S));
        void *gg = dgetf(dg, (size_t)n * es);
        same_bits(gg, want, (size_t)n * es, "grad_add");
        free(hg), free(want), free(wide), free(got), free(gg);
        dfree(dg), dfree(dw);
    }
    /* add, and y aliasing a */
    float *b = rnd(n, 1.0), *want = halloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) want[i] = g0[i] + b[i];
    float *da = dput(g0, (size_t)n * 4), *db = dput(b, (size_t)n * 4), *dy = dpoison((size_t)n * 4);
    LAUNCH(gpt2_cu_add(dy, da, db, n, S));
    float *got = dgetf(dy, (size_t)n * 4);
    same_bits(got, want, (size_t)n * 4, "add");
    free(got);
    LAUNCH(gpt2_cu_add(da, da, db, n, S));
    got = dgetf(da, (size_t)n * 4);
    same_bits(got, want, (size_t)n * 4, "add in place");
    free(got), free(b), free(want), free(add), free(g0);
    dfree(da), dfree(db), dfree(dy), dfree(dadd);
}

static void test_gelu(int64_t n) {
    float *x = rnd(n, 2.0), *dout = rnd(n, 1.0), *dx0 = rnd(n, 1.0);
    float *out = halloc((size_t)n * 4), *dx = copyf(dx0, n);
    gpt2_gelu_forward(NULL, out, x, n);
    gpt2_gelu_backward(NULL, dx, x, dout, n);
    float *dX = dput(x, (size_t)n * 4), *dO = dput(dout, (size_t)n * 4), *dY = dpoison((size_t)n * 4);
    float *dD = dput(dx0, (size_t)n * 4), *dD2 = dput(dx0, (size_t)n * 4), *dY2 = dpoison((size_t)n * 4);
    LAUNCH(gpt2_cu_gelu_forward(dY, dX, n, S));
    LAUNCH(gpt2_cu_gelu_backward(dD, dX, dO, n, S));
    LAUNCH(gpt2_cu_gelu_forward(dY2, dX, n, S));
    LAUNCH(gpt2_cu_gelu_backward(dD2, dX, dO, n, S));
    float *y = dgetf(dY, (size_t)n * 4), *d = dgetf(dD, (size_t)n * 4);
    float *y2 = dgetf(dY2, (size_t)n * 4), *d2 = dgetf(dD2, (size_t)n * 4);
    close_to(y, out, n, 1e-6, 1e-5, "gelu out");
    close_to(d, dx, n, 1e-6, 1e-5, "gelu dx");
    same_bits(y, y2, (size_t)n * 4, "gelu out, two runs");
    same_bits(d, d2, (size_t)n * 4, "gelu dx, two runs");
    free(x), free(dout), free(dx0), free(out), free(dx), free(y), free(d), free(y2), free(d2);
    dfree(dX), dfree(dO), dfree(dY), dfree(dD), dfree(dD2), dfree(dY2);
}

/* ------------------------------------------------------------------ bias */

static void test_bias(int64_t N, int OC) {
    float *out0 = rnd(N * OC, 1.0), *b = rnd(OC, 1.0), *dout = rnd(N * OC, 1.0), *db0 = rnd(OC, 1.0);
    float *want = copyf(out0, N * OC), *wdb = copyf(db0, OC);
    for (int64_t n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) want[n * OC + o] += b[o];
    gpt2_matmul_backward(NULL, NULL, NULL, wdb, dout, NULL, NULL, N, 1, OC); /* the db part only */
    float *dOut = dput(out0, (size_t)(N * OC) * 4), *dB = dput(b, (size_t)OC * 4),
          *dDo = dput(dout, (size_t)(N * OC) * 4);
    float *dDb = dput(db0, (size_t)OC * 4), *dDb2 = dput(db0, (size_t)OC * 4);
    LAUNCH(gpt2_cu_bias_forward(dOut, dB, N, OC, S));
    LAUNCH(gpt2_cu_bias_backward(dDb, dDo, N, OC, S));
    LAUNCH(gpt2_cu_bias_backward(dDb2, dDo, N, OC, S));
    float *got = dgetf(dOut, (size_t)(N * OC) * 4), *gdb = dgetf(dDb, (size_t)OC * 4),
          *gdb2 = dgetf(dDb2, (size_t)OC * 4);
    same_bits(got, want, (size_t)(N * OC) * 4, "bias forward");
    close_to(gdb, wdb, OC, 1e-5, 1e-4, "bias db");
    same_bits(gdb, gdb2, (size_t)OC * 4, "bias db, two runs");
    free(out0), free(b), free(dout), free(db0), free(want), free(wdb), free(got), free(gdb), free(gdb2);
    dfree(dOut), dfree(dB), dfree(dDo), dfree(dDb), dfree(dDb2);
}

/* ------------------------------------------------------------------ embedding */

/* Vp rows of wte, token ids below V (<= Vp): the padded rows must stay as they were. */
static void test_embed(int B, int T, int C, int V, int Vp) {
    int64_t N = (int64_t)B * T;
    float *wte = rnd((int64_t)Vp * C, 1.0), *wpe = rnd((int64_t)T * C, 1.0), *dout = rnd(N * C, 1.0);
    float *dwte0 = rnd((int64_t)Vp * C, 1.0), *dwpe0 = rnd((int64_t)T * C, 1.0);
    int32_t *inp = tokens(N, V);
    float *out = halloc((size_t)(N * C) * 4), *dwte = copyf(dwte0, (int64_t)Vp * C),
          *dwpe = copyf(dwpe0, (int64_t)T * C);
    for (int64_t n = 0; n < N; n++) /* gpt2.c's embed_rows and scatter_channels */
        for (int c = 0; c < C; c++) out[n * C + c] = wte[(int64_t)inp[n] * C + c] + wpe[(n % T) * C + c];
    for (int c = 0; c < C; c++)
        for (int64_t n = 0; n < N; n++) {
            dwte[(int64_t)inp[n] * C + c] += dout[n * C + c];
            dwpe[(n % T) * C + c] += dout[n * C + c];
        }
    size_t wb = (size_t)Vp * C * 4, pb = (size_t)T * C * 4, nb = (size_t)(N * C) * 4;
    float *dWte = dput(wte, wb), *dWpe = dput(wpe, pb), *dDo = dput(dout, nb), *dOut = dpoison(nb);
    int32_t *dInp = dput(inp, (size_t)N * 4);
    float *dDwte[2], *dDwpe[2], *g[2][2];
    for (int r = 0; r < 2; r++) {
        dDwte[r] = dput(dwte0, wb), dDwpe[r] = dput(dwpe0, pb);
        LAUNCH(gpt2_cu_embed_backward(dDwte[r], dDwpe[r], dDo, dInp, B, T, C, S));
        g[r][0] = dgetf(dDwte[r], wb), g[r][1] = dgetf(dDwpe[r], pb);
    }
    LAUNCH(gpt2_cu_embed_forward(dOut, dInp, dWte, dWpe, B, T, C, S));
    float *got = dgetf(dOut, nb);
    same_bits(got, out, nb, "embed forward");
    same_bits(g[0][0], dwte, wb, "embed dwte (same additions, same order)");
    same_bits(g[0][1], dwpe, pb, "embed dwpe");
    same_bits(g[0][0], g[1][0], wb, "embed dwte, two runs");
    /* one gradient alone */
    dset(dDwte[1], dwte0, wb);
    LAUNCH(gpt2_cu_embed_backward(dDwte[1], NULL, dDo, dInp, B, T, C, S));
    float *only = dgetf(dDwte[1], wb);
    same_bits(only, dwte, wb, "embed dwte alone");
    free(only);
    dset(dDwpe[1], dwpe0, pb);
    LAUNCH(gpt2_cu_embed_backward(NULL, dDwpe[1], dDo, NULL, B, T, C, S));
    only = dgetf(dDwpe[1], pb);
    same_bits(only, dwpe, pb, "embed dwpe alone");
    free(only);
    for (int r = 0; r < 2; r++) {
        free(g[r][0]), free(g[r][1]);
        dfree(dDwte[r]), dfree(dDwpe[r]);
    }
    free(wte), free(wpe), free(dout), free(dwte0), free(dwpe0), free(inp), free(out), free(dwte), free(dwpe), free(got);
    dfree(dWte), dfree(dWpe), dfree(dDo), dfree(dOut), dfree(dInp);
}

/* ------------------------------------------------------------------ LayerNorm */

static void test_layernorm(int64_t N, int C) {
    int64_t NC = N * C;
    float *x = rnd(NC, 1.5), *w = rnd(C, 1.0), *b = rnd(C, 1.0), *dout = rnd(NC, 1.0);
    for (int64_t i = 0; i < NC; i++) x[i] += 0.7f;
    float *dx0 = rnd(NC, 1.0), *dw0 = rnd(C, 1.0), *db0 = rnd(C, 1.0);
    float *out = halloc((size_t)NC * 4), *mean = halloc((size_t)N * 4), *rstd = halloc((size_t)N * 4);
    float *dx = copyf(dx0, NC), *dw = copyf(dw0, C), *db = copyf(db0, C);
    gpt2_layernorm_forward(NULL, out, mean, rstd, x, w, b, N, C);
    gpt2_layernorm_backward(NULL, dx, dw, db, dout, x, w, mean, rstd, N, C);
    size_t nb = (size_t)NC * 4, cb = (size_t)C * 4, rb = (size_t)N * 4;
    float *dX = dput(x, nb), *dW = dput(w, cb), *dB = dput(b, cb), *dDo = dput(dout, nb);
    float *res[2][6];
    for (int r = 0; r < 2; r++) {
        float *dOut = dpoison(nb), *dM = dpoison(rb), *dR = dpoison(rb);
        float *dDx = dput(dx0, nb), *dDw = dput(dw0, cb), *dDb = dput(db0, cb);
        LAUNCH(gpt2_cu_layernorm_forward(dOut, dM, dR, dX, dW, dB, N, C, S));
        /* backward from the host's mean and rstd, so dx compares the backward alone */
        dset(dM, mean, rb), dset(dR, rstd, rb);
        LAUNCH(gpt2_cu_layernorm_backward(dDx, dDw, dDb, dDo, dX, dW, dM, dR, N, C, S));
        res[r][0] = dgetf(dOut, nb), res[r][3] = dgetf(dDx, nb), res[r][4] = dgetf(dDw, cb), res[r][5] = dgetf(dDb, cb);
        /* the forward's own mean and rstd */
        LAUNCH(gpt2_cu_layernorm_forward(dOut, dM, dR, dX, dW, dB, N, C, S));
        res[r][1] = dgetf(dM, rb), res[r][2] = dgetf(dR, rb);
        dfree(dOut), dfree(dM), dfree(dR), dfree(dDx), dfree(dDw), dfree(dDb);
    }
    close_to(res[0][0], out, NC, 1e-5, 1e-4, "layernorm out");
    close_to(res[0][1], mean, N, 1e-5, 1e-4, "layernorm mean");
    close_to(res[0][2], rstd, N, 1e-5, 1e-4, "layernorm rstd");
    close_to(res[0][3], dx, NC, 1e-5, 1e-4, "layernorm dx");
    close_to(res[0][4], dw, C, 1e-5, 1e-4, "layernorm dw");
    close_to(res[0][5], db, C, 1e-5, 1e-4, "layernorm db");
    static const char *names[6] = {"out", "mean", "rstd", "dx", "dw", "db"};
    const size_t sizes[6] = {nb, rb, rb, nb, cb, cb};
    for (int k = 0; k < 6; k++) {
        char what[64];
        snprintf(what, sizeof what, "layernorm %s, two runs", names[k]);
        same_bits(res[0][k], res[1][k], sizes[k], what);
        free(res[0][k]), free(res[1][k]);
    }
    free(x), free(w), free(b), free(dout), free(dx0), free(dw0), free(db0), free(out), free(mean), free(rstd);
    free(dx), free(dw), free(db);
    dfree(dX), dfree(dW), dfree(dB), dfree(dDo);
}

/* ------------------------------------------------------------------ attention */

static void test_attention(int B, int T, int C, int H) {
    int64_t N = (int64_t)B * T, A = (int64_t)B * H * T * T;
    float *qkv = rnd(N * 3 * C, 1.0), *dout = rnd(N * C, 1.0), *dqkv0 = rnd(N * 3 * C, 1.0);
    float *out = halloc((size_t)(N * C) * 4), *att = halloc((size_t)A * 4), *datt = halloc((size_t)A * 4);
    float *dqkv = copyf(dqkv0, N * 3 * C);
    gpt2_attention_forward(NULL, out, att, qkv, B, T, C, H);
    gpt2_attention_backward(NULL, dqkv, datt, dout, qkv, att, B, T, C, H);
    size_t qb = (size_t)(N * 3 * C) * 4, ob = (size_t)(N * C) * 4, ab = (size_t)A * 4;
    float *dQkv = dput(qkv, qb), *dDo = dput(dout, ob), *dAttHost = dput(att, ab);
    float *res[2][3];
    for (int r = 0; r < 2; r++) {
        float *dOut = dpoison(ob), *dAtt = dpoison(ab), *dDatt = dpoison(ab), *dDq = dput(dqkv0, qb);
        LAUNCH(gpt2_cu_attention_forward(dOut, dAtt, dQkv, B, T, C, H, S));
        /* backward from the host's att, so dqkv compares the backward alone */
        LAUNCH(gpt2_cu_attention_backward(dDq, dDatt, dDo, dQkv, dAttHost, B, T, C, H, S));
        res[r][0] = dgetf(dOut, ob), res[r][1] = dgetf(dAtt, ab), res[r][2] = dgetf(dDq, qb);
        dfree(dOut), dfree(dAtt), dfree(dDatt), dfree(dDq);
    }
    char what[96];
    snprintf(what, sizeof what, "attention out (B%d T%d C%d H%d)", B, T, C, H);
    close_to(res[0][0], out, N * C, 1e-5, 1e-4, what);
    snprintf(what, sizeof what, "attention att (B%d T%d C%d H%d)", B, T, C, H);
    close_to(res[0][1], att, A, 1e-5, 1e-4, what);
    int above = 0; /* exactly zero above the diagonal, as the host leaves it */
    for (int64_t bh = 0; bh < (int64_t)B * H; bh++)
        for (int t = 0; t < T; t++)
            for (int u = t + 1; u < T; u++) above += res[0][1][(bh * T + t) * T + u] != 0.0f;
    ZT_CHECK(above == 0, "attention att: %d entries above the diagonal are not 0", above);
    snprintf(what, sizeof what, "attention dqkv (B%d T%d C%d H%d)", B, T, C, H);
    close_to(res[0][2], dqkv, N * 3 * C, 1e-5, 1e-4, what);
    same_bits(res[0][0], res[1][0], ob, "attention out, two runs");
    same_bits(res[0][1], res[1][1], ab, "attention att, two runs");
    same_bits(res[0][2], res[1][2], qb, "attention dqkv, two runs");
    for (int r = 0; r < 2; r++) free(res[r][0]), free(res[r][1]), free(res[r][2]);
    free(qkv), free(dout), free(dqkv0), free(out), free(att), free(datt), free(dqkv);
    dfree(dQkv), dfree(dDo), dfree(dAttHost);
}

/* ------------------------------------------------------------------ cross-entropy */

/* mode 0: dlogits a separate buffer; 1: dlogits = logits (in place); 2: no dlogits. */
static void test_crossentropy(int64_t N, int V, int mode) {
    int64_t NV = N * V;
    float *logits = rnd(NV, 3.0), *dl = halloc((size_t)NV * 4);
    int32_t *tg = tokens(N, V);
    double *rl = halloc((size_t)N * 8);
    const float dscale = 1.0f / (float)N;
    double total = gpt2_crossentropy(NULL, mode == 2 ? NULL : dl, logits, tg, N, V, dscale, rl);
    size_t lb = (size_t)NV * 4;
    float *dL = dput(logits, lb);
    int32_t *dT = dput(tg, (size_t)N * 4);
    float *gd[2] = {NULL, NULL};
    double *gl[2];
    for (int r = 0; r < 2; r++) {
        double *dR = dpoison((size_t)N * 8);
        float *dD = mode == 0 ? dpoison(lb) : NULL;
        if (mode == 1) dset(dL, logits, lb);
        LAUNCH(gpt2_cu_crossentropy(mode == 0 ? dD : mode == 1 ? dL : NULL, dL, dT, N, V, dscale, dR, S));
        gl[r] = dgetf(dR, (size_t)N * 8);
        if (mode != 2) gd[r] = dgetf(mode == 0 ? dD : dL, lb);
        dfree(dR);
        if (dD) dfree(dD);
    }
    int bad = 0;
    double sum = 0;
    for (int64_t n = 0; n < N; n++) {
        sum += gl[0][n];
        if (!zt_near(gl[0][n], rl[n], 0, 1e-9) && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "row_loss[%lld] (V %d): gpu %.17g, host %.17g", (long long)n, V, gl[0][n],
                       rl[n]);
    }
    ZT_CHECK(!bad, "crossentropy row losses (N %lld, V %d)", (long long)N, V);
    ZT_NEAR(sum, total, 0, 1e-9, "crossentropy total: gpu rows summed %.17g, host %.17g", sum, total);
    same_bits(gl[0], gl[1], (size_t)N * 8, "crossentropy row_loss, two runs");
    if (mode != 2) {
        close_to(gd[0], dl, NV, 1e-6, 1e-5, mode ? "crossentropy dlogits (in place)" : "crossentropy dlogits");
        same_bits(gd[0], gd[1], lb, "crossentropy dlogits, two runs");
    } else {
        float *still = dgetf(dL, lb); /* no dlogits: the logits are left alone */
        same_bits(still, logits, lb, "crossentropy without dlogits leaves logits");
        free(still);
    }
    for (int r = 0; r < 2; r++) free(gl[r]), free(gd[r]);
    free(logits), free(dl), free(tg), free(rl);
    dfree(dL), dfree(dT);
}

/* A target outside 0..V-1 gives a NaN row loss (the host path never sees one: the model checks its ids). */
static void test_crossentropy_bad_target(void) {
    const int V = 5;
    float z[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    int32_t t = V;
    float *dL = dput(z, sizeof z);
    int32_t *dT = dput(&t, 4);
    double *dR = dpoison(8);
    LAUNCH(gpt2_cu_crossentropy(NULL, dL, dT, 1, V, 1.0f, dR, S));
    double *l = dgetf(dR, 8);
    ZT_CHECK(isnan(*l), "target %d of V %d: row loss %g, want NaN", t, V, *l);
    free(l);
    dfree(dL), dfree(dT), dfree(dR);
}

int main(void) {
    zt_name = "gpt2_kernels_cuda";
    test_contract();
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) {
        printf("%s: %d contract checks passed, %d failed before looking for a GPU\n", zt_name, zt_passed, zt_failed);
        if (zt_failed) return zt_finish();
        return zt_skip("no CUDA device");
    }
    rng = zt_seed();
    CU(cudaStreamCreate(&S));

    const int64_t ns[3] = {1, 7, 1000003};
    for (int i = 0; i < 3; i++) test_to_f32_grad_add(ns[i]);
    const int64_t gn[3] = {1, 1001, 65537};
    for (int i = 0; i < 3; i++) test_gelu(gn[i]);

    test_bias(1, 1);
    test_bias(5, 7);
    test_bias(300, 2304);
    test_bias(1031, 9);

    test_embed(1, 1, 5, 3, 3);
    test_embed(2, 7, 33, 11, 16); /* repeated ids, padded vocabulary */
    test_embed(3, 64, 96, 50, 64);
    test_embed(4, 700, 40, 37, 40); /* N = 2800: more than one vote of 2048 positions */
    test_embed(2, 5, 17, 1, 1);     /* one id everywhere */

    test_layernorm(1, 1);
    test_layernorm(1, 3);
    test_layernorm(7, 33);
    test_layernorm(130, 768);
    test_layernorm(257, 100);
    test_layernorm(3001, 65); /* rows not a multiple of the 128 row groups */

    test_attention(1, 1, 8, 2);     /* T = 1 */
    test_attention(2, 5, 12, 3);    /* head size 4 */
    test_attention(1, 33, 64, 1);   /* T one past a tile */
    test_attention(2, 70, 96, 3);   /* head size 32 */
    test_attention(1, 128, 128, 2); /* head size 64, whole tiles */
    test_attention(1, 257, 192, 3);
    test_attention(1, 40, 400, 2);  /* head size 200: more than 48 KB of shared memory per block */
    test_attention(1, 1024, 64, 1); /* GPT-2's context */

    test_crossentropy(1, 1, 0);
    test_crossentropy(3, 7, 0);
    test_crossentropy(5, 257, 1);
    test_crossentropy(7, 50257, 0);
    test_crossentropy(4, 50257, 1);
    test_crossentropy(3, 1000, 2);
    test_crossentropy_bad_target();

    CU(cudaStreamDestroy(S));
    return zt_finish();
}
