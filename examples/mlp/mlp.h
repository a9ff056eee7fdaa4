/* An MLP classifier wrapped through the zinc engine: the model a newcomer reads to learn how to wrap
 * their own. Forward and backward are plain C (float math; parameters read from and gradients written in
 * the engine's dtypes), trained on a deterministic synthetic task: inputs are Gaussian, labels come from
 * a fixed random "teacher" network. The samples of optimizer step k are global indices
 * [k*B, (k+1)*B) (B = train_batch_size), split into micro-batches: micro-step j on rank r takes chunk
 * j*W + r. So runs with the same train_batch_size see the same samples per step on any rank count. */
#ifndef ZINC_EXAMPLES_MLP_H
#define ZINC_EXAMPLES_MLP_H

#include <stdint.h>

#include "zinc.h"

typedef struct zinc_mlp_config {
    int in_dim;       /* input features (default 32) */
    int hidden;       /* width of the hidden layers (default 128) */
    int depth;        /* hidden layers (default 2) */
    int classes;      /* output classes (default 8) */
    uint64_t data_seed; /* the synthetic task (teacher and inputs) */
} zinc_mlp_config;

zinc_mlp_config zinc_mlp_default_config(void);

typedef struct zinc_mlp zinc_mlp;

typedef struct zinc_mlp_metrics {
    double loss;      /* mean cross-entropy over the global batch of the step */
    double accuracy;  /* fraction of the global batch classified right */
} zinc_mlp_metrics;

/* Registers the model's modules and parameters with the engine and builds it. */
zinc_status zinc_mlp_create(zinc_engine *e, const zinc_mlp_config *cfg, zinc_mlp **out);
void zinc_mlp_destroy(zinc_mlp *m);

/* One optimizer step: zinc_grad_accum_steps micro-steps of forward and backward over this rank's samples
 * of global step `step`, then zinc_step. Metrics are averaged over every rank's samples. */
zinc_status zinc_mlp_train_step(zinc_mlp *m, int64_t step, zinc_step_info *info, zinc_mlp_metrics *metrics);

/* Test hook: the next backward adds `value` to the gradient of element 0 of the first parameter on this
 * rank (an inf injects an overflow). Cleared after one use. */
void zinc_mlp_inject_grad(zinc_mlp *m, float value);

#endif
