/* The plan's buffers the engine itself holds (runtime/mem/plan.h), allocated at zinc_build and freed at
 * zinc_destroy by one loop over the plan: a row says where a buffer's pointer lives in the engine and
 * how it is allocated; its size, category, kind and name are the plan's. The plan's other buffers belong
 * to their owners, which size themselves from the same plan: the device's scratch and collective staging
 * (base/device), the state store and its NVMe swap buffers (offload/), gradients, buckets and stage-3
 * gathers (zero/), Muon's update (engine_muon.c), the parameter store (engine_pstore.c), checkpoints'. */
#include <stddef.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

typedef enum {
    ON_DEVICE = 1, /* compute-device memory (zengine_alloc) */
    ON_HOST,       /* host memory of the plan's kind (zmem_host_alloc) */
    PINNED,        /* pinned host memory the device copies from (the device's alloc_host) */
} how;

typedef struct row {
    how how;
    void **(*slot)(zinc_engine *e, int i); /* where buffer i of the entry lives */
} row;

static void **params(zinc_engine *e, int i) {
    (void)i;
    return e->stage <= 2 ? &e->params_full : &e->params_shard;
}
static void **decay_mask(zinc_engine *e, int i) {
    (void)i;
    return (void **)&e->decay_mask;
}
static void **decay_mask_dev(zinc_engine *e, int i) {
    (void)i;
    return (void **)&e->decay_mask_dev;
}
static void **grad_staging(zinc_engine *e, int i) { return (void **)&e->stage_g[i]; }
static void **param_staging(zinc_engine *e, int i) { return (void **)&e->stage_p[i]; }
static void **tensor_sums(zinc_engine *e, int i) {
    (void)i;
    return &e->tensor_sums;
}

static const row rows[ZPLAN_BUF_COUNT] = {
    [ZPLAN_PARAMS] = {ON_DEVICE, params}, /* on NVMe: the parameter store's file (engine_pstore.c) */
    [ZPLAN_DECAY_MASK] = {ON_HOST, decay_mask},
    [ZPLAN_DECAY_MASK_DEVICE] = {ON_DEVICE, decay_mask_dev},
    [ZPLAN_OFFLOAD_GRAD_STAGING] = {PINNED, grad_staging},
    [ZPLAN_OFFLOAD_PARAM_STAGING] = {PINNED, param_staging},
    [ZPLAN_TENSOR_SUMS] = {ON_DEVICE, tensor_sums},
};

/* The row of plan entry b that this engine allocates, or NULL. */
static const row *row_of(const zinc_engine *e, int b) {
    const zplan_entry *pe = &e->plan.buf[b];
    if (!rows[b].how || pe->count <= 0 || pe->kind == ZINC_MEMKIND_NVME) return NULL;
    if (pe->count > 2) return NULL; /* no row holds more than two (zengine_buffers_alloc refuses it) */
    return &rows[b];
}

zinc_status zengine_buffers_alloc(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    for (int b = 0; b < ZPLAN_BUF_COUNT; b++) {
        const zplan_entry *pe = &e->plan.buf[b];
        if (rows[b].how && pe->count > 2)
            FAIL(ZINC_ERR_INTERNAL,
                 "zinc_build: the sizing plan asks for %d of %s, the engine holds 2; please "
                 "report this",
                 pe->count, pe->what);
        const row *r = row_of(e, b);
        for (int i = 0; r && i < pe->count; i++) {
            void **slot = r->slot(e, i);
            if (r->how == ON_DEVICE)
                TRY(zengine_alloc(e, pe->cat, pe->each, pe->what, slot));
            else if (r->how == ON_HOST)
                TRY(zmem_host_alloc(&e->mem, pe->kind, pe->cat, pe->each, pe->what, slot));
            else
                TRY(e->dev->ops->alloc_host(e->dev, pe->cat, pe->each, pe->what, slot));
        }
    }
fail:
    return st;
}

void zengine_buffers_free(zinc_engine *e) {
    for (int b = 0; b < ZPLAN_BUF_COUNT; b++) {
        const zplan_entry *pe = &e->plan.buf[b];
        const row *r = row_of(e, b);
        for (int i = 0; r && i < pe->count; i++) {
            void **slot = r->slot(e, i);
            if (!*slot) continue;
            if (r->how == ON_DEVICE)
                zengine_free(e, pe->cat, *slot, pe->each);
            else if (r->how == ON_HOST)
                zmem_host_free(&e->mem, pe->kind, pe->cat, *slot, pe->each);
            else
                e->dev->ops->free_host(e->dev, pe->cat, *slot, pe->each);
            *slot = NULL;
        }
    }
}
