/* GPT-2 on the host (gpt2_internal.h's table): gpt2_layers.c on the engine's threads, buffers from malloc,
 * parameters and gradients through the engine's zinc_param_to_f32 / zinc_grad_add_f32. Nothing here waits:
 * every call is done when it returns. */
#include <stdlib.h>
#include <string.h>

#include "gpt2_internal.h"
#include "gpt2_layers.h"

static zinc_status h_alloc(gpt2_model *m, void **p, size_t bytes) {
    (void)m;
    *p = calloc(1, bytes ? bytes : 1);
    return *p ? ZINC_OK : ZINC_ERR_NOMEM;
}
static void h_release(gpt2_model *m, void *p) {
    (void)m;
    free(p);
}
static zinc_status h_zero(gpt2_model *m, void *p, size_t bytes) {
    (void)m;
    memset(p, 0, bytes);
    return ZINC_OK;
}
static zinc_status h_copy(gpt2_model *m, void *dst, const void *src, size_t bytes) {
    (void)m;
    if (dst != src) memcpy(dst, src, bytes);
    return ZINC_OK;
}
static zinc_status h_to_f32(gpt2_model *m, float *dst, const zinc_param *p, int64_t n) {
    (void)m, (void)n;
    return zinc_param_to_f32(p, dst);
}
static zinc_status h_grad_add(gpt2_model *m, zinc_param *p, const float *g, int64_t n) {
    (void)m, (void)n;
    return zinc_grad_add_f32(p, g);
}
static zinc_status h_embed_fwd(gpt2_model *m, float *out, const int32_t *inp, const void *wte, zinc_dtype t,
                               const float *wpe, float *wte_f32, int B, int T) {
    (void)wte_f32; /* the rows used are widened as they are read */
    gpt2_embed_forward(m->e, out, inp, wte, t, wpe, B, T, m->s.channels);
    return ZINC_OK;
}
static zinc_status h_embed_bwd(gpt2_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B,
                               int T) {
    gpt2_embed_backward(m->e, dwte, dwpe, dout, inp, B, T, m->s.channels);
    return ZINC_OK;
}
static zinc_status h_ln_fwd(gpt2_model *m, float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t N) {
    gpt2_layernorm_forward(m->e, out, mean, rstd, x, w, b, N, m->s.channels);
    return ZINC_OK;
}
static zinc_status h_ln_bwd(gpt2_model *m, float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N) {
    gpt2_layernorm_backward(m->e, dx, dw, db, dout, x, w, mean, rstd, N, m->s.channels);
    return ZINC_OK;
}
static zinc_status h_mm_fwd(gpt2_model *m, float *out, const float *x, const float *W, const float *b, int64_t N,
                            int IC, int OC) {
    if (m->bf16_products)
        gpt2_matmul_forward_bf16(m->e, m->bf16ws, out, x, W, b, NULL, N, IC, OC);
    else
        gpt2_matmul_forward(m->e, out, x, W, b, N, IC, OC);
    return ZINC_OK;
}
static zinc_status h_mm_fwd_res(gpt2_model *m, float *out, const float *x, const float *W, const float *b,
                                const float *res, int64_t N, int IC, int OC) {
    if (m->bf16_products)
        gpt2_matmul_forward_bf16(m->e, m->bf16ws, out, x, W, b, res, N, IC, OC);
    else
        gpt2_matmul_forward_res(m->e, out, x, W, b, res, N, IC, OC);
    return ZINC_OK;
}
static zinc_status h_mm_bwd(gpt2_model *m, float *dx, float *dW, float *db, const float *dout, const float *x,
                            const float *W, int64_t N, int IC, int OC) {
    if (m->bf16_products)
        gpt2_matmul_backward_bf16(m->e, m->bf16ws, false, NULL, dx, dW, db, dout, x, W, N, IC, OC);
    else
        gpt2_matmul_backward(m->e, dx, dW, db, dout, x, W, N, IC, OC);
    return ZINC_OK;
}
static zinc_status h_mm_bwd_set(gpt2_model *m, float *dx, const float *dx_mul, float *dW, float *db, const float *dout,
                                const float *x, const float *W, int64_t N, int IC, int OC) {
    if (m->bf16_products)
        gpt2_matmul_backward_bf16(m->e, m->bf16ws, true, dx_mul, dx, dW, db, dout, x, W, N, IC, OC);
    else
        gpt2_matmul_backward_set(m->e, dx, dx_mul, dW, db, dout, x, W, N, IC, OC);
    return ZINC_OK;
}
static zinc_status h_att_fwd(gpt2_model *m, float *out, float *att, const float *qkv, int B, int T) {
    gpt2_attention_forward(m->e, out, att, qkv, B, T, m->s.channels, m->s.heads);
    return ZINC_OK;
}
static zinc_status h_att_bwd(gpt2_model *m, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T) {
    gpt2_attention_backward(m->e, dqkv, datt, dout, qkv, att, B, T, m->s.channels, m->s.heads);
    return ZINC_OK;
}
static zinc_status h_gelu_fwd(gpt2_model *m, float *out, const float *x, int64_t n) {
    gpt2_gelu_forward(m->e, out, x, n);
    return ZINC_OK;
}
static zinc_status h_gelu_bwd(gpt2_model *m, float *dx, const float *x, const float *dout, int64_t n) {
    gpt2_gelu_backward(m->e, dx, x, dout, n);
    return ZINC_OK;
}

