/* Gradient buffers and their reduction across ranks.
 *
 * Stages 0-1: the model adds into one full flat gradient buffer (grad dtype) across micro-steps. At the
 * accumulation boundary stage 0 all-reduces it; stage 1 reduce-scatters it, chunk by chunk, into the
 * rank's fp32 gradient shard.
 * Stages 2-3: the model's gradients land in bucket slots handed out at module backward entry. Backward
 * visits modules in reverse order, so a bucket holds one contiguous flat range, filled downwards; when
 * the next module does not fit (or is not adjacent), the bucket is reduce-scattered to the owners (a
 * real variable-count reduce-scatter: each rank receives exactly its shard's piece) and the piece is
 * accumulated into the fp32 shard. With overlap_comm two buckets alternate and the reduce-scatter is
 * non-blocking, so it overlaps the rest of backward. A module larger than a bucket writes into one
 * landing buffer instead and is reduce-scattered from it in bucket-sized chunks when it exits, so the
 * buckets stay at reduce_bucket_size whatever the largest module (an embedding, say) is.
 *
 * Both paths share one mechanism: a chunk of a contiguous flat range is sent (converted to the comm
 * dtype and pre-scaled when needed), reduce-scattered, and its local piece accumulated on completion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/grads.h"

#include "base/core/error.h"
#include "base/core/trace.h"
#include "zero/sizing.h"

/* Device buffers, counted by the device's tracker; a NULL pointer frees nothing (a partly built zgrads). */
static zinc_status dalloc(zgrads *g, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return g->c.dev->ops->alloc(g->c.dev, cat, bytes, what, out);
}

static void dfree(zgrads *g, zinc_mem_category cat, void *p, size_t bytes) {
    if (p) g->c.dev->ops->free(g->c.dev, cat, p, bytes);
}

static size_t gsz(const zgrads *g) { return zinc_dtype_size(g->c.grad_dtype); }

/* What each rank multiplies its gradient by before communication: DeepSpeed's prescale_gradients
 * divides by the world size first; otherwise it divides by gradient_predivide_factor (default 1) and
 * the step multiplies by predivide / world afterwards (see zgrads_post_scale). */
static float pre_scale(const zgrads *g) {
    return zsize_pre_scale(g->c.prescale_gradients, g->c.predivide_factor, g->c.world);
}

/* Converts n elements from one dtype to another on the device, multiplying by scale. */
static zinc_status convert(zgrads *g, void *dst, zinc_dtype dt, const void *src, zinc_dtype st, size_t n, float scale) {
    return g->c.dev->ops->convert(g->c.dev, dst, dt, src, st, n, scale);
}

static bool send_needs_copy(const zgrads *g) {
    return zsize_send_needs_copy(g->c.comm_dtype, g->c.grad_dtype, g->c.prescale_gradients, g->c.predivide_factor,
                                 g->c.world);
}

void zgrads_init(zgrads *g, const zgrads_ctx *ctx) { g->c = *ctx; }

