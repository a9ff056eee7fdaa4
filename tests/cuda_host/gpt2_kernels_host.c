/* The launchers of examples/gpt2/gpt2_kernels.h on the CUDA emulation: each checks that its buffers stay
 * inside their device allocations, then enqueues on the emulated stream (lazy: it runs when the stream is
 * forced, cuda_host.h) the plain-C reference itself: gpt2_layers.c's function on one thread (e = NULL), or
 * for the pieces gpt2_layers.c has no function of their own (the casts, the residual add, the bias) the
 * same loop the host path runs. So the GPU path's host code (examples/gpt2/gpt2_cuda.c) runs in CI with
 * the host path's arithmetic, and only cuBLAS's emulated SGEMM sums in another order. */
#include "cuda_host.h"
#include "gpt2_kernels.h"
#include "gpt2_layers.h"

typedef enum {
    K_TO_F32, K_GRAD_ADD, K_ADD, K_EMBED_FWD, K_EMBED_BWD, K_LN_FWD, K_LN_BWD, K_BIAS_FWD, K_BIAS_BWD, K_ATT_FWD,
    K_ATT_BWD, K_GELU_FWD, K_GELU_BWD, K_XENT
} kind;

typedef struct args {
    kind k;
    float *o0, *o1, *o2;           /* outputs, in the launcher's order */
    const float *i0, *i1, *i2, *i3, *i4; /* inputs, in the launcher's order */
    const void *src;
    void *grad;
    const int32_t *tok;
    double *row_loss;
    zinc_dtype t;
    float scale;
    int64_t n;
    int B, T, C, H;
} args;

static void run(void *p) {
    const args *a = p;
    switch (a->k) {
    case K_TO_F32:
        for (int64_t i = 0; i < a->n; i++) a->o0[i] = zinc_load_f32(a->src, a->t, (size_t)i);
        break;
    case K_GRAD_ADD:
        for (int64_t i = 0; i < a->n; i++) zinc_add_f32(a->grad, a->t, (size_t)i, a->i0[i] * a->scale);
        break;
    case K_ADD:
        for (int64_t i = 0; i < a->n; i++) a->o0[i] = a->i0[i] + a->i1[i];
        break;
    case K_EMBED_FWD:
        gpt2_embed_forward(NULL, a->o0, a->tok, a->i0, ZINC_FP32, a->i1, a->B, a->T, a->C);
        break;
    case K_EMBED_BWD:
        gpt2_embed_backward(NULL, a->o0, a->o1, a->i0, a->tok, a->B, a->T, a->C);
        break;
    case K_LN_FWD:
        gpt2_layernorm_forward(NULL, a->o0, a->o1, a->o2, a->i0, a->i1, a->i2, a->n, a->C);
        break;
    case K_LN_BWD:
        gpt2_layernorm_backward(NULL, a->o0, a->o1, a->o2, a->i0, a->i1, a->i2, a->i3, a->i4, a->n, a->C);
        break;
    case K_BIAS_FWD: /* as gpt2_matmul_forward adds it after the product */
        for (int64_t r = 0; r < a->n; r++)
            for (int o = 0; o < a->C; o++) a->o0[r * a->C + o] += a->i0[o];
        break;
    case K_BIAS_BWD: /* gpt2_matmul_backward with only db */
        gpt2_matmul_backward(NULL, NULL, NULL, a->o0, a->i0, NULL, NULL, a->n, 0, a->C);
        break;
    case K_ATT_FWD:
        gpt2_attention_forward(NULL, a->o0, a->o1, a->i0, a->B, a->T, a->C, a->H);
        break;
    case K_ATT_BWD:
        gpt2_attention_backward(NULL, a->o0, a->o1, a->i0, a->i1, a->i2, a->B, a->T, a->C, a->H);
        break;
    case K_GELU_FWD:
        gpt2_gelu_forward(NULL, a->o0, a->i0, a->n);
        break;
    case K_GELU_BWD:
        gpt2_gelu_backward(NULL, a->o0, a->i0, a->i1, a->n);
        break;
    case K_XENT:
        gpt2_crossentropy(NULL, a->o0, a->i0, a->tok, a->n, a->C, a->scale, a->row_loss);
        break;
    }
}

#define SPAN(p, bytes, what) cuda_host_check_span((p), (size_t)(bytes), what)
#define F(n) ((int64_t)(n) * 4)

