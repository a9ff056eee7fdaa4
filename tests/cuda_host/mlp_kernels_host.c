/* Plain-C versions of examples/mlp/mlp_kernels.cu (same contract, mlp_kernels.h), enqueued on the
 * emulated stream (cuda_host.h) so the MLP's GPU path runs on the emulated device. Each checks that its
 * buffers stay inside their allocations. */
#include <math.h>

#include "cuda_host.h"
#include "mlp_kernels.h"

typedef enum { K_TO_F32, K_BIAS_ACT, K_RELU_GRAD, K_GRAD_ADD, K_BIAS_GRAD, K_XENT } kind;

typedef struct args {
    kind k;
    float *f0, *f1;      /* to_f32 dst | bias_act z, act | relu_grad dh | grad_add add | xent dz */
    const float *c0;     /* bias_act bias | relu_grad z_below | bias_grad dz | xent logits */
    void *g;             /* grad_add / bias_grad grad; to_f32 src */
    zinc_dtype t;
    int64_t rows, n;
    int cols, relu;
    float scale;
    const int *labels;
    double *loss;
    int *correct;
} args;

static void run(void *p) {
    args *a = p;
    switch (a->k) {
    case K_TO_F32:
        for (int64_t i = 0; i < a->n; i++) a->f0[i] = zinc_load_f32(a->g, a->t, (size_t)i);
        break;
    case K_BIAS_ACT:
        for (int64_t i = 0; i < a->rows * a->cols; i++) {
            float v = a->f0[i] + a->c0[i % a->cols];
            a->f0[i] = v;
            a->f1[i] = a->relu && !(v > 0.0f) ? 0.0f : v;
        }
        break;
    case K_RELU_GRAD:
        for (int64_t i = 0; i < a->rows * a->cols; i++)
            if (!(a->c0[i] > 0.0f)) a->f0[i] = 0.0f;
        break;
    case K_GRAD_ADD:
        for (int64_t i = 0; i < a->n; i++) zinc_add_f32(a->g, a->t, (size_t)i, a->f1[i]);
        break;
    case K_BIAS_GRAD:
        for (int o = 0; o < a->cols; o++) {
            float acc = 0.0f;
            for (int64_t r = 0; r < a->rows; r++) acc += a->c0[r * a->cols + o];
            zinc_add_f32(a->g, a->t, (size_t)o, acc);
        }
        break;
    case K_XENT:
        for (int64_t r = 0; r < a->rows; r++) {
            const float *z = a->c0 + r * a->cols;
            float mx = z[0];
            int arg = 0;
            for (int k = 1; k < a->cols; k++)
                if (z[k] > mx) mx = z[k], arg = k;
            double den = 0;
            for (int k = 0; k < a->cols; k++) den += exp((double)(z[k] - mx));
            int y = a->labels[r];
            a->loss[r] = log(den) - (double)(z[y] - mx);
            a->correct[r] = arg == y;
            for (int k = 0; k < a->cols; k++) {
                double q = exp((double)(z[k] - mx)) / den;
                a->f0[r * a->cols + k] = (float)((q - (k == y)) / (double)a->rows * a->scale);
            }
        }
        break;
    }
}

#define SPAN(p, bytes, what) cuda_host_check_span((p), (size_t)(bytes), what)

cudaError_t mlp_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s) {
    SPAN(dst, n * 4, "mlp_cu_to_f32 dst");
    SPAN(src, n * (int64_t)zinc_dtype_size(t), "mlp_cu_to_f32 src");
    args a = {.k = K_TO_F32, .f0 = dst, .g = (void *)src, .t = t, .n = n};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}

cudaError_t mlp_cu_bias_act(float *z, float *act, const float *bias, int64_t rows, int cols, int relu,
                            cudaStream_t s) {
    SPAN(z, rows * cols * 4, "mlp_cu_bias_act z");
    SPAN(act, rows * cols * 4, "mlp_cu_bias_act act");
    SPAN(bias, cols * 4, "mlp_cu_bias_act bias");
    args a = {.k = K_BIAS_ACT, .f0 = z, .f1 = act, .c0 = bias, .rows = rows, .cols = cols, .relu = relu};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}

cudaError_t mlp_cu_relu_grad(float *dh, const float *z_below, int64_t rows, int cols, cudaStream_t s) {
    SPAN(dh, rows * cols * 4, "mlp_cu_relu_grad dh");
    SPAN(z_below, rows * cols * 4, "mlp_cu_relu_grad z_below");
    args a = {.k = K_RELU_GRAD, .f0 = dh, .c0 = z_below, .rows = rows, .cols = cols};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}

cudaError_t mlp_cu_grad_add(void *grad, zinc_dtype t, const float *add, int64_t n, cudaStream_t s) {
    SPAN(grad, n * (int64_t)zinc_dtype_size(t), "mlp_cu_grad_add grad");
    SPAN(add, n * 4, "mlp_cu_grad_add add");
    args a = {.k = K_GRAD_ADD, .g = grad, .t = t, .f1 = (float *)add, .n = n};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}

cudaError_t mlp_cu_bias_grad(void *grad, zinc_dtype t, const float *dz, int64_t rows, int cols, cudaStream_t s) {
    SPAN(grad, cols * (int64_t)zinc_dtype_size(t), "mlp_cu_bias_grad grad");
    SPAN(dz, rows * cols * 4, "mlp_cu_bias_grad dz");
    args a = {.k = K_BIAS_GRAD, .g = grad, .t = t, .c0 = dz, .rows = rows, .cols = cols};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}

cudaError_t mlp_cu_softmax_xent(const float *logits, const int *labels, int64_t rows, int classes, float scale,
                                float *dz, double *loss, int *correct, cudaStream_t s) {
    SPAN(logits, rows * classes * 4, "mlp_cu_softmax_xent logits");
    SPAN(dz, rows * classes * 4, "mlp_cu_softmax_xent dz");
    SPAN(labels, rows * 4, "mlp_cu_softmax_xent labels");
    SPAN(loss, rows * 8, "mlp_cu_softmax_xent loss");
    SPAN(correct, rows * 4, "mlp_cu_softmax_xent correct");
    args a = {.k = K_XENT, .c0 = logits, .labels = labels, .rows = rows, .cols = classes, .scale = scale, .f0 = dz,
              .loss = loss, .correct = correct};
    return cuda_host_enqueue(s, run, &a, sizeof a);
}
