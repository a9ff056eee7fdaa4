/* zinc.deterministic_reduction: the step's fp32 gradient sum as one fixed binary tree over the global
 * micro-batch index, so 1 rank x 4 micro-steps, 2 x 2 and 4 x 1 give the same bits.
 *
 * The models give micro-step j of rank r the global micro-batch m = j x world + r (examples/mlp, examples/gpt2).
 * The pairwise tree over consecutive m, T(a..b) = T(first half) + T(second half), then has its low
 * log2(world) levels across the ranks within one micro-step and its upper log2(gas) levels across
 * micro-steps; both counts must be powers of two (config_determinism.c) for its nodes to fall on every
 * split. Float addition is commutative (a + b == b + a bitwise), so only the association matters, and
 * either side of a pair may compute it.
 *
 * Across the ranks: recursive halving, lowest bit first. At level i a rank and its partner r xor 2^i hold
 * the same set of per-rank pieces (those whose index agrees with r in the bits below i), each a sum over
 * the 2^i ranks of their group; each keeps the pieces whose bit i is its own, sends the others, and adds
 * the partner's: mine + theirs is the node over 2^(i+1) consecutive ranks. After log2(world) levels a rank
 * holds its own shard's piece, summed over all ranks. Sent per rank and micro-step: (1 - 1/world) x the
 * range, as a reduce-scatter, in world - 1 messages (one per piece; point to point, blocking).
 * Across the micro-steps: a binary counter of partial sums, part[k] the sum of 2^k consecutive micro-steps,
 * so gas 4 gives ((s0 + s1) + (s2 + s3)).
 *
 * Scaling: a pre-scale (prescale_gradients, gradient_predivide_factor) multiplies each leaf, the same
 * rounding for the same leaf whatever the split; the step's 1/(world x gas) is a power of two (exact). */
#include <stdlib.h>
#include <string.h>

#include "zero/grads.h"

#include "base/core/error.h"
#include "base/core/trace.h"

static size_t shard_bytes(const zgrads *g) { return (size_t)g->c.part->shard * sizeof(float); }

static zinc_status dalloc(zgrads *g, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return g->c.dev->ops->alloc(g->c.dev, cat, bytes, what, out);
}

static void dfree(zgrads *g, zinc_mem_category cat, void *p, size_t bytes) {
    if (p) g->c.dev->ops->free(g->c.dev, cat, p, bytes);
}

/* dst += src over n fp32 elements: dst + src, one rounding (the scale 1 is exact). */
static zinc_status add(zgrads *g, float *dst, const float *src, size_t n) {
    return g->c.dev->ops->axpy_f32(g->c.dev, dst, src, ZINC_FP32, 1.0f, n, 1);
}

static zinc_status copy(zgrads *g, float *dst, const float *src) {
    return g->c.dev->ops->copy(g->c.dev, dst, src, shard_bytes(g), ZDEV_D2D);
}

/* The step's sum lands in the fp32 shard the optimizer reads (stages 1-3), or in `sum` (stage 0). */
static float *result(zgrads *g) { return g->c.stage == 0 ? g->det.sum : g->shard; }

