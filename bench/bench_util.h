/* Small helpers shared by the benchmark programs (header-only: each bench_*.c is its own executable). */
#ifndef ZINC_BENCH_UTIL_H
#define ZINC_BENCH_UTIL_H

#include <string.h>
#include <time.h>

#include "zinc.h"

static inline double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A zinc_init_fn that sets every parameter to zero (the IO benchmarks do not care about values). */
static inline zinc_status bench_zero_init(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud, (void)seed;
    memset(out, 0, (size_t)p->numel * sizeof *out);
    return ZINC_OK;
}

#endif
