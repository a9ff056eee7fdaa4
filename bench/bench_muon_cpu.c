/* Muon's Newton-Schulz (zmuon_newton_schulz, 5 steps) on GPT-2 124M's four matrix shapes of one layer
 * (c_attn 2304 x 768, attn c_proj 768 x 768, c_fc 3072 x 768, mlp c_proj 768 x 3072) beside the AdamW step
 * (zadam_step) over the same elements, on the current thread count: what one layer's Muon step costs on one
 * rank before the owners split the matrices. One run each after no warm-up (the NS time dwarfs it), in ms.
 * The products on the process's CBLAS (cblas_sgemm, zmuon_blas_load), or with --loops on the fallback loops
 * (double accumulation); --compare runs both and prints their normwise difference (the loops are within a
 * few float roundings of float64, so that is the sgemm path's error).
 *
 * usage: bench_muon_cpu [--threads N] [--only I] [--loops | --compare]   (--only: just shape I, 0-3) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"

int main(int argc, char **argv) {
    int threads = 1, only = -1, loops = 0, compare = 0;
    setvbuf(stdout, NULL, _IONBF, 0); /* each shape's line as it is measured */
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only"))
            only = atoi(argv[++i]);
    }
    for (int i = 1; i < argc; i++) loops |= !strcmp(argv[i], "--loops"), compare |= !strcmp(argv[i], "--compare");
    const zmuon_blas *blas = NULL;
    if (!loops && zmuon_blas_load(&blas, NULL) != ZINC_OK) {
        fprintf(stderr, "bench_muon_cpu: %s\n", zinc_last_error());
        return 1;
    }
    zkernels_set_threads(threads);
    const int64_t shapes[4][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};
    double ns_total = 0;
    size_t total = 0;
    for (int s = 0; s < 4; s++) {
        if (only >= 0 && s != only) continue;
        int64_t r = shapes[s][0], c = shapes[s][1];
        float *x = bench_alloc("bench_muon_cpu", sizeof(float) * (size_t)(r * c));
        float *w = bench_alloc("bench_muon_cpu", sizeof(float) * zmuon_ns_work_floats(r, c));
        float *x0 = bench_alloc("bench_muon_cpu", sizeof(float) * (size_t)(r * c));
        for (int64_t i = 0; i < r * c; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        memcpy(x0, x, sizeof(float) * (size_t)(r * c));
        double t0 = bench_now_ms();
        zmuon_newton_schulz(x, r, c, 5, w, blas);
        double dt = bench_now_ms() - t0;
        double n = (double)(r < c ? r : c), k = (double)(r < c ? c : r);
        double flops = 5 * (4 * n * n * k + 2 * n * n * n);
        printf("newton-schulz %5lld x %5lld (%s): %9.1f ms  %.2f GFLOP/s\n", (long long)r, (long long)c,
               blas ? "cblas_sgemm" : "loops", dt, flops / dt / 1e6);
        if (compare && blas) {
            double l0 = bench_now_ms();
            zmuon_newton_schulz(x0, r, c, 5, w, NULL);
            double ldt = bench_now_ms() - l0, num = 0, den = 0;
            for (int64_t i = 0; i < r * c; i++)
                num += ((double)x[i] - x0[i]) * ((double)x[i] - x0[i]), den += (double)x0[i] * x0[i];
            printf("  loops: %9.1f ms  %.2f GFLOP/s; sgemm vs loops normwise %.3g; speed-up %.1fx\n", ldt,
                   flops / ldt / 1e6, sqrt(num / den), ldt / dt);
        }
        free(x0);
        ns_total += dt;
        total += (size_t)(r * c);
        free(x), free(w);
    }
    float *p = bench_alloc("bench_muon_cpu", total * 4), *m = bench_alloc("bench_muon_cpu", total * 4),
          *v = bench_alloc("bench_muon_cpu", total * 4), *g = bench_alloc("bench_muon_cpu", total * 4);
    memset(p, 0, total * 4), memset(m, 0, total * 4), memset(v, 0, total * 4), memset(g, 0, total * 4);
    zadam_hparams h = {.lr = 1e-3f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .weight_decay = 0.1f,
                       .bias_correction1 = 0.1,
                       .bias_correction2 = 0.05,
                       .grad_factor = 1,
                       .adamw = 1};
    double t0 = bench_now_ms();
    for (int r = 0; r < 5; r++) zadam_step(&h, total, p, m, v, g, ZINC_FP32, NULL, ZINC_FP32, NULL);
    double adam = (bench_now_ms() - t0) / 5;
    printf("one GPT-2 124M layer's matrices (%zu elements), %d thread(s): Newton-Schulz %.1f ms, AdamW step %.2f ms, "
           "ratio %.0fx\n",
           total, threads, ns_total, adam, ns_total / adam);
    free(p), free(m), free(v), free(g);
    return 0;
}
