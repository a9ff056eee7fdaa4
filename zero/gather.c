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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/gather.h"

#include "base/core/error.h"
#include "base/core/trace.h"
#include "zero/sizing.h"
#include "zero/zeropp.h"

/* Device buffers, counted by the device's tracker; a NULL pointer frees nothing. */
static zinc_status dalloc(zgather *g, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return g->c.dev->ops->alloc(g->c.dev, cat, bytes, what, out);
}

static void dfree(zgather *g, zinc_mem_category cat, void *p, size_t bytes) {
    if (p) g->c.dev->ops->free(g->c.dev, cat, p, bytes);
}

static size_t csz(const zgather *g) { return zinc_dtype_size(g->c.compute_dtype); }

static zinc_mem_category cat_of(const zgather_module *s) { return s->persistent ? ZINC_MEM_PARAMS : ZINC_MEM_GATHER; }

/* The per-module records, made once (at build, before any module is entered). */
static zinc_status ensure_mods(zgather *g) {
    zinc_status st = ZINC_OK;
    if (!g->mods && g->c.nmodules > 0) TRY_ALLOC(g->mods, g->c.nmodules, "the stage-3 module records");
    return ZINC_OK;
fail:
    return st;
}

static void decide_persistence(zgather *g) {
    int64_t total = 0;
    for (int i = 0; i < g->c.nmodules; i++)
        g->mods[i].persistent =
            zsize_persistent(zmodule_numel(&g->c.modules[i]), &total, g->c.cfg->param_persistence_threshold,
                             g->c.cfg->model_persistence_threshold);
}

/* --trace: the all-gather of s, issued at s->trace_t0, is complete. */
static void trace_gathered(zgather *g, zgather_module *s, int64_t flow) {
    if (!s->trace_t0) return;
    int i = (int)(s - g->mods);
    int64_t bytes = s->wire ? (int64_t)s->wire_bytes : zmodule_numel(&g->c.modules[i]) * (int64_t)csz(g);
    ztrace_span_flow(s->trace_t0, ZTRACE_COMM, "all_gather", g->trace_lane_track[s->trace_lane], "bytes", bytes,
                     "module", i, flow, ZTRACE_FLOW_OUT);
    g->trace_lane_busy[s->trace_lane] = false;
    s->trace_t0 = 0;
}

/* --trace: a free lane for an all-gather issued now (none free: not traced). */
static void trace_issue(zgather *g, zgather_module *s, bool prefetch) {
    if (!(s->trace_t0 = ztrace_begin())) return;
    for (int k = 0; k < ZGATHER_TRACE_LANES; k++)
        if (!g->trace_lane_busy[k]) {
            if (!g->trace_lane_track[k]) {
                char name[40];
                snprintf(name, sizeof name, "comm all-gather %d", k);
                g->trace_lane_track[k] = ztrace_track(name);
            }
            g->trace_lane_busy[k] = true;
            s->trace_lane = k;
            s->trace_prefetch = prefetch;
            return;
        }
    s->trace_t0 = 0;
}

/* hpZ: copies this rank's piece of module i's secondary partition out of its gathered copy. */
static zinc_status fill_secondary(zgather *g, int i) {
    const zmodule *m = &g->c.modules[i];
    const zpartition *hp = &g->c.hpart;
    int64_t lo, hi;
    zpart_intersect(hp, hp->rank, m->flat_begin, m->flat_end, &lo, &hi);
    zinc_status st = ZINC_OK;
    if (hi > lo)
        st = g->c.dev->ops->copy(g->c.dev, (char *)g->secondary + (size_t)(lo - (int64_t)hp->rank * hp->shard) * csz(g),
                                 (const char *)g->mods[i].gathered + (size_t)(lo - m->flat_begin) * csz(g),
                                 (size_t)(hi - lo) * csz(g), ZDEV_D2D);
    if (st == ZINC_OK) g->sec_valid[i] = true;
    return st;
}

static zinc_status gather_issue(zgather *g, int i, bool blocking);

