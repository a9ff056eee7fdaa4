/* The MLP on the GPU: the same model as mlp.c's host path, with cuBLAS for the matrix products and
 * mlp_kernels.cu for the rest, all enqueued on the engine's compute stream (zinc_stream), so the engine's
 * gradient reduction is ordered after the backward that filled its buffers without the host waiting.
 *
 * Row-major X (r x c) is column-major X^T (c x r) to cuBLAS, so with W (out x in), h (mb x in):
 *   forward   z^T  (out x mb) = W^T' h^T       gemm(T, N, out, mb, in,  W, h)
 *   grad W    dW^T (in x out) = h^T dz          gemm(N, T, in, out, mb,  h, dz)
 *   grad h    dh^T (in x mb)  = W^T dz^T        gemm(N, N, in, mb, out,  W, dz)
 * Products are fp32 (parameters in fp16/bf16 are widened first), with cuBLAS's default math mode: no
 * TF32, so the host path is the reference within fp32 rounding. */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "../common/cublas_loader.h"
#include "../common/gpu_check.h"
#include "mlp_internal.h"
#include "mlp_kernels.h"

static const example_cublas *cublas; /* set by the first mlp_cuda_create (examples/common/cublas_loader.h) */

struct mlp_cuda {
    cudaStream_t stream;
    cublasHandle_t blas;
    float *x;            /* inputs (mb x in_dim) */
    int *labels;         /* mb */
    float **z, **act;    /* per layer: pre-activation and output (mb x out) */
    float *wf, *bf;      /* fp32 copies of one layer's parameters (compute dtype fp16/bf16) */
    float *dz, *dh;      /* backward scratch (mb x widest) */
    float *gw;           /* one layer's weight gradient in fp32 (gradient dtype fp16/bf16) */
    float *inject;       /* one float: the test hook's value */
    double *loss;        /* gas x mb per-sample losses of the current step */
    int *correct;        /* gas x mb */
    int64_t gas;
};

#define CU(expr) EXAMPLE_CU(m->e, "mlp (cuda)", expr)
#define BLAS(expr) EXAMPLE_BLAS(m->e, "mlp (cuda)", expr)
#define CHECK(expr) EXAMPLE_CHECK(expr)

static zinc_status dalloc(mlp_model *m, void **p, size_t bytes) {
    CU(cudaMalloc(p, bytes ? bytes : 1));
    CU(cudaMemset(*p, 0, bytes ? bytes : 1));
    return ZINC_OK;
}

zinc_status mlp_cuda_create(mlp_model *m) {
    mlp_cuda *c = calloc(1, sizeof *c);
    if (!c) return ZINC_ERR_NOMEM;
    m->cuda = c; /* mlp_cuda_destroy frees what was made if a later step fails */
    c->stream = (cudaStream_t)zinc_stream(m->e);
    c->gas = zinc_grad_accum_steps(m->e);
    c->z = calloc((size_t)m->nlayers, sizeof *c->z);
    c->act = calloc((size_t)m->nlayers, sizeof *c->act);
    if (!c->z || !c->act) return ZINC_ERR_NOMEM;
    CHECK(example_cublas_load(m->e, "mlp (cuda)", "compute the MLP on the host (MLP_COMPUTE_HOST)",
                              &cublas));
    BLAS(cublas->Create(&c->blas));
    BLAS(cublas->SetStream(c->blas, c->stream));
    size_t mb = (size_t)m->mb, wmax = 0, bmax = 0;
    for (int l = 0; l < m->nlayers; l++) {
        const mlp_layer *L = &m->layers[l];
        size_t w = (size_t)L->out * (size_t)L->in;
        if (w > wmax) wmax = w;
        if ((size_t)L->out > bmax) bmax = (size_t)L->out;
        CHECK(dalloc(m, (void **)&c->z[l], mb * (size_t)L->out * sizeof(float)));
        CHECK(dalloc(m, (void **)&c->act[l], mb * (size_t)L->out * sizeof(float)));
    }
    CHECK(dalloc(m, (void **)&c->x, mb * (size_t)m->cfg.in_dim * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->labels, mb * sizeof(int)));
    CHECK(dalloc(m, (void **)&c->wf, wmax * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->bf, bmax * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->gw, wmax * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->dz, mb * (size_t)m->widest * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->dh, mb * (size_t)m->widest * sizeof(float)));
    CHECK(dalloc(m, (void **)&c->inject, sizeof(float)));
    CHECK(dalloc(m, (void **)&c->loss, (size_t)c->gas * mb * sizeof(double)));
    CHECK(dalloc(m, (void **)&c->correct, (size_t)c->gas * mb * sizeof(int)));
    return ZINC_OK;
}

void mlp_cuda_destroy(mlp_model *m) {
    mlp_cuda *c = m->cuda;
    if (!c) return;
    /* Work on the stream may still read these buffers (an error path leaves it mid-step). */
    cudaStreamSynchronize(c->stream);
    for (int l = 0; l < m->nlayers; l++) {
        if (c->z) cudaFree(c->z[l]);
        if (c->act) cudaFree(c->act[l]);
    }
    void *bufs[] = {c->x, c->labels, c->wf, c->bf, c->gw, c->dz, c->dh, c->inject, c->loss, c->correct};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    if (c->blas) cublas->Destroy(c->blas);
    free(c->z);
    free(c->act);
    free(c);
    m->cuda = NULL;
}

/* The layer's weights and biases as fp32 device pointers: the engine's own buffers when the compute
 * dtype is fp32, else widened into c->wf / c->bf. Valid between enter and exit (stage 3 gathers). */
