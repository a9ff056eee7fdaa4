/* The fast CPU kernels: run-time SIMD dispatch (AVX-512, AVX2 or scalar; ZINC_SIMD forces a lower one)
 * and OpenMP threading over fixed-size chunks. The SIMD bodies are in adam_avx2.c / adam_avx512.c; the
 * scalar element code, shared with their tails, is in adam_scalar.h.
 *
 * Threading: work is split into ZK_CHUNK-element chunks (a multiple of ZADAM_MASK_GROUP and of 64, so
 * chunk starts fall on mask groups and, for aligned arrays, on cache lines), scheduled statically so each
 * thread streams one contiguous range. Below two chunks the call runs on the calling thread, with no
 * OpenMP region at all. Results never depend on the thread count: Adam is elementwise, and zgrad_stats
 * sums in a fixed order (blocks of ZSTATS_BLOCK left to right, then block sums left to right). */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/adam_scalar.h"

#define ZK_CHUNK ((size_t)65536)
#define ZK_AI static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- the scalar path */
ZK_AI void adam_scalar_body(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                            const zinc_dtype gdt, void *po, const int pdt, const uint8_t *mask) {
    zk_adam_scalar_range(c, 0, n, p, m, v, g, gdt, po, pdt, mask);
}
#define ZK_SCALAR_PDT(GDT)                                                                                 \
    do {                                                                                                   \
        switch (pdt) {                                                                                     \
        case ZINC_FP32: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_FP32, mask); break;               \
        case ZINC_FP16: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_FP16, mask); break;               \
        case ZINC_BF16: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_BF16, mask); break;               \
        default: adam_scalar_body(c, n, p, m, v, g, GDT, NULL, ZK_NO_OUT, mask); break;                    \
        }                                                                                                  \
    } while (0)
static void adam_scalar(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                        zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    if (!po) pdt = ZK_NO_OUT;
    switch (gdt) {
    case ZINC_FP16: ZK_SCALAR_PDT(ZINC_FP16); break;
    case ZINC_BF16: ZK_SCALAR_PDT(ZINC_BF16); break;
    default: ZK_SCALAR_PDT(ZINC_FP32); break;
    }
}

static void axpy_scalar(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int acc) {
    if (acc)
        for (size_t i = 0; i < n; i++) dst[i] = dst[i] + scale * zk_load(src, t, i);
    else
        for (size_t i = 0; i < n; i++) dst[i] = scale * zk_load(src, t, i);
}
static void cast_from_scalar(void *dst, zinc_dtype t, const float *src, size_t n) {
    if (t == ZINC_FP32) memmove(dst, src, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) zk_store(dst, t, i, src[i]);
}
static void cast_to_scalar(float *dst, const void *src, zinc_dtype t, size_t n) {
    if (t == ZINC_FP32) memmove(dst, src, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) dst[i] = zk_load(src, t, i);
}
static void scale_scalar(void *x, zinc_dtype t, float scale, size_t n) {
    for (size_t i = 0; i < n; i++) zk_store(x, t, i, zk_load(x, t, i) * scale);
}
static const zk_ops zk_ops_scalar = {"scalar", adam_scalar, axpy_scalar, cast_from_scalar, cast_to_scalar,
                                     scale_scalar};

/* ---------------------------------------------------------------- dispatch */
enum { ZK_SCALAR = 0, ZK_AVX2 = 1, ZK_AVX512 = 2 };
static const zk_ops *const zk_levels[] = {&zk_ops_scalar, &zk_ops_avx2, &zk_ops_avx512};
static int zk_cpu_level, zk_default_level, zk_level;
static pthread_once_t zk_once = PTHREAD_ONCE_INIT;

static int level_of(const char *name) {
    if (!strcmp(name, "scalar")) return ZK_SCALAR;
    if (!strcmp(name, "avx2")) return ZK_AVX2;
    if (!strcmp(name, "avx512")) return ZK_AVX512;
    return -1;
}