zinc_status zgrads_alloc(zgrads *g) {
    zinc_status st = ZINC_OK;
    /* The sizes are the engine's sizing plan's (runtime/mem/plan.h), the figures the estimator sums. */
    if (!g->c.sizes) return ZERR(ZINC_ERR_INTERNAL, "zgrads_alloc: no sizes from the sizing plan");
    const zgrads_plan plan = *g->c.sizes;
    if (g->c.nmodules > 0) TRY_ALLOC(g->mods, g->c.nmodules, "the gradient module records");
    for (int i = 0; i < g->c.nmodules; i++) g->mods[i].hold = g->c.modules[i].reentered;
    g->bytes_full = plan.bytes_grads_full;
    g->bytes_shard = plan.bytes_grads_shard;
    if (g->c.stage <= 1) TRY(dalloc(g, ZINC_MEM_GRADS, g->bytes_full, "the gradient buffer", &g->full));
    if (g->c.stage >= 1 && g->bytes_shard)
        TRY(dalloc(g, ZINC_MEM_GRADS, g->bytes_shard, "the fp32 gradient shard", (void **)&g->shard));
    if (g->c.deterministic) TRY(zgrads_det_alloc(g));
    if (plan.nbuckets == 0) return ZINC_OK;
    g->bucket_cap = plan.bucket_cap;
    if (g->c.qgz_intra) TRY(zgrads_qgz_alloc(g));
    g->bytes_landing = plan.bytes_landing;
    if (g->bytes_landing)
        TRY(dalloc(g, ZINC_MEM_BUCKETS, g->bytes_landing, "the gradient landing buffer for large modules",
                   &g->landing));
    g->nbuckets = plan.nbuckets;
    g->bytes_bucket_grads = plan.bytes_bucket_grads;
    g->bytes_bucket_send = plan.bytes_bucket_send;
    g->bytes_bucket_recv = plan.bytes_bucket_recv;
    for (int i = 0; i < g->nbuckets; i++) {
        zbucket *b = &g->buckets[i];
        TRY(dalloc(g, ZINC_MEM_BUCKETS, g->bytes_bucket_grads, "a gradient bucket", &b->grads));
        TRY(dalloc(g, ZINC_MEM_BUCKETS, g->bytes_bucket_send, "a communication buffer", &b->send));
        TRY(dalloc(g, ZINC_MEM_BUCKETS, g->bytes_bucket_recv, "a reduce-scatter buffer", &b->recv));
        TRY_ALLOC(b->counts, g->c.world, "collective counts");
        TRY_ALLOC(b->displs, g->c.world, "collective displacements");
        b->lo = b->hi = 0;
        char track[40];
        snprintf(track, sizeof track, "comm bucket %d", i);
        b->trace_track = ztrace_track(track); /* 0 when not tracing */
    }
    return ZINC_OK;
fail:
    return st;
}

void zgrads_free(zgrads *g) {
    for (int i = 0; i < g->nbuckets; i++) {
        zbucket *b = &g->buckets[i];
        if (b->req) zcomm_wait(g->c.dcomm, b->req);
        b->req = NULL;
        dfree(g, ZINC_MEM_BUCKETS, b->grads, g->bytes_bucket_grads);
        dfree(g, ZINC_MEM_BUCKETS, b->send, g->bytes_bucket_send);
        dfree(g, ZINC_MEM_BUCKETS, b->recv, g->bytes_bucket_recv);
        free(b->counts);
        free(b->displs);
        b->counts = b->displs = NULL;
    }
    g->nbuckets = 0;
    zgrads_det_free(g);
    zgrads_qgz_free(g);
    dfree(g, ZINC_MEM_BUCKETS, g->landing, g->bytes_landing);
    g->landing = NULL;
    for (int i = 0; g->mods && i < g->c.nmodules; i++)
        dfree(g, ZINC_MEM_BUCKETS, g->mods[i].held, (size_t)zmodule_numel(&g->c.modules[i]) * gsz(g));
    free(g->mods);
    g->mods = NULL;
    for (int i = 0; i < g->nscratch; i++) dfree(g, ZINC_MEM_BUCKETS, g->scratch[i].buf, g->scratch[i].bytes);
    free(g->scratch);
    g->scratch = NULL;
    g->nscratch = 0;
    dfree(g, ZINC_MEM_GRADS, g->full, g->bytes_full);
    dfree(g, ZINC_MEM_GRADS, g->shard, g->bytes_shard);
    g->full = NULL;
    g->shard = NULL;
}

