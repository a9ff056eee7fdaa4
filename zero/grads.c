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
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"
#include "zero/sizing.h"

static size_t gsz(const zinc_engine *e) { return zinc_dtype_size(e->grad_dtype); }
static int64_t mod_numel(const zmodule *m) { return m->flat_end - m->flat_begin; }

/* What each rank multiplies its gradient by before communication: DeepSpeed's prescale_gradients
 * divides by the world size first; otherwise it divides by gradient_predivide_factor (default 1) and
 * the step multiplies by predivide / world afterwards (see zgrads_post_scale). */
static float pre_scale(const zinc_engine *e) {
    return zsize_pre_scale(e->cfg.prescale_gradients, e->cfg.gradient_predivide_factor, e->world);
}

/* Converts n elements from one dtype to another on the device, multiplying by scale. */
static zinc_status convert(zinc_engine *e, void *dst, zinc_dtype dt, const void *src, zinc_dtype st, size_t n,
                           float scale) {
    return e->dev->ops->convert(e->dev, dst, dt, src, st, n, scale);
}

static bool send_needs_copy(const zinc_engine *e) {
    return zsize_send_needs_copy(e->comm_dtype, e->grad_dtype, e->cfg.prescale_gradients,
                                 e->cfg.gradient_predivide_factor, e->world);
}

zinc_status zgrads_alloc(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    /* The sizes come from zero/sizing.c, which the memory estimator uses too. */
    int64_t biggest = 0;
    for (int m = 0; m < e->nmodules; m++) {
        int64_t n = e->modules[m].flat_end - e->modules[m].flat_begin;
        if (n > biggest) biggest = n;
    }
    zgrads_plan plan;
    zgrads_plan_make(&(zgrads_plan_in){.stage = e->stage, .world = e->world, .part = &e->part,
                                       .grad_dtype = e->grad_dtype, .comm_dtype = e->comm_dtype,
                                       .send_needs_copy = send_needs_copy(e),
                                       .reduce_bucket_size = e->cfg.zero.reduce_bucket_size,
                                       .biggest_module = biggest, .overlap_comm = e->cfg.zero.overlap_comm},
                     &plan);
    e->bytes_grads_full = plan.bytes_grads_full;
    e->bytes_grads_shard = plan.bytes_grads_shard;
    if (e->stage <= 1)
        TRY(zengine_alloc(e, ZINC_MEM_GRADS, e->bytes_grads_full, "the gradient buffer", &e->grads_full));
    if (e->stage >= 1)
        TRY(zengine_alloc(e, ZINC_MEM_GRADS, e->bytes_grads_shard, "the fp32 gradient shard",
                          (void **)&e->grads_shard));
    if (plan.nbuckets == 0) return ZINC_OK;
    e->bucket_cap = plan.bucket_cap;
    e->bytes_landing = plan.bytes_landing;
    if (e->bytes_landing)
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, e->bytes_landing, "the gradient landing buffer for large modules",
                          &e->landing));
    e->nbuckets = plan.nbuckets;
    e->bytes_bucket_grads = plan.bytes_bucket_grads;
    e->bytes_bucket_send = plan.bytes_bucket_send;
    e->bytes_bucket_recv = plan.bytes_bucket_recv;
    for (int i = 0; i < e->nbuckets; i++) {
        zbucket *b = &e->buckets[i];
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, e->bytes_bucket_grads, "a gradient bucket", &b->grads));
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, e->bytes_bucket_send, "a communication buffer", &b->send));
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, e->bytes_bucket_recv, "a reduce-scatter buffer", &b->recv));
        TRY_ALLOC(b->counts, e->world, "collective counts");
        TRY_ALLOC(b->displs, e->world, "collective displacements");
        b->lo = b->hi = 0;
    }
    return ZINC_OK;
fail:
    return st;
}