static zinc_status h_att_fwd_lse(gpt2_model *m, float *out, float *lse, const float *qkv, int B, int T) {
    gpt2_attention_forward_blocked(m->e, out, lse, qkv, B, T, m->s.channels, m->s.heads);
    return ZINC_OK;
}
static zinc_status h_att_bwd_lse(gpt2_model *m, float *dqkv, const float *dout, const float *out, const float *qkv,
                                 const float *lse, int B, int T) {
    gpt2_attention_backward_blocked(m->e, dqkv, dout, out, qkv, lse, B, T, m->s.channels, m->s.heads);
    return ZINC_OK;
}
static zinc_status h_gelu_fwd_deriv(gpt2_model *m, float *out, float *deriv, const float *x, int64_t n) {
    gpt2_gelu_forward_deriv(m->e, out, deriv, x, n);
    return ZINC_OK;
}

static zinc_status h_xent(gpt2_model *m, float *dlogits, const float *logits, const int32_t *targets, int64_t N,
                          float dscale, double *row_loss) {
    gpt2_crossentropy(m->e, dlogits, logits, targets, N, m->s.vocab, dscale, row_loss);
    return ZINC_OK;
}

const gpt2_ops gpt2_host_ops = {
    .name = "host",
    .device = 0,
    .embed_widens = 0,
    .alloc = h_alloc,
    .release = h_release,
    .zero = h_zero,
    .to_device = h_copy,
    .to_host = h_copy,
    .to_f32 = h_to_f32,
    .grad_add = h_grad_add,
    .embed_fwd = h_embed_fwd,
    .embed_bwd = h_embed_bwd,
    .layernorm_fwd = h_ln_fwd,
    .layernorm_bwd = h_ln_bwd,
    .matmul_fwd = h_mm_fwd,
    .matmul_bwd = h_mm_bwd,
    .matmul_bwd_set = h_mm_bwd_set,
    .matmul_fwd_res = h_mm_fwd_res,
    .attention_fwd = h_att_fwd,
    .attention_bwd = h_att_bwd,
    .gelu_fwd = h_gelu_fwd,
    .gelu_bwd = h_gelu_bwd,
    .attention_fwd_lse = h_att_fwd_lse,
    .attention_bwd_lse = h_att_bwd_lse,
    .gelu_fwd_deriv = h_gelu_fwd_deriv,
    .crossentropy = h_xent,
};