/* Completes a slot's pending reduce-scatter and adds this rank's piece into the fp32 shard. */
static zinc_status complete(zgrads *g, zbucket *b) {
    zinc_status st = ZINC_OK;
    if (!b->req && b->recv_hi <= b->recv_lo) {
        if (b->trace_t0) /* a blocking one that brought this rank no piece: complete already */
            ztrace_span(b->trace_t0, ZTRACE_COMM, "reduce_scatter", b->trace_track, "bytes", b->trace_bytes, "bucket",
                        b - g->buckets);
        b->trace_t0 = 0;
        return ZINC_OK;
    }
    int64_t flow = 0; /* the timeline's arrow from the collective's issue to the wait for it */
    if (b->req) {
        zcomm_req *r = b->req;
        b->req = NULL;
        int64_t w0 = ztrace_begin();
        TRY(zdev_comm_wait(g->c.dev, g->c.dcomm, r));
        if (w0 && b->trace_t0) flow = ztrace_flow_id();
        if (w0)
            ztrace_span_flow(w0, ZTRACE_WAIT, "reduce_scatter", 0, "bytes", b->trace_bytes, NULL, 0, flow,
                             ZTRACE_FLOW_IN);
    }
    if (b->trace_t0)
        ztrace_span_flow(b->trace_t0, ZTRACE_COMM, "reduce_scatter", b->trace_track, "bytes", b->trace_bytes, "bucket",
                         b - g->buckets, flow, ZTRACE_FLOW_OUT);
    b->trace_t0 = 0;
    if (b->recv_hi > b->recv_lo && !g->shard && g->c.shard_add) { /* the owner's shard (a file) */
        int64_t shard_lo = (int64_t)g->c.rank * g->c.part->shard;
        TRY(g->c.shard_add(g->c.shard_owner, b->recv_lo - shard_lo, b->recv_hi - b->recv_lo, b->recv, g->c.comm_dtype));
    } else if (b->recv_hi > b->recv_lo) {
        int64_t shard_lo = (int64_t)g->c.rank * g->c.part->shard;
        TRY(g->c.dev->ops->axpy_f32(g->c.dev, g->shard + (b->recv_lo - shard_lo), b->recv, g->c.comm_dtype, 1.0f,
                                    (size_t)(b->recv_hi - b->recv_lo), 1));
    }
    b->recv_lo = b->recv_hi = 0;
    return ZINC_OK;
fail:
    return st;
}

/* Starts the reduce-scatter of flat range [a, b), whose grad-dtype values start at src, using slot b's
 * buffers. Blocking unless overlap_comm. */
static zinc_status issue(zgrads *g, zbucket *bk, const void *src, int64_t a, int64_t b) {
    zinc_status st = ZINC_OK;
    const void *send = src;
    if (g->c.deterministic) {       /* the fixed tree, blocking; its sum goes into this micro-step's own buffer */
        float *work = (float *)src; /* fp32; every source is zeroed before its next use */
        if (send_needs_copy(g)) {
            TRY(convert(g, bk->send, ZINC_FP32, src, ZINC_FP32, (size_t)(b - a), pre_scale(g)));
            work = bk->send;
        }
        g->stat_rs_sends++;
        return zgrads_det_reduce_range(g, work, a, b);
    }
    if (send_needs_copy(g)) {
        TRY(convert(g, bk->send, g->c.comm_dtype, src, g->c.grad_dtype, (size_t)(b - a), pre_scale(g)));
        send = bk->send;
    }
    if (g->qgz) { /* ZeRO++ qgZ: quantized all-to-alls, blocking, added into the shard */
        g->stat_rs_sends++;
        return zgrads_qgz_reduce_range(g, send, send_needs_copy(g) ? g->c.comm_dtype : g->c.grad_dtype, a, b);
    }
    zpart_range_split(g->c.part, a, b, bk->counts, bk->displs);
    zpart_intersect(g->c.part, g->c.rank, a, b, &bk->recv_lo, &bk->recv_hi);
    TRY(zdev_comm_begin(g->c.dev));
    g->stat_rs_sends++;
    bk->trace_t0 = ztrace_begin();
    bk->trace_bytes = (b - a) * (int64_t)zinc_dtype_size(g->c.comm_dtype);
    if (bk->trace_t0 && g->trace_producer_t0) { /* the arrow from the backward span that completed the bucket */
        int64_t flow = ztrace_flow_id();
        ztrace_flow_at(g->trace_producer_t0, 0, flow, ZTRACE_FLOW_OUT);
        ztrace_flow_at(bk->trace_t0, bk->trace_track, flow, ZTRACE_FLOW_IN);
    }
    /* One bucket: blocking on cpu; on a GPU a request the compute stream waits for in complete(). */
    int dev_span = zdev_trace_begin(g->c.dev, ZDEV_STREAM_COMM);
    TRY(zcomm_reduce_scatterv(g->c.dcomm, send, bk->recv, bk->counts, g->c.comm_dtype,
                              g->nbuckets > 1 ? &bk->req : zdev_req(g->c.dev, &bk->req)));
    zdev_trace_end(g->c.dev, dev_span, ZTRACE_COMM, "reduce_scatter", "bytes", bk->trace_bytes);
    /* a blocking call: this thread waited for it */
    if (bk->trace_t0 && !bk->req)
        ztrace_span(bk->trace_t0, ZTRACE_WAIT, "reduce_scatter", 0, "bytes", bk->trace_bytes, NULL, 0);
    if (g->nbuckets == 1) TRY(complete(g, bk));
    return ZINC_OK;
fail:
    return st;
}

