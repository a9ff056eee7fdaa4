/* ZeRO stage 3: parameters live only as shards; a module's full parameters are all-gathered when it is
 * entered and released when it exits.
 *
 * - Trace: the first micro-step records the order of module entries (module, phase). Later micro-steps
 *   follow it; on entry the next modules of the trace are prefetched with non-blocking all-gathers, up to
 *   stage3_prefetch_bucket_size elements in flight and stage3_max_live_parameters gathered in all. A
 *   mismatch with the trace stops prefetching until the next step re-records it.
 * - Release: on exit a module's copy is freed unless the trace says it is needed again within
 *   stage3_max_reuse_distance elements (the last layer's forward followed by its backward, typically).
 * - Persistence: modules with at most stage3_param_persistence_threshold elements (up to
 *   stage3_model_persistence_threshold in all) stay gathered; they are refreshed after each step.
 *   DeepSpeed decides persistence per parameter; zinc decides it per module, its unit of gathering. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
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

static void trace_finish_recording(zinc_engine *e) {
    if (!e->trace_recording) return;
    e->trace_recording = false;
    e->trace_valid = e->trace_len > 0;
    ZLOG_DEBUG(&e->log, "stage 3: recorded a trace of %d module entries", e->trace_len);
}

static void trace_restart(zinc_engine *e) {
    trace_finish_recording(e);
    e->trace_pos = 0;
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
        inflight += numel(m);
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgather_module_enter(zinc_engine *e, int module, int phase) {
    zinc_status st = ZINC_OK;
    zmodule *m = &e->modules[module];
    if (phase == ZINC_FORWARD && e->last_phase == ZINC_BACKWARD) trace_restart(e);
    if (e->trace_recording) {
        TRY(trace_push(e, module, phase));
    } else if (e->trace_valid) {
        if (e->trace_pos < e->trace_len && e->trace[e->trace_pos].module == module &&
            e->trace[e->trace_pos].phase == phase) {
            e->trace_pos++;
        } else {
            ZLOG_DEBUG(&e->log, "stage 3: module \"%s\" entered out of the recorded order; prefetching stops "
                                "until the next step",
                       m->name);
            e->trace_valid = false;
        }
    }
    if (!m->gathered) {
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
