/* ZeRO++ symmetric block quantization (kernels/cpu_kernels.h, zk_quant_sym): the scalar references and the
 * fast versions.
 *
 * The fast loops are the references' loops over fp32 blocks, compiled for the baseline ISA, AVX2 and AVX-512
 * (chosen with the Adam kernels' SIMD level, zkernels_simd_name), vectorised by gcc. Every operation is
 * exact or rounds once per element in a fixed order (the block maximum is taken on the absolute values' bit
 * patterns, an unsigned maximum, which no order changes), so every path writes the reference's bits. 16-bit
 * inputs and outputs go through fp32 tiles converted by zcast_to_f32 / zcast_from_f32 (bit-identical to the
 * scalar conversions). Threads: runs of whole blocks, about ZK_CHUNK_ELEMS elements each, on the current
 * pool. */
#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

/* |x|'s bit pattern: for non-NaN floats the unsigned order of these is the order of |x| (a NaN is above
 * every infinity, so it becomes the block's maximum and the block dequantizes to the clamp value times NaN). */
static inline uint32_t abs_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* DeepSpeed's Params<Symmetric, bits>(max): scale = 2^bits / (2 max), 1 for an all-zero block. */
static inline float quant_mul(float max, int bits) { return max == 0.0f ? 1.0f : (float)(1 << bits) / (2.0f * max); }

/* q = clamp(rint(x * s)): rint rounds half to even (the kernel's __float2int_rn); NaN goes to qmin. */
static inline int8_t quant_one(float x, float s, float qmin, float qmax) {
    float r = rintf(x * s);
    r = r > qmax ? qmax : r;
    r = r >= qmin ? r : qmin;
    return (int8_t)(int)r;
}

void zk_quant_sym_ref(const void *x, zinc_dtype t, size_t n, size_t block, int bits, int8_t *q, float *scales) {
    const float qmax = (float)((1 << (bits - 1)) - 1), qmin = -(float)(1 << (bits - 1));
    for (size_t b = 0, k = 0; b < n; b += block, k++) {
        size_t e = n - b < block ? n : b + block;
        uint32_t m = 0;
        for (size_t i = b; i < e; i++) {
            uint32_t a = abs_bits(zk_load(x, t, i));
            if (a > m) m = a;
        }
        float s = quant_mul(bits_f32(m), bits);
        for (size_t i = b; i < e; i++) q[i] = quant_one(zk_load(x, t, i), s, qmin, qmax);
        scales[k] = 1.0f / s;
    }
}

void zk_dequant_sym_ref(const int8_t *q, const float *scales, size_t n, size_t block, void *y, zinc_dtype t) {
    for (size_t i = 0; i < n; i++) zk_store(y, (int)t, i, (float)q[i] * scales[i / block]);
}

/* ---------------------------------------------------------------- the fast loops (fp32 blocks) */
#define QUANT_FNS(SUF, ATTR)                                                                                           \
    ATTR static void quant_f32_##SUF(const float *restrict x, size_t n, size_t block, int bits, int8_t *restrict q,    \
                                     float *restrict scales) {                                                         \
        const float qmax = (float)((1 << (bits - 1)) - 1), qmin = -(float)(1 << (bits - 1));                           \
        for (size_t b = 0, k = 0; b < n; b += block, k++) {                                                            \
            const size_t e = n - b < block ? n - b : block;                                                            \
            const float *xb = x + b;                                                                                   \
            int8_t *qb = q + b;                                                                                        \
            uint32_t m = 0;                                                                                            \
            for (size_t i = 0; i < e; i++) {                                                                           \
                uint32_t a = abs_bits(xb[i]);                                                                          \
                m = a > m ? a : m;                                                                                     \
            }                                                                                                          \
            const float s = quant_mul(bits_f32(m), bits);                                                              \
            for (size_t i = 0; i < e; i++) qb[i] = quant_one(xb[i], s, qmin, qmax);                                    \
            scales[k] = 1.0f / s;                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    ATTR static void dequant_f32_##SUF(const int8_t *restrict q, const float *restrict scales, size_t n, size_t block, \
                                       float *restrict y) {                                                            \
        for (size_t b = 0, k = 0; b < n; b += block, k++) {                                                            \
            const size_t e = n - b < block ? n - b : block;                                                            \
            const float sc = scales[k];                                                                                \
            for (size_t i = 0; i < e; i++) y[b + i] = (float)q[b + i] * sc;                                            \
        }                                                                                                              \
    }

QUANT_FNS(base, )
#if defined(__x86_64__) || defined(__i386__)
QUANT_FNS(avx2_body, __attribute__((target("avx2,fma,f16c"))))
QUANT_FNS(avx512_body, __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))))
/* Leave through vzeroupper, as every AVX kernel does (kernels/adam_simd.inc says why). */
__attribute__((target("avx2"))) static void quant_f32_avx2(const float *x, size_t n, size_t block, int bits, int8_t *q,
                                                           float *scales) {
    quant_f32_avx2_body(x, n, block, bits, q, scales);
    _mm256_zeroupper();
}
__attribute__((target("avx2"))) static void dequant_f32_avx2(const int8_t *q, const float *scales, size_t n,
                                                             size_t block, float *y) {
    dequant_f32_avx2_body(q, scales, n, block, y);
    _mm256_zeroupper();
}
__attribute__((target("avx2"))) static void quant_f32_avx512(const float *x, size_t n, size_t block, int bits,
                                                             int8_t *q, float *scales) {
    quant_f32_avx512_body(x, n, block, bits, q, scales);
    _mm256_zeroupper();
}
__attribute__((target("avx2"))) static void dequant_f32_avx512(const int8_t *q, const float *scales, size_t n,
                                                               size_t block, float *y) {
    dequant_f32_avx512_body(q, scales, n, block, y);
    _mm256_zeroupper();
}
#define HAVE_QUANT_SIMD 1
#endif

