/* The cost of the timeline (zinc_options.trace_path, issue 26: at most 2% on the step with tracing on,
 * nothing with it off): the example MLP's optimizer step timed one by one, with tracing off and on, in
 * alternating engines of one process (the order swapped every repetition, so drift and load hit both
 * alike). Tracing covers every timed step (the window opens at step 2, after an untimed warm-up step, and
 * closes one step after the last timed one, whose write is not timed). Prints, per mode, the median step
 * time over all repetitions and the overhead of "on" against "off".
 *
 *   bench_trace_overhead [--steps N] [--reps R] [--hidden H] [--depth D] [--in-dim I] [--stage S]
 *                        [--batch B] [--micro M] [--threads T] [--trace FILE]
 * Under mpirun each rank trains its part; rank 0 prints its own step times. bench/trace_overhead.sh runs
 * the shapes quoted in bench/RESULTS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "base/core/clock.h"
#include "base/core/trace.h"
#include "zinc.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct bench {
    int steps, reps, hidden, depth, in_dim, stage, batch, micro, threads;
    const char *trace;
} bench;

static void quiet(void *u, zinc_log_level l, int r, const char *m) {
    (void)u;
    if (l >= ZINC_LOG_WARN && r == 0) fprintf(stderr, "%s\n", m);
}

/* One engine's run: the step times of steps 2..steps+1 into t[0..steps); traced: the spans those steps
 * recorded into *spans. */
static zinc_status run(const bench *b, int traced, double *t, int *rank, int *world, int64_t *spans) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": %d, \"train_micro_batch_size_per_gpu\": %d, \"optimizer\": {\"type\": "
             "\"AdamW\", \"params\": {\"lr\": 1e-3}}, \"zero_optimization\": {\"stage\": %d}, "
             "\"steps_per_print\": 0}",
             b->batch, b->micro, b->stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = quiet;
    o.cpu_threads = b->threads;
    if (traced) {
        o.trace_path = b->trace;
        o.trace_first_step = 2;
        o.trace_last_step = b->steps + 2;
        o.trace_replace = 1;
    }
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = zinc_create(&o, &e);
    if (st != ZINC_OK) return st;
    *rank = zinc_rank(e);
    *world = zinc_world_size(e);
    mlp_config mc = mlp_default_config();
    mc.hidden = b->hidden;
    mc.depth = b->depth;
    mc.in_dim = b->in_dim;
    st = mlp_create(e, &mc, &m);
    if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL); /* warm-up, untimed */
    for (int s = 0; s < b->steps && st == ZINC_OK; s++) {
        double t0 = zclock_now_s();
        st = mlp_train_step(m, s + 1, NULL, NULL);
        t[s] = zclock_now_s() - t0;
    }
    if (traced) *spans = ztrace_recorded();
    if (st == ZINC_OK) st = mlp_train_step(m, b->steps + 1, NULL, NULL); /* the window's last: the write */
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}

static int arg_int(int argc, char **argv, int *i, const char *name, int *out) {
    if (strcmp(argv[*i], name) || *i + 1 >= argc) return 0;
    *out = atoi(argv[++*i]);
    return 1;
}

/* What a call site costs with tracing off: ns per begin/end pair, the recorder on but outside its window (the
 * same branch as off). */
static double disabled_pair_ns(void) {
    if (ztrace_start((ztrace_window){1000000, 1000000}, 0) != ZINC_OK) return -1;
    const long n = 100000000;
    long seen = 0;
    double t0 = zclock_now_s();
    for (long i = 0; i < n; i++) {
        int64_t b = ztrace_begin();
        if (b) seen++, ztrace_span(b, ZTRACE_ENGINE, "never", 0, NULL, 0, NULL, 0);
    }
    double dt = zclock_now_s() - t0;
    ztrace_reset();
    return seen ? -1 : 1e9 * dt / (double)n;
}

int main(int argc, char **argv) {
    bench b = {.steps = 40,
               .reps = 5,
               .hidden = 256,
               .depth = 4,
               .in_dim = 64,
               .stage = 2,
               .batch = 64,
               .micro = 8,
               .threads = 1,
               .trace = "bench_trace_overhead.json"};
    for (int i = 1; i < argc; i++) {
        if (arg_int(argc, argv, &i, "--steps", &b.steps) || arg_int(argc, argv, &i, "--reps", &b.reps) ||
            arg_int(argc, argv, &i, "--hidden", &b.hidden) || arg_int(argc, argv, &i, "--depth", &b.depth) ||
            arg_int(argc, argv, &i, "--in-dim", &b.in_dim) || arg_int(argc, argv, &i, "--stage", &b.stage) ||
            arg_int(argc, argv, &i, "--batch", &b.batch) || arg_int(argc, argv, &i, "--micro", &b.micro) ||
            arg_int(argc, argv, &i, "--threads", &b.threads))
            continue;
        if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            b.trace = argv[++i];
            continue;
        }
        fprintf(stderr, "bench_trace_overhead: unknown argument %s (see the comment at the top)\n", argv[i]);
        return 2;
    }
    if (b.steps < 1 || b.reps < 1) return 2;
    size_t n = (size_t)b.steps * (size_t)b.reps;
    double *times[2] = {malloc(n * sizeof(double)), malloc(n * sizeof(double))};
    int rank = 0, world = 1;
    int64_t spans = 0;
    if (!times[0] || !times[1]) return 1;
    for (int r = 0; r < b.reps; r++)
        for (int k = 0; k < 2; k++) {
            int traced = (r + k) % 2; /* off, on; then on, off; ... */
            if (run(&b, traced, times[traced] + (size_t)r * b.steps, &rank, &world, &spans) != ZINC_OK) {
                fprintf(stderr, "bench_trace_overhead: %s\n", zinc_last_error());
                return 1;
            }
        }
    double med[2];
    for (int k = 0; k < 2; k++) {
        qsort(times[k], n, sizeof(double), cmp_double);
        med[k] = times[k][n / 2];
    }
    double pair = disabled_pair_ns(), per_step = (double)spans / b.steps;
    if (rank == 0)
        printf("  %.0f spans per traced step on rank 0; a call site with tracing off costs %.2f ns per span "
               "(begin and end): tracing off adds about %.0f ns to a %.3f ms step (%.4f%%)\n",
               per_step, pair, per_step * pair, 1e3 * med[0], 100.0 * per_step * pair * 1e-9 / med[0]);
    if (rank == 0)
        printf("mlp hidden %d depth %d in %d, stage %d, %d rank(s), batch %d (micro %d), %d thread(s): median step "
               "%.3f ms "
               "off, %.3f ms on (%d steps x %d reps each): tracing on %+.2f%%\n",
               b.hidden, b.depth, b.in_dim, b.stage, world, b.batch, b.micro, b.threads, 1e3 * med[0], 1e3 * med[1],
               b.steps, b.reps, 100.0 * (med[1] / med[0] - 1.0));
    free(times[0]);
    free(times[1]);
    zinc_finalize();
    return 0;
}
