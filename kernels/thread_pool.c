/* The kernels' thread pool (see thread_pool.h).
 *
 * Protocol: zpool_for publishes a job (fn, ctx, ntasks, the number of workers wanted) under `mu`, marks
 * it open, bumps `gen` and broadcasts `wake`. A worker that sees a new generation joins if the job is
 * still open and its index is below `want` (`active`++), pulls task indices from `next` until they run
 * out, then decrements `active` under `mu`. The caller pulls tasks too; when they have run out it closes
 * the job and waits on `done` only for the workers that joined: a worker the OS has not run yet by then
 * (a busy machine) costs the caller nothing, and skips the job when it wakes. The job's data (on the
 * caller's stack) outlives every use of it, and `next` is reset only when no worker is inside a job.
 *
 * A worker polls `gen` for ZPOOL_SPIN_NS after each job, then sleeps on `wake`: a wake-up from sleep costs
 * some microseconds per job (which the kernels amortise by only using the pool for two or more
 * 64K-element chunks), and the model's loops come faster than that. */
#include "kernels/thread_pool.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/core/clock.h"
#include "base/core/error.h"
#include "base/core/trace.h"

typedef struct zpool_worker {
    zpool *pool;
    int index;
} zpool_worker;

struct zpool {
    int nthreads;
    int started; /* workers running */
    pthread_t *threads;
    zpool_worker *args;
    pthread_mutex_t busy; /* held by the zpool_for in progress */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t gen;
    bool stop;
    int want, active;
    bool open;
    zpool_fn fn;
    void *ctx;
    size_t ntasks;
    atomic_size_t next;
    atomic_uint_fast64_t calls, parallel_calls;
};

/* How long a worker polls for the next job before it sleeps: a model's loops come back to back (GPT-2 at
 * the README's shape: about 300 jobs a step, microseconds apart), and waking a sleeping worker costs more
 * than the gap. Bounded, so an idle pool or an oversubscribed machine loses at most this much per job. */
#define ZPOOL_SPIN_NS 20000

static bool spin_for_job(zpool *p, uint64_t seen) {
    double until = zclock_now_s() + 1e-9 * ZPOOL_SPIN_NS;
    for (;;) {
        for (int i = 0; i < 32; i++) {
            if (__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != seen) return true;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (zclock_now_s() > until) return false;
    }
}

static void run_tasks(zpool *p, zpool_fn fn, void *ctx, size_t ntasks) {
    for (;;) {
        size_t k = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (k >= ntasks) return;
        fn(ctx, k);
    }
}

static void *worker_main(void *arg) {
    const zpool_worker *w = (const zpool_worker *)arg;
    zpool *p = w->pool;
    uint64_t seen = 0;
    char track[32];
    snprintf(track, sizeof track, "pool %d", w->index + 1);
    ztrace_thread_name(track); /* its spans, if it records any, on a track of its own */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->gen == seen && !p->stop) { /* a short spin first (ZPOOL_SPIN_NS) */
            pthread_mutex_unlock(&p->mu);
            spin_for_job(p, seen);
            pthread_mutex_lock(&p->mu);
        }
        while (p->gen == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        if (!p->open || w->index >= p->want) continue;
        p->active++;
        zpool_fn fn = p->fn;
        void *ctx = p->ctx;
        size_t n = p->ntasks;
        pthread_mutex_unlock(&p->mu);
        int64_t t0 = ztrace_begin();
        run_tasks(p, fn, ctx, n);
        if (t0) ztrace_span(t0, ZTRACE_POOL, "pool job", 0, "tasks", (int64_t)n, NULL, 0);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0 && !p->open) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int zpool_default_threads(int local_ranks) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long t = cores / (local_ranks > 0 ? local_ranks : 1);
    return t < 1 ? 1 : t > ZPOOL_MAX_THREADS ? ZPOOL_MAX_THREADS : (int)t;
}

zinc_status zpool_create(int nthreads, zpool **out) {
    zinc_status st = ZINC_OK;
    zpool *p = NULL;
    bool sync_ok = false;
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zpool_create: out is NULL");
    *out = NULL;
    if (nthreads < 1 || nthreads > ZPOOL_MAX_THREADS)
        return ZERR(ZINC_ERR_INVALID_ARG, "CPU kernel threads %d: want 1 to %d", nthreads, ZPOOL_MAX_THREADS);
    TRY_ALLOC(p, 1, "the kernel thread pool");
    p->nthreads = nthreads;
    TRY_ALLOC(p->threads, nthreads, "the kernel thread pool's threads");
    TRY_ALLOC(p->args, nthreads, "the kernel thread pool's threads");
    if (pthread_mutex_init(&p->busy, NULL) || pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->wake, NULL) ||
        pthread_cond_init(&p->done, NULL))
        FAIL(ZINC_ERR_INTERNAL, "the kernel thread pool: cannot initialise its mutex or condition variables");
    sync_ok = true;
    atomic_init(&p->next, 0);
    atomic_init(&p->calls, 0);
    atomic_init(&p->parallel_calls, 0);

    /* Workers start with every signal blocked (they inherit the creator's mask). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    for (int i = 0; i < nthreads - 1 && !err; i++) {
        p->args[i] = (zpool_worker){p, i};
        err = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
        if (!err) p->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        FAIL(err == EAGAIN ? ZINC_ERR_NOMEM : ZINC_ERR_INTERNAL,
             "CPU kernel threads: could not start thread %d of %d (%s); ask for fewer (zinc_options.cpu_threads)",
             p->started + 2, nthreads, strerror(err));
    *out = p;
    return ZINC_OK;
fail:
    if (p && !sync_ok) { /* nothing started; the sync objects may be half made */
        free(p->threads);
        free(p->args);
        free(p);
    } else {
        zpool_destroy(p);
    }
    return st;
}

void zpool_destroy(zpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->busy);
    free(p->threads);
    free(p->args);
    free(p);
}

void zpool_for(zpool *p, size_t ntasks, zpool_fn fn, void *ctx) {
    if (p) atomic_fetch_add_explicit(&p->calls, 1, memory_order_relaxed);
    if (!p || p->started == 0 || ntasks < 2 || pthread_mutex_trylock(&p->busy) != 0) {
        for (size_t k = 0; k < ntasks; k++) fn(ctx, k);
        return;
    }
    atomic_fetch_add_explicit(&p->parallel_calls, 1, memory_order_relaxed);
    int want = ntasks - 1 < (size_t)p->started ? (int)(ntasks - 1) : p->started;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = ntasks;
    p->want = want;
    p->active = 0;
    p->open = true;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    __atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE); /* read unlocked by spinning workers */
    pthread_mutex_unlock(&p->mu);
    pthread_cond_broadcast(&p->wake);

    run_tasks(p, fn, ctx, ntasks);

    pthread_mutex_lock(&p->mu);
    p->open = false;
    while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->busy);
}

int zpool_threads(const zpool *p) { return p ? p->started + 1 : 1; }

void zpool_get_stats(const zpool *p, zpool_stats *out) {
    *out = (zpool_stats){0};
    if (!p) return;
    out->calls = atomic_load(&((zpool *)p)->calls);
    out->parallel_calls = atomic_load(&((zpool *)p)->parallel_calls);
}
