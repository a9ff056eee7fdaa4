/* ZeRO stage 3: parameters live only as shards; a module's full parameters are all-gathered when it is
 * entered and released when it exits.
 *
 * - Trace: the first micro-step with a backward records the order of module entries (module, phase).
 *   Later micro-steps follow it; on entry the next modules of the trace are prefetched with non-blocking
 *   all-gathers, up to stage3_prefetch_bucket_size elements in flight and stage3_max_live_parameters
 *   gathered in all. Forward-only passes (a validation loss) do not poison it: a recording without a
 *   backward is not kept, forward passes repeated before the backward are trimmed to the last one, and an
 *   entry out of order resynchronises to the next place in the trace where it occurs. An entry the trace
 *   does not have stops prefetching, and the next step records the trace again.
 * - Release: on exit a module's copy is freed unless the trace says it is needed again within
 *   stage3_max_reuse_distance elements (the last layer's forward followed by its backward, typically).
 * - Persistence: modules with at most stage3_param_persistence_threshold elements (up to
 *   stage3_model_persistence_threshold in all) stay gathered; they are refreshed after each step.
 *   DeepSpeed decides persistence per parameter; zinc decides it per module, its unit of gathering. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"
#include "zero/sizing.h"

static size_t csz(const zinc_engine *e) { return zinc_dtype_size(e->compute_dtype); }
static int64_t numel(const zmodule *m) { return m->flat_end - m->flat_begin; }

static zinc_mem_category cat_of(const zmodule *m) { return m->persistent ? ZINC_MEM_PARAMS : ZINC_MEM_GATHER; }

static void decide_persistence(zinc_engine *e) {
    int64_t total = 0;
    for (int i = 0; i < e->nmodules; i++) {
        zmodule *m = &e->modules[i];
        int64_t n = numel(m);
        m->persistent = zsize_persistent(n, &total, e->cfg.zero.param_persistence_threshold,
                                         e->cfg.zero.model_persistence_threshold);
    }
}

/* Makes the module's pending all-gather complete for the compute stream (cpu: the host waits). */
static zinc_status gather_wait(zinc_engine *e, zmodule *m) {
    if (!m->gather_req) return ZINC_OK;
    zcomm_req *r = m->gather_req;
    m->gather_req = NULL;
    return zdev_comm_wait(e->dev, e->dcomm, r);
}

/* Starts (or, when blocking, completes) the all-gather of module m into a fresh buffer. */
static zinc_status gather_start(zinc_engine *e, zmodule *m, bool blocking) {
    zinc_status st = ZINC_OK;
    if (!m->g_counts) {
        TRY_ALLOC(m->g_counts, e->world, "gather counts");
        TRY_ALLOC(m->g_displs, e->world, "gather displacements");
    }
    if (!m->gathered) {
        TRY(zengine_alloc(e, cat_of(m), (size_t)numel(m) * csz(e), "gathered parameters", &m->gathered));
        if (!m->persistent) e->live_numel += numel(m);
    }
    zpart_range_split(&e->part, m->flat_begin, m->flat_end, m->g_counts, m->g_displs);
    int64_t lo, hi;
    zpart_intersect(&e->part, e->rank, m->flat_begin, m->flat_end, &lo, &hi);
    if (hi > lo)
        TRY(e->dev->ops->copy(e->dev, (char *)m->gathered + (size_t)(lo - m->flat_begin) * csz(e),
                              (const char *)e->params_shard + (size_t)(lo - e->own_lo) * csz(e),
                              (size_t)(hi - lo) * csz(e), ZDEV_D2D));
    TRY(zdev_comm_begin(e->dev));
    /* Blocking: on cpu the call itself; on a GPU a request that the compute stream waits for at once. */
    TRY(zcomm_allgatherv_inplace(e->dcomm, m->gathered, m->g_counts, m->g_displs, e->compute_dtype,
                                 blocking ? zdev_req(e->dev, &m->gather_req) : &m->gather_req));
    if (blocking) TRY(gather_wait(e, m));
    return ZINC_OK;
fail:
    return st;
}


