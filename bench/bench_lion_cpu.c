/* CPU Lion against CPU Adam in the same run: times zlion_step and zadam_step (AdamW, weight decay 0.1) over
 * one flat shard of N parameters on each SIMD path this CPU has and at several thread counts; median of K
 * runs after warm-up, in ms, and the ratio Adam / Lion.
 *
 *   fp32 layout: master, m (v for Adam), grad fp32, no param_out. Lion moves 20 B/param (read 12, write 8),
 *   Adam 28 (read 16, write 12): memory-bound, Lion should take about 5/7 of Adam's time.
 *   bf16 layout: bf16 grad and bf16 param_out: Lion 18 B/param, Adam 26.
 *
 * usage: bench_lion_cpu [--n 2e7] [--reps 7] [--warmup 2] [--threads 1,2] [--layout fp32,bf16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"

#define ALLOC(bytes) bench_alloc("bench_lion_cpu", (bytes))

typedef struct bufs {
    float *p, *m, *v;
    void *g, *po;
    zinc_dtype gdt;
} bufs;

static double time_step(const zadam_hparams *h, size_t n, bufs *b, int reps, int warmup) {
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -warmup; r < reps; r++) {
        double t0 = bench_now_ms();
        zadam_step(h, n, b->p, b->m, b->v, b->g, b->gdt, b->po, ZINC_BF16, NULL);
        double dt = bench_now_ms() - t0;
        if (r >= 0) t[r] = dt;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double med = t[reps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv) {
    bench_cpu_args a = {.n = 2e7, .reps = 7, .warmup = 2, .threads = "1,2", .layouts = "fp32,bf16"};
    if (bench_cpu_args_parse(argc, argv, &a)) return 2;
    double nd = a.n;
    int reps = a.reps, warmup = a.warmup;
    const char *threads_arg = a.threads;
    const char *layouts_arg = a.layouts;
    if (reps < 1) reps = 1;
    size_t n = (size_t)nd;
    printf("zinc bench_lion_cpu: n=%zu, median of %d after %d warm-up\n", n, reps, warmup);
    bufs b = {ALLOC(n * 4), ALLOC(n * 4), ALLOC(n * 4), ALLOC(n * 4), ALLOC(n * 2), ZINC_FP32};
    for (size_t i = 0; i < n; i++) {
        b.p[i] = 0.01f * (float)(i % 101);
        ((float *)b.g)[i] = 1e-3f * (float)((int)(i % 37) - 18);
    }
    static const char *const simd[] = {"scalar", "avx2", "avx512"};
    zadam_hparams adam = {.lr = 1e-3f,
                          .beta1 = 0.9f,
                          .beta2 = 0.999f,
                          .eps = 1e-8f,
                          .weight_decay = 0.1f,
                          .bias_correction1 = 0.1,
                          .bias_correction2 = 0.001,
                          .grad_factor = 1.0f,
                          .adamw = 1};
    zadam_hparams lion = adam;
    lion.lion = 1;
    printf("%-7s %-6s %7s %10s %10s %10s\n", "layout", "simd", "threads", "adam_ms", "lion_ms", "adam/lion");
    char lay[64];
    snprintf(lay, sizeof lay, "%s", layouts_arg);
    char *s1 = NULL;
    for (char *l = strtok_r(lay, ",", &s1); l; l = strtok_r(NULL, ",", &s1)) {
        int bf = !strcmp(l, "bf16");
        bufs cur = b;
        if (bf) {
            cur.gdt = ZINC_BF16;
            cur.g = b.po; /* a bf16 gradient (zeros) and a bf16 param_out: the mixed layout's traffic */
            cur.po = (char *)b.g;
        } else {
            cur.po = NULL;
        }
        for (int k = 0; k < 3; k++) {
            if (zkernels_set_simd(simd[k]) != 0) continue;
            char thr[64];
            snprintf(thr, sizeof thr, "%s", threads_arg);
            char *s2 = NULL;
            for (char *tok = strtok_r(thr, ",", &s2); tok; tok = strtok_r(NULL, ",", &s2)) {
                int nt = atoi(tok);
                zkernels_set_threads(nt);
                double ta = time_step(&adam, n, &cur, reps, warmup);
                double tl = time_step(&lion, n, &cur, reps, warmup);
                printf("%-7s %-6s %7d %10.2f %10.2f %10.2f\n", l, simd[k], zkernels_threads(), ta, tl, ta / tl);
            }
        }
        zkernels_set_simd(NULL);
    }
    return 0;
}