/* Makes the module's pending all-gather complete for the compute stream (cpu: the host waits). */
static zinc_status gather_wait(zgather *g, zgather_module *s) {
    zinc_status st = ZINC_OK;
    int64_t flow = 0;
    if (s->own_pending) { /* the piece's read was prefetched: its all-gather now (its read_own waits) */
        s->own_pending = false;
        return gather_issue(g, (int)(s - g->mods), true);
    }
    if (s->gather_req) {
        zcomm_req *r = s->gather_req;
        s->gather_req = NULL;
        int64_t w0 = ztrace_begin();
        st = zdev_comm_wait(g->c.dev, s->from_secondary ? g->c.hcomm : g->c.dcomm, r);
        if (w0 && s->trace_t0) flow = ztrace_flow_id(); /* the arrow from the issue to this wait */
        if (w0)
            ztrace_span_flow(w0, ZTRACE_WAIT, s->trace_prefetch ? "prefetch" : "all_gather", 0, NULL, 0, NULL, 0, flow,
                             ZTRACE_FLOW_IN);
    }
    trace_gathered(g, s, flow);
    if (s->wire) { /* qwZ: every rank's piece, this rank's included, from the wire (of the group's ranks) */
        if (st == ZINC_OK)
            zpp_wire_dequantize(g->c.dev, s->wire, s->g_counts, s->g_displs, s->w_displs,
                                s->from_secondary ? g->c.hpart.world : g->c.world, s->gathered, g->c.compute_dtype);
        dfree(g, ZINC_MEM_GATHER, s->wire, s->wire_bytes);
        s->wire = NULL;
    }
    if (st == ZINC_OK && s->gathered && g->secondary && !s->persistent && !s->from_secondary) {
        int i = (int)(s - g->mods);
        if (!g->sec_valid[i]) st = fill_secondary(g, i);
    }
    return st;
}

/* Starts (or, when blocking, completes) the all-gather of module i into a fresh buffer. */
static zinc_status gather_start(zgather *g, int i, bool blocking) {
    zinc_status st = ZINC_OK;
    const zmodule *m = &g->c.modules[i];
    zgather_module *s = &g->mods[i];
    if (!s->g_counts) {
        TRY_ALLOC(s->g_counts, g->c.world, "gather counts");
        TRY_ALLOC(s->g_displs, g->c.world, "gather displacements");
    }
    if (!s->gathered) {
        TRY(dalloc(g, cat_of(s), (size_t)zmodule_numel(m) * csz(g), "gathered parameters", &s->gathered));
        if (!s->persistent) g->live_numel += zmodule_numel(m);
    }
    /* hpZ: after the module's first gather of this step, from the secondary shards inside the group */
    s->from_secondary = g->secondary && !s->persistent && g->sec_valid[i];
    if (!blocking && !s->from_secondary && !g->c.params_shard && g->c.prefetch_own) {
        int64_t lo, hi;
        zpart_intersect(g->c.part, g->c.rank, m->flat_begin, m->flat_end, &lo, &hi);
        /* the read in flight now; the all-gather at use, on every rank (one with no piece here too), so
         * the ranks issue their collectives in one order whichever prefetches each one's buffers allow */
        if (hi > lo) TRY(g->c.prefetch_own(g->c.read_ud, lo - g->c.own_lo, hi - lo));
        s->own_pending = true;
        s->trace_prefetch = true;
        return ZINC_OK;
    }
    return gather_issue(g, i, blocking);
fail:
    return st;
}

