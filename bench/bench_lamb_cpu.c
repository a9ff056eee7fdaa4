/* CPU LAMB against CPU Adam in the same run: times one LAMB step over one tensor of N parameters (zlamb_sums,
 * zlamb_coeff, zlamb_apply: two passes over the state) and one AdamW step (zadam_step) on each SIMD path this
 * CPU has and at several thread counts; median of K runs after warm-up, in ms, and the ratio LAMB / Adam.
 * Layout fp32: master, m, v, grad fp32, no param_out. LAMB reads 16 B/param in the sums pass and moves 28
 * in the apply pass (Adam's 28 in one pass): memory-bound, LAMB should take about 44/28 = 1.6x Adam's time.
 *
 * usage: bench_lamb_cpu [--n 2e7] [--reps 7] [--warmup 2] [--threads 1,2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"

#define ALLOC(bytes) bench_alloc("bench_lamb_cpu", (bytes))

typedef struct state {
    float *p, *m, *v, *g;
} state;

static double median_ms(int lamb, const zlamb_hparams *lh, const zadam_hparams *ah, size_t n, state *s, int reps,
                        int warmup) {
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -warmup; r < reps; r++) {
        double t0 = bench_now_ms();
        if (lamb) {
            double w, u;
            zlamb_sums(lh, n, s->p, s->m, s->v, s->g, ZINC_FP32, NULL, &w, &u);
            zlamb_apply(lh, zlamb_coeff(lh, w, u), n, s->p, s->m, s->v, s->g, ZINC_FP32, NULL, ZINC_FP32, NULL);
        } else {
            zadam_step(ah, n, s->p, s->m, s->v, s->g, ZINC_FP32, NULL, ZINC_FP32, NULL);
        }
        double dt = bench_now_ms() - t0;
        if (r >= 0) t[r] = dt;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double med = t[reps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv) {
    bench_cpu_args a = {.n = 2e7, .reps = 7, .warmup = 2, .threads = "1,2", .layouts = NULL};
    if (bench_cpu_args_parse(argc, argv, &a)) return 2;
    double nd = a.n;
    int reps = a.reps, warmup = a.warmup;
    const char *threads_arg = a.threads;
    if (reps < 1) reps = 1;
    size_t n = (size_t)nd;
    printf("zinc bench_lamb_cpu: n=%zu, fp32 layout, median of %d after %d warm-up\n", n, reps, warmup);
    state s = {ALLOC(n * sizeof(float)), ALLOC(n * sizeof(float)), ALLOC(n * sizeof(float)), ALLOC(n * sizeof(float))};
    for (size_t i = 0; i < n; i++) {
        s.p[i] = 0.01f * (float)(i % 101);
        s.g[i] = 1e-3f * (float)((int)(i % 37) - 18);
    }
    zlamb_hparams lh = {.lr = 1e-3f,
                        .beta1 = 0.9f,
                        .beta2 = 0.999f,
                        .eps = 1e-6f,
                        .weight_decay = 0.01f,
                        .grad_factor = 1.0f,
                        .bias_correction1 = 0.1,
                        .bias_correction2 = 0.001,
                        .max_coeff = 10.0f,
                        .min_coeff = 0.01f};
    zadam_hparams ah = {.lr = 1e-3f,
                        .beta1 = 0.9f,
                        .beta2 = 0.999f,
                        .eps = 1e-8f,
                        .weight_decay = 0.01f,
                        .bias_correction1 = 0.1,
                        .bias_correction2 = 0.001,
                        .grad_factor = 1.0f,
                        .adamw = 1};
    static const char *const simd[] = {"scalar", "avx2", "avx512"};
    printf("%-6s %7s %10s %10s %11s\n", "simd", "threads", "adam_ms", "lamb_ms", "lamb/adam");
    for (int k = 0; k < 3; k++) {
        if (zkernels_set_simd(simd[k]) != 0) continue;
        char thr[64];
        snprintf(thr, sizeof thr, "%s", threads_arg);
        char *sv = NULL;
        for (char *tok = strtok_r(thr, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
            zkernels_set_threads(atoi(tok));
            double ta = median_ms(0, &lh, &ah, n, &s, reps, warmup);
            double tl = median_ms(1, &lh, &ah, n, &s, reps, warmup);
            printf("%-6s %7d %10.2f %10.2f %11.2f\n", simd[k], zkernels_threads(), ta, tl, tl / ta);
        }
    }
    zkernels_set_simd(NULL);
    return 0;
}
