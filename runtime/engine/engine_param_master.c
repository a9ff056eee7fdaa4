/* One parameter's fp32 master weights in and out (zinc_param_get_master, zinc_param_set_master), for models
 * whose layers own their arrays: the part of the tensor inside this rank's own range goes through one pass
 * over the state store; the ranks' parts are all-gathered in place (get), or every rank writes its own part
 * from the same full tensor (set), which is also every rank's compute copy at stages 0-2 (no gather). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

/* The tensor's flat range [fo, fo + numel) inside this rank's own range: [*a, *b) (empty when *a >= *b). */
static void own_part(const zinc_engine *e, const zinc_param *p, int64_t *a, int64_t *b) {
    *a = p->flat_offset > e->own_lo ? p->flat_offset : e->own_lo;
    *b = p->flat_offset + p->numel < e->own_hi ? p->flat_offset + p->numel : e->own_hi;
}

static zinc_status check_param(zinc_engine *e, const zinc_param *p, const void *buf, const char *fn) {
    if (!e || !p || !buf) return ZERR(ZINC_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (!e->built) return ZERR(ZINC_ERR_STATE, "%s: call zinc_build first", fn);
    if (p->e != e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: parameter \"%s\" belongs to another engine", fn, p->name);
    return zengine_check_usable(e, fn);
}

/* Copies between the store's master weights and buf (the tensor, numel floats) over [a, b): a READ pass
 * (to_buf) or a READ_WRITE pass that writes only the chunks' elements in [a, b). */
static zinc_status state_part(zinc_engine *e, const zinc_param *p, int64_t a, int64_t b, float *out, const float *in) {
    zinc_status st = ZINC_OK;
    TRY(zstate_pass_begin(e->state, (out ? ZSTATE_READ : ZSTATE_READ_WRITE) | ZSTATE_HOST_VIEW));
    for (int64_t i = 0; i < e->state->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, i, &v));
        int64_t lo = e->own_lo + v.lo, hi = lo + v.n; /* the chunk's flat range */
        int64_t x = a > lo ? a : lo, y = b < hi ? b : hi;
        if (y > x) {
            if (out)
                memcpy(out + (x - p->flat_offset), v.master + (x - lo), (size_t)(y - x) * sizeof *out);
            else
                memcpy(v.master + (x - lo), in + (x - p->flat_offset), (size_t)(y - x) * sizeof *in);
        }
        TRY(zstate_release(e->state, i));
    }
    TRY(zstate_pass_end(e->state));
fail:
    zstate_pass_abort(e->state);
    return st;
}

zinc_status zinc_param_get_master(zinc_engine *e, const zinc_param *p, float *out) {
    zinc_status st = ZINC_OK;
    size_t *counts = NULL, *displs = NULL;
    TRY(check_param(e, p, out, "zinc_param_get_master"));
    int64_t a, b;
    own_part(e, p, &a, &b);
    TRY(state_part(e, p, a, b, out, NULL));
    if (e->stage > 0 && e->world > 1) {
        TRY_ALLOC(counts, e->world, "gather counts");
        TRY_ALLOC(displs, e->world, "gather displacements");
        for (int r = 0; r < e->world; r++) {
            int64_t lo = (int64_t)r * e->part.shard, hi = lo + e->part.shard;
            int64_t x = lo > p->flat_offset ? lo : p->flat_offset;
            int64_t y = hi < p->flat_offset + p->numel ? hi : p->flat_offset + p->numel;
            counts[r] = y > x ? (size_t)(y - x) : 0;
            displs[r] = y > x ? (size_t)(x - p->flat_offset) : 0;
        }
        TRY(zcomm_allgatherv_inplace(e->comm, out, counts, displs, ZINC_FP32, NULL));
    }
fail:
    free(counts);
    free(displs);
    return st;
}

/* The checks before anything changes; every rank reaches the same verdict (agreed by the caller). */
static zinc_status set_check(zinc_engine *e, const zinc_param *p, const float *in) {
    zinc_status st = ZINC_OK;
    uint64_t *all = NULL;
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[0] || e->modules[m].in_phase[1])
            return ZERR(ZINC_ERR_STATE,
                        "zinc_param_set_master: module \"%s\" is still entered; set weights between steps",
                        e->modules[m].name);
    if (e->micro_steps > 0)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_param_set_master: gradients of %lld micro-step%s are accumulated; set weights before "
                    "training or right after zinc_step",
                    (long long)e->micro_steps, e->micro_steps == 1 ? "" : "s");
    for (int64_t i = 0; i < p->numel; i++)
        if (!isfinite(in[i]))
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "zinc_param_set_master: element %lld of \"%s\" is %g; master weights must be finite",
                        (long long)i, p->name, (double)in[i]);
    if (e->world > 1) {
        uint64_t h = zengine_fnv1a(in, (size_t)p->numel * sizeof *in);
        TRY_ALLOC(all, e->world, "weight checksums");
        TRY(zcomm_allgather_bytes(e->comm, &h, all, sizeof h));
        for (int r = 1; r < e->world; r++)
            if (all[r] != all[0])
                FAIL(ZINC_ERR_INVALID_ARG,
                     "zinc_param_set_master: rank %d passed other values for \"%s\" than rank 0 (checksums %016llx "
                     "and %016llx); every rank must pass the same %lld floats",
                     r, p->name, (unsigned long long)all[r], (unsigned long long)all[0], (long long)p->numel);
    }
fail:
    free(all);
    return st;
}

zinc_status zinc_param_set_master(zinc_engine *e, zinc_param *p, const float *in) {
    zinc_status st = ZINC_OK;
    TRY(check_param(e, p, in, "zinc_param_set_master"));
    TRY(zcomm_agree_status(e->comm, set_check(e, p, in)));
    int64_t a, b;
    own_part(e, p, &a, &b);
    size_t csz = zinc_dtype_size(e->compute_dtype);
    /* From here a failure leaves the tensor partly set: the engine is marked broken. */
    zinc_status local = state_part(e, p, a, b, NULL, in);
    if (local == ZINC_OK && e->stage <= 2) /* every rank's full copy, from the full tensor each holds */
        local = zdev_upload_f32(e->dev, (char *)e->params_full + (size_t)p->flat_offset * csz, e->compute_dtype, in,
                                (size_t)p->numel);
    if (local == ZINC_OK && e->stage == 3 && b > a)
        local = zengine_params_upload_f32(e, a - e->own_lo, in + (a - p->flat_offset), b - a);
    st = zcomm_agree_status(e->comm, local);
    if (st == ZINC_OK && e->stage == 3) {
        zgather_forget_empty_trace(&e->gather);
        st = zgather_after_step(&e->gather); /* the persistent modules, gathered again */
    }
    if (st != ZINC_OK) zengine_mark_broken(e, "setting a parameter's master weights");
fail:
    return st;
}