/* gather_start's second half: this rank's piece into place and the all-gather. */
static zinc_status gather_issue(zgather *g, int i, bool blocking) {
    zinc_status st = ZINC_OK;
    const zmodule *m = &g->c.modules[i];
    zgather_module *s = &g->mods[i];
    const zpartition *part = s->from_secondary ? &g->c.hpart : g->c.part;
    zcomm *comm = s->from_secondary ? g->c.hcomm : g->c.dcomm;
    int prank = s->from_secondary ? g->c.hpart.rank : g->c.rank;
    zpart_range_split(part, m->flat_begin, m->flat_end, s->g_counts, s->g_displs);
    int64_t lo, hi;
    zpart_intersect(part, prank, m->flat_begin, m->flat_end, &lo, &hi);
    const void *own;
    if (s->from_secondary)
        own = (const char *)g->secondary + (size_t)(lo - (int64_t)prank * part->shard) * csz(g);
    else if (g->c.params_shard)
        own = (const char *)g->c.params_shard + (size_t)(lo - g->c.own_lo) * csz(g);
    else { /* swapped in from NVMe straight into its place in the gathered copy */
        void *at = (char *)s->gathered + (size_t)(lo - m->flat_begin) * csz(g);
        if (hi > lo) TRY(g->c.read_own(g->c.read_ud, lo - g->c.own_lo, hi - lo, at));
        own = at;
    }
    /* qwZ quantizes the gathers from the secondary too, as DeepSpeed 0.19.8 does (partition_parameters.py
     * _all_gather_coalesced: quantize(cat(ds_secondary_tensor)) when quantize is set): the secondary holds the
     * forward's dequantized values, quantized again in pieces of the group's partition */
    bool qwz = zpp_quantize_gathers(g->c.cfg, g->c.world);
    if (s->from_secondary) g->stat_secondary++;
    if (qwz) { /* this rank's piece quantized into the wire; the copy is filled when the gather completes */
        if (!s->w_counts) {
            TRY_ALLOC(s->w_counts, g->c.world, "qwZ wire counts");
            TRY_ALLOC(s->w_displs, g->c.world, "qwZ wire displacements");
        }
        s->wire_bytes = zpp_wire_layout(s->g_counts, part->world, s->w_counts, s->w_displs);
        TRY(dalloc(g, ZINC_MEM_GATHER, s->wire_bytes, "the qwZ all-gather wire", &s->wire));
        zpp_wire_quantize(g->c.dev, own, (int64_t)(hi - lo), g->c.compute_dtype,
                          (char *)s->wire + s->w_displs[prank] * ZPP_WIRE_UNIT);
        g->stat_wire_bytes += (int64_t)s->wire_bytes;
    } else if (hi > lo && own != (char *)s->gathered + (size_t)(lo - m->flat_begin) * csz(g)) {
        TRY(g->c.dev->ops->copy(g->c.dev, (char *)s->gathered + (size_t)(lo - m->flat_begin) * csz(g), own,
                                (size_t)(hi - lo) * csz(g), ZDEV_D2D));
    }
    TRY(zdev_comm_begin(g->c.dev));
    trace_issue(g, s, !blocking);
    int dev_span = zdev_trace_begin(g->c.dev, ZDEV_STREAM_COMM);
    /* Blocking: on cpu the call itself; on a GPU a request that the compute stream waits for at once. */
    if (qwz) /* the wire's 4-byte units travel as fp32 elements (no arithmetic: any 4-byte type would do) */
        TRY(zcomm_allgatherv_inplace(comm, s->wire, s->w_counts, s->w_displs, ZINC_FP32,
                                     blocking ? zdev_req(g->c.dev, &s->gather_req) : &s->gather_req));
    else
        TRY(zcomm_allgatherv_inplace(comm, s->gathered, s->g_counts, s->g_displs, g->c.compute_dtype,
                                     blocking ? zdev_req(g->c.dev, &s->gather_req) : &s->gather_req));
    zdev_trace_end(g->c.dev, dev_span, ZTRACE_COMM, "all_gather", "bytes",
                   qwz ? (int64_t)s->wire_bytes : zmodule_numel(m) * (int64_t)csz(g));
    if (blocking) TRY(gather_wait(g, s));
    return ZINC_OK;
fail:
    return st;
}

/* A prefetched piece released before its use: its read is completed here, locally, and no all-gather is
 * issued (the ranks' prefetches depend on their own swap buffers, so another rank may have none pending
 * for this module: a collective here could meet nothing on it). */
static zinc_status drop_own_pending(zgather *g, int i) {
    zgather_module *s = &g->mods[i];
    if (!s->own_pending) return ZINC_OK;
    s->own_pending = false;
    const zmodule *m = &g->c.modules[i];
    int64_t lo, hi;
    zpart_intersect(g->c.part, g->c.rank, m->flat_begin, m->flat_end, &lo, &hi);
    if (hi <= lo) return ZINC_OK;
    return g->c.read_own(g->c.read_ud, lo - g->c.own_lo, hi - lo,
                         (char *)s->gathered + (size_t)(lo - m->flat_begin) * csz(g));
}

static zinc_status release(zgather *g, int i) {
    zinc_status st = ZINC_OK;
    zgather_module *s = &g->mods[i];
    int64_t n = zmodule_numel(&g->c.modules[i]);
    if (s->persistent || !s->gathered) return ZINC_OK;
    TRY(drop_own_pending(g, i));
    TRY(gather_wait(g, s));
    dfree(g, ZINC_MEM_GATHER, s->gathered, (size_t)n * csz(g));
    s->gathered = NULL;
    g->live_numel -= n;
    return ZINC_OK;
fail:
    return st;
}

static zinc_status trace_push(zgather *g, int module, int phase) {
    if (g->trace_len == g->trace_cap) {
        int cap = g->trace_cap ? 2 * g->trace_cap : 64;
        zgather_trace_entry *t = realloc(g->trace, (size_t)cap * sizeof *t);
        if (!t) return ZERR(ZINC_ERR_NOMEM, "out of memory recording the stage-3 module trace");
        g->trace = t;
        g->trace_cap = cap;
    }
    g->trace[g->trace_len].module = module;
    g->trace[g->trace_len].phase = phase;
    g->trace_len++;
    return ZINC_OK;
}

