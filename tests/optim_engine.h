/* The model the optimizer engine tests train (tests/test_engine_lion.c, test_engine_lamb.c): NMOD modules
 * of a [ROWS, WIDTH] weight (decayed) and a [WIDTH] bias (not), initialised and given gradients by closed
 * forms that a float64 reference repeats, trained through the public API with the optimizer a test names. */
#ifndef ZINC_TESTS_OPTIM_ENGINE_H
#define ZINC_TESTS_OPTIM_ENGINE_H

#include <stdint.h>

#include "zinc.h"

enum { NMOD = 3, BATCH = 24, STEPS = 6, ROWS = 40, WIDTH = 8 };

/* Parameter k's initial element i, and the gradient of sample s for element i of parameter k whose value
 * is w (it depends on w, so reading wrong parameters shows). */
float oe_init_value(int k, int64_t i);
double oe_grad_fn(int k, int64_t i, double w, int64_t s);
int64_t oe_numel_of(int k);
int64_t oe_total_numel(void);

typedef struct oe_run {
    int stage, gas, bucket, offload;
    const char *type;      /* NULL: the test's own optimizer */
    const char *zero_json; /* NULL, or members added to zero_optimization (after the offload ones) */
} oe_run;

/* What a test supplies: the value of the config's "optimizer" key for a run, and the zero_optimization
 * members added when the run offloads. */
typedef struct oe_optimizer {
    void (*json)(const oe_run *r, char *buf, size_t cap);
    const char *offload_json;
} oe_optimizer;

typedef struct oe_model {
    zinc_engine *e;
    zinc_param *p[2 * NMOD];
    int mod[NMOD];
    int rank, world, micro;
} oe_model;

extern int oe_rank, oe_world; /* of the last engine built */

zinc_status oe_model_create(const oe_optimizer *opt, const oe_run *r, oe_model *md);
/* Steps [from, to): each micro-step a forward and a backward over every module, the gradient of this
 * rank's samples added through the engine's device (fp32 compute, loss scale 1). */
zinc_status oe_train_steps(oe_model *md, const oe_run *r, int from, int to);
/* Creates, trains STEPS steps, gathers the fp32 master weights into out (oe_total_numel floats). */
zinc_status oe_train(const oe_optimizer *opt, const oe_run *r, float *out);

#endif
