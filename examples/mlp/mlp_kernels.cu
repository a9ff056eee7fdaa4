// See mlp_kernels.h. Small, simple kernels: the MLP's layers are narrow, so these are launch-bound and
// not worth vectorising; the matrix products (cuBLAS) dominate.
#include "mlp_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load(const void *p, zinc_dtype t, int64_t i) {
    switch (t) {
    case ZINC_FP16: return __half2float(static_cast<const __half *>(p)[i]);
    case ZINC_BF16: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    default: return static_cast<const float *>(p)[i];
    }
}
__device__ __forceinline__ void store(void *p, zinc_dtype t, int64_t i, float x) {
    switch (t) {
    case ZINC_FP16: static_cast<__half *>(p)[i] = __float2half_rn(x); break;
    case ZINC_BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<float *>(p)[i] = x; break;
    }
}

unsigned blocks(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)

__global__ void to_f32(float *dst, const void *src, zinc_dtype t, int64_t n) {
    GRID_STRIDE(i, n) dst[i] = load(src, t, i);
}

__global__ void bias_act(float *z, float *act, const float *bias, int64_t rows, int cols, int relu) {
    GRID_STRIDE(i, rows * cols) {
        float v = z[i] + bias[i % cols];
        z[i] = v;
        act[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

__global__ void relu_grad(float *dh, const float *z_below, int64_t n) {
    GRID_STRIDE(i, n) if (!(z_below[i] > 0.0f)) dh[i] = 0.0f;
}

__global__ void grad_add(void *grad, zinc_dtype t, const float *add, int64_t n) {
    GRID_STRIDE(i, n) store(grad, t, i, load(grad, t, i) + add[i]);
}

__global__ void bias_grad(void *grad, zinc_dtype t, const float *dz, int64_t rows, int cols) {
    GRID_STRIDE(o, (int64_t)cols) {
        float acc = 0.0f;
        for (int64_t r = 0; r < rows; r++) acc += dz[r * cols + o];
        store(grad, t, o, load(grad, t, o) + acc);
    }
}

__global__ void softmax_xent(const float *logits, const int *labels, int64_t rows, int classes, float scale,
                             float *dz, double *loss, int *correct) {
    GRID_STRIDE(r, rows) {
        const float *z = logits + r * classes;
        float mx = z[0];
        int arg = 0;
        for (int k = 1; k < classes; k++)
            if (z[k] > mx) mx = z[k], arg = k;
        double den = 0;
        for (int k = 0; k < classes; k++) den += exp((double)(z[k] - mx));
        int y = labels[r];
        loss[r] = log(den) - (double)(z[y] - mx);
        correct[r] = arg == y;
        for (int k = 0; k < classes; k++) {
            double p = exp((double)(z[k] - mx)) / den;
            dz[r * classes + k] = (float)((p - (k == y)) / (double)rows * scale);
        }
    }
}

}  // namespace

extern "C" {

cudaError_t mlp_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s) {
    to_f32<<<blocks(n), kThreads, 0, s>>>(dst, src, t, n);
    return cudaGetLastError();
}

cudaError_t mlp_cu_bias_act(float *z, float *act, const float *bias, int64_t rows, int cols, int relu,
                            cudaStream_t s) {
    bias_act<<<blocks(rows * cols), kThreads, 0, s>>>(z, act, bias, rows, cols, relu);
    return cudaGetLastError();
}

cudaError_t mlp_cu_relu_grad(float *dh, const float *z_below, int64_t rows, int cols, cudaStream_t s) {
    relu_grad<<<blocks(rows * cols), kThreads, 0, s>>>(dh, z_below, rows * cols);
    return cudaGetLastError();
}

cudaError_t mlp_cu_grad_add(void *grad, zinc_dtype t, const float *add, int64_t n, cudaStream_t s) {
    grad_add<<<blocks(n), kThreads, 0, s>>>(grad, t, add, n);
    return cudaGetLastError();
}

cudaError_t mlp_cu_bias_grad(void *grad, zinc_dtype t, const float *dz, int64_t rows, int cols, cudaStream_t s) {
    bias_grad<<<blocks(cols), kThreads, 0, s>>>(grad, t, dz, rows, cols);
    return cudaGetLastError();
}

cudaError_t mlp_cu_softmax_xent(const float *logits, const int *labels, int64_t rows, int classes, float scale,
                                float *dz, double *loss, int *correct, cudaStream_t s) {
    softmax_xent<<<blocks(rows), kThreads, 0, s>>>(logits, labels, rows, classes, scale, dz, loss, correct);
    return cudaGetLastError();
}

}  // extern "C"