zinc_status zgrads_det_alloc(zgrads *g) {
    zinc_status st = ZINC_OK;
    zgrads_determ *d = &g->det;
    const zgrads_plan *p = g->c.sizes;
    int levels = 0;
    while (((int64_t)1 << levels) < g->c.gas) levels++;
    if (((int64_t)1 << levels) != g->c.gas || levels > 30 || p->determ_shards != 1 + levels + (g->c.stage == 0))
        return ZERR(ZINC_ERR_INTERNAL,
                    "zinc.deterministic_reduction: gradient_accumulation_steps %lld against %d planned buffers",
                    (long long)g->c.gas, p->determ_shards);
    if (strncmp(g->c.dev->ops->name, "cpu", 3) != 0)
        return ZERR(ZINC_ERR_UNSUPPORTED,
                    "zinc.deterministic_reduction runs on the cpu device only, this engine's device is %s: set "
                    "zinc.device \"cpu\" or zinc.deterministic_reduction false",
                    g->c.dev->ops->name);
    if (g->c.world > 1 && !g->c.dcomm->ops->sendrecv)
        return ZERR(ZINC_ERR_UNSUPPORTED,
                    "zinc.deterministic_reduction needs point-to-point messages, which the %s collective backend "
                    "of device %s lacks: run on the plain cpu device, or set zinc.deterministic_reduction false",
                    g->c.dcomm->ops->name, g->c.dev->ops->name);
    d->levels = levels;
    size_t bytes = p->bytes_determ_shard;
    TRY(dalloc(g, ZINC_MEM_GRADS, bytes, "the deterministic reduction's partial sums", (void **)&d->cur));
    if (levels) TRY_ALLOC(d->part, levels, "the deterministic reduction's partial sums");
    for (int k = 0; k < levels; k++)
        TRY(dalloc(g, ZINC_MEM_GRADS, bytes, "the deterministic reduction's partial sums", (void **)&d->part[k]));
    if (g->c.stage == 0)
        TRY(dalloc(g, ZINC_MEM_GRADS, bytes, "the deterministic reduction's partial sums", (void **)&d->sum));
    if (p->bytes_determ_recv)
        TRY(dalloc(g, ZINC_MEM_BUCKETS, p->bytes_determ_recv, "the deterministic reduction's receive buffer",
                   (void **)&d->recv));
    TRY_ALLOC(d->counts, g->c.world, "the deterministic reduction's pieces");
    TRY_ALLOC(d->displs, g->c.world, "the deterministic reduction's pieces");
    return ZINC_OK;
fail:
    return st;
}

void zgrads_det_free(zgrads *g) {
    zgrads_determ *d = &g->det;
    size_t bytes = g->c.sizes ? g->c.sizes->bytes_determ_shard : 0;
    dfree(g, ZINC_MEM_GRADS, d->cur, bytes);
    for (int k = 0; d->part && k < d->levels; k++) dfree(g, ZINC_MEM_GRADS, d->part[k], bytes);
    free(d->part);
    dfree(g, ZINC_MEM_GRADS, d->sum, bytes);
    dfree(g, ZINC_MEM_BUCKETS, d->recv, g->c.sizes ? g->c.sizes->bytes_determ_recv : 0);
    free(d->counts);
    free(d->displs);
    *d = (zgrads_determ){0};
}

zinc_status zgrads_det_reduce_range(zgrads *g, float *work, int64_t a, int64_t b) {
    zinc_status st = ZINC_OK;
    zgrads_determ *d = &g->det;
    const int W = g->c.world, r = g->c.rank;
    int64_t t0 = W > 1 ? ztrace_begin() : 0; /* --trace: one span per reduced range */
    zpart_range_split(g->c.part, a, b, d->counts, d->displs);
    for (int bit = 1; bit < W; bit <<= 1) {
        int partner = r ^ bit;
        /* the pieces both hold agree with r below `bit`; ascending s pairs with the partner's s ^ bit */
        for (int s = 0; s < W; s++) {
            if ((s & (bit - 1)) != (r & (bit - 1)) || (s & bit) != (r & bit)) continue;
            int give = s ^ bit;
            size_t nkeep = d->counts[s], ngive = d->counts[give];
            if (!nkeep && !ngive) continue; /* the partner skips the same pair */
            TRY(zcomm_sendrecv(g->c.dcomm, work + d->displs[give], ngive, partner, d->recv, nkeep, partner, ZINC_FP32));
            if (nkeep) TRY(add(g, work + d->displs[s], d->recv, nkeep));
        }
    }
    if (d->counts[r]) {
        int64_t lo = a + (int64_t)d->displs[r], shard_lo = (int64_t)r * g->c.part->shard;
        TRY(add(g, d->cur + (lo - shard_lo), work + d->displs[r], d->counts[r]));
    }
    if (t0) ztrace_span(t0, ZTRACE_COMM, "tree_reduce", 0, "bytes", (b - a) * (int64_t)sizeof(float), NULL, 0);
    return ZINC_OK;
fail:
    return st;
}

