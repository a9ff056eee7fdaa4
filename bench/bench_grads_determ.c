/* What zinc.deterministic_reduction costs the engine itself, without a model's compute: a synthetic model of
 * --n fp32 parameters in --modules modules, whose backward only writes its gradients (a constant per micro-step,
 * the same work either way), gradient_accumulation_steps --gas, one micro-batch per micro-step, AdamW, ZeRO
 * --stage. Two engines in one process, the key off and on, run steps alternately (so drift in a shared
 * machine's load hits both alike); prints the median step time of each (forward marks, backward writes, the
 * reduction and the optimizer step) and their difference, the mode's cost per step. Run under mpirun for
 * several ranks (bench/determinism.sh does, at 2).
 *   bench_grads_determ [--n 4e6] [--modules 16] [--gas 2] [--stage 0] [--steps 20] [--threads 1] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"
#include "zinc.h"

typedef struct model {
    zinc_engine *e;
    zinc_param **p;
    int64_t *numel;
    int nmod;
} model;

static int build(model *m, int64_t n, int nmod, int gas, int stage, int det) {
    char cfg[1024];
    zinc_options o = zinc_default_options();
    o.log_level = ZINC_LOG_WARN;
    /* the world size is known after zinc_create; the batch triad takes it from the micro batch and gas */
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": %d, \"gradient_clipping\": 1.0, "
             "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}}, \"zero_optimization\": {\"stage\": "
             "%d}, "
             "\"zinc\": {\"deterministic_reduction\": %s}}",
             gas, stage, det ? "true" : "false");
    o.config_json = cfg;
    if (zinc_create(&o, &m->e) != ZINC_OK) return -1;
    m->nmod = nmod;
    m->p = calloc((size_t)nmod, sizeof *m->p);
    m->numel = calloc((size_t)nmod, sizeof *m->numel);
    if (!m->p || !m->numel) return -1;
    for (int k = 0; k < nmod; k++) {
        char name[64];
        snprintf(name, sizeof name, "layer%d", k);
        int mod = zinc_module_add(m->e, name);
        m->numel[k] = (n / nmod + 7) / 8 * 8;
        snprintf(name, sizeof name, "layer%d.weight", k);
        if (mod < 0 || !(m->p[k] = zinc_param_add(m->e, mod, name, 1, (int64_t[]){m->numel[k]}, ZINC_PARAM_DECAY)))
            return -1;
    }
    return zinc_build(m->e, bench_zero_init, NULL) == ZINC_OK ? 0 : -1;
}

/* One optimizer step: gas micro-steps (forward marks, backward writes), then zinc_step. */
static int step(model *m, int gas, int64_t s) {
    for (int j = 0; j < gas; j++) {
        for (int k = 0; k < m->nmod; k++)
            if (zinc_module_enter(m->e, k, ZINC_FORWARD) != ZINC_OK ||
                zinc_module_exit(m->e, k, ZINC_FORWARD) != ZINC_OK)
                return -1;
        for (int k = m->nmod - 1; k >= 0; k--) {
            if (zinc_module_enter(m->e, k, ZINC_BACKWARD) != ZINC_OK) return -1;
            float *g = zinc_param_grad(m->p[k]);
            float v = 1e-3f * (float)((s * 7 + j * 3 + k + zinc_rank(m->e)) % 11 - 5);
            for (int64_t i = 0; i < m->numel[k]; i++) g[i] += v;
            if (zinc_module_exit(m->e, k, ZINC_BACKWARD) != ZINC_OK) return -1;
        }
    }
    zinc_step_info info;
    return zinc_step(m->e, &info) == ZINC_OK ? 0 : -1;
}

int main(int argc, char **argv) {
    double nd = 4e6;
    int nmod = 16, gas = 2, stage = 0, steps = 20, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--n"))
            nd = atof(v);
        else if (!strcmp(a, "--modules"))
            nmod = atoi(v);
        else if (!strcmp(a, "--gas"))
            gas = atoi(v);
        else if (!strcmp(a, "--stage"))
            stage = atoi(v);
        else if (!strcmp(a, "--steps"))
            steps = atoi(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else {
            fprintf(stderr, "usage: bench_grads_determ [--n N] [--modules M] [--gas G] [--stage S] [--steps K] "
                            "[--threads T]\n");
            return 2;
        }
    }
    if (nmod < 1 || gas < 1 || steps < 1) return 2;
    zkernels_set_threads(threads);
    model m[2] = {0};
    double *t[2] = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double))};
    for (int d = 0; d < 2; d++)
        if (build(&m[d], (int64_t)nd, nmod, gas, stage, d) != 0) {
            fprintf(stderr, "bench_grads_determ: %s\n", zinc_last_error());
            return 1;
        }
    for (int d = 0; d < 2; d++) /* one untimed step each: first-touch of the buffers */
        if (step(&m[d], gas, 0) != 0) return 1;
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < 2; i++) {
            int d = (s + i) % 2; /* off, on / on, off alternately */
            double t0 = bench_now_s();
            if (step(&m[d], gas, s + 1) != 0) {
                fprintf(stderr, "bench_grads_determ: %s\n", zinc_last_error());
                return 1;
            }
            t[d][s] = bench_now_s() - t0;
        }
    if (zinc_rank(m[0].e) == 0) {
        qsort(t[0], (size_t)steps, sizeof(double), bench_cmp_double);
        qsort(t[1], (size_t)steps, sizeof(double), bench_cmp_double);
        double off = t[0][steps / 2], on = t[1][steps / 2];
        printf("  %.3g parameters, %d ranks, stage %d, gas %d, %d steps each: median step %.2f ms off, %.2f ms "
               "on (%+.2f ms, %+.1f%%); fastest %.2f / %.2f ms\n",
               nd, zinc_world_size(m[0].e), stage, gas, steps, 1e3 * off, 1e3 * on, 1e3 * (on - off),
               100 * (on / off - 1), 1e3 * t[0][0], 1e3 * t[1][0]);
    }
    for (int d = 0; d < 2; d++) {
        zinc_destroy(m[d].e);
        free(m[d].p);
        free(m[d].numel);
        free(t[d]);
    }
    return 0;
}