typedef void (*quant_fn)(const float *x, size_t n, size_t block, int bits, int8_t *q, float *scales);
typedef void (*dequant_fn)(const int8_t *q, const float *scales, size_t n, size_t block, float *y);

static void pick(quant_fn *qf, dequant_fn *df) {
    *qf = quant_f32_base;
    *df = dequant_f32_base;
#ifdef HAVE_QUANT_SIMD
    const char *l = zkernels_simd_name();
    if (!strcmp(l, "avx512")) {
        *qf = quant_f32_avx512;
        *df = dequant_f32_avx512;
    } else if (!strcmp(l, "avx2")) {
        *qf = quant_f32_avx2;
        *df = dequant_f32_avx2;
    }
#endif
}

/* 16-bit data goes through fp32 tiles of whole blocks (at least one block; a block longer than the tile is
 * converted in one piece on the heap-free path by splitting it: only the maximum spans tiles, so such a block
 * takes the reference's loop). */
#define QUANT_TILE 8192

typedef struct quant_job {
    quant_fn qf;
    dequant_fn df;
    const void *x;
    void *y;
    zinc_dtype t;
    size_t n, block, blocks_per_task;
    int bits;
    int8_t *q;
    float *scales;
    const int8_t *cq;
    const float *cscales;
} quant_job;

/* Blocks [k0, k1) of the job: elements [k0*block, min(n, k1*block)). */
static void quant_run(const quant_job *j, size_t k0, size_t k1) {
    size_t lo = k0 * j->block, hi = k1 * j->block < j->n ? k1 * j->block : j->n;
    if (lo >= hi) return;
    size_t sz = zinc_dtype_size(j->t);
    if (j->t == ZINC_FP32) {
        j->qf((const float *)j->x + lo, hi - lo, j->block, j->bits, j->q + lo, j->scales + k0);
        return;
    }
    if (j->block > QUANT_TILE) {
        zk_quant_sym_ref((const char *)j->x + lo * sz, j->t, hi - lo, j->block, j->bits, j->q + lo, j->scales + k0);
        return;
    }
    float tile[QUANT_TILE];
    size_t per = QUANT_TILE / j->block * j->block;
    for (size_t o = lo; o < hi; o += per) {
        size_t k = hi - o < per ? hi - o : per;
        zcast_to_f32(tile, (const char *)j->x + o * sz, j->t, k);
        j->qf(tile, k, j->block, j->bits, j->q + o, j->scales + o / j->block);
    }
}

static void dequant_run(const quant_job *j, size_t k0, size_t k1) {
    size_t lo = k0 * j->block, hi = k1 * j->block < j->n ? k1 * j->block : j->n;
    if (lo >= hi) return;
    size_t sz = zinc_dtype_size(j->t);
    if (j->t == ZINC_FP32) {
        j->df(j->cq + lo, j->cscales + k0, hi - lo, j->block, (float *)j->y + lo);
        return;
    }
    if (j->block > QUANT_TILE) {
        zk_dequant_sym_ref(j->cq + lo, j->cscales + k0, hi - lo, j->block, (char *)j->y + lo * sz, j->t);
        return;
    }
    float tile[QUANT_TILE];
    size_t per = QUANT_TILE / j->block * j->block;
    for (size_t o = lo; o < hi; o += per) {
        size_t k = hi - o < per ? hi - o : per;
        j->df(j->cq + o, j->cscales + o / j->block, k, j->block, tile);
        zcast_from_f32((char *)j->y + o * sz, j->t, tile, k);
    }
}

static void quant_task(void *ctx, size_t k) {
    const quant_job *j = (const quant_job *)ctx;
    quant_run(j, k * j->blocks_per_task, (k + 1) * j->blocks_per_task);
}

static void dequant_task(void *ctx, size_t k) {
    const quant_job *j = (const quant_job *)ctx;
    dequant_run(j, k * j->blocks_per_task, (k + 1) * j->blocks_per_task);
}

static void run(quant_job *j, void (*task)(void *, size_t), void (*serial)(const quant_job *, size_t, size_t)) {
    pick(&j->qf, &j->df);
    size_t nblocks = (j->n + j->block - 1) / j->block;
    j->blocks_per_task = ZK_CHUNK_ELEMS / j->block ? ZK_CHUNK_ELEMS / j->block : 1;
    size_t ntasks = (nblocks + j->blocks_per_task - 1) / j->blocks_per_task;
    zpool *p = zk_pool_for(ntasks);
    if (!p || ntasks < 2)
        serial(j, 0, nblocks);
    else
        zpool_for(p, ntasks, task, j);
}

void zk_quant_sym(const void *x, zinc_dtype t, size_t n, size_t block, int bits, int8_t *q, float *scales) {
    if (!n) return;
    quant_job j = {.x = x, .t = t, .n = n, .block = block, .bits = bits, .q = q, .scales = scales};
    run(&j, quant_task, quant_run);
}

void zk_dequant_sym(const int8_t *q, const float *scales, size_t n, size_t block, void *y, zinc_dtype t) {
    if (!n) return;
    quant_job j = {.y = y, .t = t, .n = n, .block = block, .cq = q, .cscales = scales};
    run(&j, dequant_task, dequant_run);
}
