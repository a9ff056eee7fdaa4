/* Muon's whole-matrix step under ZeRO (runtime/optim/optim_muon.c is the elementwise rest). The flat,
 * padded partition (zero/partition.h) splits a matrix across ranks, and Newton-Schulz needs it whole, so
 * before the step pass:
 *   1. each rank computes the Nesterov momentum u of its own matrix elements (a read pass over the state
 *      store), into muon_upd over the own range;
 *   2. one all-to-all sends every piece to its matrix's owner (the plan's owners, runtime/mem/plan_muon.c,
 *      balanced by Newton-Schulz FLOPs: the largest first, each to the least loaded rank), which assembles the matrix,
 *      orthogonalises it (kernels: zmuon_newton_schulz) and a second all-to-all returns each rank its
 *      piece of the update, over u in muon_upd;
 *   3. the pass's Muon kernel recomputes the momentum from the same gradient (the same float operations)
 *      and applies the update.
 * Stage 0 (every rank holds every element) and one rank compute every matrix locally: no collective, the
 * same bits. The owners' assembly buffers exist only in the step, as one scratch block of the size the plan
 * gives (ZPLAN_MUON_SCRATCH: the estimate counts it at the step's peak). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "base/core/trace.h"
#include "kernels/cpu_kernels.h"

static double ns_flops(const zinc_param *p) { return zmuon_ns_flops(p->shape[0], p->shape[1], ZMUON_NS_STEPS); }

zinc_status zengine_muon_build(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    if (!e->optim->whole_matrix) return ZINC_OK;
    if (!e->dev->host_addressable)
        return ZERR(ZINC_ERR_CONFIG,
                    "optimizer Muon runs on the cpu device only so far (its whole-matrix step reads the state and "
                    "gradients in host memory); use \"zinc\": {\"device\": \"cpu\"}");
    for (int i = 0; i < e->nparams; i++) e->nmuon += (e->params[i]->flags & ZINC_PARAM_MUON) != 0;
    if (!e->nmuon)
        ZLOG_WARN(&e->log, "optimizer Muon: no parameter is marked ZINC_PARAM_MUON, so every parameter takes the "
                           "AdamW half");
    if (e->nmuon && zmuon_blas_load(&e->muon_blas, &e->log) != ZINC_OK) {
        ZLOG_WARN(&e->log, "optimizer Muon: Newton-Schulz runs on plain loops, about 30x slower: %s",
                  zinc_last_error());
        e->muon_blas = NULL;
    }
    TRY_ALLOC(e->muon_idx, e->nmuon ? e->nmuon : 1, "Muon's matrices");
    /* the owners, balanced by Newton-Schulz FLOPs, are the plan's (runtime/mem/plan_muon.c), so the plan
     * sizes the assembly this rank makes */
    e->muon_owner = e->plan.muon_owner;
    int n = 0;
    for (int i = 0; i < e->nparams; i++)
        if (e->params[i]->flags & ZINC_PARAM_MUON) e->muon_idx[n++] = i;
    const zplan_entry *u = &e->plan.buf[ZPLAN_MUON_UPDATE];
    if (u->count) TRY(zmem_host_alloc(&e->mem, u->kind, u->cat, u->each, u->what, (void **)&e->muon_upd));
fail:
    return st;
}

void zengine_muon_free(zinc_engine *e) {
    const zplan_entry *u = &e->plan.buf[ZPLAN_MUON_UPDATE];
    if (e->muon_upd) zmem_host_free(&e->mem, u->kind, u->cat, e->muon_upd, u->each);
    e->muon_upd = NULL;
    free(e->muon_idx);
    e->muon_idx = NULL;
    e->muon_owner = NULL; /* the plan's */
}

/* The own part [*lo, *hi) (flat) of rank r of parameter p's elements, at stages 1-3. */
static void piece(const zinc_engine *e, const zinc_param *p, int r, int64_t *lo, int64_t *hi) {
    zpart_intersect(&e->part, r, p->flat_offset, p->flat_offset + p->numel, lo, hi);
}

/* 1: the Nesterov momentum of the own matrix elements into muon_upd; *g2: the sum of their (factored)
 * gradients' squares. */
