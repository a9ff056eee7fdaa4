/* Small helpers shared by the benchmark programs (header-only: each bench_*.c is its own executable). */
#ifndef ZINC_BENCH_UTIL_H
#define ZINC_BENCH_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zinc.h"

static inline double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double bench_now_ms(void) { return 1e3 * bench_now_s(); }

/* qsort order for doubles (medians of timed runs). */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* bytes of zeroed, 64-byte aligned memory; a benchmark that cannot have it stops, naming itself. */
static inline void *bench_alloc(const char *who, size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", who, bytes);
        exit(1);
    }
    memset(p, 0, rounded);
    return p;
}

/* The options of the CPU optimizer benchmarks: --n N --reps K --warmup W --threads LIST and, where the
 * benchmark has layouts (layouts not NULL in the defaults), --layout LIST. *a holds the defaults on entry.
 * Returns 0, or 2 after printing the usage line (with the defaults) for anything else. */
typedef struct bench_cpu_args {
    double n;
    int reps, warmup;
    const char *threads, *layouts;
} bench_cpu_args;

static inline int bench_cpu_args_parse(int argc, char **argv, bench_cpu_args *a) {
    const bool has_layouts = a->layouts != NULL;
    char n_text[32]; /* 2e7, 1e8: as the usage lines have always shown the default */
    int e = 0;
    double m = a->n;
    while (m >= 10) m /= 10, e++;
    snprintf(n_text, sizeof n_text, "%ge%d", m, e);
    char usage[256];
    snprintf(usage, sizeof usage, "[--n %s] [--reps %d] [--warmup %d] [--threads %s]", n_text, a->reps, a->warmup,
             a->threads);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            a->n = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            a->reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            a->warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            a->threads = argv[++i];
        else if (has_layouts && !strcmp(argv[i], "--layout") && i + 1 < argc)
            a->layouts = argv[++i];
        else {
            if (has_layouts)
                fprintf(stderr, "usage: %s %s [--layout %s]\n", argv[0], usage, a->layouts);
            else
                fprintf(stderr, "usage: %s %s\n", argv[0], usage);
            return 2;
        }
    }
    return 0;
}

/* A zinc_init_fn that sets every parameter to zero (the IO benchmarks do not care about values). */
static inline zinc_status bench_zero_init(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud, (void)seed;
    memset(out, 0, (size_t)p->numel * sizeof *out);
    return ZINC_OK;
}

/* nvme_path must be absolute (the config refuses a relative one): a relative --dir is taken from the working
 * directory. */
static inline const char *bench_abs_dir(const char *dir, char *buf, size_t cap) {
    char cwd[2048];
    if (dir[0] == '/' || !getcwd(cwd, sizeof cwd)) return dir;
    snprintf(buf, cap, "%s/%s", cwd, dir);
    return buf;
}

#endif
