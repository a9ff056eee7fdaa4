/* Lion over a flat shard: the scalar reference (zlion_step_ref) and the fast version (zlion_step).
 *
 * Lion is elementwise with one sign and no division or square root, so the fast version is the same loop
 * specialised per gradient / parameter dtype and compiled twice, once for the baseline ISA and once for
 * AVX2 (chosen with the Adam kernels' SIMD level, zkernels_simd_name); gcc's vectoriser makes the SIMD
 * code (the element update is branch-free for it). 16-bit gradients and outputs go through fp32 tiles
 * converted by the SIMD casts (lion_tiled). bench/bench_lion_cpu.c times it against Adam. The build is ISO C11, where gcc does not contract a*b+c into an FMA, so every path rounds as the
 * reference does: the results are bitwise equal (tests/test_kernels_cpu.c checks it). Threads: chunks
 * of ZK_CHUNK_ELEMS on the current pool, as the Adam kernel. */
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

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

/* One element; `decayed` is its mask bit (1 without a mask). Returns the new master and updates *m.
 * Branch-free so that gcc vectorises the loops around it: the sign is (c > 0) - (c < 0) (0 for 0 and for
 * NaN), and an undecayed element is multiplied by exactly 1 (which leaves every float, inf and NaN
 * included, as it is). */
