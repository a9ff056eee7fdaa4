/* Small helpers shared by the benchmark programs (header-only: each bench_*.c is its own executable). */
#ifndef ZINC_BENCH_UTIL_H
#define ZINC_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* A zinc_init_fn that sets every parameter to zero (the IO benchmarks do not care about values). */
static inline zinc_status bench_zero_init(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud, (void)seed;
    memset(out, 0, (size_t)p->numel * sizeof *out);
    return ZINC_OK;
}

#endif
