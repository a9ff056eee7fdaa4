/* GPT-2's layers on float buffers, forward and backward, with no engine in sight: the model (gpt2.c)
 * calls them between module entries, and the tests check each against a float64 reference. Shapes:
 * N = B*T token positions, C channels; every 2-D buffer is row-major. Backward functions ADD into the
 * gradients they are given (d-inputs and d-parameters), so a buffer used twice (the tied embedding, the
 * residual stream) accumulates. Matrix products go through cblas_sgemm (OpenBLAS, one thread per call);
 * every function splits its work over the threads of the engine e (zinc_parallel_for: the same threads as
 * the engine's kernels, asleep between jobs); e NULL runs it on the calling thread. The work is cut into
 * pieces of fixed size (rows, columns, heads), each computed whole by one thread, and every sum runs in an
 * order fixed by the shapes: results are bit for bit the same for any thread count. */
#ifndef ZINC_EXAMPLES_GPT2_LAYERS_H
#define ZINC_EXAMPLES_GPT2_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "zinc.h"

#define GPT2_LN_EPS 1e-5f

/* Makes OpenBLAS single-threaded: the layers split their sgemm calls over the engine's threads. */
void gpt2_layers_init(void);

/* The embedding: out[b,t,:] = wte[inp[b,t],:] (widened from dtype t: fp32, bf16 or fp16; only the rows
 * used are read) + wpe[t,:], for B sequences of T positions. */
void gpt2_embed_forward(zinc_engine *e, float *out, const int32_t *inp, const void *wte, zinc_dtype t, const float *wpe,
                        int B, int T, int C);
/* dwte[inp[b,t],:] += dout[b,t,:], dwpe[t,:] += dout[b,t,:] (either may be NULL); each row's additions in
 * (b,t) order (the work is split by channel, since rows repeat). */
void gpt2_embed_backward(zinc_engine *e, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T,
                         int C);

/* out[N,C] = (x - mean) * rstd * w + b over the last axis; mean and rstd (N each) saved for backward. */
void gpt2_layernorm_forward(zinc_engine *e, float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t N, int C);
void gpt2_layernorm_backward(zinc_engine *e, float *dx, float *dw, float *db, const float *dout, const float *x,
                             const float *w, const float *mean, const float *rstd, int64_t N, int C);

/* out[N,OC] = x[N,IC] W^T + b, W is OC x IC (torch.nn.Linear's layout); b may be NULL. */
void gpt2_matmul_forward(zinc_engine *e, float *out, const float *x, const float *W, const float *b, int64_t N, int IC,
                         int OC);
/* out = res + (x W^T + b), res N x OC: a residual connection added in each piece while it is in cache, with
 * the bits of the product followed by a separate add. */
void gpt2_matmul_forward_res(zinc_engine *e, float *out, const float *x, const float *W, const float *b,
                             const float *res, int64_t N, int IC, int OC);
/* dx[N,IC] += dout W, dW += dout^T x, db += column sums of dout; any of the three may be NULL (W is
 * read for dx only, x for dW only). */
void gpt2_matmul_backward(zinc_engine *e, float *dx, float *dW, float *db, const float *dout, const float *x,
                          const float *W, int64_t N, int IC, int OC);
/* The same with dx = dout W written, not added: no pass zeroing dx before it (dW and db are still added);
 * with dx_mul (N x IC), dx = (dout W) * dx_mul element by element, each piece multiplied while in cache
 * (GELU's backward through its kept derivative: no pass of its own). */
void gpt2_matmul_backward_set(zinc_engine *e, float *dx, const float *dx_mul, float *dW, float *db, const float *dout,
                              const float *x, const float *W, int64_t N, int IC, int OC);

/* The same two with bf16 products (torch autocast's rounding: operands rounded to bf16, products summed in
 * float, gpt2_gemm_bf16): x, W and dout are rounded into ws (gpt2_matmul_bf16_elems(N, IC, OC) uint16s) and
 * multiplied there; the bias and its gradient stay float. res: as gpt2_matmul_forward_res (NULL: none). dx_set: dx written (times dx_mul when given), as
 * gpt2_matmul_backward_set. */
int64_t gpt2_matmul_bf16_elems(int64_t N, int IC, int OC);
void gpt2_matmul_forward_bf16(zinc_engine *e, uint16_t *ws, float *out, const float *x, const float *W, const float *b,
                              const float *res, int64_t N, int IC, int OC);
void gpt2_matmul_backward_bf16(zinc_engine *e, uint16_t *ws, bool dx_set, const float *dx_mul, float *dx, float *dW,
                               float *db, const float *dout, const float *x, const float *W, int64_t N, int IC, int OC);
/* dst[i] = src[i] rounded to bf16 (nearest even; NaN stays NaN), on e's threads. */
void gpt2_to_bf16(zinc_engine *e, uint16_t *dst, const float *src, int64_t n);

/* Causal multi-head self-attention. qkv[B,T,3C] holds q, k, v (each C wide; head h takes channels
 * h*C/H .. (h+1)*C/H - 1 of each); out[B,T,C]; att[B,H,T,T] keeps the softmax weights for backward
 * (entries above the diagonal are 0). Scores are scaled by 1/sqrt(C/H). The GPU kernels keep this form
 * and are tested against it; the host model runs the blocked form below. */
void gpt2_attention_forward(zinc_engine *e, float *out, float *att, const float *qkv, int B, int T, int C, int H);
/* dqkv += ...; datt is scratch of B*H*T*T floats. */
void gpt2_attention_backward(zinc_engine *e, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int H);

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), one libm tanhf per element: the
 * reference of the GPU kernels; the host model runs the _deriv form below. */
void gpt2_gelu_forward(zinc_engine *e, float *out, const float *x, int64_t n);
void gpt2_gelu_backward(zinc_engine *e, float *dx, const float *x, const float *dout, int64_t n);

/* The same GELU, vectorised (gpt2_vecmath.h), also writing the derivative gelu'(x) into deriv (n floats;
 * deriv may be x, overwritten): backward is then dx = dout * deriv, which the model does in the pieces of
 * the product that makes dout (gpt2_matmul_backward_set's dx_mul); neither x nor the tanh is kept or
 * computed again. */
void gpt2_gelu_forward_deriv(zinc_engine *e, float *out, float *deriv, const float *x, int64_t n);

/* Causal self-attention in blocks through sgemm (gpt2_attention.c): the same contract as
 * gpt2_attention_forward without the B x H x T x T matrix; lse[B,H,T] keeps each row's log-sum-exp of
 * the scaled scores for backward, which also reads the forward's out. dqkv += the gradient. */
void gpt2_attention_forward_blocked(zinc_engine *e, float *out, float *lse, const float *qkv, int B, int T, int C,
                                    int H);
void gpt2_attention_backward_blocked(zinc_engine *e, float *dqkv, const float *dout, const float *out, const float *qkv,
                                     const float *lse, int B, int T, int C, int H);

/* Softmax cross-entropy over the first V of the V columns of logits[N,V] (row stride V). Returns the sum
 * of the N losses (double, summed in row order), writes dlogits[N,V] = (softmax - onehot) * dscale
 * (dlogits may be NULL, or logits itself). targets[i] in 0..V-1; row_loss: scratch of N doubles. */
double gpt2_crossentropy(zinc_engine *e, float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                         float dscale, double *row_loss);

#endif
