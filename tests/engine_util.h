/* Shared by the engine tests: build a ds_config for a stage/dtype, train the example MLP, gather the
 * fp32 master weights. */
#ifndef ZINC_TESTS_ENGINE_UTIL_H
#define ZINC_TESTS_ENGINE_UTIL_H

#include <stddef.h>

#include "mlp.h"
#include "zinc.h"
#include "zt.h"

typedef struct eu_run {
    int stage;
    zinc_dtype dtype;
    int overlap_comm;
    int train_batch;            /* default 24 */
    int gas;                    /* default 2 */
    int bucket;                 /* reduce_bucket_size; default 3000 (larger than every module of eu_model) */
    zt_logcap *log;             /* the log (zt_logcap_fn); default: warnings and errors of rank 0 to stderr */
    const char *extra;          /* extra top-level JSON members, e.g. "\"gradient_clipping\": 1.0", or NULL */
    const char *zero_extra;     /* extra zero_optimization members, or NULL */
    const char *fp16_extra;     /* extra fp16 members, or NULL */
    const char *bf16_extra;     /* extra bf16 members, or NULL */
    int cuda;                   /* 1: the engine runs on device cuda (tests/test_engine_cuda.c), else cpu */
    mlp_compute_at mlp_compute; /* where the MLP computes (default AUTO: on the engine's device) */
    int nonfinite_skip;         /* 1: zinc_options.nonfinite = ZINC_NONFINITE_SKIP (fp32/bf16 skip inf steps) */
    const char *optimizer;      /* the "optimizer" value (JSON), or NULL: AdamW, lr 0.003, weight_decay 0.01 */
} eu_run;

/* The device an engine test runs on: cuda when r->cuda is set or ZINC_TEST_DEVICE=cuda is in the
 * environment (the CUDA emulation's variants of the tests, tests/cuda_emulated.cmake), else cpu. For cuda
 * it sets ZINC_EXPERIMENTAL_CUDA=1, which the engine asks for. */
zinc_device_kind eu_device(const eu_run *r);
/* The small MLP every engine test trains. */
mlp_config eu_model(void);
/* Writes the ds_config JSON for a run into buf. */
void eu_config(const eu_run *r, char *buf, size_t cap);
/* Creates an engine (quiet logging) and the MLP. */
zinc_status eu_create(const eu_run *r, zinc_engine **e, mlp_model **m);
/* Trains `steps` steps and gathers the master weights into *out (malloc'd, *n elements). */
zinc_status eu_train(const eu_run *r, int steps, float **out, size_t *n);
const char *eu_dtype_name(zinc_dtype t);

#endif
