/* Collective helpers: metric sums, the full fp32 master weights, and the parameters rebuilt from the
 * optimizer state. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "base/core/trace.h"

zinc_status zinc_allreduce_sum(zinc_engine *e, double *values, int n) {
    zinc_status st = ZINC_OK;
    double *all = NULL;
    if (!e || (!values && n > 0) || n < 0) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_allreduce_sum: bad arguments");
    if (n == 0 || e->world == 1) return ZINC_OK;
    TRY_ALLOC(all, (size_t)n * (size_t)e->world, "metric reduction");
    int64_t t0 = ztrace_begin();
    TRY(zcomm_allgather_bytes(e->comm, values, all, (size_t)n * sizeof *values));
    if (t0) ztrace_span(t0, ZTRACE_WAIT, "metrics all-reduce", 0, "bytes", (int64_t)n * 8 * e->world, NULL, 0);
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
    if ((st = zengine_require_built(e, "zinc_gather_master")) != ZINC_OK) return st;
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

/* FNV-1a over the bytes: every rank must pass the same weights to zinc_set_master. */
static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t zengine_fnv1a(const void *p, size_t n) { return fnv1a(p, n); }

/* Copies the part of the unpadded model `in` that falls into flat [lo, hi) to dst (hi - lo floats; the
 * alignment padding between parameters and after the last one is zero). */
static void unpadded_to_flat(const zinc_engine *e, const float *in, int64_t lo, int64_t hi, float *dst) {
    memset(dst, 0, (size_t)(hi - lo) * sizeof *dst);
    int64_t k = 0; /* where parameter i starts in `in` */
    for (int i = 0; i < e->nparams; i++) {
        const zinc_param *p = e->params[i];
        int64_t a = p->flat_offset > lo ? p->flat_offset : lo, b = p->flat_offset + p->numel;
        if (b > hi) b = hi;
        if (b > a) memcpy(dst + (a - lo), in + k + (a - p->flat_offset), (size_t)(b - a) * sizeof *dst);
        k += p->numel;
    }
}

/* The checks before any state changes; every rank reaches the same verdict. */
static zinc_status set_master_check(zinc_engine *e, const float *in, size_t n) {
    zinc_status st = ZINC_OK;
    uint64_t *all = NULL;
    TRY(zengine_check_usable(e, "zinc_set_master"));
    if ((int64_t)n != zinc_numel_total(e))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_set_master: n is %zu but the model has %lld elements", n,
                    (long long)zinc_numel_total(e));
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[0] || e->modules[m].in_phase[1])
            return ZERR(ZINC_ERR_STATE, "zinc_set_master: module \"%s\" is still entered; set weights between steps",
                        e->modules[m].name);
    for (size_t i = 0; i < n; i++) /* a NaN or infinity would train nothing but NaN */
        if (!isfinite(in[i]))
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "zinc_set_master: weight %zu of %zu is %g; every weight must be finite (check the model "
                        "file it came from)",
                        i, n, (double)in[i]);
    if (e->micro_steps > 0)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_set_master: gradients of %lld micro-step%s are accumulated; set weights before training "
                    "or right after zinc_step",
                    (long long)e->micro_steps, e->micro_steps == 1 ? "" : "s");
    if (e->world > 1) {
        uint64_t h = fnv1a(in, n * sizeof *in);
        TRY_ALLOC(all, e->world, "weight checksums");
        TRY(zcomm_allgather_bytes(e->comm, &h, all, sizeof h));
        for (int r = 1; r < e->world; r++)
            if (all[r] != all[0])
                FAIL(ZINC_ERR_INVALID_ARG,
                     "zinc_set_master: rank %d passed other weights than rank 0 (checksums %016llx and %016llx); "
                     "every rank must pass the same %zu floats",
                     r, (unsigned long long)all[r], (unsigned long long)all[0], n);
    }
fail:
    free(all);
    return st;
}

zinc_status zinc_set_master(zinc_engine *e, const float *in, size_t n) {
    zinc_status st = ZINC_OK;
    bool touched = false;
    if (!e || !in) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_set_master: NULL argument");
    zinc_status built = zengine_require_built(e, "zinc_set_master");
    if (built != ZINC_OK) return built;
    TRY(zcomm_agree_status(e->comm, set_master_check(e, in, n)));
    /* This rank's own range of the master weights, through one read-write pass over the store (the
     * optimizer's moments stay as they are), then the compute-dtype copies as zinc_build makes them. */
    zinc_status local = ZINC_OK;
    if (local == ZINC_OK) {
        touched = true; /* from here a failure leaves the weights partly set */
        local = zstate_pass_begin(e->state, ZSTATE_READ_WRITE | ZSTATE_HOST_VIEW);
        for (int64_t i = 0; local == ZINC_OK && i < e->state->nchunks; i++) {
            zstate_view v;
            local = zstate_acquire(e->state, i, &v);
            if (local != ZINC_OK) break;
            /* each chunk straight from `in`: no copy of the own range (issue 41: it was a transient) */
            unpadded_to_flat(e, in, e->own_lo + v.lo, e->own_lo + v.lo + v.n, v.master);
            local = zstate_release(e->state, i);
        }
        if (local == ZINC_OK) local = zstate_pass_end(e->state);
        if (local == ZINC_OK) local = zengine_params_from_master(e);
    }
    st = zcomm_agree_status(e->comm, local);
    if (st != ZINC_OK) goto fail;
    if ((e->stage == 1 || e->stage == 2) && e->world > 1) TRY(zengine_allgather_params(e));
    if (e->stage == 3) {
        zgather_forget_empty_trace(&e->gather);
        TRY(zgather_after_step(&e->gather)); /* the persistent modules, gathered again */
    }
fail:
    zstate_pass_abort(e->state);
    if (st != ZINC_OK && touched) zengine_mark_broken(e, "setting the master weights");
    return st;
}

