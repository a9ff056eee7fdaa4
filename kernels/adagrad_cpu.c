/* Adagrad as DeepSpeed's DeepSpeedCPUAdagrad computes it (kernels/cpu_kernels.h states the formula): the
 * plain-C reference and the fast version, which splits the work into chunks of ZK_CHUNK_ELEMS on the
 * current pool and runs the same element code (the fp32 loop is left to gcc's vectoriser: separate
 * multiplies and adds, IEEE sqrt and division, so every path rounds identically and the results are
 * bitwise equal to the reference). */
#include <math.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master, updates *sum. */
static inline __attribute__((always_inline)) float adagrad_elem(const zadagrad_hparams *h, float p, float *sum,
                                                                float graw, int decayed) {
    float g = graw * h->grad_factor; /* DeepSpeed's "momentum": the gradient before weight decay */
    float gw = (decayed && h->weight_decay != 0.0f) ? p * h->weight_decay + g : g;
    float s = *sum + gw * gw;
    float upd = g / (sqrtf(s) + h->eps);
    *sum = s;
    return upd * -h->lr + p;
}

void zadagrad_step_ref(const zadagrad_hparams *h, size_t n, float *master, float *sum, const void *grad, zinc_dtype gdt,
                       void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    for (size_t i = 0; i < n; i++) {
        int decayed = decay_mask == NULL || decay_mask[i / ZADAM_MASK_GROUP] != 0;
        float p = adagrad_elem(h, master[i], &sum[i], zinc_load_f32(grad, gdt, i), decayed);
        master[i] = p;
        if (param_out) zk_store(param_out, (int)pdt, i, p);
    }
}

static void adagrad_chunk(const zadagrad_hparams *h, size_t n, float *restrict p, float *restrict sum, const void *g,
                          zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    if (gdt == ZINC_FP32 && !mask && !po) { /* the loop gcc vectorises */
        const float *restrict gf = (const float *)g;
        for (size_t i = 0; i < n; i++) p[i] = adagrad_elem(h, p[i], &sum[i], gf[i], 1);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int decayed = mask == NULL || mask[i / ZADAM_MASK_GROUP] != 0;
        float v = adagrad_elem(h, p[i], &sum[i], zk_load(g, gdt, i), decayed);
        p[i] = v;
        if (po) zk_store(po, pdt, i, v);
    }
}

typedef struct adagrad_job {
    const zadagrad_hparams *h;
    size_t n, gsz, psz;
    float *master, *sum;
    const void *grad;
    zinc_dtype gdt;
    void *param_out;
    int pt;
    const uint8_t *mask;
} adagrad_job;

static void adagrad_task(void *ctx, size_t k) {
    const adagrad_job *j = (const adagrad_job *)ctx;
    size_t s = k * ZK_CHUNK_ELEMS, len = j->n - s < ZK_CHUNK_ELEMS ? j->n - s : ZK_CHUNK_ELEMS;
    adagrad_chunk(j->h, len, j->master + s, j->sum + s, (const char *)j->grad + s * j->gsz, j->gdt,
                  j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pt,
                  j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

void zadagrad_step(const zadagrad_hparams *h, size_t n, float *master, float *sum, const void *grad, zinc_dtype gdt,
                   void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const zadagrad_hparams hc = *h; /* a local copy: stores to master and sum cannot alias it */
    adagrad_job j = {&hc,
                     n,
                     zinc_dtype_size(gdt),
                     param_out ? zinc_dtype_size(pdt) : 0,
                     master,
                     sum,
                     grad,
                     gdt,
                     param_out,
                     param_out ? (int)pdt : ZK_NO_OUT,
                     decay_mask};
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    zpool *pool = zk_pool_for(nch);
    if (!pool)
        for (size_t k = 0; k < nch; k++) adagrad_task(&j, k);
    else
        zpool_for(pool, nch, adagrad_task, &j);
}