/* Adds this micro-step's sum (cur) into the binary counter and zeroes cur. */
static zinc_status fold(zgrads *g) {
    zinc_status st = ZINC_OK;
    zgrads_determ *d = &g->det;
    float *carry = d->cur;
    int k = 0;
    if (d->done) { /* more micro-steps than gradient_accumulation_steps (the engine warns): added after */
        TRY(add(g, result(g), carry, (size_t)g->c.part->shard));
        return g->c.dev->ops->memset0(g->c.dev, d->cur, shard_bytes(g));
    }
    for (; k < d->levels && (d->filled >> k & 1u); k++) {
        TRY(add(g, d->part[k], carry, (size_t)g->c.part->shard)); /* earlier + later */
        d->filled &= ~(1u << k);
        carry = d->part[k];
    }
    if (k < d->levels) {
        TRY(copy(g, d->part[k], carry));
        d->filled |= 1u << k;
    } else {
        TRY(copy(g, result(g), carry));
        d->done = true;
    }
    TRY(g->c.dev->ops->memset0(g->c.dev, d->cur, shard_bytes(g)));
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_det_end_micro_step(zgrads *g) {
    zinc_status st = ZINC_OK;
    g->det.dirty = false;
    if (g->c.stage <= 1) { /* the model wrote this micro-step's gradient alone into the (zeroed) full buffer */
        size_t n = (size_t)g->c.part->padded;
        float pre = zsize_pre_scale(g->c.prescale_gradients, g->c.predivide_factor, g->c.world);
        if (pre != 1.0f) TRY(g->c.dev->ops->scale(g->c.dev, g->full, ZINC_FP32, pre, n));
        TRY(zgrads_det_reduce_range(g, (float *)g->full, 0, g->c.part->padded));
        TRY(g->c.dev->ops->memset0(g->c.dev, g->full, g->bytes_full));
    }
    return fold(g);
fail:
    return st;
}

zinc_status zgrads_det_finish(zgrads *g) {
    zinc_status st = ZINC_OK;
    zgrads_determ *d = &g->det;
    float *res = result(g);
    if (!d->done) { /* fewer micro-steps than gradient_accumulation_steps: the partial sums, earliest first */
        bool any = false;
        for (int k = d->levels - 1; k >= 0; k--) {
            if (!(d->filled >> k & 1u)) continue;
            if (any)
                TRY(add(g, res, d->part[k], (size_t)g->c.part->shard));
            else
                TRY(copy(g, res, d->part[k]));
            any = true;
        }
        if (!any) TRY(g->c.dev->ops->memset0(g->c.dev, res, shard_bytes(g)));
    }
    d->filled = 0;
    d->done = false;
    if (g->c.stage == 0) { /* every rank's full buffer holds the whole sum: copies, no more arithmetic */
        int64_t shard = g->c.part->shard;
        TRY(g->c.dev->ops->copy(g->c.dev, (float *)g->full + (size_t)g->c.rank * (size_t)shard, res, shard_bytes(g),
                                ZDEV_D2D));
        for (int r = 0; r < g->c.world; r++) {
            d->counts[r] = (size_t)shard;
            d->displs[r] = (size_t)(r * shard);
        }
        zcomm_req *req = NULL;
        TRY(zdev_comm_begin(g->c.dev));
        TRY(zcomm_allgatherv_inplace(g->c.dcomm, g->full, d->counts, d->displs, ZINC_FP32, zdev_req(g->c.dev, &req)));
        TRY(zdev_comm_wait(g->c.dev, g->c.dcomm, req));
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zgrads_det_reset(zgrads *g) {
    zgrads_determ *d = &g->det;
    d->filled = 0;
    d->done = false;
    d->dirty = false;
    return d->cur ? g->c.dev->ops->memset0(g->c.dev, d->cur, shard_bytes(g)) : ZINC_OK;
}