static bool same_entry(const zgather_trace_entry *a, const zgather_trace_entry *b) {
    return a->module == b->module && a->phase == b->phase;
}

/* Forward-only passes recorded before the training pass repeat its forward: when the entries before the
 * first backward one are k copies of a period p, only the last copy belongs to the micro-step. */
static void trace_trim_forward_repeats(zgather *g) {
    int k = 0;
    while (k < g->trace_len && g->trace[k].phase == ZINC_FORWARD) k++;
    for (int p = 1; p <= k / 2; p++) {
        if (k % p) continue;
        bool periodic = true;
        for (int i = p; i < k && periodic; i++) periodic = same_entry(&g->trace[i], &g->trace[i - p]);
        if (!periodic) continue;
        memmove(g->trace, g->trace + (k - p), (size_t)(g->trace_len - (k - p)) * sizeof *g->trace);
        g->trace_len -= k - p;
        ZLOG_DEBUG(g->c.log, "stage 3: dropped %d forward-only pass%s from the recorded trace", k / p - 1,
                   k / p - 1 == 1 ? "" : "es");
        return;
    }
}

static void trace_finish_recording(zgather *g) {
    if (!g->trace_recording) return;
    bool has_backward = false;
    for (int i = 0; i < g->trace_len && !has_backward; i++) has_backward = g->trace[i].phase == ZINC_BACKWARD;
    if (!has_backward) { /* forward-only passes: not a training micro-step, keep recording */
        g->trace_len = 0;
        return;
    }
    trace_trim_forward_repeats(g);
    g->trace_recording = false;
    g->trace_valid = g->trace_len > 0;
    ZLOG_DEBUG(g->c.log, "stage 3: recorded a trace of %d module entries", g->trace_len);
}

static void trace_restart(zgather *g) {
    trace_finish_recording(g);
    g->trace_pos = 0;
}

/* An entry that is not the next one of the trace: continue from its next occurrence (after the current
 * position first, then from the start), or stop prefetching until the next step records a new trace. */
static void trace_resync(zgather *g, const zgather_trace_entry *x) {
    for (int pass = 0; pass < 2; pass++) {
        int from = pass == 0 ? g->trace_pos : 0, to = pass == 0 ? g->trace_len : g->trace_pos;
        for (int j = from; j < to; j++)
            if (same_entry(&g->trace[j], x)) {
                g->trace_pos = j + 1;
                g->stat_trace_resync++;
                return;
            }
    }
    ZLOG_DEBUG(g->c.log,
               "stage 3: module \"%s\" (%s) is not in the recorded trace; prefetching stops and the "
               "next step records the trace again",
               g->c.modules[x->module].name, x->phase == ZINC_FORWARD ? "forward" : "backward");
    g->trace_valid = false;
    g->trace_lost = true;
}