static zinc_status local_momentum(zinc_engine *e, const zmuon_hparams *h, const char *g, zinc_dtype gdt, double *g2) {
    zinc_status st = ZINC_OK;
    zstate *z = e->state;
    size_t gsz = zinc_dtype_size(gdt);
    TRY(zstate_pass_begin(z, ZSTATE_READ));
    for (int64_t c = 0; c < z->nchunks; c++) {
        zstate_view v;
        TRY(zstate_acquire(z, c, &v));
        int64_t lo = e->own_lo + v.lo, hi = lo + v.n;
        for (int j = 0; j < e->nmuon; j++) {
            const zinc_param *p = e->params[e->muon_idx[j]];
            int64_t a = p->flat_offset > lo ? p->flat_offset : lo;
            int64_t b = p->flat_offset + p->numel < hi ? p->flat_offset + p->numel : hi;
            if (a >= b) continue;
            int64_t o = a - e->own_lo;
            *g2 += zmuon_nesterov_ref(h, (size_t)(b - a), v.m + (a - lo), g + (size_t)o * gsz, gdt, e->muon_upd + o);
        }
        TRY(zstate_release(z, c));
    }
    TRY(zstate_pass_end(z));
    return ZINC_OK;
fail:
    zstate_pass_abort(z);
    return st;
}

static zinc_status orthogonalise(zinc_engine *e, const zinc_param *p, float *x, float *work) {
    int64_t t0 = ztrace_begin();
    ZDEV_ON_POOL(e->dev, zmuon_newton_schulz(x, p->shape[0], p->shape[1], ZMUON_NS_STEPS, work, e->muon_blas));
    if (t0) ztrace_span(t0, ZTRACE_OPTIMIZER, "Newton-Schulz", 0, "flops", (int64_t)ns_flops(p), "param", p->index);
    return ZINC_OK;
}

/* Every matrix on this rank (stage 0, one rank): in place in muon_upd. */
static zinc_status all_local(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    size_t wmax = 0;
    float *work = NULL;
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        size_t w = zmuon_ns_work_floats(p->shape[0], p->shape[1]);
        if (w > wmax) wmax = w;
    }
    const zplan_entry *sb = &e->plan.buf[ZPLAN_MUON_SCRATCH];
    if (sb->each < wmax * sizeof(float))
        return ZERR(ZINC_ERR_INTERNAL, "Muon: the plan's step scratch (%llu bytes) is below the workspace's %zu",
                    (unsigned long long)sb->each, wmax * sizeof(float));
    TRY(zmem_host_alloc(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_SCRATCH, sb->each, "Newton-Schulz workspace",
                        (void **)&work));
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        TRY(orthogonalise(e, p, e->muon_upd + (p->flat_offset - e->own_lo), work));
    }
fail:
    if (work) zmem_host_free(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_SCRATCH, work, sb->each);
    return st;
}

