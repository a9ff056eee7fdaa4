/* A small fork-join thread pool for the CPU kernels. The calling thread takes part in every job; the
 * workers sleep on a condition variable between jobs, so an idle pool takes no CPU time from the threads
 * of the model that runs beside it (OpenMP's idle workers spin for milliseconds after every parallel
 * region, which slowed a model's own threads 10x on a busy 2-core machine).
 *
 * A job is `ntasks` independent tasks fn(ctx, 0 .. ntasks-1), handed out one at a time, so a worker that
 * is slow to wake (the machine is busy) holds nothing up: the caller and the awake workers take its
 * tasks, and the caller does not wait for a worker that had not joined when the tasks ran out. Which thread runs a task is not fixed; callers that want results independent of
 * the thread count make each task's result depend on its index only (fixed-size chunks; partial sums
 * combined in task order by the caller). */
#ifndef ZINC_KERNELS_THREAD_POOL_H
#define ZINC_KERNELS_THREAD_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

typedef struct zpool zpool;
typedef void (*zpool_fn)(void *ctx, size_t task);

#define ZPOOL_MAX_THREADS 1024

/* The threads a rank's pool gets when nobody says: the online cores shared among the node's `local_ranks`
 * ranks, within 1..ZPOOL_MAX_THREADS (the engine's default, and what zinc mem estimate assumes). */
int zpool_default_threads(int local_ranks);

/* A pool of nthreads threads in all: the caller of zpool_for and nthreads - 1 workers (1 <= nthreads <=
 * ZPOOL_MAX_THREADS; 1 makes a pool that runs every job on the caller). Workers block all signals, so
 * signal handlers run on the application's threads. */
zinc_status zpool_create(int nthreads, zpool **out);
/* Stops and joins the workers. Not while a zpool_for on the pool runs. NULL is a no-op. */
void zpool_destroy(zpool *p);
/* Runs fn(ctx, k) for k in [0, ntasks) on the caller and the workers; returns when all are done. One job
 * at a time: a zpool_for that finds the pool busy (another thread's job, or a call from inside a task)
 * runs its tasks on its own thread, in order. p NULL also runs them on the caller. */
void zpool_for(zpool *p, size_t ntasks, zpool_fn fn, void *ctx);
/* Threads a job can use, the caller included (1 for NULL). */
int zpool_threads(const zpool *p);

/* Counts since creation, for tests: zpool_for calls, and those of them that woke workers. */
typedef struct zpool_stats {
    uint64_t calls;
    uint64_t parallel_calls;
} zpool_stats;
void zpool_get_stats(const zpool *p, zpool_stats *out);

#endif
