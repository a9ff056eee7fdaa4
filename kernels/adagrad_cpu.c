/* Adagrad as DeepSpeed's DeepSpeedCPUAdagrad computes it (kernels/cpu_kernels.h states the formula): the
 * element function; the reference and the fast step around it are kernels/one_moment_step.inc's (separate
 * multiplies and adds, IEEE sqrt and division, so every path rounds identically). */
#include <math.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master, updates *sum. */
static inline __attribute__((always_inline)) float adagrad_elem(const zadagrad_hparams *h, float p, float *sum,
                                                                float graw, int decayed) {
    float g = graw * h->grad_factor; /* DeepSpeed's "momentum": the gradient before weight decay */
    float gw = (decayed && h->weight_decay != 0.0f) ? p * h->weight_decay + g : g;
    float s = *sum + gw * gw;
    float upd = g / (sqrtf(s) + h->eps);
    *sum = s;
    return upd * -h->lr + p;
}

#define OM_HPARAMS zadagrad_hparams
#define OM_ELEM adagrad_elem
#define OM_REF zadagrad_step_ref
#define OM_STEP zadagrad_step
#include "kernels/one_moment_step.inc"