/* Sends the current bucket and moves to the other slot (finishing what that slot had in flight). */
static zinc_status flush_current(zgrads *g) {
    zinc_status st = ZINC_OK;
    zbucket *b = &g->buckets[g->cur_bucket];
    if (b->hi <= b->lo) return ZINC_OK;
    const void *src = (const char *)b->grads + (size_t)(g->bucket_cap - (b->hi - b->lo)) * gsz(g);
    TRY(issue(g, b, src, b->lo, b->hi));
    b->lo = b->hi = 0;
    g->cur_bucket = (g->cur_bucket + 1) % g->nbuckets;
    TRY(complete(g, &g->buckets[g->cur_bucket]));
    return ZINC_OK;
fail:
    return st;
}

/* Reduce-scatters a module's gradients from a buffer of its own (landing, held or scratch) in bucket-sized
 * chunks, through the buckets' communication buffers only: the buckets' gradient contents (which may hold
 * an open module's slot) and the current bucket stay as they are. Everything is complete on return, so the
 * buffer may be reused. */
static zinc_status send_buffer(zgrads *g, const void *src, int64_t lo, int64_t hi) {
    zinc_status st = ZINC_OK;
    int k = g->cur_bucket;
    for (int64_t a = lo; a < hi; a += g->bucket_cap) {
        int64_t b = a + g->bucket_cap < hi ? a + g->bucket_cap : hi;
        k = (k + 1) % g->nbuckets;
        zbucket *bk = &g->buckets[k];
        TRY(complete(g, bk));
        TRY(issue(g, bk, (const char *)src + (size_t)(a - lo) * gsz(g), a, b));
    }
    for (int i = 0; i < g->nbuckets; i++) TRY(complete(g, &g->buckets[i]));
    return ZINC_OK;
fail:
    return st;
}

/* An open module other than `self` whose slot is `kind`, or -1. */
static int open_in(const zgrads *g, int self, zgrad_slot kind) {
    for (int i = 0; i < g->c.nmodules; i++)
        if (i != self && g->c.modules[i].in_phase[ZINC_BACKWARD] && g->mods[i].slot == (int)kind) return i;
    return -1;
}

/* The module's own buffer: zeroed at its first entry of a micro-step, added into by later ones. */
static zinc_status enter_held(zgrads *g, int module, void **out) {
    zinc_status st = ZINC_OK;
    zgrads_module *s = &g->mods[module];
    size_t bytes = (size_t)zmodule_numel(&g->c.modules[module]) * gsz(g);
    if (!s->held)
        TRY(dalloc(g, ZINC_MEM_BUCKETS, bytes, "the gradient buffer of a re-entered or enclosing module", &s->held));
    if (!s->held_dirty) TRY(g->c.dev->ops->memset0(g->c.dev, s->held, bytes));
    s->held_dirty = true;
    s->slot = ZSLOT_HELD;
    *out = s->held;
    return ZINC_OK;
fail:
    return st;
}