static inline __attribute__((always_inline)) float lion_elem(const lion_consts *c, float p, float *m, float graw,
                                                             int decayed) {
    float g = graw * c->gf;
    float cm = c->b1 * *m + c->omb1 * g;
    float sgn = (float)(cm > 0.0f) - (float)(cm < 0.0f);
    float keep = (c->decay & decayed) ? c->after_decay : 1.0f;
    p = p * keep;
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
#define LION_BODY(GDT, PDT)                                                                                            \
    do {                                                                                                               \
        if (!mask) {                                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                                           \
                float x = lion_elem(c, p[i], &m[i], zk_load(g, GDT, i), 1);                                            \
                p[i] = x;                                                                                              \
                if (PDT != ZK_NO_OUT) zk_store(po, PDT, i, x);                                                         \
            }                                                                                                          \
        } else {                                                                                                       \
            for (size_t b = 0; b < n; b += ZADAM_MASK_GROUP) {                                                         \
                const int dec = mask[b / ZADAM_MASK_GROUP] != 0;                                                       \
                const size_t e = n - b < ZADAM_MASK_GROUP ? n : b + ZADAM_MASK_GROUP;                                  \
                for (size_t i = b; i < e; i++) {                                                                       \
                    float x = lion_elem(c, p[i], &m[i], zk_load(g, GDT, i), dec);                                      \
                    p[i] = x;                                                                                          \
                    if (PDT != ZK_NO_OUT) zk_store(po, PDT, i, x);                                                     \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

#define LION_SWITCH(GDT)                                                                                               \
    do {                                                                                                               \
        switch (pdt) {                                                                                                 \
        case ZINC_FP32: LION_BODY(GDT, ZINC_FP32); break;                                                              \
        case ZINC_FP16: LION_BODY(GDT, ZINC_FP16); break;                                                              \
        case ZINC_BF16: LION_BODY(GDT, ZINC_BF16); break;                                                              \
        default: LION_BODY(GDT, ZK_NO_OUT); break;                                                                     \
        }                                                                                                              \
    } while (0)

#define LION_CHUNK_FN(NAME, ATTR)                                                                                      \
    ATTR static void NAME(const lion_consts *cp, size_t n, float *restrict p, float *restrict m, const void *g,        \
                          zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {                                    \
        const lion_consts cl = *cp; /* a local copy: stores to p and m cannot alias it */                              \
        const lion_consts *c = &cl;                                                                                    \
        if (!po) pdt = ZK_NO_OUT;                                                                                      \
        switch (gdt) {                                                                                                 \
        case ZINC_FP16: LION_SWITCH(ZINC_FP16); break;                                                                 \
        case ZINC_BF16: LION_SWITCH(ZINC_BF16); break;                                                                 \
        default: LION_SWITCH(ZINC_FP32); break;                                                                        \
        }                                                                                                              \
    }

LION_CHUNK_FN(lion_chunk_base, )
#if defined(__x86_64__) || defined(__i386__)
LION_CHUNK_FN(lion_chunk_avx2_body, __attribute__((target("avx2,fma,f16c"))))
/* Leaves through vzeroupper, as every AVX kernel does (kernels/adam_simd.inc says why). */
__attribute__((target("avx2,fma,f16c"))) static void lion_chunk_avx2(const lion_consts *c, size_t n, float *p, float *m,
                                                                     const void *g, zinc_dtype gdt, void *po, int pdt,
                                                                     const uint8_t *mask) {
    lion_chunk_avx2_body(c, n, p, m, g, gdt, po, pdt, mask);
    _mm256_zeroupper();
}
#define HAVE_LION_AVX2 1
#endif

typedef void (*lion_chunk_fn)(const lion_consts *c, size_t n, float *p, float *m, const void *g, zinc_dtype gdt,
                              void *po, int pdt, const uint8_t *mask);

/* The fp32 loop vectorises; the 16-bit conversions inside it (a branch for NaN in each) do not. So a
 * 16-bit gradient or parameter output goes through fp32 tiles converted by the casts' own SIMD code
 * (zcast_to_f32 / zcast_from_f32, bit-identical to the scalar conversions; one tile is under one chunk, so
 * they run on this thread). */
#define LION_TILE 2048
static void lion_tiled(lion_chunk_fn fp32_fn, const lion_consts *c, size_t n, float *p, float *m, const void *g,
                       zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    float gt[LION_TILE];
    const size_t gsz = zinc_dtype_size(gdt), psz = po ? zinc_dtype_size((zinc_dtype)pdt) : 0;
    for (size_t o = 0; o < n; o += LION_TILE) { /* LION_TILE is a multiple of ZADAM_MASK_GROUP */
        size_t k = n - o < LION_TILE ? n - o : LION_TILE;
        const void *gk = (const char *)g + o * gsz;
        if (gdt != ZINC_FP32) zcast_to_f32(gt, gk, gdt, k);
        fp32_fn(c, k, p + o, m + o, gdt != ZINC_FP32 ? gt : gk, ZINC_FP32, NULL, ZK_NO_OUT,
                mask ? mask + o / ZADAM_MASK_GROUP : NULL);
        if (po) zcast_from_f32((char *)po + o * psz, (zinc_dtype)pdt, p + o, k);
    }
}

static lion_chunk_fn chunk_fn(void) {
#ifdef HAVE_LION_AVX2
    if (strcmp(zkernels_simd_name(), "scalar") != 0) return lion_chunk_avx2; /* avx2 or avx512 */
#endif
    return lion_chunk_base;
}

/* One chunk: the fp32 loop directly when nothing is 16-bit, else through tiles. */
static void lion_chunk(lion_chunk_fn fn, const lion_consts *c, size_t n, float *p, float *m, const void *g,
                       zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    if (gdt == ZINC_FP32 && (!po || pdt == ZINC_FP32))
        fn(c, n, p, m, g, gdt, po, pdt, mask);
    else
        lion_tiled(fn, c, n, p, m, g, gdt, po, pdt, mask);
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
    lion_chunk(j->fn, j->c, len, j->master + s, j->m + s, (const char *)j->grad + s * j->gsz, j->gdt,
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
        lion_chunk(fn, &c, n, master, m, grad, gdt, param_out, pt, decay_mask);
        return;
    }
    lion_job j =
        {fn,        &c, n,         zinc_dtype_size(gdt), param_out ? zinc_dtype_size(pdt) : 0, master, m, grad, gdt,
         param_out, pt, decay_mask};
    zpool_for(p, nch, lion_task, &j);
}
