/* What comms_logger costs per collective call: the single-rank backend's all-reduce of a few elements (the
 * backend does next to nothing, so the wrapper's own cost shows) without a logger, with one that records
 * every op, and with one that filters the op out (prof_all false, prof_ops []); and the backend's function
 * called directly, without the wrapper (the floor).
 *
 *   bench_comms_log [calls=2000000] [repeats=7]
 *
 * Prints the median nanoseconds per call of each. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/comm/comm.h"
#include "base/core/clock.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double per_call_ns(zcomm *c, long long calls, bool direct) {
    float buf[4] = {1, 2, 3, 4};
    double t0 = zclock_now_s();
    for (long long i = 0; i < calls; i++)
        if ((direct ? c->ops->allreduce(c, buf, 4, ZINC_FP32, ZCOMM_SUM, NULL)
                    : zcomm_allreduce(c, buf, 4, ZINC_FP32, ZCOMM_SUM, NULL)) != ZINC_OK)
            return -1;
    return (zclock_now_s() - t0) / (double)calls * 1e9;
}

int main(int argc, char **argv) {
    long long calls = argc > 1 ? atoll(argv[1]) : 2000000;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (calls < 1 || reps < 1 || reps > 101) {
        fprintf(stderr, "usage: bench_comms_log [calls>=1] [repeats 1..101]\n");
        return 2;
    }
    zcomm *c = NULL;
    if (zcomm_create_single(&c) != ZINC_OK) return 1;
    zcomm_log *all = NULL, *none = NULL;
    zcomm_log_settings s_all = {.prof_all = true}, s_none = {.prof_all = false};
    if (zcomm_log_create(&s_all, NULL, 1, &all) != ZINC_OK || zcomm_log_create(&s_none, NULL, 1, &none) != ZINC_OK)
        return 1;
    const char *names[4] = {"backend called directly", "no logger", "logger, every op", "logger, op filtered out"};
    zcomm_log *logs[4] = {NULL, NULL, all, none};
    double t[4][101];
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 4; k++) { /* interleaved, so drifting load hits each alike */
            c->log = logs[k];
            t[k][r] = per_call_ns(c, calls, k == 0);
        }
    c->log = NULL;
    for (int k = 0; k < 4; k++) {
        qsort(t[k], (size_t)reps, sizeof t[k][0], cmp);
        printf("%-26s %8.1f ns per all_reduce call (median of %d x %lld)\n", names[k], t[k][reps / 2], reps, calls);
    }
    zcomm_log_destroy(all);
    zcomm_log_destroy(none);
    zcomm_destroy(c);
    return 0;
}