/* A pooled buffer for a module entered while another module's slot must stay untouched. */
static zinc_status enter_scratch(zgrads *g, int module, void **out) {
    zinc_status st = ZINC_OK;
    zgrads_module *m = &g->mods[module];
    size_t bytes = (size_t)zmodule_numel(&g->c.modules[module]) * gsz(g);
    int k = -1;
    for (int i = 0; i < g->nscratch; i++)
        if (!g->scratch[i].busy && (k < 0 || g->scratch[i].bytes > g->scratch[k].bytes)) k = i;
    if (k < 0) {
        zscratch *s = realloc(g->scratch, (size_t)(g->nscratch + 1) * sizeof *s);
        if (!s) return ZERR(ZINC_ERR_NOMEM, "out of memory for the nested-module gradient pool");
        g->scratch = s;
        k = g->nscratch++;
        g->scratch[k] = (zscratch){0};
    }
    zscratch *sc = &g->scratch[k];
    if (sc->bytes < bytes) {
        dfree(g, ZINC_MEM_BUCKETS, sc->buf, sc->bytes);
        sc->buf = NULL;
        sc->bytes = 0;
        TRY(dalloc(g, ZINC_MEM_BUCKETS, bytes, "the gradient buffer of a nested module", &sc->buf));
        sc->bytes = bytes;
    }
    TRY(g->c.dev->ops->memset0(g->c.dev, sc->buf, bytes));
    sc->busy = true;
    m->scratch = k;
    m->slot = ZSLOT_SCRATCH;
    *out = sc->buf;
    return ZINC_OK;
fail:
    return st;
}

/* Stage 2-3 placement. A module entered again in the same micro-step, or one that enclosed another
 * module's backward, keeps its gradients in a buffer of its own from then on (`hold`), so all of its
 * entries are reduced once, at the end of the micro-step. A module whose usual slot would send or
 * overwrite an open module's gradients takes a scratch buffer, reduced when it exits. */
