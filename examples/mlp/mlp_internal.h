/* The MLP's state, shared by its host path (mlp.c) and its CUDA path (mlp_cuda.c, cuBLAS). */
#ifndef ZINC_EXAMPLES_MLP_INTERNAL_H
#define ZINC_EXAMPLES_MLP_INTERNAL_H

#include "mlp.h"

typedef struct mlp_layer {
    int module;
    int in, out;
    zinc_param *w, *b;
    /* host path */
    float *wf, *bf;     /* float copies of the parameters, made at module entry */
    float *h_in;        /* the layer's input (mb x in), saved for backward */
    float *z;           /* pre-activation (mb x out) */
} mlp_layer;

typedef struct mlp_cuda mlp_cuda; /* the CUDA path's buffers (mlp_cuda.c) */

struct mlp_model {
    zinc_engine *e;
    mlp_config cfg;
    int nlayers;
    mlp_layer *layers;
    int64_t mb;
    int widest;         /* max(in_dim, hidden, classes) */
    float *x;           /* micro-batch inputs (mb x in_dim), sampled on the host */
    int *labels;
    float *dz, *dh;     /* host path: backward scratch */
    float *teacher_w1, *teacher_w2; /* fixed random teacher: in -> 2*in -> classes */
    float inject;
    int has_inject;
    double sums[2];     /* host path: loss sum and correct count of the current step */
    mlp_cuda *cuda;     /* non-NULL when the model computes on the GPU */
};

/* Backward over every layer, last first: fn(m, l, dz, dh) takes the gradient at layer l's pre-activation
 * in dz and writes the one for the layer below in dh (NULL for the first layer); the two buffers then
 * swap roles. Shared by both paths. */
typedef zinc_status (*mlp_backward_fn)(mlp_model *m, int l, const float *dz, float *dh);
zinc_status mlp_backward_all(mlp_model *m, mlp_backward_fn fn, float *dz, float *dh);

/* The CUDA path (built with the CUDA backend only). mlp_cuda_create allocates its buffers and a cuBLAS
 * handle bound to the engine's compute stream; the rest enqueue there and never wait, except
 * mlp_cuda_metrics, which waits for the step's per-sample losses. */
zinc_status mlp_cuda_create(mlp_model *m);
void mlp_cuda_destroy(mlp_model *m);
/* Forward, loss and backward of micro-step j (0 .. gas-1) on the inputs in m->x, m->labels. */
zinc_status mlp_cuda_microstep(mlp_model *m, int64_t j);
/* This rank's loss sum and correct count over the step's gas micro-steps, summed in sample order. */
zinc_status mlp_cuda_metrics(mlp_model *m, int64_t gas, double sums[2]);

#endif