void zgrads_free(zinc_engine *e) {
    for (int i = 0; i < e->nbuckets; i++) {
        zbucket *b = &e->buckets[i];
        if (b->req) zcomm_wait(e->dcomm, b->req);
        b->req = NULL;
        zengine_free(e, ZINC_MEM_BUCKETS, b->grads, e->bytes_bucket_grads);
        zengine_free(e, ZINC_MEM_BUCKETS, b->send, e->bytes_bucket_send);
        zengine_free(e, ZINC_MEM_BUCKETS, b->recv, e->bytes_bucket_recv);
        free(b->counts);
        free(b->displs);
        b->counts = b->displs = NULL;
    }
    e->nbuckets = 0;
    zengine_free(e, ZINC_MEM_BUCKETS, e->landing, e->bytes_landing);
    e->landing = NULL;
    for (int i = 0; i < e->nmodules; i++) {
        zmodule *m = &e->modules[i];
        zengine_free(e, ZINC_MEM_BUCKETS, m->held, m->held ? (size_t)mod_numel(m) * gsz(e) : 0);
        m->held = NULL;
        m->held_dirty = false;
    }
    for (int i = 0; i < e->nscratch; i++) zengine_free(e, ZINC_MEM_BUCKETS, e->scratch[i].buf, e->scratch[i].bytes);
    free(e->scratch);
    e->scratch = NULL;
    e->nscratch = 0;
    zengine_free(e, ZINC_MEM_GRADS, e->grads_full, e->bytes_grads_full);
    zengine_free(e, ZINC_MEM_GRADS, e->grads_shard, e->bytes_grads_shard);
    e->grads_full = NULL;
    e->grads_shard = NULL;
}

/* Completes a slot's pending reduce-scatter and adds this rank's piece into the fp32 shard. */
static zinc_status complete(zinc_engine *e, zbucket *b) {
    zinc_status st = ZINC_OK;
    if (!b->req && b->recv_hi <= b->recv_lo) return ZINC_OK;
    if (b->req) {
        zcomm_req *r = b->req;
        b->req = NULL;
        TRY(zdev_comm_wait(e->dev, e->dcomm, r));
    }
    if (b->recv_hi > b->recv_lo) {
        int64_t shard_lo = (int64_t)e->rank * e->part.shard;
        TRY(e->dev->ops->axpy_f32(e->dev, e->grads_shard + (b->recv_lo - shard_lo), b->recv, e->comm_dtype, 1.0f,
                                  (size_t)(b->recv_hi - b->recv_lo), 1));
    }
    b->recv_lo = b->recv_hi = 0;
    return ZINC_OK;
fail:
    return st;
}

/* Starts the reduce-scatter of flat range [a, b), whose grad-dtype values start at src, using slot b's
 * buffers. Blocking unless overlap_comm. */
static zinc_status issue(zinc_engine *e, zbucket *bk, const void *src, int64_t a, int64_t b) {
    zinc_status st = ZINC_OK;
    const void *send = src;
    if (send_needs_copy(e)) {
        TRY(convert(e, bk->send, e->comm_dtype, src, e->grad_dtype, (size_t)(b - a), pre_scale(e)));
        send = bk->send;
    }
    zpart_range_split(&e->part, a, b, bk->counts, bk->displs);
    zpart_intersect(&e->part, e->rank, a, b, &bk->recv_lo, &bk->recv_hi);
    TRY(zdev_comm_begin(e->dev));
    e->stat_rs_sends++;
    /* One bucket: blocking on cpu; on a GPU a request the compute stream waits for in complete(). */
    TRY(zcomm_reduce_scatterv(e->dcomm, send, bk->recv, bk->counts, e->comm_dtype,
                              e->nbuckets > 1 ? &bk->req : zdev_req(e->dev, &bk->req)));
    if (e->nbuckets == 1) TRY(complete(e, bk));
    return ZINC_OK;
fail:
    return st;
}

/* Sends the current bucket and moves to the other slot (finishing what that slot had in flight). */
static zinc_status flush_current(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    zbucket *b = &e->buckets[e->cur_bucket];
    if (b->hi <= b->lo) return ZINC_OK;
    const void *src = (const char *)b->grads + (size_t)(e->bucket_cap - (b->hi - b->lo)) * gsz(e);
    TRY(issue(e, b, src, b->lo, b->hi));
    b->lo = b->hi = 0;
    e->cur_bucket = (e->cur_bucket + 1) % e->nbuckets;
    TRY(complete(e, &e->buckets[e->cur_bucket]));
    return ZINC_OK;
fail:
    return st;
}

/* Reduce-scatters a module's gradients from a buffer of its own (landing, held or scratch) in bucket-sized
 * chunks, through the buckets' communication buffers only: the buckets' gradient contents (which may hold
 * an open module's slot) and the current bucket stay as they are. Everything is complete on return, so the
 * buffer may be reused. */