/* zinc_master_foreach: the flat buffer in windows of ZINC_INIT_PIECE elements. Each rank copies its own
 * range's part of a window from the state store (one pass over its chunks, in order, across all windows),
 * the ranks all-gather the window in place, and every parameter piece in it goes to fn. */
static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
    int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

zinc_status zinc_master_foreach(zinc_engine *e, zinc_master_fn fn, void *userdata) {
    zinc_status st = ZINC_OK;
    float *win = NULL;
    size_t *counts = NULL, *displs = NULL;
    int64_t chunk = -1, next_param = 0;
    zstate_view v = {0};
    if (!e || !fn) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_master_foreach: NULL argument");
    zinc_status built = zengine_require_built(e, "zinc_master_foreach");
    if (built != ZINC_OK) return built;
    TRY(zengine_check_usable(e, "zinc_master_foreach")); /* a broken engine's weights may be half-updated */
    const int64_t W = ZINC_INIT_PIECE, padded = e->part.padded;
    bool gather = e->stage > 0 && e->world > 1;
    TRY_ALLOC(win, (size_t)(W < padded ? W : padded), "a window of the master weights");
    TRY_ALLOC(counts, e->world, "gather counts");
    TRY_ALLOC(displs, e->world, "gather displacements");
    TRY(zstate_pass_begin(e->state, ZSTATE_READ | ZSTATE_HOST_VIEW));
    for (int64_t w0 = 0; w0 < padded; w0 += W) {
        int64_t w1 = w0 + W < padded ? w0 + W : padded;
        /* this rank's part: [own_lo, own_hi) within the window, chunk by chunk */
        for (int64_t at = w0 > e->own_lo ? w0 : e->own_lo; at < w1 && at < e->own_hi;) {
            int64_t rel = at - e->own_lo;
            while (chunk < 0 || rel >= v.lo + v.n) {
                if (chunk >= 0) TRY(zstate_release(e->state, chunk));
                TRY(zstate_acquire(e->state, ++chunk, &v));
            }
            int64_t n = v.lo + v.n - rel, room = w1 - at;
            n = n < room ? n : room;
            memcpy(win + (at - w0), v.master + (rel - v.lo), (size_t)n * sizeof *win);
            at += n;
        }
        if (gather) {
            for (int r = 0; r < e->world; r++) {
                int64_t lo = (int64_t)r * e->part.shard;
                counts[r] = (size_t)overlap(lo, lo + e->part.shard, w0, w1);
                displs[r] = (size_t)(lo > w0 ? lo - w0 : 0);
            }
            TRY(zcomm_allgatherv_inplace(e->comm, win, counts, displs, ZINC_FP32, NULL));
        }
        /* the parameters' pieces in this window, in registration (= flat) order */
        for (int i = (int)next_param; i < e->nparams; i++) {
            const zinc_param *p = e->params[i];
            int64_t lo = p->flat_offset > w0 ? p->flat_offset : w0, hi = p->flat_offset + p->numel;
            hi = hi < w1 ? hi : w1;
            if (p->flat_offset >= w1) break;
            if (hi > lo) {
                st = fn(userdata, i, lo - p->flat_offset, win + (lo - w0), hi - lo);
                if (st != ZINC_OK) {
                    zinc__error_trace(__FILE__, __LINE__);
                    goto fail;
                }
            }
            if (p->flat_offset + p->numel <= w1) next_param = i + 1;
        }
    }
    if (chunk >= 0) TRY(zstate_release(e->state, chunk));
    chunk = -1;
    /* the chunks after the last window this rank read from (stage 0 reads all) */
    for (int64_t c = 0; c < e->state->nchunks && e->state->next < e->state->nchunks; c++) {
        int64_t k = e->state->next;
        TRY(zstate_acquire(e->state, k, &v));
        TRY(zstate_release(e->state, k));
    }
    TRY(zstate_pass_end(e->state));
fail:
    zstate_pass_abort(e->state);
    free(win);
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
    int64_t t0 = ztrace_begin();
    TRY(zdev_comm_begin(e->dev));
    int dev_span = zdev_trace_begin(e->dev, ZDEV_STREAM_COMM);
    TRY(zcomm_allgatherv_inplace(e->dcomm, e->params_full, counts, displs, e->compute_dtype, zdev_req(e->dev, &req)));
    zdev_trace_end(e->dev, dev_span, ZTRACE_COMM, "all_gather", "bytes",
                   e->part.shard * e->world * (int64_t)zinc_dtype_size(e->compute_dtype));
    TRY(zdev_comm_wait(e->dev, e->dcomm, req));
    if (t0) {
        int64_t bytes = e->part.shard * e->world * (int64_t)zinc_dtype_size(e->compute_dtype);
        ztrace_span(t0, ZTRACE_WAIT, "all_gather", 0, "bytes", bytes, NULL, 0);
        ztrace_span(t0, ZTRACE_COMM, "all_gather", ztrace_track("comm all-gather params"), "bytes", bytes, NULL, 0);
    }
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
        if (!out) /* offload_param nvme: the chunk narrowed in the store's scratch, then written */
            TRY(zengine_params_upload_f32(e, v.lo, v.master, v.n));
        else if (on_dev)
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
