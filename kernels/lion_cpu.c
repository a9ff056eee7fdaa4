/* Lion over a flat shard: the scalar reference (zlion_step_ref) and the fast version (zlion_step).
 *
 * Lion is elementwise with one sign and no division or square root, so the fast version is the same loop
 * specialised per gradient / parameter dtype and compiled twice, once for the baseline ISA and once for
 * AVX2 (chosen with the Adam kernels' SIMD level, zkernels_simd_name); gcc's vectoriser makes the SIMD
 * code. The build is ISO C11, where gcc does not contract a*b+c into an FMA, so every path rounds as the
 * reference does: the results are bitwise equal (tests/test_kernels_cpu.c checks it). Threads: chunks
 * of ZK_CHUNK_ELEMS on the current pool, as the Adam kernel. */
#include <string.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

typedef struct lion_consts {
    float gf, b1, omb1, b2, omb2, lr, after_decay;
    int decay; /* wd != 0 */
} lion_consts;

static lion_consts lion_consts_make(const zadam_hparams *h) {
    lion_consts c;
    c.gf = h->grad_factor;
    c.b1 = h->beta1;
    c.omb1 = 1.0f - h->beta1;
    c.b2 = h->beta2;
    c.omb2 = 1.0f - h->beta2;
    c.lr = h->lr;
    c.after_decay = 1.0f - h->lr * h->weight_decay;
    c.decay = h->weight_decay != 0.0f;
    return c;
}

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master and updates *m. */
static inline __attribute__((always_inline)) float lion_elem(const lion_consts *c, float p, float *m, float graw,
                                                             int decayed) {
    float g = graw * c->gf;
    float cm = c->b1 * *m + c->omb1 * g;
    float sgn = cm > 0.0f ? 1.0f : (cm < 0.0f ? -1.0f : 0.0f);
    if (c->decay && decayed) p = p * c->after_decay;
    p = p - c->lr * sgn;
    *m = c->b2 * *m + c->omb2 * g;
    return p;
}

void zlion_step_ref(const zadam_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                    void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const lion_consts c = lion_consts_make(h);
    for (size_t i = 0; i < n; i++) {
        int decayed = decay_mask == NULL || decay_mask[i / ZADAM_MASK_GROUP] != 0;
        float p = lion_elem(&c, master[i], &m[i], zinc_load_f32(grad, gdt, i), decayed);
        master[i] = p;
        if (param_out) zk_store(param_out, (int)pdt, i, p);
    }
}

/* ---------------------------------------------------------------- the fast loop */
/* Groups of ZADAM_MASK_GROUP elements share one mask byte: the inner loop over a group has a
 * loop-invariant decay flag and vectorises; without a mask the whole range is one loop. */
#define LION_BODY(GDT, PDT)                                                                                  \
    do {                                                                                                     \
        if (!mask) {                                                                                         \
            for (size_t i = 0; i < n; i++) {                                                                 \
                float x = lion_elem(c, p[i], &m[i], zk_load(g, GDT, i), 1);                                  \
                p[i] = x;                                                                                    \
                if (PDT != ZK_NO_OUT) zk_store(po, PDT, i, x);                                               \
            }                                                                                                \
        } else {                                                                                             \
            for (size_t b = 0; b < n; b += ZADAM_MASK_GROUP) {                                               \
                const int dec = mask[b / ZADAM_MASK_GROUP] != 0;                                             \
                const size_t e = n - b < ZADAM_MASK_GROUP ? n : b + ZADAM_MASK_GROUP;                        \
                for (size_t i = b; i < e; i++) {                                                             \
                    float x = lion_elem(c, p[i], &m[i], zk_load(g, GDT, i), dec);                            \
                    p[i] = x;                                                                                \
                    if (PDT != ZK_NO_OUT) zk_store(po, PDT, i, x);                                           \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    } while (0)

#define LION_SWITCH(GDT)                                                                                     \
    do {                                                                                                     \
        switch (pdt) {                                                                                       \
        case ZINC_FP32: LION_BODY(GDT, ZINC_FP32); break;                                                    \
        case ZINC_FP16: LION_BODY(GDT, ZINC_FP16); break;                                                    \
        case ZINC_BF16: LION_BODY(GDT, ZINC_BF16); break;                                                    \
        default: LION_BODY(GDT, ZK_NO_OUT); break;                                                           \
        }                                                                                                    \
    } while (0)

#define LION_CHUNK_FN(NAME, ATTR)                                                                            \
    ATTR static void NAME(const lion_consts *c, size_t n, float *restrict p, float *restrict m,              \
                          const void *g, zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {           \
        if (!po) pdt = ZK_NO_OUT;                                                                            \
        switch (gdt) {                                                                                       \
        case ZINC_FP16: LION_SWITCH(ZINC_FP16); break;                                                       \
        case ZINC_BF16: LION_SWITCH(ZINC_BF16); break;                                                       \
        default: LION_SWITCH(ZINC_FP32); break;                                                              \
        }                                                                                                    \
    }

LION_CHUNK_FN(lion_chunk_base, )
#if defined(__x86_64__) || defined(__i386__)
LION_CHUNK_FN(lion_chunk_avx2, __attribute__((target("avx2,fma,f16c"))))
#define HAVE_LION_AVX2 1
#endif

typedef void (*lion_chunk_fn)(const lion_consts *c, size_t n, float *p, float *m, const void *g, zinc_dtype gdt,
                              void *po, int pdt, const uint8_t *mask);

static lion_chunk_fn chunk_fn(void) {
#ifdef HAVE_LION_AVX2
    if (strcmp(zkernels_simd_name(), "scalar") != 0) return lion_chunk_avx2; /* avx2 or avx512 */
#endif
    return lion_chunk_base;
}

typedef struct lion_job {
    lion_chunk_fn fn;
    const lion_consts *c;
    size_t n, gsz, psz;
    float *master, *m;
    const void *grad;
    zinc_dtype gdt;
    void *param_out;
    int pt;
    const uint8_t *mask;
} lion_job;

static void lion_task(void *ctx, size_t k) {
    const lion_job *j = (const lion_job *)ctx;
    size_t s = k * ZK_CHUNK_ELEMS, len = j->n - s < ZK_CHUNK_ELEMS ? j->n - s : ZK_CHUNK_ELEMS;
    j->fn(j->c, len, j->master + s, j->m + s, (const char *)j->grad + s * j->gsz, j->gdt,
          j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pt,
          j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

void zlion_step(const zadam_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const lion_consts c = lion_consts_make(h);
    const lion_chunk_fn fn = chunk_fn();
    const int pt = param_out ? (int)pdt : ZK_NO_OUT;
    const size_t nch = (n + ZK_CHUNK_ELEMS - 1) / ZK_CHUNK_ELEMS;
    zpool *p = zk_pool_for(nch);
    if (!p) {
        fn(&c, n, master, m, grad, gdt, param_out, pt, decay_mask);
        return;
    }
    lion_job j = {fn, &c, n, zinc_dtype_size(gdt), param_out ? zinc_dtype_size(pdt) : 0, master, m, grad, gdt,
                  param_out, pt, decay_mask};
    zpool_for(p, nch, lion_task, &j);
}