static zinc_status release(zinc_engine *e, zmodule *m) {
    zinc_status st = ZINC_OK;
    if (m->persistent || !m->gathered) return ZINC_OK;
    TRY(gather_wait(e, m));
    zengine_free(e, ZINC_MEM_GATHER, m->gathered, (size_t)numel(m) * csz(e));
    m->gathered = NULL;
    e->live_numel -= numel(m);
    return ZINC_OK;
fail:
    return st;
}

static zinc_status trace_push(zinc_engine *e, int module, int phase) {
    if (e->trace_len == e->trace_cap) {
        int cap = e->trace_cap ? 2 * e->trace_cap : 64;
        ztrace_entry *t = realloc(e->trace, (size_t)cap * sizeof *t);
        if (!t) return ZERR(ZINC_ERR_NOMEM, "out of memory recording the stage-3 module trace");
        e->trace = t;
        e->trace_cap = cap;
    }
    e->trace[e->trace_len].module = module;
    e->trace[e->trace_len].phase = phase;
    e->trace_len++;
    return ZINC_OK;
}

static bool same_entry(const ztrace_entry *a, const ztrace_entry *b) {
    return a->module == b->module && a->phase == b->phase;
}

/* Forward-only passes recorded before the training pass repeat its forward: when the entries before the
 * first backward one are k copies of a period p, only the last copy belongs to the micro-step. */
static void trace_trim_forward_repeats(zinc_engine *e) {
    int k = 0;
    while (k < e->trace_len && e->trace[k].phase == ZINC_FORWARD) k++;
    for (int p = 1; p <= k / 2; p++) {
        if (k % p) continue;
        bool periodic = true;
        for (int i = p; i < k && periodic; i++) periodic = same_entry(&e->trace[i], &e->trace[i - p]);
        if (!periodic) continue;
        memmove(e->trace, e->trace + (k - p), (size_t)(e->trace_len - (k - p)) * sizeof *e->trace);
        e->trace_len -= k - p;
        ZLOG_DEBUG(&e->log, "stage 3: dropped %d forward-only pass%s from the recorded trace", k / p - 1,
                   k / p - 1 == 1 ? "" : "es");
        return;
    }
}

static void trace_finish_recording(zinc_engine *e) {
    if (!e->trace_recording) return;
    bool has_backward = false;
    for (int i = 0; i < e->trace_len && !has_backward; i++) has_backward = e->trace[i].phase == ZINC_BACKWARD;
    if (!has_backward) { /* forward-only passes: not a training micro-step, keep recording */
        e->trace_len = 0;
        return;
    }
    trace_trim_forward_repeats(e);
    e->trace_recording = false;
    e->trace_valid = e->trace_len > 0;
    ZLOG_DEBUG(&e->log, "stage 3: recorded a trace of %d module entries", e->trace_len);
}

static void trace_restart(zinc_engine *e) {
    trace_finish_recording(e);
    e->trace_pos = 0;
}

/* An entry that is not the next one of the trace: continue from its next occurrence (after the current
 * position first, then from the start), or stop prefetching until the next step records a new trace. */
static void trace_resync(zinc_engine *e, const ztrace_entry *x) {
    for (int pass = 0; pass < 2; pass++) {
        int from = pass == 0 ? e->trace_pos : 0, to = pass == 0 ? e->trace_len : e->trace_pos;
        for (int j = from; j < to; j++)
            if (same_entry(&e->trace[j], x)) {
                e->trace_pos = j + 1;
                e->stat_trace_resync++;
                return;
            }
    }
    ZLOG_DEBUG(&e->log, "stage 3: module \"%s\" (%s) is not in the recorded trace; prefetching stops and the "
                        "next step records the trace again",
               e->modules[x->module].name, x->phase == ZINC_FORWARD ? "forward" : "backward");
    e->trace_valid = false;
    e->trace_lost = true;
}

