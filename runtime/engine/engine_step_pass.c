/* The one step pass every optimizer runs through (its descriptor, runtime/optim/optim.h, says what to
 * compute): over the optimizer-state store chunk by chunk (sub_group_size with offload), each chunk's
 * compute-dtype result written straight into this rank's slice of the parameters.
 *
 * Where the kernels run follows where the state is (zengine_state_on_device):
 *   - state the device operations reach (always on cpu; on cuda without offload): the descriptor's device
 *     kernel (on the compute stream on cuda), or its CPU kernel on the device's pool where the device has
 *     none and the host addresses the memory;
 *   - state offloaded from a discrete device (cpu or nvme offload from a GPU): the CPU kernel updates it in
 *     host memory through two pairs of pinned staging buffers the plan laid out, pipelined: while chunk i
 *     is updated, chunk i+1's gradient comes down and chunk i-1's parameters go up (copy_async on the
 *     device's copy stream), and the NVMe store reads and writes around it.
 * An elementwise optimizer (Adam, Lion, Adagrad) takes a whole chunk with the decay mask; with an NVMe
 * store in sub-blocks with zstate_poll between them, so its reads ahead and writes behind keep moving
 * while the CPU computes. A per-tensor one (LAMB) takes the pieces of each tensor inside a chunk, in two
 * passes: the sums (the state only read), one allreduce of 2 x nparams doubles (summed in rank order:
 * every rank gets the same bits) giving each tensor's norms, then the update with its coefficient.
 * Padding between tensors is neither measured nor updated (it stays zero). On a device the host cannot
 * address the sums add up in device memory (ZPLAN_TENSOR_SUMS, with the sums kernel's workspace) and come to
 * the host once, after the sums pass. An overflowed step never gets here: zengine_step skips it from the
 * gradient statistics, before any pass reads a gradient. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "base/core/trace.h"
#include "kernels/cpu_kernels.h"
#include "offload/param_nvme.h"

#define GRAD_SLOT(b) (b)        /* copy slots: gradient downloads into staging buffer b */
#define PARAM_SLOT(b) (2 + (b)) /* parameter uploads from staging buffer b */

typedef struct step_pass {
    zinc_engine *e;
    const zopt_desc *o;
    const zopt_hp *hp;
    const char *g; /* the local gradient over the own range, compute-device memory */
    zinc_dtype gdt;
    char *out;          /* the compute-dtype parameters of the own range, compute-device memory */
    bool staged;        /* the state is in host memory the device cannot reach: CPU kernels on staged chunks */
    double *sums;       /* per-tensor: (||p||^2, ||u||^2) per tensor where the kernels add them */
    void *ws;           /* per-tensor: the device sums kernel's workspace (NULL on cpu and when staged) */
    const float *coeff; /* per-tensor, apply pass: per tensor, host */
} step_pass;

static zinc_status kernel(step_pass *s, zopt_pass pass, const zopt_piece *p) {
    zdevice *d = s->e->dev;
    if (!s->staged && s->o->device) return s->o->device(d, s->hp, pass, p);
    ZDEV_ON_POOL(d, s->o->cpu(s->hp, pass, p));
    return ZINC_OK;
}

/* Chunk v's exp_avg_sq from its element o on: compacted where elements keep none (offload/state.h vgaps). */
static float *v_at(const zstate *z, const zstate_view *v, int64_t o) {
    if (!v->v) return NULL;
    const zstate_vgaps *g = &z->ctx.vgaps;
    return v->v + (g->n ? zstate_v_kept(g, v->lo + o) - zstate_v_kept(g, v->lo) : o);
}

