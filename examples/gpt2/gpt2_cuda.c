/* GPT-2 on the GPU (gpt2_internal.h's table): cuBLAS for the matrix products and gpt2_kernels.h for the
 * rest, all enqueued on the engine's compute stream (zinc_stream), so the engine's gradient reduction is
 * ordered after the backward that filled its buffers without the host waiting. The host waits only where
 * it needs a result: the step's per-row losses (gpt2.c's sum_losses, once per step), and next_logits.
 *
 * Row-major X (r x c) is column-major X^T (c x r) to cuBLAS, so with W (OC x IC), x (N x IC), dout (N x OC):
 *   forward  out^T (OC x N) = W'^T x^T        gemm(T, N, OC, N, IC,  W, x)
 *   grad x   dx^T  (IC x N) = W'  dout^T      gemm(N, N, IC, N, OC,  W, dout)   beta 1: dx accumulates
 *   grad W   dW^T  (IC x OC) = x^T dout       gemm(N, T, IC, OC, N,  x, dout)   beta 1: dW accumulates
 * (W' is W as cuBLAS sees it: IC x OC.) Products are fp32 with cuBLAS's default math mode (no TF32):
 * fp32 compute means true fp32, and the host path is the reference within fp32 rounding. Parameters in
 * bf16/fp16 are widened first (gpt2_cu_to_f32) and gradients added once, rounded to the gradient dtype,
 * with the loss scale (gpt2_cu_grad_add). */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "../common/cublas_loader.h"
#include "../common/gpu_check.h"
#include "gpt2_internal.h"
#include "gpt2_kernels.h"

static const example_cublas *cublas; /* set by the first gpt2_cuda_create (examples/common/cublas_loader.h) */

struct gpt2_cuda {
    cudaStream_t stream;
    cublasHandle_t blas;
};

#define CU(expr) EXAMPLE_CU(m->e, "gpt2 (cuda)", expr)
#define BLAS(expr) EXAMPLE_BLAS(m->e, "gpt2 (cuda)", expr)
#define CHECK(expr) EXAMPLE_CHECK(expr)
#define S (m->cuda->stream)

zinc_status gpt2_cuda_create(gpt2_model *m) {
    gpt2_cuda *c = calloc(1, sizeof *c);
    if (!c) return ZINC_ERR_NOMEM;
    m->cuda = c; /* gpt2_cuda_destroy frees what was made if a later step fails */
    c->stream = (cudaStream_t)zinc_stream(m->e);
    CHECK(example_cublas_load(m->e, "gpt2 (cuda)", "train on the CPU (device cpu: --device cpu)", &cublas));
    BLAS(cublas->Create(&c->blas));
    BLAS(cublas->SetStream(c->blas, c->stream));
    return ZINC_OK;
}

void gpt2_cuda_destroy(gpt2_model *m) {
    gpt2_cuda *c = m->cuda;
    if (!c) return;
    /* Work on the stream may still use the model's buffers (an error path leaves it mid-step). */
    cudaStreamSynchronize(c->stream);
    if (c->blas) cublas->Destroy(c->blas);
    free(c);
    m->cuda = NULL;
}

