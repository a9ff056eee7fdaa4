/* A module as ZeRO sees it: its flat range, and the per-module state of gathering (zero/gather.c) and of
 * gradient placement (zero/grads.c). The engine keeps the array (registration order) and hands it to
 * zero/ through the contexts of zero/grads.h and zero/gather.h.
 *
 * zero/ may include runtime/core, runtime/comm, runtime/device, runtime/config and kernels; never
 * runtime/engine, runtime/checkpoint, runtime/mem or cli. */
#ifndef ZINC_ZERO_MODULE_H
#define ZINC_ZERO_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

typedef struct zmodule {
    char *name;
    int first_param, nparams;
    int64_t flat_begin, flat_end; /* [begin, end) in the flat buffer, ZPART_PARAM_ALIGN-aligned */
    bool in_phase[2];             /* entered and not yet exited, per phase */
    /* stage 3 */
    bool persistent;             /* small enough to stay gathered (stage3_param_persistence_threshold) */
    void *gathered;              /* compute-dtype copy of [flat_begin, flat_end) while live */
    zcomm_req *gather_req;       /* pending (prefetch) all-gather into `gathered` */
    size_t *g_counts, *g_displs; /* per-rank pieces of the gather; live as long as the request */
    /* backward, stages 2-3: where the open entry's gradients are written (zero/grads.c) */
    int slot;        /* zgrad_slot */
    int scratch;     /* index into zgrads.scratch for ZSLOT_SCRATCH */
    int bwd_entries; /* backward entries in the current micro-step (every stage) */
    bool hold;       /* learned: gradients collect in `held` until the micro-step ends */
    bool held_dirty; /* `held` has gradients of this micro-step not yet reduced */
    void *held;      /* grad dtype, the module's elements; allocated when hold is set */
} zmodule;

static inline int64_t zmodule_numel(const zmodule *m) { return m->flat_end - m->flat_begin; }

#endif
