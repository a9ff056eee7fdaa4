/* The fast CPU kernels: run-time SIMD dispatch (AVX-512, AVX2 or scalar; ZINC_SIMD forces a lower one)
 * and threading over fixed-size chunks on a thread pool (thread_pool.h). The SIMD bodies are in
 * adam_simd.inc (instantiated by adam_avx2.c / adam_avx512.c); the scalar element code, shared with their
 * tails, is in adam_scalar.h.
 *
 * Threading: work is split into ZK_CHUNK-element chunks (a multiple of ZADAM_MASK_GROUP and of 64, so
 * chunk starts fall on mask groups and, for aligned arrays, on cache lines). Each
 * chunk is one task of the pool (handed out one at a time, so a thread the OS is slow to run holds up
 * only its own chunk). Below two chunks the call runs on the calling thread, without waking the pool.
 * Results never depend on the thread count: Adam is elementwise, and zgrad_stats sums in a fixed order
 * (blocks of ZSTATS_BLOCK left to right, then block sums left to right, whichever thread made them). */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"
#include "base/core/env.h"

#define ZK_CHUNK ZK_CHUNK_ELEMS
#define ZK_AI static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- the scalar path */
ZK_AI void adam_scalar_body(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                            const zinc_dtype gdt, void *po, const int pdt, const uint8_t *mask) {
    zk_adam_scalar_range(c, 0, n, p, m, v, g, gdt, po, pdt, mask);
}
#define ZK_SCALAR_PDT(GDT)                                                                                             \
    do {                                                                                                               \
        switch (pdt) {                                                                                                 \
        case ZINC_FP32: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_FP32, mask); break;                           \
        case ZINC_FP16: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_FP16, mask); break;                           \
        case ZINC_BF16: adam_scalar_body(c, n, p, m, v, g, GDT, po, ZINC_BF16, mask); break;                           \
        default: adam_scalar_body(c, n, p, m, v, g, GDT, NULL, ZK_NO_OUT, mask); break;                                \
        }                                                                                                              \
    } while (0)
static void adam_scalar(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g, zinc_dtype gdt,
                        void *po, int pdt, const uint8_t *mask) {
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
    if (t == ZINC_FP32)
        memmove(dst, src, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) zk_store(dst, t, i, src[i]);
}
static void cast_to_scalar(float *dst, const void *src, zinc_dtype t, size_t n) {
    if (t == ZINC_FP32)
        memmove(dst, src, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) dst[i] = zk_load(src, t, i);
}
static void scale_scalar(void *x, zinc_dtype t, float scale, size_t n) {
    for (size_t i = 0; i < n; i++) zk_store(x, t, i, zk_load(x, t, i) * scale);
}
static void lamb_sums_scalar(const zk_lamb_consts *c, size_t n, const float *p, const float *m, const float *v,
                             const void *g, zinc_dtype gdt, const uint8_t *mask, double *wsq, double *usq) {
    *wsq = *usq = 0;
    zk_lamb_sums_range(c, 0, n, p, m, v, g, gdt, mask, wsq, usq);
}
static void lamb_apply_scalar(const zk_lamb_consts *c, float sc, size_t n, float *p, float *m, float *v, const void *g,
                              zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    zk_lamb_apply_range(c, sc, 0, n, p, m, v, g, gdt, po, po ? pdt : ZK_NO_OUT, mask);
}
int zk_copy_stream_ref(void *dst, const void *src, size_t bytes, int f32) {
    memcpy(dst, src, bytes);
    int bad = 0;
    if (f32)
        for (size_t i = 0; i < bytes / sizeof(float); i++) bad |= !isfinite(((const float *)dst)[i]);
    return bad;
}

static const zk_ops zk_ops_scalar = {"scalar",         adam_scalar,       axpy_scalar,
                                     cast_from_scalar, cast_to_scalar,    scale_scalar,
                                     lamb_sums_scalar, lamb_apply_scalar, zk_copy_stream_ref};

