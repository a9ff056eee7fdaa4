/* zinc_parallel_for (include/zinc.h), through the public API: every index of [0, n) is visited exactly
 * once, in the documented ranges (min(n, threads) of them, n / threads elements each, the first n % threads
 * one more) whichever thread runs them; one range on an engine of 1 thread; a call from inside fn runs
 * fn(ctx, 0, n) on the calling thread; n == 0 calls nothing; n < 0, a NULL engine and a NULL fn are
 * ZINC_ERR_INVALID_ARG with a message naming the problem; and the threads do not spin after a loop (the
 * process uses under 20 ms of CPU time over a 200 ms sleep right after one). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zinc.h"
#include "zt.h"

enum { MAX_RANGES = 64 };

typedef struct loop {
    atomic_int *visits;
    pthread_mutex_t lock;
    int64_t lo[MAX_RANGES], hi[MAX_RANGES];
    int ranges;
    zinc_engine *e;
    int nested_ok, nested_calls;
} loop;

static void record(void *arg, int64_t lo, int64_t hi) {
    loop *l = arg;
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&l->visits[i], 1);
    pthread_mutex_lock(&l->lock);
    if (l->ranges < MAX_RANGES) l->lo[l->ranges] = lo, l->hi[l->ranges] = hi;
    l->ranges++;
    pthread_mutex_unlock(&l->lock);
}

static zinc_engine *engine(int threads) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";
    o.log_level = ZINC_LOG_OFF;
    o.cpu_threads = threads;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    return e;
}

/* Runs a loop of n on e and checks the visits and the ranges against the documented split. */
static void check_split(zinc_engine *e, int threads, int64_t n) {
    loop l = {.visits = calloc((size_t)n, sizeof(atomic_int)), .lock = PTHREAD_MUTEX_INITIALIZER};
    ZT_OK(zinc_parallel_for(e, n, record, &l));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += atomic_load(&l.visits[i]) != 1;
    ZT_CHECK(bad == 0, "n %lld, %d threads: %lld indices not visited exactly once", (long long)n, threads,
             (long long)bad);
    int want = n < threads ? (int)n : threads;
    ZT_CHECK(l.ranges == want, "n %lld, %d threads: %d ranges, want %d", (long long)n, threads, l.ranges, want);
    for (int k = 0; k < want && l.ranges == want; k++) { /* range k, wherever it was recorded */
        int64_t q = n / want, r = n % want, lo = k * q + (k < r ? k : r), hi = lo + q + (k < r);
        int found = 0;
        for (int j = 0; j < l.ranges; j++) found |= l.lo[j] == lo && l.hi[j] == hi;
        ZT_CHECK(found, "n %lld, %d threads: no range [%lld, %lld)", (long long)n, threads, (long long)lo,
                 (long long)hi);
    }
    free(l.visits);
}

static void inner(void *arg, int64_t lo, int64_t hi) {
    loop *l = arg;
    l->nested_calls++;
    l->nested_ok &= lo == 0 && hi == 10;
}

typedef struct nest {
    zinc_engine *e;
    atomic_int bad, outer_ranges;
} nest;

/* Each range of the outer loop runs an inner loop of 10 from inside fn: one call (0, 10), on this thread. */
static void outer(void *arg, int64_t lo, int64_t hi) {
    nest *n = arg;
    (void)lo, (void)hi;
    loop l = {.nested_ok = 1};
    if (zinc_parallel_for(n->e, 10, inner, &l) != ZINC_OK || l.nested_calls != 1 || !l.nested_ok)
        atomic_fetch_add(&n->bad, 1);
    atomic_fetch_add(&n->outer_ranges, 1);
}

static void count_calls(void *arg, int64_t lo, int64_t hi) {
    (void)lo, (void)hi;
    atomic_fetch_add((atomic_int *)arg, 1);
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void busy(void *arg, int64_t lo, int64_t hi) {
    long long s = 0;
    for (int64_t i = lo; i < hi; i++) s += i % 7;
    atomic_fetch_add((atomic_llong *)arg, s);
}

int main(void) {
    zt_name = "parallel_for";
    zinc_engine *e3 = engine(3), *e1 = engine(1);
    if (!e3 || !e1) return zt_finish();
    int64_t sizes[] = {1, 2, 3, 4, 7, 1000, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        check_split(e3, 3, sizes[i]);
        check_split(e1, 1, sizes[i]);
    }

    nest n = {.e = e3};
    ZT_OK(zinc_parallel_for(e3, 6, outer, &n));
    ZT_CHECK(atomic_load(&n.bad) == 0 && atomic_load(&n.outer_ranges) == 3,
             "nested calls: %d wrong, %d outer ranges (want 0 and 3)", atomic_load(&n.bad),
             atomic_load(&n.outer_ranges));

    atomic_int calls = 0;
    ZT_OK(zinc_parallel_for(e3, 0, count_calls, &calls));
    ZT_CHECK(atomic_load(&calls) == 0, "n == 0 called fn %d times", atomic_load(&calls));
    ZT_ERR(zinc_parallel_for(e3, -1, count_calls, &calls), ZINC_ERR_INVALID_ARG, "n = -1");
    ZT_ERR(zinc_parallel_for(e3, 5, NULL, NULL), ZINC_ERR_INVALID_ARG, "NULL fn");
    ZT_ERR(zinc_parallel_for(NULL, 5, count_calls, &calls), ZINC_ERR_INVALID_ARG, "NULL engine");
    ZT_CHECK(atomic_load(&calls) == 0, "a refused call ran fn %d times", atomic_load(&calls));

    /* idle threads sleep: CPU time over a sleep right after a loop */
    atomic_llong sink = 0;
    ZT_OK(zinc_parallel_for(e3, 3000000, busy, &sink));
    double c0 = cpu_s();
    struct timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, NULL);
    double used = cpu_s() - c0;
    ZT_CHECK(used < 0.020, "the process used %.1f ms of CPU over a 200 ms sleep after a loop: threads spin",
             used * 1e3);

    zinc_destroy(e3);
    zinc_destroy(e1);
    zinc_finalize();
    return zt_finish();
}