/* Prefetches the modules that follow trace position `from`. */
static zinc_status prefetch(zgather *g, int from) {
    zinc_status st = ZINC_OK;
    int64_t inflight = 0;
    for (int j = from; j < g->trace_len; j++) {
        int i = g->trace[j].module;
        const zgather_module *s = &g->mods[i];
        int64_t n = zmodule_numel(&g->c.modules[i]);
        if (s->persistent || s->gathered) {
            if (s->gather_req || s->own_pending) inflight += n;
            continue;
        }
        if (inflight + n > g->c.cfg->prefetch_bucket_size) break;
        if (g->live_numel + n > g->c.cfg->max_live_parameters) break;
        if (!g->c.params_shard && g->c.can_prefetch_own && !(g->secondary && g->sec_valid[i])) {
            int64_t lo, hi; /* the swap buffers full: the next entries wait for a free one */
            zpart_intersect(g->c.part, g->c.rank, g->c.modules[i].flat_begin, g->c.modules[i].flat_end, &lo, &hi);
            if (hi > lo && !g->c.can_prefetch_own(g->c.read_ud, lo - g->c.own_lo, hi - lo)) break;
        }
        TRY(gather_start(g, i, false));
        g->stat_prefetch++;
        inflight += n;
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgather_module_enter(zgather *g, int module, int phase, bool new_micro_step) {
    zinc_status st = ZINC_OK;
    TRY(ensure_mods(g));
    zgather_module *s = &g->mods[module];
    if (new_micro_step) trace_restart(g);
    if (g->trace_recording) {
        TRY(trace_push(g, module, phase));
    } else if (g->trace_valid) {
        zgather_trace_entry x = {module, phase};
        if (g->trace_pos < g->trace_len && same_entry(&g->trace[g->trace_pos], &x))
            g->trace_pos++;
        else
            trace_resync(g, &x);
    }
    if (!s->gathered) {
        g->stat_gather_blocking++;
        TRY(gather_start(g, module, true));
    } else {
        TRY(gather_wait(g, s));
    }
    if (g->trace_valid) TRY(prefetch(g, g->trace_pos));
    return ZINC_OK;
fail:
    return st;
}

/* True when the trace says module `module` is entered again within max_reuse_distance elements. */
static bool reused_soon(const zgather *g, int module) {
    if (!g->trace_valid) return false;
    int64_t dist = 0;
    for (int j = g->trace_pos; j < g->trace_len; j++) {
        int mj = g->trace[j].module;
        if (mj == module) return dist <= g->c.cfg->max_reuse_distance;
        dist += zmodule_numel(&g->c.modules[mj]);
        if (dist > g->c.cfg->max_reuse_distance) return false;
    }
    return false;
}

zinc_status zgather_module_exit(zgather *g, int module, int phase) {
    const zmodule *m = &g->c.modules[module];
    (void)phase;
    if (m->in_phase[0] || m->in_phase[1]) return ZINC_OK; /* still in use by the other phase */
    if (!g->mods || reused_soon(g, module)) return ZINC_OK;
    return release(g, module);
}

zinc_status zgather_after_step(zgather *g) {
    zinc_status st = ZINC_OK;
    TRY(ensure_mods(g));
    if (g->c.hcomm && !g->secondary) { /* hpZ: the secondary shard, once */
        TRY(dalloc(g, ZINC_MEM_PARAMS, (size_t)g->c.hpart.shard * csz(g), "the hpZ secondary parameter shard",
                   &g->secondary));
        TRY_ALLOC(g->sec_valid, g->c.nmodules > 0 ? g->c.nmodules : 1, "the hpZ secondary flags");
    }
    /* the shards change at a step: the secondary is refilled by each module's next gather */
    if (g->sec_valid) memset(g->sec_valid, 0, (size_t)g->c.nmodules * sizeof *g->sec_valid);
    if (!g->trace_started) { /* at build: decide persistence, record the first micro-step */
        decide_persistence(g);
        g->trace_started = true;
        g->trace_recording = true;
    } else if (g->trace_lost) { /* the model's order changed: record it again */
        g->trace_lost = false;
        g->trace_valid = false;
        g->trace_recording = true;
        g->trace_len = g->trace_pos = 0;
    } else {
        trace_restart(g);
    }
    for (int i = 0; i < g->c.nmodules; i++) {
        if (!g->mods[i].persistent) TRY(drop_own_pending(g, i)); /* released below: no collective for it */
        TRY(gather_wait(g, &g->mods[i]));
        if (g->mods[i].persistent)
            TRY(gather_start(g, i, true)); /* refresh with the updated shards */
        else
            TRY(release(g, i));
    }
    return ZINC_OK;
fail:
    return st;
}

void zgather_init(zgather *g, const zgather_ctx *ctx) { g->c = *ctx; }

const void *zgather_module_data(const zgather *g, int module) {
    return g->mods && module >= 0 && module < g->c.nmodules ? g->mods[module].gathered : NULL;
}

bool zgather_module_persistent(const zgather *g, int module) {
    return g->mods && module >= 0 && module < g->c.nmodules && g->mods[module].persistent;
}

void zgather_forget_empty_trace(zgather *g) {
    if (g->trace_recording && g->trace_len == 0) g->trace_started = false;
}

void zgather_free(zgather *g) {
    for (int i = 0; g->mods && i < g->c.nmodules; i++) {
        zgather_module *s = &g->mods[i];
        if (s->gather_req) zcomm_wait(g->c.dcomm, s->gather_req);
        if (s->gathered) dfree(g, cat_of(s), s->gathered, (size_t)zmodule_numel(&g->c.modules[i]) * csz(g));
        dfree(g, ZINC_MEM_GATHER, s->wire, s->wire_bytes);
        free(s->g_counts);
        free(s->g_displs);
        free(s->w_counts);
        free(s->w_displs);
    }
    free(g->mods);
    g->mods = NULL;
    dfree(g, ZINC_MEM_PARAMS, g->secondary, (size_t)g->c.hpart.shard * csz(g));
    g->secondary = NULL;
    free(g->sec_valid);
    g->sec_valid = NULL;
    g->live_numel = 0;
    free(g->trace);
    g->trace = NULL;
    g->trace_len = g->trace_cap = g->trace_pos = 0;
}