/* 2 at stages 1-3 with several ranks: assemble on the owners, orthogonalise, scatter back. */
static zinc_status exchanged(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    int W = e->world, me = e->rank;
    size_t *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL;
    float *send = NULL, *recv = NULL, *mats = NULL, *work = NULL;
    size_t nsend = 0, nrecv = 0, nmats = 0, wmax = 0, *at = NULL, need = 0;
    const zplan_entry *sb = &e->plan.buf[ZPLAN_MUON_SCRATCH];
    TRY_ALLOC(sc, 4 * (size_t)W, "Muon's all-to-all counts");
    memset(sc, 0, 4 * (size_t)W * sizeof *sc);
    sd = sc + W, rc = sd + W, rd = rc + W;
    /* sizes: what this rank sends to each owner, receives from each rank, and its matrices whole */
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        int o = e->muon_owner[p->index];
        int64_t lo, hi;
        piece(e, p, me, &lo, &hi);
        sc[o] += (size_t)(hi - lo);
        if (o != me) continue;
        nmats += (size_t)p->numel;
        size_t w = zmuon_ns_work_floats(p->shape[0], p->shape[1]);
        if (w > wmax) wmax = w;
        for (int r = 0; r < W; r++) {
            piece(e, p, r, &lo, &hi);
            rc[r] += (size_t)(hi - lo);
        }
    }
    for (int r = 0; r < W; r++) {
        sd[r] = nsend, nsend += sc[r];
        rd[r] = nrecv, nrecv += rc[r];
    }
    /* one block of the plan's size (runtime/mem/plan_muon.c states the same sum) */
    need = (nsend + nrecv + nmats + wmax + 4) * sizeof(float);
    if (sb->each != need)
        FAIL(ZINC_ERR_INTERNAL, "Muon: the plan's step scratch is %llu bytes, the assembly needs %zu",
             (unsigned long long)sb->each, need);
    TRY(zmem_host_alloc(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_SCRATCH, need, "Muon's matrix assembly", (void **)&send));
    recv = send + nsend + 1, mats = recv + nrecv + 1, work = mats + nmats + 1;
    /* pack: to each owner, this rank's pieces of its matrices in matrix order */
    TRY_ALLOC(at, (size_t)W, "Muon's pack cursors");
    memcpy(at, sd, (size_t)W * sizeof *at);
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        int o = e->muon_owner[p->index];
        int64_t lo, hi;
        piece(e, p, me, &lo, &hi);
        memcpy(send + at[o], e->muon_upd + (lo - e->own_lo), (size_t)(hi - lo) * sizeof(float));
        at[o] += (size_t)(hi - lo);
    }
    for (int r = 0; r < W; r++) sc[r] *= 4, sd[r] *= 4, rc[r] *= 4, rd[r] *= 4; /* bytes */
    int64_t t0 = ztrace_begin();
    TRY(zcomm_alltoallv_bytes(e->comm, send, sc, sd, recv, rc, rd));
    if (t0) ztrace_span(t0, ZTRACE_COMM, "Muon assembly", 0, "bytes", (int64_t)(nrecv * 4), NULL, 0);
    /* unpack into whole matrices (the pieces of rank r follow each other in matrix order), orthogonalise,
     * pack each rank's pieces of the update back where they came from */
    for (int r = 0; r < W; r++) at[r] = rd[r] / 4;
    size_t mo = 0;
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        if (e->muon_owner[p->index] != me) continue;
        for (int r = 0; r < W; r++) {
            int64_t lo, hi;
            piece(e, p, r, &lo, &hi);
            memcpy(mats + mo + (lo - p->flat_offset), recv + at[r], (size_t)(hi - lo) * sizeof(float));
            at[r] += (size_t)(hi - lo);
        }
        TRY(orthogonalise(e, p, mats + mo, work));
        mo += (size_t)p->numel;
    }
    for (int r = 0; r < W; r++) at[r] = rd[r] / 4;
    mo = 0;
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        if (e->muon_owner[p->index] != me) continue;
        for (int r = 0; r < W; r++) {
            int64_t lo, hi;
            piece(e, p, r, &lo, &hi);
            memcpy(recv + at[r], mats + mo + (lo - p->flat_offset), (size_t)(hi - lo) * sizeof(float));
            at[r] += (size_t)(hi - lo);
        }
        mo += (size_t)p->numel;
    }
    t0 = ztrace_begin();
    TRY(zcomm_alltoallv_bytes(e->comm, recv, rc, rd, send, sc, sd)); /* the reverse exchange */
    if (t0) ztrace_span(t0, ZTRACE_COMM, "Muon scatter", 0, "bytes", (int64_t)(nsend * 4), NULL, 0);
    for (int r = 0; r < W; r++) at[r] = sd[r] / 4;
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        int o = e->muon_owner[p->index];
        int64_t lo, hi;
        piece(e, p, me, &lo, &hi);
        memcpy(e->muon_upd + (lo - e->own_lo), send + at[o], (size_t)(hi - lo) * sizeof(float));
        at[o] += (size_t)(hi - lo);
    }
fail:
    free(at);
    if (send) zmem_host_free(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_SCRATCH, send, need);
    free(sc);
    return st;
}

