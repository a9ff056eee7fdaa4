/* LAMB over a segment of one parameter (kernels/cpu_kernels.h): the sums pass (||p||^2 and ||u||^2 of the
 * segment, the moments computed but not stored) and the apply pass (the moments stored, p -= step*coeff*u).
 * Both passes compute u with the same operations in the same order (lamb_update), so the u the trust
 * ratio measured is the u applied. Reference and fast versions: the fast apply is the reference loop split
 * into ZK_CHUNK_ELEMS chunks on the current pool (elementwise, so bitwise equal); the fast sums add
 * per-chunk partial sums in chunk order, so they do not depend on the thread count (and equal the
 * reference to double rounding of the regrouped sum). */
#include <math.h>
#include <stdlib.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

typedef struct lamb_consts {
    float gf, b1, omb1, b2, omb2, eps, wd, step;
    int eps_inside, decay;
} lamb_consts;

static lamb_consts lamb_consts_make(const zlamb_hparams *h) {
    lamb_consts c;
    c.gf = h->grad_factor;
    c.b1 = h->beta1;
    c.omb1 = 1.0f - h->beta1;
    c.b2 = h->beta2;
    c.omb2 = 1.0f - h->beta2;
    c.eps = h->eps;
    c.wd = h->weight_decay;
    /* DeepSpeed's FusedLamb: lr * sqrt(bc2) / bc1 (moments themselves not corrected); in double, rounded once. */
    c.step = (float)((double)h->lr * sqrt(h->bias_correction2) / h->bias_correction1);
    c.eps_inside = h->eps_inside_sqrt;
    c.decay = h->weight_decay != 0.0f;
    return c;
}

/* The new moments and the update u of one element. */
static inline __attribute__((always_inline)) float lamb_update(const lamb_consts *c, float p, float *m, float *v,
                                                               float graw, int decayed) {
    float g = graw * c->gf;
    float mm = c->b1 * *m + c->omb1 * g;
    float vv = c->b2 * *v + c->omb2 * (g * g);
    float denom = c->eps_inside ? sqrtf(vv + c->eps) : sqrtf(vv) + c->eps;
    float u = mm / denom;
    if (c->decay && decayed) u = u + c->wd * p;
    *m = mm;
    *v = vv;
    return u;
}

static inline int decayed_at(const uint8_t *mask, size_t i) { return mask == NULL || mask[i / ZADAM_MASK_GROUP] != 0; }

static void sums_range(const lamb_consts *c, size_t n, const float *master, const float *m, const float *v,
                       const void *grad, zinc_dtype gdt, const uint8_t *mask, double *wsq, double *usq) {
    double w = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        float mi = m[i], vi = v[i], p = master[i];
        float u = lamb_update(c, p, &mi, &vi, zk_load(grad, gdt, i), decayed_at(mask, i));
        w += (double)p * (double)p;
        s += (double)u * (double)u;
    }
    *wsq = w;
    *usq = s;
}

static void apply_range(const lamb_consts *c, float coeff, size_t n, float *master, float *m, float *v,
                        const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *mask) {
    const float sc = c->step * coeff; /* DeepSpeed: (step_size * lamb_coeff) * update */
    for (size_t i = 0; i < n; i++) {
        float p = master[i];
        float u = lamb_update(c, p, &m[i], &v[i], zk_load(grad, gdt, i), decayed_at(mask, i));
        p = p - sc * u;
        master[i] = p;
        if (param_out) zk_store(param_out, (int)pdt, i, p);
    }
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
    const lamb_consts c = lamb_consts_make(h);
    sums_range(&c, n, master, m, v, grad, gdt, decay_mask, wsq, usq);
}

void zlamb_apply_ref(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v,
                     const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const lamb_consts c = lamb_consts_make(h);
    apply_range(&c, coeff, n, master, m, v, grad, gdt, param_out, pdt, decay_mask);
}

/* ---------------------------------------------------------------- threaded */
typedef struct lamb_job {
    const lamb_consts *c;
    float coeff;
    size_t n, gsz, psz;
    float *master, *m, *v;
    const void *grad;
    zinc_dtype gdt, pdt;
    void *param_out;
    const uint8_t *mask;
    double *part; /* sums: two per chunk */
} lamb_job;

#define CHUNK_OF(j, k, s, len)                                                                               \
    size_t s = (k) * ZK_CHUNK_ELEMS, len = (j)->n - s < ZK_CHUNK_ELEMS ? (j)->n - s : ZK_CHUNK_ELEMS

static void sums_task(void *ctx, size_t k) {
    const lamb_job *j = ctx;
    CHUNK_OF(j, k, s, len);
    sums_range(j->c, len, j->master + s, j->m + s, j->v + s, (const char *)j->grad + s * j->gsz, j->gdt,
               j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL, &j->part[2 * k], &j->part[2 * k + 1]);
}

static void apply_task(void *ctx, size_t k) {
    const lamb_job *j = ctx;
    CHUNK_OF(j, k, s, len);
    apply_range(j->c, j->coeff, len, j->master + s, j->m + s, j->v + s, (const char *)j->grad + s * j->gsz, j->gdt,
                j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pdt,
                j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

void zlamb_sums(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, double *wsq, double *usq) {
    const lamb_consts c = lamb_consts_make(h);
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    double one[2], *part = nch <= 1 ? one : malloc(2 * nch * sizeof(double));
    zpool *p = part ? zk_pool_for(nch) : NULL;
    double w = 0, s = 0;
    if (!part || !p) { /* the same chunked sums on this thread */
        for (size_t k = 0; k < nch; k++) {
            size_t o = k * ZK_CHUNK_ELEMS, len = n - o < ZK_CHUNK_ELEMS ? n - o : ZK_CHUNK_ELEMS;
            double a, b;
            sums_range(&c, len, master + o, m + o, v + o, (const char *)grad + o * zinc_dtype_size(gdt), gdt,
                       decay_mask ? decay_mask + o / ZADAM_MASK_GROUP : NULL, &a, &b);
            w += a;
            s += b;
        }
    } else {
        lamb_job j = {&c, 1.0f, n, zinc_dtype_size(gdt), 0, (float *)master, (float *)m, (float *)v, grad, gdt,
                      ZINC_FP32, NULL, decay_mask, part};
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
    const lamb_consts c = lamb_consts_make(h);
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    zpool *p = zk_pool_for(nch);
    if (!p) {
        apply_range(&c, coeff, n, master, m, v, grad, gdt, param_out, pdt, decay_mask);
        return;
    }
    lamb_job j = {&c, coeff, n, zinc_dtype_size(gdt), param_out ? zinc_dtype_size(pdt) : 0, master, m, v, grad, gdt,
                  pdt, param_out, decay_mask, NULL};
    zpool_for(p, nch, apply_task, &j);
}
