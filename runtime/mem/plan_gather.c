/* Stage 3's gather schedule, simulated for the sizing plan (plan_gather.h). */
#include "runtime/mem/plan_gather.h"

#include <stdlib.h>

#include "base/core/error.h"

/* Mirrors zero/gather.c's policy (trace recording on the first micro-step, prefetch within
 * stage3_prefetch_bucket_size and stage3_max_live_parameters, release unless reused within
 * stage3_max_reuse_distance, persistent modules kept) for modules entered 0..N-1 in forward and N-1..0
 * in backward, and returns the most non-persistent elements gathered at once. Every micro-step after
 * the recorded one is the same, so two micro-steps give the peak of any run. */
typedef struct gsim {
    const int64_t *n; /* elements per module */
    const bool *persistent;
    bool *gathered, *pending;
    int *trace; /* module per trace entry; the phase follows from the position */
    int len, pos;
    bool valid, recording;
    int64_t live, peak;
    /* bytes: gathered copies (elem_bytes each) plus qwZ's wire of each gather in flight (wire[m]; NULL:
     * none), as zero/gather.c allocates them: the wire after the copy, freed once the gather completes */
    const uint64_t *wire;
    uint64_t elem_bytes, live_bytes, peak_bytes;
    const zcfg_zero *z;
} gsim;

static uint64_t gsim_wire(const gsim *s, int m) { return s->wire ? s->wire[m] : 0; }

static void gsim_complete(gsim *s, int m) {
    if (s->pending[m]) s->live_bytes -= gsim_wire(s, m);
    s->pending[m] = false;
}

static bool gsim_reused_soon(const gsim *s, int module) {
    if (!s->valid) return false;
    int64_t dist = 0;
    for (int j = s->pos; j < s->len; j++) {
        int mj = s->trace[j];
        if (mj == module) return dist <= s->z->max_reuse_distance;
        dist += s->n[mj];
        if (dist > s->z->max_reuse_distance) return false;
    }
    return false;
}

static void gsim_gather(gsim *s, int m, bool blocking) {
    if (!s->gathered[m]) {
        s->gathered[m] = true;
        if (!s->persistent[m]) {
            s->live += s->n[m];
            s->live_bytes += (uint64_t)s->n[m] * s->elem_bytes;
        }
        if (s->live > s->peak) s->peak = s->live;
    }
    s->live_bytes += gsim_wire(s, m);
    if (s->live_bytes > s->peak_bytes) s->peak_bytes = s->live_bytes;
    s->pending[m] = true;
    if (blocking) gsim_complete(s, m);
}

static void gsim_prefetch(gsim *s) {
    int64_t inflight = 0;
    for (int j = s->pos; j < s->len; j++) {
        int m = s->trace[j];
        if (s->persistent[m] || s->gathered[m]) {
            if (s->pending[m]) inflight += s->n[m];
            continue;
        }
        if (inflight + s->n[m] > s->z->prefetch_bucket_size) break;
        if (s->live + s->n[m] > s->z->max_live_parameters) break;
        gsim_gather(s, m, false);
        inflight += s->n[m];
    }
}

static void gsim_enter(gsim *s, int m, int phase, int entry) {
    if (s->recording) {
        s->trace[s->len++] = m;
    } else if (s->valid) {
        if (s->pos < s->len && s->pos == entry)
            s->pos++; /* sequential: the trace always matches */
        else
            s->valid = false;
    }
    if (!s->gathered[m])
        gsim_gather(s, m, true);
    else
        gsim_complete(s, m);
    if (s->valid) gsim_prefetch(s);
    (void)phase;
}

static void gsim_exit(gsim *s, int m) {
    if (gsim_reused_soon(s, m)) return;
    if (s->persistent[m] || !s->gathered[m]) return;
    gsim_complete(s, m);
    s->gathered[m] = false;
    s->live -= s->n[m];
    s->live_bytes -= (uint64_t)s->n[m] * s->elem_bytes;
}

zinc_status zplan_gather_peak(const int64_t *begin, const int64_t *end, const bool *persistent, int nm,
                              const zcfg_zero *z, int64_t *peak) {
    uint64_t bytes;
    return zplan_gather_peak_bytes(begin, end, persistent, nm, z, 1, NULL, peak, &bytes);
}

zinc_status zplan_gather_peak_bytes(const int64_t *begin, const int64_t *end, const bool *persistent, int nm,
                                    const zcfg_zero *z, uint64_t elem_bytes, const uint64_t *wire, int64_t *peak,
                                    uint64_t *peak_bytes) {
    zinc_status st = ZINC_OK;
    gsim s = {.persistent = persistent, .z = z, .recording = true, .wire = wire, .elem_bytes = elem_bytes};
    bool *flags = NULL;
    int64_t *n = NULL;
    TRY_ALLOC(n, nm, "the gather simulation");
    for (int i = 0; i < nm; i++) n[i] = end[i] - begin[i];
    s.n = n;
    TRY_ALLOC(flags, 2 * (size_t)nm, "the gather simulation");
    TRY_ALLOC(s.trace, 2 * (size_t)nm, "the gather simulation");
    s.gathered = flags;
    s.pending = flags + nm;
    for (int i = 0; i < nm; i++) s.gathered[i] = persistent[i];
    for (int micro = 0; micro < 2; micro++) {
        if (micro > 0) { /* a forward after a backward: the recording ends, the trace restarts */
            s.recording = false;
            s.valid = s.len > 0;
            s.pos = 0;
        }
        int entry = 0;
        for (int m = 0; m < nm; m++, entry++) {
            gsim_enter(&s, m, ZINC_FORWARD, entry);
            gsim_exit(&s, m);
        }
        for (int m = nm - 1; m >= 0; m--, entry++) {
            gsim_enter(&s, m, ZINC_BACKWARD, entry);
            gsim_exit(&s, m);
        }
    }
    *peak = s.peak;
    /* the refresh of the persistent modules after a step: one wire at a time, nothing else gathered */
    for (int i = 0; wire && i < nm; i++)
        if (persistent[i] && wire[i] > s.peak_bytes) s.peak_bytes = wire[i];
    *peak_bytes = s.peak_bytes;
fail:
    free(n);
    free(flags);
    free(s.trace);
    return st;
}