static void zk_init(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int f16 = __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (f16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        zk_cpu_level = ZK_AVX512;
    else if (f16 && __builtin_cpu_supports("avx2")) zk_cpu_level = ZK_AVX2;
    else zk_cpu_level = ZK_SCALAR;
#else
    zk_cpu_level = ZK_SCALAR;
#endif
    zk_default_level = zk_cpu_level;
    const char *e = getenv("ZINC_SIMD");
    if (e && *e) {
        int l = level_of(e);
        if (l < 0) fprintf(stderr, "zinc: ignoring ZINC_SIMD=%s (want scalar, avx2 or avx512)\n", e);
        else if (l < zk_default_level) zk_default_level = l;
    }
    zk_level = zk_default_level;
}

static const zk_ops *ops(void) {
    pthread_once(&zk_once, zk_init);
    return zk_levels[zk_level];
}

const char *zkernels_simd_name(void) { return ops()->name; }

int zkernels_set_simd(const char *name) {
    pthread_once(&zk_once, zk_init);
    if (!name) {
        zk_level = zk_default_level;
        return 0;
    }
    int l = level_of(name);
    if (l < 0 || l > zk_cpu_level) return -1;
    zk_level = l;
    return 0;
}

static int zk_threads_set;
void zkernels_set_threads(int n) { zk_threads_set = n > 0 ? n : 0; }
int zkernels_threads(void) { return zk_threads_set > 0 ? zk_threads_set : omp_get_max_threads(); }

/* Threads for n elements in ZK_CHUNK chunks: 1 when there is less than two chunks of work. */
static int threads_for(size_t nchunks) {
    if (nchunks < 2) return 1;
    int t = zkernels_threads();
    if ((size_t)t > nchunks) t = (int)nchunks;
    return t < 1 ? 1 : t;
}

/* ---------------------------------------------------------------- Adam, casts, axpy, scale */
void zadam_step(const zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad,
                zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    const zk_ops *o = ops();
    const zk_adam_consts c = zk_adam_consts_make(h);
    const int pt = param_out ? (int)pdt : ZK_NO_OUT;
    const size_t gsz = zinc_dtype_size(gdt), psz = param_out ? zinc_dtype_size(pdt) : 0;
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const int nt = threads_for(nch);
    if (nt == 1) {
        o->adam(&c, n, master, m, v, grad, gdt, param_out, pt, decay_mask);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
        o->adam(&c, len, master + s, m + s, v + s, (const char *)grad + s * gsz, gdt,
                param_out ? (char *)param_out + s * psz : NULL, pt, decay_mask ? decay_mask + s / ZADAM_MASK_GROUP : NULL);
    }
}

void zaxpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate) {
    const zk_ops *o = ops();
    const size_t sz = zinc_dtype_size(t), nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const int nt = threads_for(nch);
    if (nt == 1) {
        o->axpy(dst, src, t, scale, n, accumulate);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
        o->axpy(dst + s, (const char *)src + s * sz, t, scale, len, accumulate);
    }
}

void zcast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n) {
    const zk_ops *o = ops();
    const size_t sz = zinc_dtype_size(t), nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const int nt = threads_for(nch);
    if (nt == 1 || (t == ZINC_FP32 && dst == (const void *)src)) {
        o->cast_from(dst, t, src, n);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
        o->cast_from((char *)dst + s * sz, t, src + s, len);
    }
}

void zcast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n) {
    const zk_ops *o = ops();
    const size_t sz = zinc_dtype_size(t), nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const int nt = threads_for(nch);
    if (nt == 1 || (t == ZINC_FP32 && (const void *)dst == src)) {
        o->cast_to(dst, src, t, n);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
        o->cast_to(dst + s, (const char *)src + s * sz, t, len);
    }
}

void zscale_inplace(void *x, zinc_dtype t, float scale, size_t n) {
    const zk_ops *o = ops();
    const size_t sz = zinc_dtype_size(t), nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const int nt = threads_for(nch);
    if (nt == 1) {
        o->scale(x, t, scale, n);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
        o->scale((char *)x + s * sz, t, scale, len);
    }
}

/* ---------------------------------------------------------------- gradient statistics */
/* The sum of squares of a full block is a chain of 4096 dependent double adds; to keep that from being
 * latency-bound, ZK_SB blocks are summed side by side (each still strictly left to right). A block whose
 * sum is not finite holds a non-finite element (squares of finite floats cannot overflow a double sum of
 * 4096), so only those blocks are scanned for the count and first index. */
#define ZK_SB 8
#define ZK_BLOCKS_PER_CHUNK (ZK_CHUNK / ZSTATS_BLOCK)

ZK_AI double sq_at(const void *x, const zinc_dtype t, size_t i) {
    double d = (double)zk_load(x, t, i);
    return d * d;
}

