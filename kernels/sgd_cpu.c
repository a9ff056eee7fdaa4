/* SGD (optionally with momentum) as torch.optim.SGD computes it (kernels/cpu_kernels.h states the formula):
 * the plain-C reference and the fast version, which splits the work into chunks of ZK_CHUNK_ELEMS on the
 * current pool and runs the same element code (the fp32 loop is left to gcc's vectoriser: separate
 * multiplies and adds, no fused multiply-add, so every path rounds identically and the results are bitwise
 * equal to the reference). */
#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master, updates *buf. */
static inline __attribute__((always_inline)) float sgd_elem(const zsgd_hparams *h, float p, float *buf, float graw,
                                                            int decayed) {
    float g = graw * h->grad_factor;
    if (h->maximize) g = -g;
    if (decayed && h->weight_decay != 0.0f) g = g + h->weight_decay * p; /* grad.add(param, alpha=wd) */
    if (h->momentum != 0.0f) {
        float b = h->first ? g : *buf * h->momentum + h->one_minus_dampening * g; /* first: buf = g */
        *buf = b;
        g = h->nesterov ? g + h->momentum * b : b;
    }
    return p - h->lr * g; /* param.add_(grad, alpha=-lr) */
}

void zsgd_step_ref(const zsgd_hparams *h, size_t n, float *master, float *buf, const void *grad, zinc_dtype gdt,
                   void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    for (size_t i = 0; i < n; i++) {
        int decayed = decay_mask == NULL || decay_mask[i / ZADAM_MASK_GROUP] != 0;
        float p = sgd_elem(h, master[i], &buf[i], zinc_load_f32(grad, gdt, i), decayed);
        master[i] = p;
        if (param_out) zk_store(param_out, (int)pdt, i, p);
    }
}

static void sgd_chunk(const zsgd_hparams *h, size_t n, float *restrict p, float *restrict buf, const void *g,
                      zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    if (gdt == ZINC_FP32 && !mask && !po) { /* the loop gcc vectorises */
        const float *restrict gf = (const float *)g;
        for (size_t i = 0; i < n; i++) p[i] = sgd_elem(h, p[i], &buf[i], gf[i], 1);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int decayed = mask == NULL || mask[i / ZADAM_MASK_GROUP] != 0;
        float v = sgd_elem(h, p[i], &buf[i], zk_load(g, gdt, i), decayed);
        p[i] = v;
        if (po) zk_store(po, pdt, i, v);
    }
}

typedef struct sgd_job {
    const zsgd_hparams *h;
    size_t n, gsz, psz;
    float *master, *buf;
    const void *grad;
    zinc_dtype gdt;
    void *param_out;
    int pt;
    const uint8_t *mask;
} sgd_job;

static void sgd_task(void *ctx, size_t k) {
    const sgd_job *j = (const sgd_job *)ctx;
    size_t s = k * ZK_CHUNK_ELEMS, len = j->n - s < ZK_CHUNK_ELEMS ? j->n - s : ZK_CHUNK_ELEMS;
    sgd_chunk(j->h, len, j->master + s, j->buf + s, (const char *)j->grad + s * j->gsz, j->gdt,
              j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pt,
              j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

void zsgd_step(const zsgd_hparams *h, size_t n, float *master, float *buf, const void *grad, zinc_dtype gdt,
               void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const zsgd_hparams hc = *h; /* a local copy: stores to master and buf cannot alias it */
    sgd_job j = {&hc,
                 n,
                 zinc_dtype_size(gdt),
                 param_out ? zinc_dtype_size(pdt) : 0,
                 master,
                 buf,
                 grad,
                 gdt,
                 param_out,
                 param_out ? (int)pdt : ZK_NO_OUT,
                 decay_mask};
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    zpool *pool = zk_pool_for(nch);
    if (!pool)
        for (size_t k = 0; k < nch; k++) sgd_task(&j, k);
    else
        zpool_for(pool, nch, sgd_task, &j);
}