static zinc_status params_f32(mlp_model *m, const mlp_layer *L, const float **w, const float **b) {
    mlp_cuda *c = m->cuda;
    zinc_dtype t = zinc_compute_dtype(m->e);
    const void *pw = zinc_param_data(L->w), *pb = zinc_param_data(L->b);
    if (!pw || !pb) return ZINC_ERR_STATE;
    if (t == ZINC_FP32) {
        *w = pw;
        *b = pb;
        return ZINC_OK;
    }
    CU(mlp_cu_to_f32(c->wf, pw, t, (int64_t)L->out * L->in, c->stream));
    CU(mlp_cu_to_f32(c->bf, pb, t, L->out, c->stream));
    *w = c->wf;
    *b = c->bf;
    return ZINC_OK;
}

static zinc_status forward_layer(mlp_model *m, int l, const float *h) {
    mlp_cuda *c = m->cuda;
    const mlp_layer *L = &m->layers[l];
    const float one = 1.0f, zero = 0.0f, *w, *b;
    CHECK(zinc_module_enter(m->e, L->module, ZINC_FORWARD));
    CHECK(params_f32(m, L, &w, &b));
    BLAS(cublas->Sgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, L->out, (int)m->mb, L->in, &one, w, L->in, h, L->in, &zero,
                     c->z[l], L->out));
    CU(mlp_cu_bias_act(c->z[l], c->act[l], b, m->mb, L->out, l < m->nlayers - 1, c->stream));
    return zinc_module_exit(m->e, L->module, ZINC_FORWARD);
}

/* dz (mb x out) is the gradient at the layer's pre-activation; writes dh (mb x in) for the layer below
 * when dh is not NULL. */
static zinc_status backward_layer(mlp_model *m, int l, const float *dz, float *dh) {
    mlp_cuda *c = m->cuda;
    const mlp_layer *L = &m->layers[l];
    const float one = 1.0f, zero = 0.0f, *w, *b;
    const float *h = l == 0 ? c->x : c->act[l - 1];
    CHECK(zinc_module_enter(m->e, L->module, ZINC_BACKWARD));
    zinc_dtype gt = zinc_grad_dtype(m->e);
    void *gw = zinc_param_grad(L->w), *gb = zinc_param_grad(L->b);
    if (!gw || !gb) return ZINC_ERR_STATE;
    int64_t nw = (int64_t)L->out * L->in;
    if (gt == ZINC_FP32) { /* accumulate straight into the engine's fp32 gradient */
        BLAS(cublas->Sgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, L->in, L->out, (int)m->mb, &one, h, L->in, dz, L->out,
                         &one, gw, L->in));
    } else {               /* the product in fp32, then added and rounded once */
        BLAS(cublas->Sgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, L->in, L->out, (int)m->mb, &one, h, L->in, dz, L->out,
                         &zero, c->gw, L->in));
        CU(mlp_cu_grad_add(gw, gt, c->gw, nw, c->stream));
    }
    CU(mlp_cu_bias_grad(gb, gt, dz, m->mb, L->out, c->stream));
    if (l == 0 && m->has_inject) {
        CU(cudaMemcpyAsync(c->inject, &m->inject, sizeof(float), cudaMemcpyHostToDevice, c->stream));
        CU(mlp_cu_grad_add(gw, gt, c->inject, 1, c->stream));
        m->has_inject = 0;
    }
    if (dh) {
        CHECK(params_f32(m, L, &w, &b));
        BLAS(cublas->Sgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, L->in, (int)m->mb, L->out, &one, w, L->in, dz, L->out,
                         &zero, dh, L->in));
        CU(mlp_cu_relu_grad(dh, c->z[l - 1], m->mb, L->in, c->stream));
    }
    return zinc_module_exit(m->e, L->module, ZINC_BACKWARD);
}

zinc_status mlp_cuda_microstep(mlp_model *m, int64_t j) {
    mlp_cuda *c = m->cuda;
    size_t mb = (size_t)m->mb;
    /* From pageable memory: the call returns once m->x is staged, so the host may sample into it again. */
    CU(cudaMemcpyAsync(c->x, m->x, mb * (size_t)m->cfg.in_dim * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    CU(cudaMemcpyAsync(c->labels, m->labels, mb * sizeof(int), cudaMemcpyHostToDevice, c->stream));
    const float *h = c->x;
    for (int l = 0; l < m->nlayers; l++) {
        CHECK(forward_layer(m, l, h));
        h = c->act[l];
    }
    CU(mlp_cu_softmax_xent(h, c->labels, m->mb, m->cfg.classes, zinc_loss_scale(m->e), c->dz, c->loss + j * m->mb,
                           c->correct + j * m->mb, c->stream));
    return mlp_backward_all(m, backward_layer, c->dz, c->dh);
}

zinc_status mlp_cuda_metrics(mlp_model *m, int64_t gas, double sums[2]) {
    mlp_cuda *c = m->cuda;
    size_t n = (size_t)(gas * m->mb);
    double *loss = malloc(n * sizeof *loss);
    int *correct = malloc(n * sizeof *correct);
    zinc_status st = ZINC_ERR_NOMEM;
    if (loss && correct) {
        st = zinc_copy_to_host(m->e, loss, c->loss, n * sizeof *loss);
        if (st == ZINC_OK) st = zinc_copy_to_host(m->e, correct, c->correct, n * sizeof *correct);
    }
    if (st == ZINC_OK)
        for (size_t i = 0; i < n; i++) {
            sums[0] += loss[i];
            sums[1] += correct[i];
        }
    free(loss);
    free(correct);
    return st;
}