/* The sum of squares of the own matrix elements' update (muon_upd), in flat order. */
static double own_update_sumsq(const zinc_engine *e) {
    double s = 0;
    for (int j = 0; j < e->nmuon; j++) {
        const zinc_param *p = e->params[e->muon_idx[j]];
        int64_t lo = e->own_lo, hi = e->own_hi;
        int64_t a = p->flat_offset > lo ? p->flat_offset : lo;
        int64_t b = p->flat_offset + p->numel < hi ? p->flat_offset + p->numel : hi;
        for (int64_t i = a; i < b; i++) s += (double)e->muon_upd[i - lo] * (double)e->muon_upd[i - lo];
    }
    return s;
}

/* Clipping, as DeepSpeed 0.19.8 places it (deepspeed/runtime/...):
 *   - stage 0 (no ZeRO optimizer): engine.py clips the gradients (clip_grad_norm_ over every gradient)
 *     before MuonWithAuxAdam.step, whose muon_update then folds the clipped gradient into the momentum
 *     (zero/muon/muon_optimizer.py:73-79, p.dim() >= 2): the momentum's factor holds the clip;
 *   - stages 1-2: muon_update runs while the gradient partition is flattened (zero/stage_1_and_2.py:
 *     2749-2760, get_flat_partition), so the partition holds the orthogonalised update U in place of the
 *     gradient; step() takes the norm after that ("Muon update runs before the norm and the clip covers
 *     the orthogonalized gradient", 3036-3039: scaled_global_norm over U for the Muon elements, the
 *     gradient for the rest) and unscale_and_clip_grads (3133, 3193-3215) multiplies the whole partition,
 *     U included, by 1 / clip; MuonWithAuxAdam.step then takes p.grad as the update (muon_optimizer.py:71,
 *     83-84: p *= 1 - lr * wd; p -= lr * U / clip);
 *   - stage 3: the same order (zero/stage3.py:2885-2886, _apply_muon_to_accumulated_grads then
 *     _get_norm_groups; 2918 and 2979-2988 unscale_and_clip_grads).
 * So at stages 1-3 the momentum takes the unclipped mean gradient (factor inv), the reported and clipping
 * norm is sqrt(sum U^2 over the Muon elements + sum g^2 over the rest), and U is scaled by 1 / clip. */
zinc_status zengine_muon_prepare(zinc_engine *e, const void *g, zinc_dtype gdt, double inv, double *norm) {
    zinc_status st = ZINC_OK;
    double *all = NULL;
    if (!e->optim->whole_matrix || !e->nmuon) return ZINC_OK;
    int64_t t0 = ztrace_begin();
    bool zero = e->stage > 0;
    zopt_step os = {.grad_factor = zero ? inv : inv / zengine_clip_factor(e, *norm)};
    zopt_hp hp;
    e->optim->hparams(&e->cfg.optimizer, &os, &hp);
    double mine[2] = {0, 0}; /* the own Muon elements' gradient and update sums of squares */
    TRY(local_momentum(e, (const zmuon_hparams *)hp.bytes, g, gdt, &mine[0]));
    if (e->stage == 0 || e->world == 1)
        TRY(all_local(e));
    else
        TRY(exchanged(e));
    if (zero) {
        mine[1] = own_update_sumsq(e);
        TRY_ALLOC(all, 2 * (size_t)e->world, "Muon's norm terms");
        TRY(zcomm_allgather_bytes(e->comm, mine, all, sizeof mine));
        double n2 = *norm * *norm;
        for (int r = 0; r < e->world; r++) n2 += all[2 * r + 1] - all[2 * r]; /* rank order: deterministic */
        *norm = sqrt(n2 > 0 ? n2 : 0);
    }
    if (t0) ztrace_span(t0, ZTRACE_ENGINE, "Muon whole-matrix step", 0, "matrices", e->nmuon, NULL, 0);
fail:
    free(all);
    return st;
}

void zengine_muon_hparams(const zinc_engine *e, zopt_hp *hp, double inv, double clip) {
    if (!e->optim->whole_matrix || e->stage == 0) return;
    zmuon_hparams *h = (zmuon_hparams *)hp->bytes;
    h->grad_factor = (float)inv;
    h->upd_scale = (float)(1.0 / clip);
}
