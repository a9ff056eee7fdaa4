/* GPT-2's own CUDA kernels (examples/gpt2/gpt2_kernels.cu), behind C launchers that enqueue on the given
 * stream and never wait. Matrix products (and only they) are cuBLAS calls in gpt2_cuda.c; these are the
 * pieces around them. Each launcher is the GPU twin of a host function of gpt2_layers.h with the same
 * buffers, shapes and accumulation rules (backward functions ADD into the gradients they are given), so
 * gpt2_layers.c is their plain-C reference: tests/test_gpt2_kernels_cuda.c compares them on a GPU, and
 * the CUDA emulation's launchers (tests/cuda_host/gpt2_kernels_host.c) run gpt2_layers.c itself.
 * Every reduction is done in a fixed order (no atomics), so results do not depend on timing.
 * Shapes: N = B*T token positions, C channels, row-major. All buffers are device memory, fp32 unless a
 * dtype `t` says it is a parameter (compute dtype) or gradient (gradient dtype) buffer of the engine. */
#ifndef ZINC_EXAMPLES_GPT2_KERNELS_H
#define ZINC_EXAMPLES_GPT2_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "zinc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = (float)src[i] for n elements of dtype t (fp32, bf16 or fp16). */
cudaError_t gpt2_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s);
/* grad[i] += add[i] * scale for n elements, grad in dtype t (read, added in fp32, rounded once): the
 * device twin of zinc_grad_add_f32 with scale = zinc_loss_scale. */
cudaError_t gpt2_cu_grad_add(void *grad, zinc_dtype t, const float *add, float scale, int64_t n, cudaStream_t s);
/* y[i] = a[i] + b[i] (y may alias a or b). */
cudaError_t gpt2_cu_add(float *y, const float *a, const float *b, int64_t n, cudaStream_t s);

/* out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]; inp is B*T int32 token ids (< the rows of wte). */
cudaError_t gpt2_cu_embed_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T,
                                  int C, cudaStream_t s);
/* dwte[inp[b,t],:] += dout[b,t,:] and dwpe[t,:] += dout[b,t,:] (either may be NULL); each row's
 * additions in (b,t) order, like the host loop. */
cudaError_t gpt2_cu_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C,
                                   cudaStream_t s);

/* gpt2_layernorm_forward / gpt2_layernorm_backward. */
cudaError_t gpt2_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                                      const float *b, int64_t N, int C, cudaStream_t s);
cudaError_t gpt2_cu_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                       const float *w, const float *mean, const float *rstd, int64_t N, int C,
                                       cudaStream_t s);

/* The bias parts of gpt2_matmul_forward / gpt2_matmul_backward: out[n,o] += b[o]; db[o] += sum over
 * rows n of dout[n,o] (in a fixed order: 128 ranges of rows, each summed in row order, added in range order). */
cudaError_t gpt2_cu_bias_forward(float *out, const float *b, int64_t N, int OC, cudaStream_t s);
cudaError_t gpt2_cu_bias_backward(float *db, const float *dout, int64_t N, int OC, cudaStream_t s);

/* gpt2_attention_forward / gpt2_attention_backward (same qkv, att, out layouts; datt is scratch of
 * B*H*T*T floats). */
cudaError_t gpt2_cu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H,
                                      cudaStream_t s);
cudaError_t gpt2_cu_attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                                       int B, int T, int C, int H, cudaStream_t s);

/* gpt2_gelu_forward / gpt2_gelu_backward. */
cudaError_t gpt2_cu_gelu_forward(float *out, const float *x, int64_t n, cudaStream_t s);
cudaError_t gpt2_cu_gelu_backward(float *dx, const float *x, const float *dout, int64_t n, cudaStream_t s);

/* gpt2_crossentropy: row_loss[i] (double, device) = the loss of row i; dlogits (may be NULL or logits
 * itself) = (softmax - onehot) * dscale. The caller sums row_loss in row order on the host, so the total
 * is the host path's. */
cudaError_t gpt2_cu_crossentropy(float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                                 float dscale, double *row_loss, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
