/* The CPU kernels leave no AVX upper state in use behind them (issue 29): after any kernel entry point
 * returns, on the calling thread and on the pool's workers, XINUSE (xgetbv with ECX = 1) has bit 2 (the
 * upper halves of ymm0-15) and bit 6 (the upper halves of zmm0-15) clear. A caller's SSE (non-VEX) code
 * then runs at full speed right after zinc_step; with the upper state dirty it pays a merge or transition
 * per instruction. The state is read directly, never timed. Every SIMD level this CPU has is run, at one
 * thread and on a pool of 2 (whose workers read it too, at the end of their tasks).
 * Skips (77) where the CPU has no XGETBV with ECX = 1 or no AVX2. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "kernels/thread_pool.h"
#include "zt.h"

#define XINUSE_DIRTY ((1u << 2) | (1u << 6)) /* AVX (ymm upper), ZMM_Hi256 (zmm0-15 upper) */

static uint64_t xinuse(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return ((uint64_t)hi << 32) | lo;
}

static int have_xinuse(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d)) return 0;
    return (a >> 2) & 1;
}

/* Dirties the upper state on purpose (a 256-bit register write, in asm so that the compiler adds no
 * vzeroupper after it), so the test can show it reads what it claims to. */
#define DIRTY_UPPER() __asm__ volatile("vpcmpeqd %%ymm1, %%ymm1, %%ymm1" ::: "xmm1")

static uint64_t worker_dirty; /* OR of the workers' XINUSE after their kernel tasks */
static void read_state(void *ctx, size_t k) {
    (void)ctx;
    (void)k;
    __atomic_fetch_or(&worker_dirty, xinuse() & XINUSE_DIRTY, __ATOMIC_RELAXED);
}

typedef struct bufs {
    size_t n;
    float *p, *m, *v, *f;
    uint16_t *h, *g16;
} bufs;

static void check_after(const char *what, const char *level, int threads) {
    uint64_t x = xinuse() & XINUSE_DIRTY;
    ZT_CHECK(x == 0, "%s (%s, %d threads): XINUSE 0x%llx after return: AVX upper state left in use", what, level,
             threads, (unsigned long long)x);
}

static void run_all(const bufs *b, const char *level, int threads, zpool *pool) {
    zadam_hparams ah = {.lr = 1e-3f,
                        .beta1 = 0.9f,
                        .beta2 = 0.999f,
                        .eps = 1e-8f,
                        .weight_decay = 0.01f,
                        .bias_correction1 = 0.1,
                        .bias_correction2 = 0.001,
                        .grad_factor = 1.0f,
                        .adamw = 1};
    zlamb_hparams lh = {.lr = 1e-3f,
                        .beta1 = 0.9f,
                        .beta2 = 0.999f,
                        .eps = 1e-6f,
                        .weight_decay = 0.01f,
                        .grad_factor = 1.0f,
                        .bias_correction1 = 0.1,
                        .bias_correction2 = 0.001,
                        .max_coeff = 10,
                        .min_coeff = 0.01f};
    zgrad_stats st;
    double w, u;
    for (int gt = 0; gt < 2; gt++) {
        zinc_dtype gdt = gt ? ZINC_BF16 : ZINC_FP32;
        const void *g = gt ? (const void *)b->g16 : (const void *)b->f;
        zadam_step(&ah, b->n, b->p, b->m, b->v, g, gdt, b->h, ZINC_FP16, NULL);
        check_after("zadam_step", level, threads);
        ah.lion = 1;
        zlion_step(&ah, b->n, b->p, b->m, g, gdt, b->h, ZINC_BF16, NULL);
        check_after("zlion_step", level, threads);
        ah.lion = 0;
        zlamb_sums(&lh, b->n, b->p, b->m, b->v, g, gdt, NULL, &w, &u);
        check_after("zlamb_sums", level, threads);
        zlamb_apply(&lh, 0.5f, b->n, b->p, b->m, b->v, g, gdt, b->h, ZINC_FP16, NULL);
        check_after("zlamb_apply", level, threads);
        zgrad_stats(g, gdt, b->n, &st);
        check_after("zgrad_stats", level, threads);
        zaxpy_f32(b->f, g, gdt, 0.5f, b->n, 1);
        check_after("zaxpy_f32", level, threads);
    }
    zcast_from_f32(b->h, ZINC_FP16, b->p, b->n);
    check_after("zcast_from_f32", level, threads);
    zcast_to_f32(b->f, b->h, ZINC_FP16, b->n);
    check_after("zcast_to_f32", level, threads);
    zscale_inplace(b->h, ZINC_BF16, 0.5f, b->n);
    check_after("zscale_inplace", level, threads);
    if (pool) { /* the workers ran kernel tasks above; what they hold now */
        worker_dirty = 0;
        zpool_for(pool, 64, read_state, NULL);
        ZT_CHECK(worker_dirty == 0, "pool workers (%s): XINUSE 0x%llx after their kernel tasks", level,
                 (unsigned long long)worker_dirty);
    }
}

int main(void) {
    zt_name = "kernels_avx_state";
    if (!have_xinuse()) return zt_skip("this CPU has no XGETBV with ECX = 1 (XINUSE)");
    if (!__builtin_cpu_supports("avx2")) return zt_skip("this CPU has no AVX2: the kernels run no AVX code");
    DIRTY_UPPER();
    uint64_t seen = xinuse() & XINUSE_DIRTY;
    if (!seen) return zt_skip("XINUSE does not report a dirty ymm upper half on this CPU (virtualised?)");
    __asm__ volatile("vzeroupper");
    ZT_CHECK((xinuse() & XINUSE_DIRTY) == 0, "vzeroupper clears XINUSE bit 2 (the test's own probe)");

    bufs b = {.n = 3 * 65536 + 13}; /* several pool chunks and a tail */
    b.p = calloc(b.n, sizeof(float));
    b.m = calloc(b.n, sizeof(float));
    b.v = calloc(b.n, sizeof(float));
    b.f = calloc(b.n, sizeof(float));
    b.h = calloc(b.n, sizeof(uint16_t));
    b.g16 = calloc(b.n, sizeof(uint16_t));
    for (size_t i = 0; i < b.n; i++) {
        b.p[i] = 0.01f * (float)(i % 97);
        b.f[i] = 1e-3f * (float)(i % 31) - 0.01f;
        b.g16[i] = 0x3c00;
    }
    zpool *pool = NULL;
    ZT_OK(zpool_create(2, &pool));
    const char *levels[] = {"avx2", "avx512"};
    for (int l = 0; l < 2; l++) {
        if (zkernels_set_simd(levels[l]) != 0) {
            printf("# %s: not on this CPU, skipped\n", levels[l]);
            continue;
        }
        zpool *prev = zkernels_use_pool(NULL);
        zkernels_set_threads(1);
        run_all(&b, levels[l], 1, NULL);
        zkernels_use_pool(pool);
        run_all(&b, levels[l], 2, pool);
        zkernels_use_pool(prev);
    }
    zkernels_set_simd(NULL);
    zpool_destroy(pool);
    free(b.p);
    free(b.m);
    free(b.v);
    free(b.f);
    free(b.h);
    free(b.g16);
    return zt_finish();
}