/* Prefetches the modules that follow trace position `from`. */
static zinc_status prefetch(zinc_engine *e, int from) {
    zinc_status st = ZINC_OK;
    int64_t inflight = 0;
    for (int j = from; j < e->trace_len; j++) {
        zmodule *m = &e->modules[e->trace[j].module];
        if (m->persistent || m->gathered) {
            if (m->gather_req) inflight += numel(m);
            continue;
        }
        if (inflight + numel(m) > e->cfg.zero.prefetch_bucket_size) break;
        if (e->live_numel + numel(m) > e->cfg.zero.max_live_parameters) break;
        TRY(gather_start(e, m, false));
        e->stat_prefetch++;
        inflight += numel(m);
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgather_module_enter(zinc_engine *e, int module, int phase) {
    zinc_status st = ZINC_OK;
    zmodule *m = &e->modules[module];
    if (phase == ZINC_FORWARD && e->last_phase == ZINC_BACKWARD && e->open_backward == 0) trace_restart(e);
    if (e->trace_recording) {
        TRY(trace_push(e, module, phase));
    } else if (e->trace_valid) {
        ztrace_entry x = {module, phase};
        if (e->trace_pos < e->trace_len && same_entry(&e->trace[e->trace_pos], &x)) e->trace_pos++;
        else trace_resync(e, &x);
    }
    if (!m->gathered) {
        e->stat_gather_blocking++;
        TRY(gather_start(e, m, true));
    } else {
        TRY(gather_wait(e, m));
    }
    if (e->trace_valid) TRY(prefetch(e, e->trace_pos));
    return ZINC_OK;
fail:
    return st;
}

/* True when the trace says module `module` is entered again within max_reuse_distance elements. */
static bool reused_soon(const zinc_engine *e, int module) {
    if (!e->trace_valid) return false;
    int64_t dist = 0;
    for (int j = e->trace_pos; j < e->trace_len; j++) {
        int mj = e->trace[j].module;
        if (mj == module) return dist <= e->cfg.zero.max_reuse_distance;
        dist += numel(&e->modules[mj]);
        if (dist > e->cfg.zero.max_reuse_distance) return false;
    }
    return false;
}

zinc_status zgather_module_exit(zinc_engine *e, int module, int phase) {
    zmodule *m = &e->modules[module];
    (void)phase;
    if (m->in_phase[0] || m->in_phase[1]) return ZINC_OK; /* still in use by the other phase */
    if (reused_soon(e, module)) return ZINC_OK;
    return release(e, m);
}

zinc_status zgather_after_step(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    if (!e->trace_started) { /* at build: decide persistence, record the first micro-step */
        decide_persistence(e);
        e->trace_started = true;
        e->trace_recording = true;
    } else if (e->trace_lost) { /* the model's order changed: record it again */
        e->trace_lost = false;
        e->trace_valid = false;
        e->trace_recording = true;
        e->trace_len = e->trace_pos = 0;
    } else {
        trace_restart(e);
    }
    for (int i = 0; i < e->nmodules; i++) {
        zmodule *m = &e->modules[i];
        TRY(gather_wait(e, m));
        if (m->persistent) TRY(gather_start(e, m, true)); /* refresh with the updated shards */
        else TRY(release(e, m));
    }
    return ZINC_OK;
fail:
    return st;
}

void zgather_free(zinc_engine *e) {
    for (int i = 0; i < e->nmodules; i++) {
        zmodule *m = &e->modules[i];
        if (m->gather_req) zcomm_wait(e->dcomm, m->gather_req);
        m->gather_req = NULL;
        if (m->gathered) zengine_free(e, cat_of(m), m->gathered, (size_t)numel(m) * csz(e));
        m->gathered = NULL;
        free(m->g_counts);
        free(m->g_displs);
        m->g_counts = m->g_displs = NULL;
    }
    e->live_numel = 0;
}
