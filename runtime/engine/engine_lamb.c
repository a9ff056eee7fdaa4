/* The LAMB step (kernels/cpu_kernels.h, zlamb_*): two passes over the optimizer-state store. The trust
 * ratio of a parameter is ||p|| / ||u|| over the whole tensor, which ZeRO splits across ranks and the
 * store splits into chunks: pass 1 sums ||p||^2 and ||u||^2 of every local piece of every parameter (the
 * state is only read), one allreduce of 2 x nparams doubles (summed in rank order: every rank gets the same
 * bits) gives each parameter's norms, and pass 2 applies the update with its coefficient. Padding between
 * parameters is neither measured nor updated (it stays zero).
 *
 * Where the kernels run follows where the state is (zengine_state_on_device):
 *   - state the device operations reach (always on cpu; on cuda without offload): the device runs both
 *     passes (lamb_sums / lamb_apply, on the compute stream on cuda). On a device the host cannot address
 *     the pieces' sums add up in device memory (ZPLAN_LAMB_NORMS, with the sums kernel's workspace) and
 *     come to the host once, after pass 1: the host waits there for 2 doubles per tensor, never for the
 *     gradients or the state;
 *   - state offloaded from such a device (cpu or nvme offload from a GPU): the CPU kernels update it in
 *     host memory, each pass bringing the gradient chunks down through the plan's pinned staging (chunk
 *     i+1's while chunk i is computed), and pass 2 sending the compute-dtype parameters up from it.
 * An overflowed step never gets here: zengine_step skips it from the gradient statistics, before either
 * pass reads a gradient. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"
#include "kernels/cpu_kernels.h"

#define GRAD_SLOT(b) (b)        /* copy slots: gradient downloads into staging buffer b */
#define PARAM_SLOT(b) (2 + (b)) /* parameter uploads from staging buffer b */

typedef struct lamb_step {
    zinc_engine *e;
    const zlamb_hparams *h;
    const char *g; /* the local gradient over the own range, compute-device memory */
    zinc_dtype gdt;
    char *out;           /* the compute-dtype parameters of the own range, compute-device memory */
    bool staged;         /* the state is in host memory the device cannot reach: CPU kernels on staged chunks */
    double *sums;        /* (||p||^2, ||u||^2) per parameter where the kernels add them (device memory or host) */
    void *ws;            /* the device sums kernel's workspace (NULL on cpu and when staged) */
    const float *coeff;  /* per parameter, host: pass 2 */
    char *hg[2], *hp[2]; /* staged: gradient and parameter chunks, pinned host memory */
} lamb_step;

/* One piece of parameter k: elements [off, off + n) of chunk v, whose gradient and parameter output
 * begin at gc and pc (the chunk's place in the device buffers, or its staging). */
static zinc_status piece(lamb_step *s, bool apply, int k, const zlamb_hparams *h, const zstate_view *v, int64_t off,
                         int64_t n, const char *gc, char *pc) {
    zdevice *d = s->e->dev;
    zinc_dtype cdt = s->e->compute_dtype;
    float *p = v->master + off, *m = v->m + off, *sq = v->v + off;
    const char *g = gc + (size_t)off * zinc_dtype_size(s->gdt);
    char *po = pc + (size_t)off * zinc_dtype_size(cdt);
    if (!s->staged && apply) return d->ops->lamb_apply(d, h, s->coeff[k], (size_t)n, p, m, sq, g, s->gdt, po, cdt);
    if (!s->staged) return d->ops->lamb_sums(d, h, (size_t)n, p, m, sq, g, s->gdt, s->ws, s->sums + 2 * k, 1);
    if (apply) {
        ZDEV_ON_POOL(d, zlamb_apply(h, s->coeff[k], (size_t)n, p, m, sq, g, s->gdt, po, cdt, NULL));
        return ZINC_OK;
    }
    double w, u;
    ZDEV_ON_POOL(d, zlamb_sums(h, (size_t)n, p, m, sq, g, s->gdt, NULL, &w, &u));
    s->sums[2 * k] += w;
    s->sums[2 * k + 1] += u;
    return ZINC_OK;
}

