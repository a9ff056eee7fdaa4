/* zinc_parallel_for: a model's own loops on the engine's kernel thread pool (kernels/thread_pool.h), so
 * that a model and the engine share one set of threads that sleep between jobs. */
#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "kernels/thread_pool.h"

typedef struct pfor_job {
    void (*fn)(void *ctx, int64_t lo, int64_t hi);
    void *ctx;
    int64_t n, ranges;
} pfor_job;

/* Set while this thread runs a range: a zinc_parallel_for from inside fn runs on its own thread (the pool
 * would do so too, but this way the range is one call, not one per task). */
static _Thread_local int in_range;

static void run_range(void *arg, size_t k) {
    const pfor_job *j = arg;
    int64_t q = j->n / j->ranges, r = j->n % j->ranges, i = (int64_t)k;
    int64_t lo = i * q + (i < r ? i : r), hi = lo + q + (i < r);
    int outer = in_range;
    in_range = 1;
    j->fn(j->ctx, lo, hi);
    in_range = outer;
}

bool zengine_in_parallel_body(void) { return in_range != 0; }

zinc_status zinc_parallel_for(zinc_engine *e, int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_parallel_for: NULL engine");
    if (!fn) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_parallel_for: NULL fn (the loop body to run)");
    if (n < 0)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_parallel_for: n = %lld; the loop count must be >= 0", (long long)n);
    if (n == 0) return ZINC_OK;
    zpool *pool = e->dev ? e->dev->pool : NULL;
    int threads = zpool_threads(pool);
    if (in_range || threads <= 1 || n == 1) {
        int outer = in_range;
        in_range = 1;
        fn(ctx, 0, n);
        in_range = outer;
        return ZINC_OK;
    }
    pfor_job j = {fn, ctx, n, n < threads ? n : threads};
    zpool_for(pool, (size_t)j.ranges, run_range, &j);
    return ZINC_OK;
}

int zinc_cpu_threads(const zinc_engine *e) {
    int t = e && e->dev ? zpool_threads(e->dev->pool) : 1;
    return t > 0 ? t : 1;
}