ZK_AI void sums_body(const void *x, const zinc_dtype t, size_t i0, size_t nblocks, double *out) {
    size_t b = 0;
    for (; b + ZK_SB <= nblocks; b += ZK_SB) {
        double s[ZK_SB] = {0};
        const size_t base = i0 + b * ZSTATS_BLOCK;
        for (size_t j = 0; j < ZSTATS_BLOCK; j++)
            for (int k = 0; k < ZK_SB; k++) s[k] += sq_at(x, t, base + (size_t)k * ZSTATS_BLOCK + j);
        for (int k = 0; k < ZK_SB; k++) out[b + k] = s[k];
    }
    for (; b < nblocks; b++) {
        double s = 0.0;
        const size_t base = i0 + b * ZSTATS_BLOCK;
        for (size_t j = 0; j < ZSTATS_BLOCK; j++) s += sq_at(x, t, base + j);
        out[b] = s;
    }
}

/* Sums of the full blocks starting at element i0 into out[0..nblocks). */
static void block_sums(const void *x, zinc_dtype t, size_t i0, size_t nblocks, double *out) {
    if (t == ZINC_FP16) sums_body(x, ZINC_FP16, i0, nblocks, out);
    else if (t == ZINC_BF16) sums_body(x, ZINC_BF16, i0, nblocks, out);
    else sums_body(x, ZINC_FP32, i0, nblocks, out);
}

/* Elements [i0, i1) left to right (the partial last block). */
static double tail_sum(const void *x, zinc_dtype t, size_t i0, size_t i1) {
    double s = 0.0;
    for (size_t i = i0; i < i1; i++) s += sq_at(x, t, i);
    return s;
}

/* Counts non-finite elements of [i0, i1); *first gets the first one's index if none was found before. */
static size_t count_nonfinite(const void *x, zinc_dtype t, size_t i0, size_t i1, size_t *first) {
    size_t c = 0;
    for (size_t i = i0; i < i1; i++) {
        float f = zk_load(x, t, i);
        if (!isfinite(f)) {
            if (*first == SIZE_MAX) *first = i;
            c++;
        }
    }
    return c;
}

/* One chunk: block sums into bs (its blocks' slots), the chunk's non-finite count and first index. */
static void stats_chunk(const void *x, zinc_dtype t, size_t s, size_t len, double *bs, size_t *cnt, size_t *first) {
    size_t nfull = len / ZSTATS_BLOCK;
    block_sums(x, t, s, nfull, bs);
    if (len % ZSTATS_BLOCK) bs[nfull] = tail_sum(x, t, s + nfull * ZSTATS_BLOCK, s + len);
    size_t nb = (len + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK, c = 0, f = SIZE_MAX;
    for (size_t b = 0; b < nb; b++)
        if (!isfinite(bs[b])) {
            size_t e = s + (b + 1) * ZSTATS_BLOCK;
            c += count_nonfinite(x, t, s + b * ZSTATS_BLOCK, e < s + len ? e : s + len, &f);
        }
    *cnt = c;
    *first = f;
}

void zgrad_stats_compute(const void *x, zinc_dtype t, size_t n, zgrad_stats *out) {
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const size_t nblocks = (n + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK;
    int nt = threads_for(nch);
    double one_chunk[ZK_BLOCKS_PER_CHUNK];
    double *bs = NULL;
    size_t *cnt = NULL;
    if (nt > 1) {
        bs = malloc(nblocks * sizeof(double) + 2 * nch * sizeof(size_t));
        if (bs) cnt = (size_t *)(bs + nblocks);
        else nt = 1;
    }
    double total = 0.0;
    size_t nonfinite = 0, first = SIZE_MAX;
    if (nt == 1) { /* chunk by chunk on this thread; same order of additions */
        for (size_t k = 0; k < nch; k++) {
            size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK, c, f;
            stats_chunk(x, t, s, len, one_chunk, &c, &f);
            for (size_t b = 0; b < (len + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK; b++) total += one_chunk[b];
            if (c && first == SIZE_MAX) first = f;
            nonfinite += c;
        }
    } else {
        size_t *firsts = cnt + nch;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (size_t k = 0; k < nch; k++) {
            size_t s = k * ZK_CHUNK, len = n - s < ZK_CHUNK ? n - s : ZK_CHUNK;
            stats_chunk(x, t, s, len, bs + k * ZK_BLOCKS_PER_CHUNK, &cnt[k], &firsts[k]);
        }
        for (size_t b = 0; b < nblocks; b++) total += bs[b];
        for (size_t k = 0; k < nch; k++) {
            if (cnt[k] && first == SIZE_MAX) first = firsts[k];
            nonfinite += cnt[k];
        }
        free(bs);
    }
    out->sumsq = total;
    out->nonfinite = nonfinite;
    out->first_nonfinite = first;
}