/* Every piece of a parameter inside the chunk view (flat range own_lo + v.lo .. + v.n). */
static zinc_status chunk_pieces(lamb_step *s, bool apply, const zstate_view *v, const char *gc, char *pc) {
    zinc_engine *e = s->e;
    int64_t lo = e->own_lo + v->lo, hi = lo + v->n;
    for (int k = 0; k < e->nparams; k++) {
        const zinc_param *p = e->params[k];
        int64_t a = p->flat_offset > lo ? p->flat_offset : lo;
        int64_t b = p->flat_offset + p->numel < hi ? p->flat_offset + p->numel : hi;
        if (a >= b) continue;
        zlamb_hparams hk = *s->h;
        if (!(p->flags & ZINC_PARAM_DECAY)) hk.weight_decay = 0; /* the decay mask, per tensor */
        zinc_status st = piece(s, apply, k, &hk, v, a - lo, b - a, gc, pc);
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

static zinc_status one_pass(lamb_step *s, bool apply) {
    zinc_status st = ZINC_OK;
    zinc_engine *e = s->e;
    zdevice *d = e->dev;
    zstate *z = e->state;
    size_t gsz = zinc_dtype_size(s->gdt), csz = zinc_dtype_size(e->compute_dtype);
    TRY(zstate_pass_begin(z, apply ? ZSTATE_READ_WRITE : ZSTATE_READ));
    if (s->staged && z->nchunks > 0) {
        size_t n0 = (size_t)(z->n < z->chunk ? z->n : z->chunk);
        TRY(d->ops->copy_async(d, s->hg[0], s->g, n0 * gsz, ZDEV_D2H, GRAD_SLOT(0)));
    }
    for (int64_t i = 0; i < z->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(z, i, &v));
        const char *gc = s->g + (size_t)v.lo * gsz;
        char *pc = s->out + (size_t)v.lo * csz;
        int b = (int)(i & 1), nb = 1 - b;
        if (s->staged) {
            TRY(d->ops->copy_wait(d, GRAD_SLOT(b)));
            if (i + 1 < z->nchunks) { /* hg[nb] was last read by chunk i-1's kernels, which are done */
                int64_t lo = (i + 1) * z->chunk, n = z->n - lo < z->chunk ? z->n - lo : z->chunk;
                TRY(d->ops->copy_async(d, s->hg[nb], s->g + (size_t)lo * gsz, (size_t)n * gsz, ZDEV_D2H,
                                       GRAD_SLOT(nb)));
            }
            if (apply) {
                TRY(d->ops->copy_wait(d, PARAM_SLOT(b))); /* chunk i-2's upload from hp[b] */
                /* the padding between parameters goes up too: zero, as it is in the parameters */
                memset(s->hp[b], 0, (size_t)v.n * csz);
            }
            gc = s->hg[b];
            pc = s->hp[b];
        }
        TRY(chunk_pieces(s, apply, &v, gc, pc));
        if (s->staged && apply)
            TRY(d->ops->copy_async(d, s->out + (size_t)v.lo * csz, s->hp[b], (size_t)v.n * csz, ZDEV_H2D,
                                   PARAM_SLOT(b)));
        TRY(zstate_poll(z));
        TRY(zstate_release(z, i));
    }
    TRY(zstate_pass_end(z));
    goto done;
fail:
    zstate_pass_abort(z);
done:
    if (s->staged) /* no copy may still use the staging, and pass 2's parameters must be in place */
        for (int slot = 0; slot < ZDEV_COPY_SLOTS; slot++) {
            zinc_status w = d->ops->copy_wait(d, slot);
            if (st == ZINC_OK) st = w;
        }
    return st;
}

zinc_status zengine_lamb_pass(zinc_engine *e, const zlamb_hparams *h, const void *g, zinc_dtype gdt, void *out) {
    zinc_status st = ZINC_OK;
    zdevice *d = e->dev;
    int np = e->nparams;
    double *sums = NULL;
    float *coeff = NULL;
    void *dnorms = NULL;
    const zplan_entry *norms = &e->plan.buf[ZPLAN_LAMB_NORMS];
    size_t hg_bytes = e->plan.buf[ZPLAN_OFFLOAD_GRAD_STAGING].each,
           hp_bytes = e->plan.buf[ZPLAN_OFFLOAD_PARAM_STAGING].each;
    lamb_step s = {.e = e, .h = h, .g = g, .gdt = gdt, .out = out, .staged = !zengine_state_on_device(e)};
    TRY_ALLOC(sums, 2 * (size_t)np, "LAMB norms");
    TRY_ALLOC(coeff, (size_t)np, "LAMB coefficients");
    memset(sums, 0, 2 * (size_t)np * sizeof *sums);
    s.sums = sums;
    if (!s.staged && !d->host_addressable) {
        size_t ws = zdev_lamb_workspace_bytes();
        if (norms->bytes < ws + 2 * sizeof(double) * (size_t)np)
            FAIL(ZINC_ERR_INTERNAL,
                 "LAMB step: the sizing plan's norms buffer (%llu bytes) is smaller than %zu parameters need; "
                 "please report this",
                 (unsigned long long)norms->bytes, (size_t)np);
        if (!e->lamb_norms)
            FAIL(ZINC_ERR_INTERNAL, "LAMB step: zinc_build made no norms buffer for it; please report this");
        dnorms = e->lamb_norms;
        TRY(d->ops->memset0(d, dnorms, norms->bytes)); /* on the compute stream, before the sums kernels */
        s.ws = dnorms;
        s.sums = (double *)((char *)dnorms + ws);
    }
    if (s.staged) {
        zstate *z = e->state;
        if (hg_bytes < (size_t)z->chunk * zinc_dtype_size(gdt) ||
            hp_bytes < (size_t)z->chunk * zinc_dtype_size(e->compute_dtype))
            FAIL(ZINC_ERR_INTERNAL,
                 "LAMB offload step: the sizing plan's staging (%zu and %zu bytes) is smaller than a chunk of %lld "
                 "elements (%s gradients); please report this",
                 hg_bytes, hp_bytes, (long long)z->chunk, zinc_dtype_name(gdt));
        if (!(e->stage_g[0] && e->stage_g[1] && e->stage_p[0] && e->stage_p[1]))
            FAIL(ZINC_ERR_INTERNAL, "LAMB offload step: zinc_build made no staging for it; please report this");
        for (int b = 0; b < 2; b++) s.hg[b] = e->stage_g[b], s.hp[b] = e->stage_p[b];
    }
    TRY(one_pass(&s, false));
    if (s.sums != sums) /* the host waits here for the norms (the device's own sum order) */
        TRY(d->ops->copy(d, sums, s.sums, 2 * (size_t)np * sizeof *sums, ZDEV_D2H));
    /* Stages 1-3: the ranks' pieces are disjoint, their sums add up (in rank order: the same bits on every
     * rank). Stage 0: every rank holds every parameter already. */
    if (e->stage > 0) TRY(zinc_allreduce_sum(e, sums, 2 * np));
    for (int k = 0; k < np; k++) coeff[k] = zlamb_coeff(h, sums[2 * k], sums[2 * k + 1]);
    s.coeff = coeff;
    TRY(one_pass(&s, true));
fail:
    free(sums);
    free(coeff);
    return st;
}
