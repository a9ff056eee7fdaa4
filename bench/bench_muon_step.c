/* The optimizer step (zinc_step) of a model with GPT-2 124M's matrices, with Muon or AdamW, at the rank
 * count it runs under (bench/muon.sh runs 1 and 2 ranks): `layers` blocks of four matrices each, c_attn
 * 768 x 2304, attn c_proj 768 x 768, c_fc 768 x 3072, mlp c_proj 3072 x 768 (12 layers: 84.9M elements),
 * every one marked ZINC_PARAM_MUON | ZINC_PARAM_DECAY, trained through the public API on the cpu device.
 * Each step: one micro-batch (forward: nothing) whose backward writes a fixed pseudo-random gradient into
 * every matrix, then zinc_step, timed alone (the gradient reduction of the boundary, Muon's assembly, Newton-Schulz on the
 * owners, the scatter and the elementwise pass). Prints the median over `steps` steps after one untimed
 * step, in ms, of the slowest rank: wall-clock time and the process's CPU time (all its threads; on a
 * loaded machine the wall time also holds the time other processes ran; Open MPI's waits spin, so a rank
 * waiting in a collective counts CPU time too).
 *
 * usage: bench_muon_step [--optimizer Muon|AdamW] [--layers L] [--steps S] [--stage Z] [--threads T] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"

enum { NSHAPES = 4 };
static const int64_t SHAPES[NSHAPES][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};

static zinc_status init_fn(void *user, const zinc_param_info *info, uint64_t seed, float *w) {
    (void)user, (void)seed;
    for (int64_t i = 0; i < info->numel; i++) w[i] = 0.02f * ((float)((i * 2654435761u) % 1000) / 500.0f - 1.0f);
    return ZINC_OK;
}

static zinc_status forward_backward(zinc_engine *e, int nmod, const int *mod, zinc_param *const *p, float *g,
                                    int step) {
    zinc_status st = ZINC_OK;
    for (int m = 0; m < nmod && st == ZINC_OK; m++) {
        st = zinc_module_enter(e, mod[m], ZINC_FORWARD);
        if (st == ZINC_OK) st = zinc_module_exit(e, mod[m], ZINC_FORWARD);
    }
    for (int m = nmod - 1; m >= 0 && st == ZINC_OK; m--) {
        st = zinc_module_enter(e, mod[m], ZINC_BACKWARD);
        for (int s = 0; s < NSHAPES && st == ZINC_OK; s++) {
            zinc_param *q = p[m * NSHAPES + s];
            int64_t n = SHAPES[s][0] * SHAPES[s][1];
            for (int64_t i = 0; i < n; i++)
                g[i] = 1e-3f * ((float)(((uint64_t)(i + step) * 0x9E3779B1u >> 7) % 2000) / 1000.0f - 1.0f);
            st = zinc_copy_from_host(e, zinc_param_grad(q), g, (size_t)n * sizeof(float));
        }
        if (st == ZINC_OK) st = zinc_module_exit(e, mod[m], ZINC_BACKWARD);
    }
    return st;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *opt = "Muon";
    int layers = 12, steps = 3, stage = 1, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--optimizer"))
            opt = argv[i + 1];
        else if (!strcmp(argv[i], "--layers"))
            layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stage"))
            stage = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_muon_step: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (layers < 1 || steps < 1 || steps > 64) {
        fprintf(stderr, "bench_muon_step: --layers >= 1, --steps 1..64\n");
        return 2;
    }
    char cfg[1024];
    zinc_options o = zinc_default_options();
    o.device = ZINC_DEVICE_CPU;
    o.cpu_threads = threads;
    o.config_json = cfg;
    zinc_engine *e = NULL;
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_clipping\": 0, \"optimizer\": {\"type\": \"%s\", "
             "\"params\": {\"lr\": 0.02, \"weight_decay\": 0.1}}, \"zero_optimization\": {\"stage\": %d}}",
             opt, stage);
    int *mod = calloc((size_t)layers, sizeof *mod);
    zinc_param **p = calloc((size_t)layers * NSHAPES, sizeof *p);
    float *g = bench_alloc("bench_muon_step", sizeof(float) * 3072 * 768);
    double *t = calloc(2 * (size_t)steps, sizeof *t), *cpu = t + steps;
    zinc_status st = mod && p && t ? zinc_create(&o, &e) : ZINC_ERR_NOMEM;
    unsigned flags = ZINC_PARAM_DECAY | (strcmp(opt, "Muon") ? 0u : ZINC_PARAM_MUON);
    char name[32];
    for (int m = 0; m < layers && st == ZINC_OK; m++) {
        snprintf(name, sizeof name, "h%d", m);
        mod[m] = zinc_module_add(e, name);
        for (int s = 0; s < NSHAPES && st == ZINC_OK; s++) {
            snprintf(name, sizeof name, "h%d.w%d", m, s);
            p[m * NSHAPES + s] = zinc_param_add(e, mod[m], name, 2, SHAPES[s], flags);
            if (mod[m] < 0 || !p[m * NSHAPES + s]) st = ZINC_ERR_INVALID_ARG;
        }
    }
    if (st == ZINC_OK) st = zinc_build(e, init_fn, NULL);
    for (int s = 0; s <= steps && st == ZINC_OK; s++) {
        st = forward_backward(e, layers, mod, p, g, s);
        zinc_step_info info;
        double t0 = bench_now_ms(), c0 = cpu_ms();
        if (st == ZINC_OK) st = zinc_step(e, &info);
        if (s) t[s - 1] = bench_now_ms() - t0, cpu[s - 1] = cpu_ms() - c0;
    }
    if (st != ZINC_OK) {
        fprintf(stderr, "bench_muon_step: %s\n", zinc_last_error());
        zinc_destroy(e);
        return 1;
    }
    qsort(t, (size_t)steps, sizeof *t, bench_cmp_double);
    qsort(cpu, (size_t)steps, sizeof *cpu, bench_cmp_double);
    double mine[2] = {t[steps / 2], cpu[steps / 2]}, worst[2] = {mine[0], mine[1]};
    int mpi = 0; /* one rank started without mpirun runs without MPI */
    MPI_Initialized(&mpi);
    if (mpi) MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (zinc_rank(e) == 0)
        printf("optimizer %s, %d layer(s) (%lld matrix elements), stage %d, %d rank(s) x %d thread(s): step %.1f ms "
               "wall, %.1f ms CPU (medians of %d, slowest rank)\n",
               opt, layers, (long long)layers * (768LL * 2304 + 768 * 768 + 2 * 768 * 3072), stage, zinc_world_size(e),
               threads, worst[0], worst[1], steps);
    zinc_destroy(e);
    free(mod), free(p), free(g), free(t);
    return 0;
}