static zinc_status send_buffer(zinc_engine *e, const void *src, int64_t lo, int64_t hi) {
    zinc_status st = ZINC_OK;
    int k = e->cur_bucket;
    for (int64_t a = lo; a < hi; a += e->bucket_cap) {
        int64_t b = a + e->bucket_cap < hi ? a + e->bucket_cap : hi;
        k = (k + 1) % e->nbuckets;
        zbucket *bk = &e->buckets[k];
        TRY(complete(e, bk));
        TRY(issue(e, bk, (const char *)src + (size_t)(a - lo) * gsz(e), a, b));
    }
    for (int i = 0; i < e->nbuckets; i++) TRY(complete(e, &e->buckets[i]));
    return ZINC_OK;
fail:
    return st;
}

static void point_grads(zinc_engine *e, const zmodule *m, char *base) {
    for (int i = 0; i < m->nparams; i++) {
        zinc_param *p = e->params[m->first_param + i];
        p->grad = base + (size_t)(p->flat_offset - m->flat_begin) * gsz(e);
    }
}

/* An open module other than `self` whose slot is `kind`, or NULL. */
static zmodule *open_in(zinc_engine *e, int self, zgrad_slot kind) {
    for (int i = 0; i < e->nmodules; i++)
        if (i != self && e->modules[i].in_phase[ZINC_BACKWARD] && e->modules[i].slot == (int)kind)
            return &e->modules[i];
    return NULL;
}

/* The module's own buffer: zeroed at its first entry of a micro-step, added into by later ones. */
static zinc_status enter_held(zinc_engine *e, zmodule *m) {
    zinc_status st = ZINC_OK;
    if (!m->held)
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, (size_t)mod_numel(m) * gsz(e),
                          "the gradient buffer of a re-entered or enclosing module", &m->held));
    if (!m->held_dirty) TRY(e->dev->ops->memset0(e->dev, m->held, (size_t)mod_numel(m) * gsz(e)));
    m->held_dirty = true;
    m->slot = ZSLOT_HELD;
    point_grads(e, m, m->held);
    return ZINC_OK;
fail:
    return st;
}

/* A pooled buffer for a module entered while another module's slot must stay untouched. */
static zinc_status enter_scratch(zinc_engine *e, zmodule *m) {
    zinc_status st = ZINC_OK;
    size_t bytes = (size_t)mod_numel(m) * gsz(e);
    int k = -1;
    for (int i = 0; i < e->nscratch; i++)
        if (!e->scratch[i].busy && (k < 0 || e->scratch[i].bytes > e->scratch[k].bytes)) k = i;
    if (k < 0) {
        zscratch *s = realloc(e->scratch, (size_t)(e->nscratch + 1) * sizeof *s);
        if (!s) return ZERR(ZINC_ERR_NOMEM, "out of memory for the nested-module gradient pool");
        e->scratch = s;
        k = e->nscratch++;
        e->scratch[k] = (zscratch){0};
    }
    zscratch *sc = &e->scratch[k];
    if (sc->bytes < bytes) {
        zengine_free(e, ZINC_MEM_BUCKETS, sc->buf, sc->bytes);
        sc->buf = NULL;
        sc->bytes = 0;
        TRY(zengine_alloc(e, ZINC_MEM_BUCKETS, bytes, "the gradient buffer of a nested module", &sc->buf));
        sc->bytes = bytes;
    }
    TRY(e->dev->ops->memset0(e->dev, sc->buf, bytes));
    sc->busy = true;
    m->scratch = k;
    m->slot = ZSLOT_SCRATCH;
    point_grads(e, m, sc->buf);
    return ZINC_OK;
fail:
    return st;
}

/* Stage 2-3 placement. A module entered again in the same micro-step, or one that enclosed another
 * module's backward, keeps its gradients in a buffer of its own from then on (`hold`), so all of its
 * entries are reduced once, at the end of the micro-step. A module whose usual slot would send or
 * overwrite an open module's gradients takes a scratch buffer, reduced when it exits. */