static zinc_status enter_sharded(zgrads *g, int module, void **out) {
    zinc_status st = ZINC_OK;
    const zmodule *m = &g->c.modules[module];
    zgrads_module *s = &g->mods[module];
    if (s->bwd_entries > 0 && !s->hold) {
        ZLOG_DEBUG(g->c.log,
                   "module \"%s\" entered twice in one backward: its gradients now collect in a buffer "
                   "of their own and are reduced once per micro-step",
                   m->name);
        s->hold = true;
    }
    if (s->hold) return enter_held(g, module, out);

    zbucket *b = &g->buckets[g->cur_bucket];
    bool large = zmodule_numel(m) > g->bucket_cap;
    bool needs_flush = b->hi > b->lo && (large || b->lo != m->flat_end || b->hi - m->flat_begin > g->bucket_cap);
    int blocker = needs_flush ? open_in(g, module, ZSLOT_BUCKET) : -1;
    if (blocker < 0 && large) blocker = open_in(g, module, ZSLOT_LANDING);
    if (blocker >= 0) {
        const char *bname = g->c.modules[blocker].name;
        ZLOG_DEBUG(g->c.log,
                   "module \"%s\" entered inside the backward of \"%s\": a scratch buffer for now, and "
                   "\"%s\" keeps its gradients in a buffer of its own from the next micro-step",
                   m->name, bname, bname);
        g->mods[blocker].hold = true;
        return enter_scratch(g, module, out);
    }
    if (large) {
        /* The landing buffer, once every send that may still read it is done. */
        TRY(flush_current(g));
        for (int i = 0; i < g->nbuckets; i++) TRY(complete(g, &g->buckets[i]));
        TRY(g->c.dev->ops->memset0(g->c.dev, g->landing, (size_t)zmodule_numel(m) * gsz(g)));
        s->slot = ZSLOT_LANDING;
        *out = g->landing;
        return ZINC_OK;
    }
    if (needs_flush) {
        TRY(flush_current(g));
        b = &g->buckets[g->cur_bucket];
    }
    if (b->hi <= b->lo) b->lo = b->hi = m->flat_end;
    b->lo = m->flat_begin;
    char *base = (char *)b->grads + (size_t)(g->bucket_cap - (b->hi - m->flat_begin)) * gsz(g);
    TRY(g->c.dev->ops->memset0(g->c.dev, base, (size_t)zmodule_numel(m) * gsz(g)));
    s->slot = ZSLOT_BUCKET;
    *out = base;
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_module_backward_enter(zgrads *g, int module, void **grads) {
    zinc_status st = ZINC_OK;
    if (module < 0 || module >= g->c.nmodules || !g->mods)
        return ZERR(ZINC_ERR_INTERNAL, "zgrads_module_backward_enter: module %d of %d (before zgrads_alloc?)", module,
                    g->c.nmodules);
    zgrads_module *s = &g->mods[module];
    g->det.dirty = true;
    if (g->c.stage <= 1) {
        s->slot = ZSLOT_FULL; /* every entry adds into the full buffer: nesting and re-entry need nothing */
        *grads = (char *)g->full + (size_t)g->c.modules[module].flat_begin * gsz(g);
    } else {
        TRY(enter_sharded(g, module, grads));
    }
    s->bwd_entries++;
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_module_backward_exit(zgrads *g, int module, bool none_open) {
    zinc_status st = ZINC_OK;
    if (module < 0 || module >= g->c.nmodules || !g->mods)
        return ZERR(ZINC_ERR_INTERNAL, "zgrads_module_backward_exit: module %d of %d (before zgrads_alloc?)", module,
                    g->c.nmodules);
    const zmodule *m = &g->c.modules[module];
    zgrads_module *s = &g->mods[module];
    int slot = s->slot;
    s->slot = ZSLOT_NONE;
    if (slot == ZSLOT_LANDING) TRY(send_buffer(g, g->landing, m->flat_begin, m->flat_end));
    if (slot == ZSLOT_SCRATCH) {
        zscratch *sc = &g->scratch[s->scratch];
        TRY(send_buffer(g, sc->buf, m->flat_begin, m->flat_end));
        sc->busy = false;
    }
    /* The first module closes backward: send what is left now rather than at the next forward (held
     * modules wait for the micro-step's end: a tied module may still be entered again). */
    if (g->c.stage >= 2 && module == 0 && none_open) TRY(flush_current(g));
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_flush(zgrads *g) {
    zinc_status st = ZINC_OK;
    for (int i = 0; g->mods && i < g->c.nmodules; i++) g->mods[i].bwd_entries = 0;
    if (g->c.stage < 2) return g->c.deterministic && g->det.dirty ? zgrads_det_end_micro_step(g) : ZINC_OK;
    TRY(flush_current(g));
    for (int i = 0; g->mods && i < g->c.nmodules; i++) {
        zgrads_module *s = &g->mods[i];
        if (!s->held_dirty) continue;
        s->held_dirty = false;
        TRY(send_buffer(g, s->held, g->c.modules[i].flat_begin, g->c.modules[i].flat_end));
    }
    for (int i = 0; i < g->nbuckets; i++) TRY(complete(g, &g->buckets[i]));
    if (g->c.deterministic && g->det.dirty) TRY(zgrads_det_end_micro_step(g));
    return ZINC_OK;
fail:
    return st;
}

/* Stage 0: all-reduce the full gradient in chunks (converted when the comm dtype differs). */
static zinc_status allreduce_full(zgrads *g) {
    zinc_status st = ZINC_OK;
    zcomm_req *r;
    if (g->c.world == 1 && !send_needs_copy(g)) return ZINC_OK;
    if (!g->trace_track_allreduce) g->trace_track_allreduce = ztrace_track("comm all-reduce");
    if (!send_needs_copy(g)) {
        int64_t t0 = ztrace_begin();
        TRY(zdev_comm_begin(g->c.dev));
        int dev_span = zdev_trace_begin(g->c.dev, ZDEV_STREAM_COMM);
        TRY(zcomm_allreduce(g->c.dcomm, g->full, (size_t)g->c.part->padded, g->c.grad_dtype, ZCOMM_SUM,
                            zdev_req(g->c.dev, &r)));
        zdev_trace_end(g->c.dev, dev_span, ZTRACE_COMM, "all_reduce", "bytes", g->c.part->padded * (int64_t)gsz(g));
        TRY(zdev_comm_wait(g->c.dev, g->c.dcomm, r));
        if (t0)
            ztrace_span(t0, ZTRACE_COMM, "all_reduce", g->trace_track_allreduce, "bytes",
                        g->c.part->padded * (int64_t)gsz(g), NULL, 0);
        return ZINC_OK;
    }
    void *buf = g->buckets[0].send;
    for (int64_t a = 0; a < g->c.part->padded; a += g->bucket_cap) {
        int64_t n = g->c.part->padded - a < g->bucket_cap ? g->c.part->padded - a : g->bucket_cap;
        char *piece = (char *)g->full + (size_t)a * gsz(g);
        TRY(convert(g, buf, g->c.comm_dtype, piece, g->c.grad_dtype, (size_t)n, pre_scale(g)));
        int64_t t0 = ztrace_begin();
        TRY(zdev_comm_begin(g->c.dev));
        TRY(zcomm_allreduce(g->c.dcomm, buf, (size_t)n, g->c.comm_dtype, ZCOMM_SUM, zdev_req(g->c.dev, &r)));
        TRY(zdev_comm_wait(g->c.dev, g->c.dcomm, r));
        if (t0)
            ztrace_span(t0, ZTRACE_COMM, "all_reduce", g->trace_track_allreduce, "bytes",
                        n * (int64_t)zinc_dtype_size(g->c.comm_dtype), NULL, 0);
        TRY(convert(g, piece, g->c.grad_dtype, buf, g->c.comm_dtype, (size_t)n, 1.0f));
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_reduce_boundary(zgrads *g) {
    zinc_status st = ZINC_OK;
    if (g->c.deterministic) {
        TRY(zgrads_flush(g));
        return zgrads_det_finish(g);
    }
    if (g->c.stage == 0) return allreduce_full(g);
    if (g->c.stage >= 2) return zgrads_flush(g);
    /* Stage 1: reduce-scatter the full buffer chunk by chunk, alternating slots under overlap_comm. */
    for (int64_t a = 0; a < g->c.part->padded; a += g->bucket_cap) {
        int64_t b = a + g->bucket_cap < g->c.part->padded ? a + g->bucket_cap : g->c.part->padded;
        zbucket *bk = &g->buckets[g->cur_bucket];
        TRY(complete(g, bk));
        TRY(issue(g, bk, (const char *)g->full + (size_t)a * gsz(g), a, b));
        g->cur_bucket = (g->cur_bucket + 1) % g->nbuckets;
    }
    for (int i = 0; i < g->nbuckets; i++) TRY(complete(g, &g->buckets[i]));
    return ZINC_OK;
fail:
    return st;
}

double zgrads_post_scale(const zgrads *g) {
    if (g->c.prescale_gradients) return 1.0;
    return g->c.predivide_factor / (double)g->c.world;
}

const void *zgrads_local(const zgrads *g, zinc_dtype *dtype) {
    if (g->c.stage == 0) {
        *dtype = g->c.grad_dtype;
        return g->full;
    }
    *dtype = ZINC_FP32;
    return g->shard;
}

const void *zgrads_norm_slice(const zgrads *g, zinc_dtype *dtype, size_t *n, int64_t *flat_lo) {
    *n = (size_t)g->c.part->shard;
    *flat_lo = (int64_t)g->c.rank * g->c.part->shard;
    if (g->c.stage == 0) {
        *dtype = g->c.grad_dtype;
        return (const char *)g->full + (size_t)*flat_lo * gsz(g);
    }
    *dtype = ZINC_FP32;
    return g->shard;
}

zinc_status zgrads_zero(zgrads *g) {
    zinc_status st = ZINC_OK;
    if (g->full) TRY(g->c.dev->ops->memset0(g->c.dev, g->full, g->bytes_full));
    if (g->shard) TRY(g->c.dev->ops->memset0(g->c.dev, g->shard, g->bytes_shard));
    if (!g->shard && g->c.shard_zero) g->c.shard_zero(g->c.shard_owner);
fail:
    return st;
}

zinc_status zgrads_reset(zgrads *g) {
    for (int i = 0; i < g->nbuckets; i++) {
        zbucket *b = &g->buckets[i];
        if (b->req) (void)zdev_comm_wait(g->c.dev, g->c.dcomm, b->req); /* its data is dropped either way */
        b->req = NULL;
        b->trace_t0 = 0;
        b->lo = b->hi = b->recv_lo = b->recv_hi = 0;
    }
    g->cur_bucket = 0;
    for (int i = 0; g->mods && i < g->c.nmodules; i++) {
        g->mods[i].held_dirty = false;
        g->mods[i].bwd_entries = 0;
    }
    for (int i = 0; i < g->nscratch; i++) g->scratch[i].busy = false;
    if (g->c.deterministic) {
        zinc_status st = zgrads_det_reset(g);
        if (st != ZINC_OK) return st;
    }
    return zgrads_zero(g);
}