/* ---------------------------------------------------------------- dispatch */
enum { ZK_SCALAR = 0, ZK_AVX2 = 1, ZK_AVX512 = 2 };
static const zk_ops *const zk_levels[] = {&zk_ops_scalar, &zk_ops_avx2, &zk_ops_avx512};
static int zk_cpu_level, zk_default_level, zk_level;
static pthread_once_t zk_once = PTHREAD_ONCE_INIT;

/* What the kernels have to say (an unusable ZINC_SIMD value): kept for whoever logs it (zinc_create logs it
 * through the engine's own log callback), never printed here. */
static char zk_warning[192];

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
    else if (f16 && __builtin_cpu_supports("avx2"))
        zk_cpu_level = ZK_AVX2;
    else
        zk_cpu_level = ZK_SCALAR;
#else
    zk_cpu_level = ZK_SCALAR;
#endif
    zk_default_level = zk_cpu_level;
    const char *e = zenv_get(ZENV_SIMD);
    if (e && *e) {
        int l = level_of(e);
        if (l < 0)
            snprintf(zk_warning, sizeof zk_warning, "ignoring ZINC_SIMD=%.64s (want scalar, avx2 or avx512); using %s",
                     e, zk_levels[zk_default_level]->name);
        else if (l < zk_default_level)
            zk_default_level = l;
    }
    zk_level = zk_default_level;
}

static const zk_ops *ops(void) {
    pthread_once(&zk_once, zk_init);
    return zk_levels[zk_level];
}

const char *zkernels_simd_name(void) { return ops()->name; }

const zk_ops *zk_current_ops(void) { return ops(); }

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

/* ---------------------------------------------------------------- threads */
/* The pool the kernels run on: the one a caller made current on this thread (an engine's device, around
 * its kernel calls), else the process default, sized by zkernels_set_threads and made on first use. */
static _Thread_local zpool *zk_current;
static pthread_mutex_t zk_default_mu = PTHREAD_MUTEX_INITIALIZER;
static zpool *zk_default_pool;
static int zk_threads_set;
static bool zk_default_failed; /* the default pool could not be made: run on the caller */

zpool *zkernels_use_pool(zpool *p) {
    zpool *prev = zk_current;
    zk_current = p;
    return prev;
}

int zkernels_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int default_threads(void) {
    int n = zk_threads_set > 0 ? zk_threads_set : zkernels_cpu_count();
    return n < ZPOOL_MAX_THREADS ? n : ZPOOL_MAX_THREADS;
}

zpool *zkernels_default_pool(void) {
    pthread_mutex_lock(&zk_default_mu);
    if (!zk_default_pool && !zk_default_failed && zpool_create(default_threads(), &zk_default_pool) != ZINC_OK)
        zk_default_failed = true; /* the same results on one thread; zinc_last_error says why */
    zpool *p = zk_default_pool;
    pthread_mutex_unlock(&zk_default_mu);
    return p;
}

void zkernels_set_threads(int n) {
    pthread_mutex_lock(&zk_default_mu);
    zk_threads_set = n > 0 ? n : 0;
    if (zk_default_pool && zpool_threads(zk_default_pool) != default_threads()) {
        zpool_destroy(zk_default_pool);
        zk_default_pool = NULL;
    }
    zk_default_failed = false;
    pthread_mutex_unlock(&zk_default_mu);
}

int zkernels_threads(void) {
    if (zk_current) return zpool_threads(zk_current);
    pthread_mutex_lock(&zk_default_mu);
    int n = default_threads();
    pthread_mutex_unlock(&zk_default_mu);
    return n;
}

static zpool *current_pool(void) { return zk_current ? zk_current : zkernels_default_pool(); }

/* The pool for a call of nch ZK_CHUNK chunks, or NULL to run on the calling thread: fewer than two
 * chunks, or a one-thread pool. */
static zpool *pool_for(size_t nch) {
    if (nch < 2) return NULL;
    zpool *p = current_pool();
    return zpool_threads(p) > 1 ? p : NULL;
}

zpool *zk_pool_for(size_t nch) { return pool_for(nch); }

#define CHUNK_RANGE(n, k, s, len) size_t s = (k)*ZK_CHUNK, len = (n)-s < ZK_CHUNK ? (n)-s : ZK_CHUNK

