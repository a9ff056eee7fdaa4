/* SGD (optionally with momentum) as torch.optim.SGD computes it (kernels/cpu_kernels.h states the formula):
 * its element function; the reference and the fast step around it are kernels/one_moment_step.inc's (separate
 * multiplies and adds, no fused multiply-add, so every path rounds identically). */
#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master, updates *buf. */
static inline __attribute__((always_inline)) float sgd_elem(const zsgd_hparams *h, float p, float *buf, float graw,
                                                            int decayed) {
    float g = graw * h->grad_factor;
    if (h->maximize) g = -g;
    if (decayed && h->weight_decay != 0.0f) g = g + h->weight_decay * p; /* grad.add(param, alpha=wd) */
    if (h->momentum != 0.0f) {
        float b = h->first ? g : *buf * h->momentum + h->one_minus_dampening * g; /* first: buf = g */
        *buf = b;
        g = h->nesterov ? g + h->momentum * b : b;
    }
    return p - h->lr * g; /* param.add_(grad, alpha=-lr) */
}

#define OM_HPARAMS zsgd_hparams
#define OM_ELEM sgd_elem
#define OM_REF zsgd_step_ref
#define OM_STEP zsgd_step
#include "kernels/one_moment_step.inc"
