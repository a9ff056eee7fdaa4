/* fp32 views of bf16/fp16 parameters and gradients: what a model that computes in fp32 pays per step to
 * read its parameters and write its gradients, one zinc_load_f32 / zinc_add_f32 call per element (the glue
 * a wrapped model needed before) against one zinc_param_to_f32 / zinc_grad_add_f32 per tensor.
 *
 *   bench_f32_views [elements=4000000] [dtype=bf16|fp16] [repeats=7]
 *
 * Prints the median time of each way per pass over all elements (read + gradient add) and the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long long n = argc > 1 ? atoll(argv[1]) : 4000000;
    const char *dt = argc > 2 ? argv[2] : "bf16";
    int reps = argc > 3 ? atoi(argv[3]) : 7;
    if (n < 1 || reps < 1 || reps > 1000 || (strcmp(dt, "bf16") && strcmp(dt, "fp16"))) {
        fprintf(stderr, "usage: bench_f32_views [elements>=1] [bf16|fp16] [repeats 1..1000]\n");
        return 2;
    }
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"train_batch_size\": 1, \"%s\": {\"enabled\": true}}", dt);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = 1;
    zinc_engine *e;
    if (zinc_create(&o, &e) != ZINC_OK) return fprintf(stderr, "%s\n", zinc_last_error()), 1;
    int m = zinc_module_add(e, "m");
    zinc_param *p = zinc_param_add(e, m, "w", 1, (int64_t[]){n}, 0);
    if (!p || zinc_build(e, bench_zero_init, NULL) != ZINC_OK) return fprintf(stderr, "%s\n", zinc_last_error()), 1;
    float *w = malloc((size_t)n * sizeof *w), *g = malloc((size_t)n * sizeof *g);
    double *t_elem = malloc((size_t)reps * sizeof *t_elem), *t_bulk = malloc((size_t)reps * sizeof *t_bulk);
    for (long long i = 0; i < n; i++) g[i] = 1e-3f * (float)(i % 977);
    zinc_dtype cdt = zinc_compute_dtype(e), gdt = zinc_grad_dtype(e);
    double sink = 0;
    for (int r = 0; r < reps; r++) {
        zinc_module_enter(e, m, ZINC_BACKWARD);
        const void *pd = zinc_param_data(p);
        void *gd = zinc_param_grad(p);
        float s = zinc_loss_scale(e);
        double t0 = bench_now_s();
        for (long long i = 0; i < n; i++) w[i] = zinc_load_f32(pd, cdt, (size_t)i);
        for (long long i = 0; i < n; i++) zinc_add_f32(gd, gdt, (size_t)i, g[i] * s);
        double t1 = bench_now_s();
        zinc_param_to_f32(p, w);
        zinc_grad_add_f32(p, g);
        double t2 = bench_now_s();
        sink += w[r % n];
        t_elem[r] = t1 - t0;
        t_bulk[r] = t2 - t1;
        zinc_module_exit(e, m, ZINC_BACKWARD);
        zinc_step(e, NULL);
    }
    qsort(t_elem, (size_t)reps, sizeof *t_elem, cmp);
    qsort(t_bulk, (size_t)reps, sizeof *t_bulk, cmp);
    printf("%lld elements %s: per-element calls %.2f ms, bulk views %.2f ms (median of %d): %.1fx faster "
           "(checksum %g)\n",
           n, dt, 1e3 * t_elem[reps / 2], 1e3 * t_bulk[reps / 2], reps, t_elem[reps / 2] / t_bulk[reps / 2], sink);
    free(w), free(g), free(t_elem), free(t_bulk);
    zinc_destroy(e);
    return 0;
}
