/* Collective helpers: metric sums, the full fp32 master weights, and the parameters rebuilt from the
 * optimizer state. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"

zinc_status zinc_allreduce_sum(zinc_engine *e, double *values, int n) {
    zinc_status st = ZINC_OK;
    double *all = NULL;
    if (!e || (!values && n > 0) || n < 0) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_allreduce_sum: bad arguments");
    if (n == 0 || e->world == 1) return ZINC_OK;
    TRY_ALLOC(all, (size_t)n * (size_t)e->world, "metric reduction");
    TRY(zcomm_allgather_bytes(e->comm, values, all, (size_t)n * sizeof *values));
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < e->world; r++) s += all[(size_t)r * (size_t)n + (size_t)i];
        values[i] = s;
    }
fail:
    free(all);
    return st;
}

int64_t zinc_numel_total(const zinc_engine *e) {
    int64_t n = 0;
    if (!e) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_numel_total: NULL engine");
        return -1;
    }
    for (int i = 0; i < e->nparams; i++) n += e->params[i]->numel;
    return n;
}

zinc_status zinc_gather_master(zinc_engine *e, float *out, size_t n) {
    zinc_status st = ZINC_OK;
    float *flat = NULL;
    size_t *counts = NULL, *displs = NULL;
    if (!e || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_gather_master: NULL argument");
    if (!e->built) return ZERR(ZINC_ERR_STATE, "zinc_gather_master: call zinc_build first");
    if ((st = zengine_check_usable(e, "zinc_gather_master")) != ZINC_OK) return st;
    if ((int64_t)n != zinc_numel_total(e))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_gather_master: n is %zu but the model has %lld elements", n,
                    (long long)zinc_numel_total(e));
    /* Every rank's master slice into a full flat buffer (in place), read chunk by chunk from the store. */
    TRY_ALLOC(flat, (size_t)e->part.padded, "the gathered master weights");
    TRY(zstate_pass_begin(e->state, ZSTATE_READ | ZSTATE_HOST_VIEW));
    for (int64_t i = 0; i < e->state->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, i, &v));
        memcpy(flat + e->own_lo + v.lo, v.master, (size_t)v.n * sizeof *flat);
        TRY(zstate_release(e->state, i));
    }
    TRY(zstate_pass_end(e->state));
    if (e->stage > 0 && e->world > 1) {
        TRY_ALLOC(counts, e->world, "gather counts");
        TRY_ALLOC(displs, e->world, "gather displacements");
        for (int r = 0; r < e->world; r++) {
            counts[r] = (size_t)e->part.shard;
            displs[r] = (size_t)r * (size_t)e->part.shard;
        }
        TRY(zcomm_allgatherv_inplace(e->comm, flat, counts, displs, ZINC_FP32, NULL));
    }
    const float *src = flat;
    size_t k = 0;
    for (int i = 0; i < e->nparams; i++) {
        const zinc_param *p = e->params[i];
        memcpy(out + k, src + p->flat_offset, (size_t)p->numel * sizeof *out);
        k += (size_t)p->numel;
    }
fail:
    zstate_pass_abort(e->state);
    free(flat);
    free(counts);
    free(displs);
    return st;
}

/* Stages 1-2: every rank's slice of the compute-dtype parameters to every rank (in place). */
zinc_status zengine_allgather_params(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    size_t *counts = NULL, *displs = NULL;
    zcomm_req *req = NULL;
    if (e->world == 1 || e->stage == 0 || e->stage == 3) return ZINC_OK;
    TRY_ALLOC(counts, e->world, "all-gather counts");
    TRY_ALLOC(displs, e->world, "all-gather displacements");
    for (int r = 0; r < e->world; r++) {
        counts[r] = (size_t)e->part.shard;
        displs[r] = (size_t)r * (size_t)e->part.shard;
    }
    TRY(zdev_comm_begin(e->dev));
    TRY(zcomm_allgatherv_inplace(e->dcomm, e->params_full, counts, displs, e->compute_dtype, zdev_req(e->dev, &req)));
    TRY(zdev_comm_wait(e->dev, e->dcomm, req));
fail:
    free(counts);
    free(displs);
    return st;
}

/* The compute-dtype copy of the own range from the master weights (after a checkpoint load). */
zinc_status zengine_params_from_master(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    size_t csz = zinc_dtype_size(e->compute_dtype);
    char *out = e->stage <= 2 ? (char *)e->params_full + (size_t)e->own_lo * csz : (char *)e->params_shard;
    zdevice *d = e->dev;
    bool on_dev = zengine_state_on_device(e);
    TRY(zstate_pass_begin(e->state, ZSTATE_READ));
    for (int64_t i = 0; i < e->state->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, i, &v));
        if (on_dev)
            TRY(d->ops->cast_from_f32(d, out + (size_t)v.lo * csz, e->compute_dtype, v.master, (size_t)v.n));
        else
            TRY(zdev_upload_f32(d, out + (size_t)v.lo * csz, e->compute_dtype, v.master, (size_t)v.n));
        TRY(zstate_release(e->state, i));
    }
    TRY(zstate_pass_end(e->state));
    return ZINC_OK;
fail:
    zstate_pass_abort(e->state);
    return st;
}