/* An elementwise optimizer over chunk v, whose gradient and parameter output begin at gc and pc. */
static zinc_status chunk_elementwise(step_pass *s, const zstate_view *v, const char *gc, char *pc) {
    zinc_engine *e = s->e;
    zstate *z = e->state;
    size_t gsz = zinc_dtype_size(s->gdt), csz = zinc_dtype_size(e->compute_dtype);
    const uint8_t *mask = s->staged ? e->decay_mask : e->decay_mask_dev;
    int64_t sub = z->ops->poll ? ZSTATE_POLL_ELEMS : (v->n > 0 ? v->n : 1);
    for (int64_t o = 0; o < v->n; o += sub) {
        zopt_piece p = {
            .n = (size_t)(v->n - o < sub ? v->n - o : sub),
            .master = v->master + o,
            .m = v->m + o,
            .v = v_at(z, v, o), /* two-tensor stores keep no exp_avg_sq */
            .grad = gc + (size_t)o * gsz,
            .gdt = s->gdt,
            .out = pc + (size_t)o * csz,
            .pdt = e->compute_dtype,
            .decay_mask = mask + (v->lo + o) / ZADAM_MASK_GROUP,
            .tensor = -1,
            .upd = e->muon_upd ? e->muon_upd + v->lo + o : NULL,
        };
        zinc_status st = kernel(s, ZOPT_APPLY, &p);
        if (st == ZINC_OK) st = zstate_poll(z);
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

/* A per-tensor optimizer: every piece of a tensor inside chunk v (flat range own_lo + v.lo .. + v.n). */
static zinc_status chunk_tensors(step_pass *s, zopt_pass pass, const zstate_view *v, const char *gc, char *pc) {
    zinc_engine *e = s->e;
    size_t gsz = zinc_dtype_size(s->gdt), csz = zinc_dtype_size(e->compute_dtype);
    int64_t lo = e->own_lo + v->lo, hi = lo + v->n;
    for (int k = 0; k < e->nparams; k++) {
        const zinc_param *prm = e->params[k];
        int64_t a = prm->flat_offset > lo ? prm->flat_offset : lo;
        int64_t b = prm->flat_offset + prm->numel < hi ? prm->flat_offset + prm->numel : hi;
        if (a >= b) continue;
        size_t off = (size_t)(a - lo);
        zopt_piece p = {
            .n = (size_t)(b - a),
            .master = v->master + off,
            .m = v->m + off,
            .v = v_at(e->state, v, (int64_t)off),
            .grad = gc + off * gsz,
            .gdt = s->gdt,
            .out = pc + off * csz,
            .pdt = e->compute_dtype,
            .tensor = k,
            .decayed = (prm->flags & ZINC_PARAM_DECAY) != 0, /* the decay mask, per tensor */
            .coeff = s->coeff ? s->coeff[k] : 1.0f,
            .sums = s->sums + 2 * k,
            .workspace = s->ws,
        };
        zinc_status st = kernel(s, pass, &p);
        if (st != ZINC_OK) return st;
    }
    return zstate_poll(e->state);
}

/* --trace: a pinned copy as the host sees it (its issue; all of it on a device whose copies are the
 * host's), and the waits for one; on a GPU the copy stream's own events show the transfer. */
static zinc_status traced_copy(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir, int slot) {
    int64_t t0 = ztrace_begin();
    zinc_status st = d->ops->copy_async(d, dst, src, bytes, dir, slot);
    if (t0) ztrace_span(t0, ZTRACE_COPY, dir == ZDEV_D2H ? "d2h" : "h2d", 0, "bytes", (int64_t)bytes, NULL, 0);
    return st;
}

static zinc_status traced_copy_wait(zdevice *d, int slot) {
    int64_t t0 = ztrace_begin();
    zinc_status st = d->ops->copy_wait(d, slot);
    if (t0) ztrace_span(t0, ZTRACE_WAIT, "copy", 0, "slot", slot, NULL, 0);
    return st;
}

/* offload_param nvme: chunk v in pieces of the parameter store's scratch, each piece's parameters written
 * to the store behind its update (the kernels are elementwise or per tensor piece: the same bits). */
static zinc_status pstore_chunk(step_pass *s, zopt_pass pass, const zstate_view *v, const char *gc) {
    zinc_engine *e = s->e;
    size_t gsz = zinc_dtype_size(s->gdt), csz = zinc_dtype_size(e->compute_dtype);
    int64_t cap = zengine_pstore_chunk(e);
    char *pc = zstate_param_scratch(e->pstore);
    float *gs = e->gstore ? zstate_param_scratch(e->gstore) : NULL; /* the gradient's piece, from its file */
    for (int64_t o = 0; o < v->n; o += cap) {
        zstate_view sv = *v;
        sv.lo += o;
        sv.n = v->n - o < cap ? v->n - o : cap;
        sv.master += o;
        sv.m += o;
        if (sv.v) sv.v += o;
        if (pass == ZOPT_APPLY && s->o->tensor_norms) memset(pc, 0, (size_t)sv.n * csz); /* padding stays zero */
        const char *gp = gs ? (const char *)gs : gc + (size_t)o * gsz;
        if (gs) { /* the next piece's read in flight first: the next of this chunk, or the next chunk's first */
            const zstate *z = e->state;
            int64_t nx = sv.lo + sv.n, cend = (nx / z->chunk + 1) * z->chunk;
            if (cend > z->n) cend = z->n;
            zinc_status rs = o == 0 ? zengine_grads_prefetch(e, sv.lo, sv.n) : ZINC_OK;
            if (rs == ZINC_OK && nx < z->n) rs = zengine_grads_prefetch(e, nx, cend - nx < cap ? cend - nx : cap);
            if (rs == ZINC_OK) rs = zengine_grads_read(e, sv.lo, sv.n, gs);
            if (rs != ZINC_OK) return rs;
        }
        int64_t t0 = ztrace_begin();
        zinc_status st = s->o->tensor_norms ? chunk_tensors(s, pass, &sv, gp, pc) : chunk_elementwise(s, &sv, gp, pc);
        if (t0) ztrace_span(t0, ZTRACE_OPTIMIZER, s->o->name, 0, "offset", sv.lo, "elements", sv.n);
        if (st == ZINC_OK && pass == ZOPT_APPLY && zengine_params_checked(e)) { /* the check, in memory */
            int64_t nm = e->part.numel, lo = e->own_lo < nm ? e->own_lo : nm, hi = e->own_hi < nm ? e->own_hi : nm;
            int64_t real = hi - lo - sv.lo; /* the model's elements here (zengine_check_params' range) */
            if (real > sv.n) real = sv.n;
            zgrad_stats cs = {0};
            if (real > 0) st = e->dev->ops->grad_stats(e->dev, pc, e->compute_dtype, (size_t)real, &cs);
            if (cs.nonfinite && !e->pcheck_nonfinite) e->pcheck_first = sv.lo + (int64_t)cs.first_nonfinite;
            e->pcheck_nonfinite += (int64_t)cs.nonfinite;
        }
        if (st == ZINC_OK && pass == ZOPT_APPLY) st = zengine_params_write(e, sv.lo, sv.n, pc);
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

static zinc_status one_pass(step_pass *s, zopt_pass pass) {
    zinc_status st = ZINC_OK;
    zinc_engine *e = s->e;
    zdevice *d = e->dev;
    zstate *z = e->state;
    bool apply = pass == ZOPT_APPLY;
    char *const *hg = e->stage_g, *const *hp = e->stage_p;
    size_t gsz = zinc_dtype_size(s->gdt), csz = zinc_dtype_size(e->compute_dtype);
    TRY(zstate_pass_begin(z, apply ? ZSTATE_READ_WRITE : ZSTATE_READ));
    if (s->staged && z->nchunks > 0) {
        size_t n0 = (size_t)(z->n < z->chunk ? z->n : z->chunk);
        TRY(traced_copy(d, hg[0], s->g, n0 * gsz, ZDEV_D2H, GRAD_SLOT(0)));
    }
    for (int64_t i = 0; i < z->nchunks; i++) {
        zstate_view v;
        int64_t w0 = z->ops->poll ? ztrace_begin() : 0; /* an NVMe store may still be reading the chunk */
        TRY(zstate_acquire(z, i, &v));
        if (w0) ztrace_span(w0, ZTRACE_WAIT, "state chunk", 0, "chunk", i, NULL, 0);
        const char *gc = s->g ? s->g + (size_t)v.lo * gsz : NULL; /* NULL: the gradient on NVMe */
        if (!s->out) {                                            /* offload_param nvme (cpu only, never staged) */
            TRY(pstore_chunk(s, pass, &v, gc));
            TRY(zstate_release(z, i));
            continue;
        }
        char *pc = s->out + (size_t)v.lo * csz;
        int b = (int)(i & 1), nb = 1 - b;
        if (s->staged) {
            TRY(traced_copy_wait(d, GRAD_SLOT(b)));
            if (i + 1 < z->nchunks) { /* hg[nb] was last read by chunk i-1's kernels, which are done */
                int64_t lo = (i + 1) * z->chunk, n = z->n - lo < z->chunk ? z->n - lo : z->chunk;
                TRY(traced_copy(d, hg[nb], s->g + (size_t)lo * gsz, (size_t)n * gsz, ZDEV_D2H, GRAD_SLOT(nb)));
            }
            if (apply) {
                TRY(traced_copy_wait(d, PARAM_SLOT(b))); /* chunk i-2's upload from hp[b] */
                /* per-tensor kernels skip the padding between tensors, which goes up too: zero, as it is */
                if (s->o->tensor_norms) memset(hp[b], 0, (size_t)v.n * csz);
            }
            gc = hg[b];
            pc = hp[b];
        }
        int64_t t0 = ztrace_begin();
        if (s->o->tensor_norms)
            TRY(chunk_tensors(s, pass, &v, gc, pc));
        else
            TRY(chunk_elementwise(s, &v, gc, pc));
        if (t0) ztrace_span(t0, ZTRACE_OPTIMIZER, apply ? s->o->name : "norms", 0, "chunk", i, "elements", v.n);
        if (s->staged && apply)
            TRY(traced_copy(d, s->out + (size_t)v.lo * csz, hp[b], (size_t)v.n * csz, ZDEV_H2D, PARAM_SLOT(b)));
        TRY(zstate_release(z, i));
    }
    TRY(zstate_pass_end(z));
    goto done;
fail:
    zstate_pass_abort(z);
done:
    if (s->staged) /* no copy may still use the staging, and the parameters must be in place */
        for (int slot = 0; slot < ZDEV_COPY_SLOTS; slot++) {
            zinc_status w = d->ops->copy_wait(d, slot);
            if (st == ZINC_OK) st = w;
        }
    return st;
}

/* The sums pass, the norms over tensors and ranks, and each tensor's coefficient. */
static zinc_status tensor_coefficients(step_pass *s, double *sums, float *coeff) {
    zinc_status st = ZINC_OK;
    zinc_engine *e = s->e;
    zdevice *d = e->dev;
    int np = e->nparams;
    const zplan_entry *norms = &e->plan.buf[ZPLAN_TENSOR_SUMS];
    memset(sums, 0, 2 * (size_t)np * sizeof *sums);
    s->sums = sums;
    if (!s->staged && !d->host_addressable && s->o->device_sums_workspace) {
        if (norms->bytes < zopt_tensor_sums_bytes(s->o, np))
            return ZERR(ZINC_ERR_INTERNAL,
                        "%s step: the sizing plan's norms buffer (%llu bytes) is smaller than %d tensors need; "
                        "please report this",
                        s->o->name, (unsigned long long)norms->bytes, np);
        if (!e->tensor_sums)
            return ZERR(ZINC_ERR_INTERNAL, "%s step: zinc_build made no norms buffer for it; please report this",
                        s->o->name);
        TRY(d->ops->memset0(d, e->tensor_sums, norms->bytes)); /* on the compute stream, before the sums */
        s->ws = e->tensor_sums;
        s->sums = zopt_tensor_sums_at(s->o, e->tensor_sums);
    }
    st = one_pass(s, ZOPT_SUMS);
    if (e->gstore) st = zcomm_agree_status(e->comm, st); /* a failed gradient read: every rank, before the sum */
    TRY(st);
    if (s->sums != sums) /* the host waits here for the norms (the device's own sum order) */
        TRY(d->ops->copy(d, sums, s->sums, 2 * (size_t)np * sizeof *sums, ZDEV_D2H));
    /* Stages 1-3: the ranks' pieces are disjoint, their sums add up (in rank order: the same bits on every
     * rank). Stage 0: every rank holds every tensor already. */
    if (e->stage > 0) TRY(zinc_allreduce_sum(e, sums, 2 * np));
    for (int k = 0; k < np; k++) coeff[k] = s->o->coeff(s->hp, sums[2 * k], sums[2 * k + 1]);
    s->coeff = coeff;
    s->sums = sums;
    s->ws = NULL;
fail:
    return st;
}

zinc_status zengine_optimizer_pass(zinc_engine *e, const zopt_desc *o, const zopt_hp *hp, const void *g, zinc_dtype gdt,
                                   void *out) {
    zinc_status st = ZINC_OK;
    double *sums = NULL;
    float *coeff = NULL;
    step_pass s = {.e = e, .o = o, .hp = hp, .g = g, .gdt = gdt, .out = out, .staged = !zengine_state_on_device(e)};
    zstate *z = e->state;
    TRY(zopt_check_placement(o, e->dev, s.staged));
    if (s.staged) {
        size_t hg_bytes = e->plan.buf[ZPLAN_OFFLOAD_GRAD_STAGING].each,
               hp_bytes = e->plan.buf[ZPLAN_OFFLOAD_PARAM_STAGING].each;
        if (hg_bytes < (size_t)z->chunk * zinc_dtype_size(gdt) ||
            hp_bytes < (size_t)z->chunk * zinc_dtype_size(e->compute_dtype))
            FAIL(ZINC_ERR_INTERNAL,
                 "offload step: the sizing plan's staging (%zu and %zu bytes) is smaller than a chunk of %lld "
                 "elements (%s gradients); please report this",
                 hg_bytes, hp_bytes, (long long)z->chunk, zinc_dtype_name(gdt));
        if (!(e->stage_g[0] && e->stage_g[1] && e->stage_p[0] && e->stage_p[1]))
            FAIL(ZINC_ERR_INTERNAL, "offload step: zinc_build made no staging for it; please report this");
    }
    if (o->tensor_norms) {
        TRY_ALLOC(sums, 2 * (size_t)e->nparams, "per-tensor norms");
        TRY_ALLOC(coeff, (size_t)e->nparams, "per-tensor coefficients");
        TRY(tensor_coefficients(&s, sums, coeff));
    }
    e->pcheck_nonfinite = 0, e->pcheck_first = -1, e->pcheck_valid = false;
    TRY(one_pass(&s, ZOPT_APPLY));
    e->pcheck_valid = e->pstore != NULL;
fail:
    free(sums);
    free(coeff);
    return st;
}

/* offload_optimizer nvme: the next optimizer pass's first chunk reads (master, exp_avg, exp_avg_sq) issued
 * ahead (zstate_pass_prestart) and kept moving, so they share the disk with the forward and backward's
 * swaps instead of waiting alone after the gradient statistics. Called after each step and at every
 * module's entry and exit (not in the statistics pass, whose own reads the disk is busy with: polling
 * there only reorders the disk's work). After the run's last step one prestart is read for nothing (at
 * most buffer_count chunks). A failure drops the prestart: the pass reports what persists. */
void zengine_state_ahead(zinc_engine *e) {
    zstate *z = e->state;
    if (!z || z->mode || !z->ops->poll) return;
    if (!z->prestarted)
        (void)zstate_pass_prestart(z);
    else
        (void)zstate_poll(z);
}