static cudaError_t launch(const args *a, cudaStream_t s) { return cuda_host_enqueue(s, run, a, sizeof *a); }

cudaError_t gpt2_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s) {
    SPAN(dst, F(n), "gpt2_cu_to_f32 dst");
    SPAN(src, n * (int64_t)zinc_dtype_size(t), "gpt2_cu_to_f32 src");
    return launch(&(args){.k = K_TO_F32, .o0 = dst, .src = src, .t = t, .n = n}, s);
}

cudaError_t gpt2_cu_grad_add(void *grad, zinc_dtype t, const float *add, float scale, int64_t n, cudaStream_t s) {
    SPAN(grad, n * (int64_t)zinc_dtype_size(t), "gpt2_cu_grad_add grad");
    SPAN(add, F(n), "gpt2_cu_grad_add add");
    return launch(&(args){.k = K_GRAD_ADD, .grad = grad, .t = t, .i0 = add, .scale = scale, .n = n}, s);
}

cudaError_t gpt2_cu_add(float *y, const float *a, const float *b, int64_t n, cudaStream_t s) {
    SPAN(y, F(n), "gpt2_cu_add y");
    SPAN(a, F(n), "gpt2_cu_add a");
    SPAN(b, F(n), "gpt2_cu_add b");
    return launch(&(args){.k = K_ADD, .o0 = y, .i0 = a, .i1 = b, .n = n}, s);
}

cudaError_t gpt2_cu_embed_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T,
                                  int C, cudaStream_t s) {
    SPAN(out, F((int64_t)B * T * C), "gpt2_cu_embed_forward out");
    SPAN(inp, F((int64_t)B * T), "gpt2_cu_embed_forward inp");
    SPAN(wpe, F((int64_t)T * C), "gpt2_cu_embed_forward wpe");
    SPAN(wte, F(C), "gpt2_cu_embed_forward wte"); /* its rows: as many as the ids need (not known here) */
    return launch(&(args){.k = K_EMBED_FWD, .o0 = out, .tok = inp, .i0 = wte, .i1 = wpe, .B = B, .T = T, .C = C}, s);
}

cudaError_t gpt2_cu_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T,
                                   int C, cudaStream_t s) {
    if (dwte) SPAN(dwte, F(C), "gpt2_cu_embed_backward dwte");
    if (dwpe) SPAN(dwpe, F((int64_t)T * C), "gpt2_cu_embed_backward dwpe");
    SPAN(dout, F((int64_t)B * T * C), "gpt2_cu_embed_backward dout");
    SPAN(inp, F((int64_t)B * T), "gpt2_cu_embed_backward inp");
    return launch(
        &(args){.k = K_EMBED_BWD, .o0 = dwte, .o1 = dwpe, .i0 = dout, .tok = inp, .B = B, .T = T, .C = C}, s);
}

cudaError_t gpt2_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                                      const float *b, int64_t N, int C, cudaStream_t s) {
    SPAN(out, F(N * C), "gpt2_cu_layernorm_forward out");
    SPAN(mean, F(N), "gpt2_cu_layernorm_forward mean");
    SPAN(rstd, F(N), "gpt2_cu_layernorm_forward rstd");
    SPAN(x, F(N * C), "gpt2_cu_layernorm_forward x");
    SPAN(w, F(C), "gpt2_cu_layernorm_forward w");
    SPAN(b, F(C), "gpt2_cu_layernorm_forward b");
    return launch(
        &(args){.k = K_LN_FWD, .o0 = out, .o1 = mean, .o2 = rstd, .i0 = x, .i1 = w, .i2 = b, .n = N, .C = C}, s);
}

cudaError_t gpt2_cu_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                       const float *w, const float *mean, const float *rstd, int64_t N, int C,
                                       cudaStream_t s) {
    SPAN(dx, F(N * C), "gpt2_cu_layernorm_backward dx");
    SPAN(dw, F(C), "gpt2_cu_layernorm_backward dw");
    SPAN(db, F(C), "gpt2_cu_layernorm_backward db");
    SPAN(dout, F(N * C), "gpt2_cu_layernorm_backward dout");
    SPAN(x, F(N * C), "gpt2_cu_layernorm_backward x");
    SPAN(w, F(C), "gpt2_cu_layernorm_backward w");
    SPAN(mean, F(N), "gpt2_cu_layernorm_backward mean");
    SPAN(rstd, F(N), "gpt2_cu_layernorm_backward rstd");
    return launch(&(args){.k = K_LN_BWD, .o0 = dx, .o1 = dw, .o2 = db, .i0 = dout, .i1 = x, .i2 = w, .i3 = mean,
                          .i4 = rstd, .n = N, .C = C},
                  s);
}