static zinc_status c_alloc(gpt2_model *m, void **p, size_t bytes) {
    *p = NULL;
    CU(cudaMalloc(p, bytes ? bytes : 1));
    CU(cudaMemset(*p, 0, bytes ? bytes : 1));
    return ZINC_OK;
}
static void c_release(gpt2_model *m, void *p) {
    (void)m;
    if (p) cudaFree(p);
}
static zinc_status c_zero(gpt2_model *m, void *p, size_t bytes) {
    CU(cudaMemsetAsync(p, 0, bytes, S));
    return ZINC_OK;
}
/* From pageable memory: the call returns once the source is staged, so the host may refill it at once. */
static zinc_status c_to_device(gpt2_model *m, void *dst, const void *src, size_t bytes) {
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, S));
    return ZINC_OK;
}
static zinc_status c_to_host(gpt2_model *m, void *dst, const void *src, size_t bytes) {
    return zinc_copy_to_host(m->e, dst, src, bytes);
}
static zinc_status c_to_f32(gpt2_model *m, float *dst, const zinc_param *p, int64_t n) {
    const void *src = zinc_param_data(p);
    if (!src) return ZINC_ERR_STATE;
    CU(gpt2_cu_to_f32(dst, src, zinc_compute_dtype(m->e), n, S));
    return ZINC_OK;
}
static zinc_status c_grad_add(gpt2_model *m, zinc_param *p, const float *g, int64_t n) {
    void *grad = zinc_param_grad(p);
    if (!grad) return ZINC_ERR_STATE;
    CU(gpt2_cu_grad_add(grad, zinc_grad_dtype(m->e), g, zinc_loss_scale(m->e), n, S));
    return ZINC_OK;
}
static zinc_status c_embed_fwd(gpt2_model *m, float *out, const int32_t *inp, const void *wte, zinc_dtype t,
                               const float *wpe, float *wte_f32, int B, int T) {
    int C = m->s.channels;
    if (t != ZINC_FP32) { /* the kernel reads float rows: widen wte whole (embed_widens) */
        CU(gpt2_cu_to_f32(wte_f32, wte, t, (int64_t)m->s.padded_vocab * C, S));
        wte = wte_f32;
    }
    CU(gpt2_cu_embed_forward(out, inp, wte, wpe, B, T, C, S));
    return ZINC_OK;
}
static zinc_status c_embed_bwd(gpt2_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B,
                               int T) {
    CU(gpt2_cu_embed_backward(dwte, dwpe, dout, inp, B, T, m->s.channels, S));
    return ZINC_OK;
}
static zinc_status c_ln_fwd(gpt2_model *m, float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t N) {
    CU(gpt2_cu_layernorm_forward(out, mean, rstd, x, w, b, N, m->s.channels, S));
    return ZINC_OK;
}
static zinc_status c_ln_bwd(gpt2_model *m, float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N) {
    CU(gpt2_cu_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, m->s.channels, S));
    return ZINC_OK;
}
static zinc_status c_mm_fwd(gpt2_model *m, float *out, const float *x, const float *W, const float *b, int64_t N,
                            int IC, int OC) {
    const float one = 1.0f, zero = 0.0f;
    BLAS(cublas->Sgemm(m->cuda->blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, (int)N, IC, &one, W, IC, x, IC, &zero, out, OC));
    if (b) CU(gpt2_cu_bias_forward(out, b, N, OC, S));
    return ZINC_OK;
}
static zinc_status c_mm_bwd(gpt2_model *m, float *dx, float *dW, float *db, const float *dout, const float *x,
                            const float *W, int64_t N, int IC, int OC) {
    const float one = 1.0f;
    if (dx)
        BLAS(cublas->Sgemm(m->cuda->blas, CUBLAS_OP_N, CUBLAS_OP_N, IC, (int)N, OC, &one, W, IC, dout, OC, &one, dx,
                           IC));
    if (dW)
        BLAS(cublas->Sgemm(m->cuda->blas, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, (int)N, &one, x, IC, dout, OC, &one, dW,
                           IC));
    if (db) CU(gpt2_cu_bias_backward(db, dout, N, OC, S));
    return ZINC_OK;
}
static zinc_status c_att_fwd(gpt2_model *m, float *out, float *att, const float *qkv, int B, int T) {
    CU(gpt2_cu_attention_forward(out, att, qkv, B, T, m->s.channels, m->s.heads, S));
    return ZINC_OK;
}
static zinc_status c_att_bwd(gpt2_model *m, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T) {
    CU(gpt2_cu_attention_backward(dqkv, datt, dout, qkv, att, B, T, m->s.channels, m->s.heads, S));
    return ZINC_OK;
}
static zinc_status c_gelu_fwd(gpt2_model *m, float *out, const float *x, int64_t n) {
    CU(gpt2_cu_gelu_forward(out, x, n, S));
    return ZINC_OK;
}
static zinc_status c_gelu_bwd(gpt2_model *m, float *dx, const float *x, const float *dout, int64_t n) {
    CU(gpt2_cu_gelu_backward(dx, x, dout, n, S));
    return ZINC_OK;
}
static zinc_status c_add(gpt2_model *m, float *y, const float *a, const float *b, int64_t n) {
    CU(gpt2_cu_add(y, a, b, n, S));
    return ZINC_OK;
}
static zinc_status c_xent(gpt2_model *m, float *dlogits, const float *logits, const int32_t *targets, int64_t N,
                          float dscale, double *row_loss) {
    CU(gpt2_cu_crossentropy(dlogits, logits, targets, N, m->s.vocab, dscale, row_loss, S));
    return ZINC_OK;
}

const gpt2_ops gpt2_cuda_ops = {
    .name = "cuda",
    .device = 1,
    .embed_widens = 1,
    .alloc = c_alloc,
    .release = c_release,
    .zero = c_zero,
    .to_device = c_to_device,
    .to_host = c_to_host,
    .to_f32 = c_to_f32,
    .grad_add = c_grad_add,
    .embed_fwd = c_embed_fwd,
    .embed_bwd = c_embed_bwd,
    .layernorm_fwd = c_ln_fwd,
    .layernorm_bwd = c_ln_bwd,
    .matmul_fwd = c_mm_fwd,
    .matmul_bwd = c_mm_bwd,
    .attention_fwd = c_att_fwd,
    .attention_bwd = c_att_bwd,
    .gelu_fwd = c_gelu_fwd,
    .gelu_bwd = c_gelu_bwd,
    .add = c_add,
    .crossentropy = c_xent,
};
