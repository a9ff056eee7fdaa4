/* The stage-3 parameter shard wherever it lives: compute-device memory (e->params_shard) or the NVMe
 * parameter store (offload_param.device "nvme", offload/param_nvme.h). Every reader and writer of the
 * shard outside the step's own chunk loop comes through here, so the two places cannot disagree. */
#include <stdio.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "offload/param_nvme.h"
#include "zero/partition.h"

bool zengine_params_on_nvme(const zinc_engine *e) {
    return e->stage == 3 && e->cfg.zero.offload_param.device == ZOFFLOAD_NVME;
}

/* What zinc_create refuses of parameter NVMe offload before anything is built (every rank alike). */
zinc_status zengine_pstore_check(const zinc_engine *e) {
    if (!zengine_params_on_nvme(e)) return ZINC_OK;
    if (!e->dev->host_addressable)
        return ZERR(ZINC_ERR_CONFIG,
                    "zero_optimization.offload_param.device \"nvme\": implemented for the cpu device only (device "
                    "%s); use offload_param.device \"cpu\" or \"none\" on a GPU",
                    e->dev->ops->name);
    return ZINC_OK;
}

zinc_status zengine_pstore_create(zinc_engine *e) {
    if (!zengine_params_on_nvme(e)) return ZINC_OK;
    zstate_ctx c = e->state_ctx;
    c.offload = e->cfg.zero.offload_param;
    /* offload_param.max_in_cpu: that many of this rank's elements stay in memory, as DeepSpeed keeps them */
    return zstate_param_create(&c, e->part.shard, e->compute_dtype, zengine_pstore_chunk(e),
                               e->cfg.zero.offload_param.max_in_cpu, &e->pstore);
}

int64_t zengine_pstore_chunk(const zinc_engine *e) {
    return zplan_param_scratch_elems(e->state->chunk, e->cfg.zero.offload_param.buffer_size);
}

zinc_status zengine_params_read(zinc_engine *e, int64_t lo, int64_t n, void *dst) {
    if (n <= 0) return ZINC_OK;
    if (e->pstore) return zstate_param_read(e->pstore, lo, n, dst);
    size_t csz = zinc_dtype_size(e->compute_dtype);
    return e->dev->ops->copy(e->dev, dst, (const char *)e->params_shard + (size_t)lo * csz, (size_t)n * csz, ZDEV_D2D);
}

zinc_status zengine_params_write(zinc_engine *e, int64_t lo, int64_t n, const void *src) {
    if (n <= 0) return ZINC_OK;
    if (e->pstore) return zstate_param_write(e->pstore, lo, n, src);
    size_t csz = zinc_dtype_size(e->compute_dtype);
    return e->dev->ops->copy(e->dev, (char *)e->params_shard + (size_t)lo * csz, src, (size_t)n * csz, ZDEV_D2D);
}

zinc_status zengine_params_gather_read(void *engine, int64_t lo, int64_t n, void *dst) {
    zinc_engine *e = engine;
    zinc_status st = zengine_params_read(e, lo, n, dst);
    if (st == ZINC_OK || !e->pstore) return st;
    if (e->pstore_st == ZINC_OK) { /* the first one is the one reported */
        e->pstore_st = st;
        snprintf(e->pstore_err, sizeof e->pstore_err, "%s", zinc_last_error());
    }
    memset(dst, 0, (size_t)n * zinc_dtype_size(e->compute_dtype));
    return ZINC_OK;
}

bool zengine_params_can_prefetch(void *engine, int64_t lo, int64_t n) {
    const zinc_engine *e = engine;
    return e->pstore && e->pstore_st == ZINC_OK && zstate_param_can_prefetch(e->pstore, lo, n);
}

zinc_status zengine_params_prefetch(void *engine, int64_t lo, int64_t n) {
    zinc_engine *e = engine;
    if (!e->pstore || e->pstore_st != ZINC_OK) return ZINC_OK;
    zinc_status st = zstate_param_prefetch(e->pstore, lo, n);
    if (st != ZINC_OK) { /* kept like a failed swap-in: agreed at the step */
        e->pstore_st = st;
        snprintf(e->pstore_err, sizeof e->pstore_err, "%s", zinc_last_error());
    }
    return ZINC_OK;
}

/* While the stage-3 prefetch has no trace to follow (the step that records it, or one after the model
 * left it), the swap-ins of the modules next in registration order (forward) or before it (backward) are
 * issued ahead as the trace would issue them: up to stage3_prefetch_bucket_size elements, while the
 * store has free buffers, skipping modules held gathered. Only the store's reads: each module's
 * all-gather is still issued at its use, whose read takes a prefetch of exactly its range. A guess the
 * model does not follow costs its reads and buffers until the optimizer pass's writes drop them. */
void zengine_params_guess_ahead(zinc_engine *e, int module, int phase) {
    const zgather *g = &e->gather;
    if (!e->pstore || e->pstore_st != ZINC_OK || g->trace_valid || !g->mods) return;
    int dir = phase == ZINC_FORWARD ? 1 : -1;
    int64_t ahead = 0;
    for (int i = module + dir; i >= 0 && i < e->nmodules; i += dir) {
        const zmodule *m = &e->modules[i];
        if (m->nparams == 0 || g->mods[i].gathered || g->mods[i].persistent) continue;
        if (g->secondary && g->sec_valid[i]) continue; /* hpZ: gathered from the secondary shards, no read */
        int64_t n = zmodule_numel(m), lo, hi;
        if (ahead + n > e->cfg.zero.prefetch_bucket_size) break;
        zpart_intersect(g->c.part, g->c.rank, m->flat_begin, m->flat_end, &lo, &hi);
        ahead += n;
        if (hi <= lo || zstate_param_prefetching(e->pstore, lo - g->c.own_lo, hi - lo)) continue;
        if (!zstate_param_can_prefetch(e->pstore, lo - g->c.own_lo, hi - lo)) break;
        (void)zengine_params_prefetch(e, lo - g->c.own_lo, hi - lo); /* keeps a failure for the step */
    }
}

zinc_status zengine_params_agree(zinc_engine *e) {
    if (!e->pstore) return ZINC_OK;
    zinc_status mine = e->pstore_st;
    if (mine != ZINC_OK) mine = ZERR(mine, "%s", e->pstore_err);
    return zcomm_agree_status(e->comm, mine);
}

zinc_status zengine_params_upload_f32(zinc_engine *e, int64_t lo, const float *vals, int64_t n) {
    zinc_status st = ZINC_OK;
    size_t csz = zinc_dtype_size(e->compute_dtype);
    if (!e->pstore)
        return zdev_upload_f32(e->dev, (char *)e->params_shard + (size_t)lo * csz, e->compute_dtype, vals, (size_t)n);
    e->pcheck_valid = false; /* the last pass's parameter check no longer describes the file */
    int64_t cap = zengine_pstore_chunk(e);
    char *s = zstate_param_scratch(e->pstore);
    for (int64_t a = 0; a < n; a += cap) {
        int64_t k = n - a < cap ? n - a : cap;
        TRY(zdev_upload_f32(e->dev, s, e->compute_dtype, vals + a, (size_t)k));
        TRY(zstate_param_write(e->pstore, lo + a, k, s));
    }
    TRY(zstate_param_flush(e->pstore));
fail:
    return st;
}
