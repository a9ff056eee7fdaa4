/* An MLP classifier wrapped through the zinc engine: the model a newcomer reads to learn how to wrap
 * their own. Forward and backward run where the engine's buffers live: plain C on the host (float math;
 * parameters read from and gradients added in the engine's dtypes, mlp.c), or on the GPU with cuBLAS on
 * the engine's compute stream (mlp_cuda.c, when zinc is built with CUDA and the engine's device is
 * cuda). It is trained on a deterministic synthetic task: inputs are Gaussian, labels come from
 * a fixed random "teacher" network. The samples of optimizer step k are global indices
 * [k*B, (k+1)*B) (B = train_batch_size), split into micro-batches: micro-step j on rank r takes chunk
 * j*W + r. So runs with the same train_batch_size see the same samples per step on any rank count. */
#ifndef ZINC_EXAMPLES_MLP_H
#define ZINC_EXAMPLES_MLP_H

#include <stdint.h>

#include "zinc.h"

typedef enum mlp_compute_at {
    MLP_COMPUTE_AUTO = 0, /* the GPU path on a cuda engine (when built with CUDA), else the host */
    MLP_COMPUTE_HOST,     /* always the host path; on cuda through zinc_copy_to_host/_from_host */
    MLP_COMPUTE_DEVICE    /* the GPU path; an error on a cpu engine or a build without CUDA */
} mlp_compute_at;

typedef struct mlp_config {
    int in_dim;             /* input features (default 32) */
    int hidden;             /* width of the hidden layers (default 128) */
    int depth;              /* hidden layers (default 2) */
    int classes;            /* output classes (default 8) */
    uint64_t data_seed;     /* the synthetic task (teacher and inputs) */
    mlp_compute_at compute; /* where forward and backward run (default AUTO) */
} mlp_config;

mlp_config mlp_default_config(void);

typedef struct mlp_model mlp_model;

typedef struct mlp_metrics {
    double loss;     /* mean cross-entropy over the global batch of the step */
    double accuracy; /* fraction of the global batch classified right */
} mlp_metrics;

/* The host memory the model declares to the engine (zinc_memory_declare) for a configuration and micro
 * batch, computed without an engine, from the same sizes it allocates with (host path). */
zinc_status mlp_memory(const mlp_config *cfg, int64_t micro_batch, uint64_t *activations, uint64_t *scratch);

/* Registers the model's modules and parameters with the engine and builds it. */
zinc_status mlp_create(zinc_engine *e, const mlp_config *cfg, mlp_model **out);
void mlp_destroy(mlp_model *m);

/* One optimizer step: zinc_grad_accum_steps micro-steps of forward and backward over this rank's samples
 * of global step `step`, then zinc_step. Metrics are averaged over every rank's samples. */
zinc_status mlp_train_step(mlp_model *m, int64_t step, zinc_step_info *info, mlp_metrics *metrics);

/* The same step in its parts, for a driver that runs the step itself (the zinc program's trainer): micro-step j
 * (0 .. zinc_grad_accum_steps - 1) of global step `step` on this rank's samples (j = 0 starts the step's
 * metrics), then, after zinc_step, the step's metrics over every rank's samples (collective). */
zinc_status mlp_microstep(mlp_model *m, int64_t step, int64_t j);
zinc_status mlp_step_metrics(mlp_model *m, mlp_metrics *metrics);

/* Test hook: the next backward adds `value` to the gradient of element 0 of the first parameter on this
 * rank (an inf injects an overflow). Cleared after one use. */
void mlp_inject_grad(mlp_model *m, float value);

#endif
