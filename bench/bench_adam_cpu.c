/* CPU Adam benchmark: times zadam_step (AdamW, weight decay 0.1, bias correction) over one flat shard of
 * N parameters at several thread counts and reports the median of K runs after warm-up, in ms and in GB/s
 * at 28 bytes/param.
 *
 *   fp32 layout (what torch keeps): master, m, v, grad fp32, no param_out: read 16 + write 12 = 28 B/param.
 *   mixed layouts: fp32 master/m/v, fp16 or bf16 grad, bf16 param_out: read 14 + write 14 = 28 B/param.
 *
 * usage: bench_adam_cpu [--n 1e8] [--reps 10] [--warmup 2] [--threads 1,2,0] [--layout fp32,fp16,bf16]
 *   threads 0 means all (the CPUs this process may run on); ZINC_SIMD=scalar|avx2 forces a lower SIMD path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"

#define ALLOC(bytes) bench_alloc("bench_adam_cpu", (bytes))

int main(int argc, char **argv) {
    bench_cpu_args a = {.n = 1e8, .reps = 10, .warmup = 2, .threads = "1,2,0", .layouts = "fp32,fp16,bf16"};
    if (bench_cpu_args_parse(argc, argv, &a)) return 2;
    double nd = a.n;
    int reps = a.reps, warmup = a.warmup;
    const char *threads_arg = a.threads;
    const char *layouts_arg = a.layouts;
    if (reps < 1) reps = 1;
    size_t n = (size_t)nd;
    zkernels_set_threads(0);
    int all = zkernels_threads();
    printf("zinc bench_adam_cpu: n=%zu, SIMD path %s, default threads %d, median of %d after %d warm-up\n", n,
           zkernels_simd_name(), all, reps, warmup);

    float *p = ALLOC(n * 4), *m = ALLOC(n * 4), *v = ALLOC(n * 4), *g32 = ALLOC(n * 4);
    uint16_t *g16 = ALLOC(n * 2), *out = ALLOC(n * 2);
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float r = (float)((double)(s >> 11) * 0x1.0p-53 - 0.5);
        p[i] = r;
        m[i] = 0.1f * r;
        v[i] = 0.01f * r * r;
        g32[i] = r * 0.5f;
    }
    double *t = malloc(sizeof(double) * (size_t)reps);

    char layouts[256];
    snprintf(layouts, sizeof layouts, "%s", layouts_arg);
    for (char *lay = strtok(layouts, ","); lay; lay = strtok(NULL, ",")) {
        zinc_dtype gdt = !strcmp(lay, "fp16") ? ZINC_FP16 : !strcmp(lay, "bf16") ? ZINC_BF16 : ZINC_FP32;
        const void *grad = g32;
        void *po = NULL;
        if (gdt != ZINC_FP32) {
            zcast_from_f32(g16, gdt, g32, n);
            grad = g16;
            po = out;
        }
        char thr[256];
        snprintf(thr, sizeof thr, "%s", threads_arg);
        char *save = NULL;
        for (char *tok = strtok_r(thr, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int nt = atoi(tok);
            zkernels_set_threads(nt <= 0 ? all : nt);
            zadam_hparams h = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.001f, 1.0f, 1, 0};
            for (int r = -warmup; r < reps; r++) {
                double t0 = bench_now_ms();
                zadam_step(&h, n, p, m, v, grad, gdt, po, ZINC_BF16, NULL);
                double dt = bench_now_ms() - t0;
                if (r >= 0) t[r] = dt;
            }
            qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
            double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
            printf("%9.1fM  zinc %-6s %-28s %2d threads %9.3f ms  %7.1f GB/s  (min %.3f ms)\n", n / 1e6,
                   zkernels_simd_name(),
                   gdt == ZINC_FP32   ? "fp32 p/m/v/g (torch layout)"
                   : gdt == ZINC_FP16 ? "fp16 grad, bf16 param_out"
                                      : "bf16 grad, bf16 param_out",
                   zkernels_threads(), med, n * 28.0 / med / 1e6, t[0]);
            fflush(stdout);
        }
    }
    zkernels_set_threads(0);
    free(t);
    free(p);
    free(m);
    free(v);
    free(g32);
    free(g16);
    free(out);
    return 0;
}
