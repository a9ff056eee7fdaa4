/* Plain-C versions of examples/mlp/mlp_kernels.cu (same contract, mlp_kernels.h), for running the MLP's
 * GPU path on the host emulation in this folder. Each checks that its buffers stay inside their
 * allocations. */
#include <math.h>

#include "cuda_runtime.h"
#include "mlp_kernels.h"

static float load(const void *p, zinc_dtype t, int64_t i) { return zinc_load_f32(p, t, (size_t)i); }

cudaError_t mlp_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s) {
    (void)s;
    cuda_host_check_span(dst, (size_t)n * sizeof(float), "mlp_cu_to_f32 dst");
    cuda_host_check_span(src, (size_t)n * zinc_dtype_size(t), "mlp_cu_to_f32 src");
    for (int64_t i = 0; i < n; i++) dst[i] = load(src, t, i);
    return cudaSuccess;
}

cudaError_t mlp_cu_bias_act(float *z, float *act, const float *bias, int64_t rows, int cols, int relu,
                            cudaStream_t s) {
    (void)s;
    size_t n = (size_t)(rows * cols);
    cuda_host_check_span(z, n * sizeof(float), "mlp_cu_bias_act z");
    cuda_host_check_span(act, n * sizeof(float), "mlp_cu_bias_act act");
    cuda_host_check_span(bias, (size_t)cols * sizeof(float), "mlp_cu_bias_act bias");
    for (size_t i = 0; i < n; i++) {
        float v = z[i] + bias[i % (size_t)cols];
        z[i] = v;
        act[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
    return cudaSuccess;
}

cudaError_t mlp_cu_relu_grad(float *dh, const float *z_below, int64_t rows, int cols, cudaStream_t s) {
    (void)s;
    size_t n = (size_t)(rows * cols);
    cuda_host_check_span(dh, n * sizeof(float), "mlp_cu_relu_grad dh");
    cuda_host_check_span(z_below, n * sizeof(float), "mlp_cu_relu_grad z_below");
    for (size_t i = 0; i < n; i++)
        if (!(z_below[i] > 0.0f)) dh[i] = 0.0f;
    return cudaSuccess;
}

cudaError_t mlp_cu_grad_add(void *grad, zinc_dtype t, const float *add, int64_t n, cudaStream_t s) {
    (void)s;
    cuda_host_check_span(grad, (size_t)n * zinc_dtype_size(t), "mlp_cu_grad_add grad");
    cuda_host_check_span(add, (size_t)n * sizeof(float), "mlp_cu_grad_add add");
    for (int64_t i = 0; i < n; i++) zinc_add_f32(grad, t, (size_t)i, add[i]);
    return cudaSuccess;
}

cudaError_t mlp_cu_bias_grad(void *grad, zinc_dtype t, const float *dz, int64_t rows, int cols, cudaStream_t s) {
    (void)s;
    cuda_host_check_span(grad, (size_t)cols * zinc_dtype_size(t), "mlp_cu_bias_grad grad");
    cuda_host_check_span(dz, (size_t)(rows * cols) * sizeof(float), "mlp_cu_bias_grad dz");
    for (int o = 0; o < cols; o++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < rows; r++) acc += dz[r * cols + o];
        zinc_add_f32(grad, t, (size_t)o, acc);
    }
    return cudaSuccess;
}

cudaError_t mlp_cu_softmax_xent(const float *logits, const int *labels, int64_t rows, int classes, float scale,
                                float *dz, double *loss, int *correct, cudaStream_t s) {
    (void)s;
    cuda_host_check_span(logits, (size_t)(rows * classes) * sizeof(float), "mlp_cu_softmax_xent logits");
    cuda_host_check_span(dz, (size_t)(rows * classes) * sizeof(float), "mlp_cu_softmax_xent dz");
    cuda_host_check_span(labels, (size_t)rows * sizeof(int), "mlp_cu_softmax_xent labels");
    cuda_host_check_span(loss, (size_t)rows * sizeof(double), "mlp_cu_softmax_xent loss");
    cuda_host_check_span(correct, (size_t)rows * sizeof(int), "mlp_cu_softmax_xent correct");
    for (int64_t r = 0; r < rows; r++) {
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
    return cudaSuccess;
}
