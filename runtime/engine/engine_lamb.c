/* The LAMB step (kernels/cpu_kernels.h, zlamb_*): two passes over the optimizer-state store. The trust
 * ratio of a parameter is ||p|| / ||u|| over the whole tensor, which ZeRO splits across ranks and the
 * store splits into chunks: pass 1 sums ||p||^2 and ||u||^2 of every local piece of every parameter (the
 * state is only read), one allreduce of 2 x nparams doubles (summed in rank order: every rank gets the same
 * bits) gives each parameter's norms, and pass 2 applies the update with its coefficient. Padding between
 * parameters is neither measured nor updated (it stays zero). The CPU kernels need the state and the
 * gradient in host memory: the cpu device (with or without offload); elsewhere the step is refused. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"
#include "kernels/cpu_kernels.h"

/* Calls fn for every piece of a parameter inside the chunk view (flat range own_lo + v.lo .. + v.n). */
typedef zinc_status (*piece_fn)(zinc_engine *e, int k, const zlamb_hparams *h, const zstate_view *v, int64_t off,
                                int64_t n, const char *g, zinc_dtype gdt, char *out, void *ctx);

static zinc_status for_pieces(zinc_engine *e, const zstate_view *v, const zlamb_hparams *h, const char *g,
                              zinc_dtype gdt, char *out, piece_fn fn, void *ctx) {
    int64_t lo = e->own_lo + v->lo, hi = lo + v->n;
    for (int k = 0; k < e->nparams; k++) {
        const zinc_param *p = e->params[k];
        int64_t a = p->flat_offset > lo ? p->flat_offset : lo;
        int64_t b = p->flat_offset + p->numel < hi ? p->flat_offset + p->numel : hi;
        if (a >= b) continue;
        zlamb_hparams hk = *h;
        if (!(p->flags & ZINC_PARAM_DECAY)) hk.weight_decay = 0; /* the decay mask, per tensor */
        zinc_status st = fn(e, k, &hk, v, a - lo, b - a, g, gdt, out, ctx);
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

typedef struct sums_ctx {
    double *wsq, *usq;
} sums_ctx;

static zinc_status sum_piece(zinc_engine *e, int k, const zlamb_hparams *h, const zstate_view *v, int64_t off,
                             int64_t n, const char *g, zinc_dtype gdt, char *out, void *ctx) {
    (void)out;
    sums_ctx *c = ctx;
    size_t gsz = zinc_dtype_size(gdt);
    double w, u;
    ZDEV_ON_POOL(e->dev, zlamb_sums(h, (size_t)n, v->master + off, v->m + off, v->v + off,
                                    g + (size_t)(v->lo + off) * gsz, gdt, NULL, &w, &u));
    c->wsq[k] += w;
    c->usq[k] += u;
    return ZINC_OK;
}

static zinc_status apply_piece(zinc_engine *e, int k, const zlamb_hparams *h, const zstate_view *v, int64_t off,
                               int64_t n, const char *g, zinc_dtype gdt, char *out, void *ctx) {
    const float *coeff = ctx;
    size_t gsz = zinc_dtype_size(gdt), csz = zinc_dtype_size(e->compute_dtype);
    ZDEV_ON_POOL(e->dev, zlamb_apply(h, coeff[k], (size_t)n, v->master + off, v->m + off, v->v + off,
                                     g + (size_t)(v->lo + off) * gsz, gdt, out + (size_t)(v->lo + off) * csz,
                                     e->compute_dtype, NULL));
    return ZINC_OK;
}

static zinc_status one_pass(zinc_engine *e, zstate_mode mode, const zlamb_hparams *h, const char *g, zinc_dtype gdt,
                            char *out, piece_fn fn, void *ctx) {
    zinc_status st = ZINC_OK;
    zstate *s = e->state;
    TRY(zstate_pass_begin(s, mode));
    for (int64_t i = 0; i < s->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(s, i, &v));
        TRY(for_pieces(e, &v, h, g, gdt, out, fn, ctx));
        TRY(zstate_poll(s));
        TRY(zstate_release(s, i));
    }
    TRY(zstate_pass_end(s));
    return ZINC_OK;
fail:
    zstate_pass_abort(s);
    return st;
}

zinc_status zengine_lamb_pass(zinc_engine *e, const zlamb_hparams *h, const void *g, zinc_dtype gdt, void *out) {
    zinc_status st = ZINC_OK;
    double *sums = NULL;
    float *coeff = NULL;
    if (!e->dev->host_addressable || !zengine_state_on_device(e))
        return ZERR(ZINC_ERR_UNSUPPORTED,
                    "optimizer \"Lamb\" runs on the cpu device only in this zinc version (its "
                    "GPU kernels are not written yet); use \"Adam\", \"AdamW\" or \"Lion\" on a GPU");
    int np = e->nparams;
    TRY_ALLOC(sums, 2 * (size_t)np, "LAMB norms");
    TRY_ALLOC(coeff, (size_t)np, "LAMB coefficients");
    memset(sums, 0, 2 * (size_t)np * sizeof *sums);
    sums_ctx c = {sums, sums + np};
    TRY(one_pass(e, ZSTATE_READ, h, g, gdt, out, sum_piece, &c));
    /* Stages 1-3: the ranks' pieces are disjoint, their sums add up (in rank order: the same bits on every
     * rank). Stage 0: every rank holds every parameter already. */
    if (e->stage > 0) TRY(zinc_allreduce_sum(e, sums, 2 * np));
    for (int k = 0; k < np; k++) coeff[k] = zlamb_coeff(h, c.wsq[k], c.usq[k]);
    TRY(one_pass(e, ZSTATE_READ_WRITE, h, g, gdt, out, apply_piece, coeff));
fail:
    free(sums);
    free(coeff);
    return st;
}