/* ---------------------------------------------------------------- Adam, casts, axpy, scale */
typedef struct adam_job {
    const zk_ops *o;
    const zk_adam_consts *c;
    size_t n, gsz, psz;
    float *master, *m, *v;
    const void *grad;
    zinc_dtype gdt;
    void *param_out;
    int pt;
    const uint8_t *mask;
} adam_job;

static void adam_task(void *ctx, size_t k) {
    const adam_job *j = (const adam_job *)ctx;
    CHUNK_RANGE(j->n, k, s, len);
    j->o->adam(j->c, len, j->master + s, j->m + s, j->v + s, (const char *)j->grad + s * j->gsz, j->gdt,
               j->param_out ? (char *)j->param_out + s * j->psz : NULL, j->pt,
               j->mask ? j->mask + s / ZADAM_MASK_GROUP : NULL);
}

void zadam_step(const zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad, zinc_dtype gdt,
                void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    if (h->lion) {
        zlion_step(h, n, master, m, grad, gdt, param_out, pdt, decay_mask);
        return;
    }
    const zk_ops *o = ops();
    const zk_adam_consts c = zk_adam_consts_make(h);
    const int pt = param_out ? (int)pdt : ZK_NO_OUT;
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    zpool *p = pool_for(nch);
    if (!p) {
        o->adam(&c, n, master, m, v, grad, gdt, param_out, pt, decay_mask);
        return;
    }
    adam_job j =
        {o,         &c, n,         zinc_dtype_size(gdt), param_out ? zinc_dtype_size(pdt) : 0, master, m, v, grad, gdt,
         param_out, pt, decay_mask};
    zpool_for(p, nch, adam_task, &j);
}

/* The element-wise conversions: one job type, one task function switching on the kind. */
typedef enum { EW_AXPY, EW_CAST_FROM, EW_CAST_TO, EW_SCALE } ew_kind;
typedef struct ew_job {
    const zk_ops *o;
    ew_kind kind;
    size_t n, sz;
    float *f32;  /* axpy dst, cast_to dst, cast_from src */
    void *other; /* axpy src, cast_to src, cast_from dst, scale x */
    zinc_dtype t;
    float scale;
    int accumulate;
} ew_job;

static void ew_task(void *ctx, size_t k) {
    const ew_job *j = (const ew_job *)ctx;
    CHUNK_RANGE(j->n, k, s, len);
    char *x = (char *)j->other + s * j->sz;
    switch (j->kind) {
    case EW_AXPY: j->o->axpy(j->f32 + s, x, j->t, j->scale, len, j->accumulate); break;
    case EW_CAST_FROM: j->o->cast_from(x, j->t, j->f32 + s, len); break;
    case EW_CAST_TO: j->o->cast_to(j->f32 + s, x, j->t, len); break;
    case EW_SCALE: j->o->scale(x, j->t, j->scale, len); break;
    }
}

static void ew_run(ew_kind kind, float *f32, void *other, zinc_dtype t, float scale, int accumulate, size_t n) {
    const zk_ops *o = ops();
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    zpool *p = pool_for(nch);
    /* An in-place fp32 cast is a no-op memmove: no threads for it. */
    if (!p || ((kind == EW_CAST_FROM || kind == EW_CAST_TO) && t == ZINC_FP32 && (void *)f32 == other)) {
        switch (kind) {
        case EW_AXPY: o->axpy(f32, other, t, scale, n, accumulate); break;
        case EW_CAST_FROM: o->cast_from(other, t, f32, n); break;
        case EW_CAST_TO: o->cast_to(f32, other, t, n); break;
        case EW_SCALE: o->scale(other, t, scale, n); break;
        }
        return;
    }
    ew_job j = {o, kind, n, zinc_dtype_size(t), f32, other, t, scale, accumulate};
    zpool_for(p, nch, ew_task, &j);
}

void zaxpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate) {
    ew_run(EW_AXPY, dst, (void *)src, t, scale, accumulate, n);
}

void zcast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n) {
    ew_run(EW_CAST_FROM, (float *)src, dst, t, 1.0f, 0, n);
}

void zcast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n) {
    ew_run(EW_CAST_TO, dst, (void *)src, t, 1.0f, 0, n);
}

