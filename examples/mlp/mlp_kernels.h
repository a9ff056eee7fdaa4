/* The example MLP's own CUDA kernels (examples/mlp/mlp_kernels.cu), behind C launchers that enqueue on
 * the given stream. Matrix products are cuBLAS calls in mlp_cuda.c; these are the elementwise and
 * per-sample pieces around them. Their reference is the MLP's host path (mlp.c): tests/test_engine_cuda.c
 * trains the same model both ways and compares. Buffers in the engine's dtypes (`t`) are the parameters
 * (compute dtype) and gradients (gradient dtype) zinc hands out; everything else is fp32. */
#ifndef ZINC_EXAMPLES_MLP_KERNELS_H
#define ZINC_EXAMPLES_MLP_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "zinc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = (float)src[i] for n elements of dtype t. */
cudaError_t mlp_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s);
/* z (rows x cols) += bias[col]; act = relu ? max(z, 0) : z (act may equal z). */
cudaError_t mlp_cu_bias_act(float *z, float *act, const float *bias, int64_t rows, int cols, int relu,
                            cudaStream_t s);
/* dh (rows x cols) = z_below > 0 ? dh : 0 (the ReLU of the layer below). */
cudaError_t mlp_cu_relu_grad(float *dh, const float *z_below, int64_t rows, int cols, cudaStream_t s);
/* grad[i] += add[i] for n elements, grad in dtype t (read, added in fp32, rounded once). */
cudaError_t mlp_cu_grad_add(void *grad, zinc_dtype t, const float *add, int64_t n, cudaStream_t s);
/* grad[o] += sum over rows of dz[row][o] (in row order: deterministic), grad in dtype t. */
cudaError_t mlp_cu_bias_grad(void *grad, zinc_dtype t, const float *dz, int64_t rows, int cols, cudaStream_t s);
/* Softmax cross-entropy over logits (rows x classes) and labels: dz = (softmax - onehot) / rows * scale
 * (computed in double, as the host path), loss[row] = -log softmax[label], correct[row] = argmax == label. */
cudaError_t mlp_cu_softmax_xent(const float *logits, const int *labels, int64_t rows, int classes, float scale,
                                float *dz, double *loss, int *correct, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