static zinc_status enter_sharded(zinc_engine *e, int module) {
    zinc_status st = ZINC_OK;
    zmodule *m = &e->modules[module];
    if (m->bwd_entries > 0 && !m->hold) {
        ZLOG_DEBUG(&e->log, "module \"%s\" entered twice in one backward: its gradients now collect in a buffer "
                            "of their own and are reduced once per micro-step",
                   m->name);
        m->hold = true;
    }
    if (m->hold) return enter_held(e, m);

    zbucket *b = &e->buckets[e->cur_bucket];
    bool large = mod_numel(m) > e->bucket_cap;
    bool needs_flush = b->hi > b->lo && (large || b->lo != m->flat_end || b->hi - m->flat_begin > e->bucket_cap);
    zmodule *blocker = needs_flush ? open_in(e, module, ZSLOT_BUCKET) : NULL;
    if (!blocker && large) blocker = open_in(e, module, ZSLOT_LANDING);
    if (blocker) {
        ZLOG_DEBUG(&e->log, "module \"%s\" entered inside the backward of \"%s\": a scratch buffer for now, and "
                            "\"%s\" keeps its gradients in a buffer of its own from the next micro-step",
                   m->name, blocker->name, blocker->name);
        blocker->hold = true;
        return enter_scratch(e, m);
    }
    if (large) {
        /* The landing buffer, once every send that may still read it is done. */
        TRY(flush_current(e));
        for (int i = 0; i < e->nbuckets; i++) TRY(complete(e, &e->buckets[i]));
        TRY(e->dev->ops->memset0(e->dev, e->landing, (size_t)mod_numel(m) * gsz(e)));
        m->slot = ZSLOT_LANDING;
        point_grads(e, m, e->landing);
        return ZINC_OK;
    }
    if (needs_flush) {
        TRY(flush_current(e));
        b = &e->buckets[e->cur_bucket];
    }
    if (b->hi <= b->lo) b->lo = b->hi = m->flat_end;
    b->lo = m->flat_begin;
    char *base = (char *)b->grads + (size_t)(e->bucket_cap - (b->hi - m->flat_begin)) * gsz(e);
    TRY(e->dev->ops->memset0(e->dev, base, (size_t)mod_numel(m) * gsz(e)));
    m->slot = ZSLOT_BUCKET;
    point_grads(e, m, base);
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_module_backward_enter(zinc_engine *e, int module) {
    zinc_status st = ZINC_OK;
    zmodule *m = &e->modules[module];
    if (e->stage <= 1) {
        m->slot = ZSLOT_FULL; /* every entry adds into the full buffer: nesting and re-entry need nothing */
        point_grads(e, m, (char *)e->grads_full + (size_t)m->flat_begin * gsz(e));
    } else {
        TRY(enter_sharded(e, module));
    }
    m->bwd_entries++;
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_module_backward_exit(zinc_engine *e, int module) {
    zinc_status st = ZINC_OK;
    zmodule *m = &e->modules[module];
    for (int i = 0; i < m->nparams; i++) e->params[m->first_param + i]->grad = NULL;
    int slot = m->slot;
    m->slot = ZSLOT_NONE;
    if (slot == ZSLOT_LANDING) TRY(send_buffer(e, e->landing, m->flat_begin, m->flat_end));
    if (slot == ZSLOT_SCRATCH) {
        zscratch *sc = &e->scratch[m->scratch];
        TRY(send_buffer(e, sc->buf, m->flat_begin, m->flat_end));
        sc->busy = false;
    }
    /* The first module closes backward: send what is left now rather than at the next forward (held
     * modules wait for the micro-step's end: a tied module may still be entered again). */
    if (e->stage >= 2 && module == 0 && e->open_backward == 0) TRY(flush_current(e));
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_flush(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    for (int i = 0; i < e->nmodules; i++) e->modules[i].bwd_entries = 0;
    if (e->stage < 2) return ZINC_OK;
    TRY(flush_current(e));
    for (int i = 0; i < e->nmodules; i++) {
        zmodule *m = &e->modules[i];
        if (!m->held_dirty) continue;
        m->held_dirty = false;
        TRY(send_buffer(e, m->held, m->flat_begin, m->flat_end));
    }
    for (int i = 0; i < e->nbuckets; i++) TRY(complete(e, &e->buckets[i]));
    return ZINC_OK;
fail:
    return st;
}

/* Stage 0: all-reduce the full gradient in chunks (converted when the comm dtype differs). */
static zinc_status allreduce_full(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    zcomm_req *r;
    if (e->world == 1 && !send_needs_copy(e)) return ZINC_OK;
    if (!send_needs_copy(e)) {
        TRY(zdev_comm_begin(e->dev));
        TRY(zcomm_allreduce(e->dcomm, e->grads_full, (size_t)e->part.padded, e->grad_dtype, ZCOMM_SUM,
                            zdev_req(e->dev, &r)));
        TRY(zdev_comm_wait(e->dev, e->dcomm, r));
        return ZINC_OK;
    }
    void *buf = e->buckets[0].send;
    for (int64_t a = 0; a < e->part.padded; a += e->bucket_cap) {
        int64_t n = e->part.padded - a < e->bucket_cap ? e->part.padded - a : e->bucket_cap;
        char *g = (char *)e->grads_full + (size_t)a * gsz(e);
        TRY(convert(e, buf, e->comm_dtype, g, e->grad_dtype, (size_t)n, pre_scale(e)));
        TRY(zdev_comm_begin(e->dev));
        TRY(zcomm_allreduce(e->dcomm, buf, (size_t)n, e->comm_dtype, ZCOMM_SUM, zdev_req(e->dev, &r)));
        TRY(zdev_comm_wait(e->dev, e->dcomm, r));
        TRY(convert(e, g, e->grad_dtype, buf, e->comm_dtype, (size_t)n, 1.0f));
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_reduce_boundary(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    if (e->stage == 0) return allreduce_full(e);
    if (e->stage >= 2) return zgrads_flush(e);
    /* Stage 1: reduce-scatter the full buffer chunk by chunk, alternating slots under overlap_comm. */
    for (int64_t a = 0; a < e->part.padded; a += e->bucket_cap) {
        int64_t b = a + e->bucket_cap < e->part.padded ? a + e->bucket_cap : e->part.padded;
        zbucket *bk = &e->buckets[e->cur_bucket];
        TRY(complete(e, bk));
        TRY(issue(e, bk, (const char *)e->grads_full + (size_t)a * gsz(e), a, b));
        e->cur_bucket = (e->cur_bucket + 1) % e->nbuckets;
    }
    for (int i = 0; i < e->nbuckets; i++) TRY(complete(e, &e->buckets[i]));
    return ZINC_OK;
fail:
    return st;
}

double zgrads_post_scale(const zinc_engine *e) {
    if (e->cfg.prescale_gradients) return 1.0;
    return e->cfg.gradient_predivide_factor / (double)e->world;
}

const void *zgrads_local(const zinc_engine *e, zinc_dtype *dtype) {
    if (e->stage == 0) {
        *dtype = e->grad_dtype;
        return e->grads_full;
    }
    *dtype = ZINC_FP32;
    return e->grads_shard;
}

const void *zgrads_norm_slice(const zinc_engine *e, zinc_dtype *dtype, size_t *n, int64_t *flat_lo) {
    *n = (size_t)e->part.shard;
    *flat_lo = (int64_t)e->rank * e->part.shard;
    if (e->stage == 0) {
        *dtype = e->grad_dtype;
        return (const char *)e->grads_full + (size_t)*flat_lo * gsz(e);
    }
    *dtype = ZINC_FP32;
    return e->grads_shard;
}

zinc_status zgrads_zero(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    if (e->grads_full) TRY(e->dev->ops->memset0(e->dev, e->grads_full, e->bytes_grads_full));
    if (e->grads_shard) TRY(e->dev->ops->memset0(e->dev, e->grads_shard, e->bytes_grads_shard));
fail:
    return st;
}

zinc_status zgrads_reset(zinc_engine *e) {
    for (int i = 0; i < e->nbuckets; i++) {
        zbucket *b = &e->buckets[i];
        if (b->req) (void)zdev_comm_wait(e->dev, e->dcomm, b->req); /* its data is dropped either way */
        b->req = NULL;
        b->lo = b->hi = b->recv_lo = b->recv_hi = 0;
    }
    e->cur_bucket = 0;
    for (int i = 0; i < e->nmodules; i++) {
        e->modules[i].held_dirty = false;
        e->modules[i].bwd_entries = 0;
    }
    for (int i = 0; i < e->nscratch; i++) e->scratch[i].busy = false;
    return zgrads_zero(e);
}
