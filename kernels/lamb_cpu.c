/* LAMB over a segment of one parameter (kernels/cpu_kernels.h): the sums pass (||p||^2 and ||u||^2 of the
 * segment, the moments computed but not stored) and the apply pass (the moments stored, p -= step*coeff*u).
 * Both passes compute u with the same operations in the same order (zk_lamb_update, adam_scalar.h, and its
 * SIMD twin in adam_simd.inc), so the u the trust ratio measured is the u applied. Reference and fast
 * versions: the reference is the scalar element loop; the fast versions run the SIMD path's chunk kernels
 * (zk_ops, chosen as for Adam) on ZK_CHUNK_ELEMS chunks of the current pool. The fast apply is elementwise
 * with the reference's operations, so bitwise equal to it; the fast sums add per-lane double sums within a
 * chunk and per-chunk sums in chunk order, so they do not depend on the thread count (and equal the
 * reference to double rounding of the regrouped sum; they depend on the SIMD width). */
#include <math.h>
#include <stdlib.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* The reference passes: the scalar element code (adam_scalar.h), single-threaded, left to right. */
static void sums_range(const zk_lamb_consts *c, size_t n, const float *master, const float *m, const float *v,
                       const void *grad, zinc_dtype gdt, const uint8_t *mask, double *wsq, double *usq) {
    *wsq = *usq = 0;
    zk_lamb_sums_range(c, 0, n, master, m, v, grad, gdt, mask, wsq, usq);
}

static void apply_range(const zk_lamb_consts *c, float coeff, size_t n, float *master, float *m, float *v,
                        const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *mask) {
    const float sc = c->step * coeff; /* DeepSpeed: (step_size * lamb_coeff) * update */
    zk_lamb_apply_range(c, sc, 0, n, master, m, v, grad, gdt, param_out, param_out ? (int)pdt : ZK_NO_OUT, mask);
}

float zlamb_coeff(const zlamb_hparams *h, double wsq, double usq) {
    float wn = sqrtf((float)wsq), un = sqrtf((float)usq);
    if (wn == 0.0f || un == 0.0f) return 1.0f;
    float r = wn / un;
    if (r > h->max_coeff) r = h->max_coeff;
    if (r < h->min_coeff) r = h->min_coeff;
    return r;
}

void zlamb_sums_ref(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                    const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, double *wsq, double *usq) {
    const zk_lamb_consts c = zk_lamb_consts_make(h);
    sums_range(&c, n, master, m, v, grad, gdt, decay_mask, wsq, usq);
}

void zlamb_apply_ref(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v, const void *grad,
                     zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const zk_lamb_consts c = zk_lamb_consts_make(h);
    apply_range(&c, coeff, n, master, m, v, grad, gdt, param_out, pdt, decay_mask);
}

/* ---------------------------------------------------------------- fast: SIMD chunks on threads */
typedef struct lamb_job {
    const zk_ops *o;
    const zk_lamb_consts *c;
    float sc;
    size_t n, gsz, psz;
    float *master, *m, *v;
    const void *grad;
    zinc_dtype gdt;
    int pt;
    void *param_out;
    const uint8_t *mask;
    double *part; /* sums: two per chunk */
} lamb_job;

#define CHUNK_OF(j, k, s, len)                                                                                         \
    size_t s = (k)*ZK_CHUNK_ELEMS, len = (j)->n - s < ZK_CHUNK_ELEMS ? (j)->n - s : ZK_CHUNK_ELEMS

static void sums_task(void *ctx, size_t k) {
    const lamb_job *j = ctx;
    CHUNK_OF(j, k, s, len);
    j->o->lamb_sums(j->c, len, j->master + s, j->m + s, j->v + s, (const char *)j->grad + s * j->gsz, j->gdt,
                    j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL, &j->part[2 * k], &j->part[2 * k + 1]);
}

static void apply_task(void *ctx, size_t k) {
    const lamb_job *j = ctx;
    CHUNK_OF(j, k, s, len);
    j->o->lamb_apply(j->c, j->sc, len, j->master + s, j->m + s, j->v + s, (const char *)j->grad + s * j->gsz, j->gdt,
                     j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pt,
                     j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

/* Chunk sums are added in chunk order whichever thread made them (or the calling thread, in the same order,
 * when there is no pool or the partials could not be allocated). */
void zlamb_sums(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v, const void *grad,
                zinc_dtype gdt, const uint8_t *decay_mask, double *wsq, double *usq) {
    const zk_lamb_consts c = zk_lamb_consts_make(h);
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    double one[2], *part = nch <= 1 ? one : malloc(2 * nch * sizeof(double));
    zpool *p = part ? zk_pool_for(nch) : NULL;
    lamb_job j = {zk_current_ops(),
                  &c,
                  0.0f,
                  n,
                  zinc_dtype_size(gdt),
                  0,
                  (float *)master,
                  (float *)m,
                  (float *)v,
                  grad,
                  gdt,
                  ZK_NO_OUT,
                  NULL,
                  decay_mask,
                  part};
    double w = 0, s = 0;
    if (!part || !p) {
        for (size_t k = 0; k < nch; k++) {
            CHUNK_OF(&j, k, o, len);
            double pw, ps;
            j.o->lamb_sums(&c, len, master + o, m + o, v + o, (const char *)grad + o * j.gsz, gdt,
                           decay_mask ? decay_mask + o / ZADAM_MASK_GROUP : NULL, &pw, &ps);
            w += pw;
            s += ps;
        }
    } else {
        zpool_for(p, nch, sums_task, &j);
        for (size_t k = 0; k < nch; k++) {
            w += part[2 * k];
            s += part[2 * k + 1];
        }
    }
    if (part && part != one) free(part);
    *wsq = w;
    *usq = s;
}

void zlamb_apply(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v, const void *grad,
                 zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const zk_lamb_consts c = zk_lamb_consts_make(h);
    const zk_ops *o = zk_current_ops();
    const float sc = c.step * coeff; /* as the reference */
    const int pt = param_out ? (int)pdt : ZK_NO_OUT;
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    zpool *p = zk_pool_for(nch);
    if (!p) {
        o->lamb_apply(&c, sc, n, master, m, v, grad, gdt, param_out, pt, decay_mask);
        return;
    }
    lamb_job j = {o,
                  &c,
                  sc,
                  n,
                  zinc_dtype_size(gdt),
                  param_out ? zinc_dtype_size(pdt) : 0,
                  master,
                  m,
                  v,
                  grad,
                  gdt,
                  pt,
                  param_out,
                  decay_mask,
                  NULL};
    zpool_for(p, nch, apply_task, &j);
}