void zscale_inplace(void *x, zinc_dtype t, float scale, size_t n) { ew_run(EW_SCALE, NULL, x, t, scale, 0, n); }

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
    if (t == ZINC_FP16)
        sums_body(x, ZINC_FP16, i0, nblocks, out);
    else if (t == ZINC_BF16)
        sums_body(x, ZINC_BF16, i0, nblocks, out);
    else
        sums_body(x, ZINC_FP32, i0, nblocks, out);
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

typedef struct stats_job {
    const void *x;
    zinc_dtype t;
    size_t n;
    double *bs;
    size_t *cnt, *firsts;
} stats_job;

static void stats_task(void *ctx, size_t k) {
    const stats_job *j = (const stats_job *)ctx;
    CHUNK_RANGE(j->n, k, s, len);
    stats_chunk(j->x, j->t, s, len, j->bs + k * ZK_BLOCKS_PER_CHUNK, &j->cnt[k], &j->firsts[k]);
}

/* The statistics of x with the block sums added, in block order, onto `total` (0: the whole statistic). */
static void stats_onto(const void *x, zinc_dtype t, size_t n, double total, zgrad_stats *out);

void zgrad_stats_compute(const void *x, zinc_dtype t, size_t n, zgrad_stats *out) { stats_onto(x, t, n, 0.0, out); }

void zgrad_stats_add(const void *x, zinc_dtype t, size_t n, size_t offset, zgrad_stats *acc) {
    zgrad_stats s;
    stats_onto(x, t, n, acc->sumsq, &s);
    acc->sumsq = s.sumsq;
    if (s.nonfinite && !acc->nonfinite) acc->first_nonfinite = offset + s.first_nonfinite;
    acc->nonfinite += s.nonfinite;
}

void zgrad_block_sums(const void *x, zinc_dtype t, size_t n, double *out) {
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    zpool *p = pool_for(nch);
    size_t *cnt = p ? malloc(2 * nch * sizeof *cnt) : NULL;
    if (!cnt) { /* chunk by chunk on this thread: the same sums */
        for (size_t k = 0; k < nch; k++) {
            size_t c, f;
            CHUNK_RANGE(n, k, s, len);
            stats_chunk(x, t, s, len, out + k * ZK_BLOCKS_PER_CHUNK, &c, &f);
        }
        return;
    }
    stats_job j = {x, t, n, out, cnt, cnt + nch};
    zpool_for(p, nch, stats_task, &j);
    free(cnt);
}

static void stats_onto(const void *x, zinc_dtype t, size_t n, double total, zgrad_stats *out) {
    const size_t nch = (n + ZK_CHUNK - 1) / ZK_CHUNK;
    const size_t nblocks = (n + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK;
    zpool *p = pool_for(nch);
    double one_chunk[ZK_BLOCKS_PER_CHUNK];
    double *bs = NULL;
    if (p) {
        bs = malloc(nblocks * sizeof(double) + 2 * nch * sizeof(size_t));
        if (!bs) p = NULL; /* the same sums, on this thread */
    }
    size_t nonfinite = 0, first = SIZE_MAX;
    if (!p) { /* chunk by chunk on this thread; same order of additions */
        for (size_t k = 0; k < nch; k++) {
            size_t c, f;
            CHUNK_RANGE(n, k, s, len);
            stats_chunk(x, t, s, len, one_chunk, &c, &f);
            for (size_t b = 0; b < (len + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK; b++) total += one_chunk[b];
            if (c && first == SIZE_MAX) first = f;
            nonfinite += c;
        }
    } else { /* per-chunk partials, combined in chunk order */
        size_t *cnt = (size_t *)(bs + nblocks), *firsts = cnt + nch;
        stats_job j = {x, t, n, bs, cnt, firsts};
        zpool_for(p, nch, stats_task, &j);
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

const char *zkernels_warning(void) {
    pthread_once(&zk_once, zk_init);
    return zk_warning[0] ? zk_warning : NULL;
}

int zk_copy_stream(void *dst, const void *src, size_t bytes, int f32) {
    return ops()->copy_stream(dst, src, bytes, f32);
}