cudaError_t gpt2_cu_bias_forward(float *out, const float *b, int64_t N, int OC, cudaStream_t s) {
    SPAN(out, F(N * OC), "gpt2_cu_bias_forward out");
    SPAN(b, F(OC), "gpt2_cu_bias_forward b");
    return launch(&(args){.k = K_BIAS_FWD, .o0 = out, .i0 = b, .n = N, .C = OC}, s);
}

cudaError_t gpt2_cu_bias_backward(float *db, const float *dout, int64_t N, int OC, cudaStream_t s) {
    SPAN(db, F(OC), "gpt2_cu_bias_backward db");
    SPAN(dout, F(N * OC), "gpt2_cu_bias_backward dout");
    return launch(&(args){.k = K_BIAS_BWD, .o0 = db, .i0 = dout, .n = N, .C = OC}, s);
}

cudaError_t gpt2_cu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H,
                                      cudaStream_t s) {
    int64_t BT = (int64_t)B * T;
    SPAN(out, F(BT * C), "gpt2_cu_attention_forward out");
    SPAN(att, F(BT * H * T), "gpt2_cu_attention_forward att");
    SPAN(qkv, F(BT * 3 * C), "gpt2_cu_attention_forward qkv");
    return launch(&(args){.k = K_ATT_FWD, .o0 = out, .o1 = att, .i0 = qkv, .B = B, .T = T, .C = C, .H = H}, s);
}

cudaError_t gpt2_cu_attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv,
                                       const float *att, int B, int T, int C, int H, cudaStream_t s) {
    int64_t BT = (int64_t)B * T;
    SPAN(dqkv, F(BT * 3 * C), "gpt2_cu_attention_backward dqkv");
    SPAN(datt, F(BT * H * T), "gpt2_cu_attention_backward datt");
    SPAN(dout, F(BT * C), "gpt2_cu_attention_backward dout");
    SPAN(qkv, F(BT * 3 * C), "gpt2_cu_attention_backward qkv");
    SPAN(att, F(BT * H * T), "gpt2_cu_attention_backward att");
    return launch(&(args){.k = K_ATT_BWD, .o0 = dqkv, .o1 = datt, .i0 = dout, .i1 = qkv, .i2 = att, .B = B, .T = T,
                          .C = C, .H = H},
                  s);
}

cudaError_t gpt2_cu_gelu_forward(float *out, const float *x, int64_t n, cudaStream_t s) {
    SPAN(out, F(n), "gpt2_cu_gelu_forward out");
    SPAN(x, F(n), "gpt2_cu_gelu_forward x");
    return launch(&(args){.k = K_GELU_FWD, .o0 = out, .i0 = x, .n = n}, s);
}

cudaError_t gpt2_cu_gelu_backward(float *dx, const float *x, const float *dout, int64_t n, cudaStream_t s) {
    SPAN(dx, F(n), "gpt2_cu_gelu_backward dx");
    SPAN(x, F(n), "gpt2_cu_gelu_backward x");
    SPAN(dout, F(n), "gpt2_cu_gelu_backward dout");
    return launch(&(args){.k = K_GELU_BWD, .o0 = dx, .i0 = x, .i1 = dout, .n = n}, s);
}

cudaError_t gpt2_cu_crossentropy(float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                                 float dscale, double *row_loss, cudaStream_t s) {
    if (dlogits) SPAN(dlogits, F(N * V), "gpt2_cu_crossentropy dlogits");
    SPAN(logits, F(N * V), "gpt2_cu_crossentropy logits");
    SPAN(targets, F(N), "gpt2_cu_crossentropy targets");
    SPAN(row_loss, N * 8, "gpt2_cu_crossentropy row_loss");
    return launch(&(args){.k = K_XENT, .o0 = dlogits, .i0 = logits, .tok = targets, .n = N, .C = V, .scale = dscale,
                          .row_loss = row_loss},
                  s);
}
