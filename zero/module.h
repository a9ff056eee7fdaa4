/* A module as ZeRO sees it: its name, parameters, flat range and which phases it is open in. The engine
 * owns the array (registration order) and every field: it registers modules and records their entries and
 * exits; zero/ reads them through the contexts of zero/grads.h and zero/gather.h and keeps its own
 * per-module state in records of its own (zgrads_module in grads.h, zgather_module in gather.h).
 *
 * zero/ never sees the engine: what it may include is in scripts/check_layers.py (LAYERS). */
#ifndef ZINC_ZERO_MODULE_H
#define ZINC_ZERO_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zmodule {
    char *name;
    int first_param, nparams;
    int64_t flat_begin, flat_end; /* [begin, end) in the flat buffer, ZPART_PARAM_ALIGN-aligned */
    bool in_phase[2];             /* entered and not yet exited, per phase */
    bool reentered;               /* declared entered twice in one backward (zinc_module_reentered): grads.c holds its
                     * gradients in a buffer of their own from the first micro-step, and the plan counts it */
    double flops_fwd, flops_bwd;  /* per sample, as the model declared them (zinc_module_flops); only reported */
} zmodule;

static inline int64_t zmodule_numel(const zmodule *m) { return m->flat_end - m->flat_begin; }

#endif
