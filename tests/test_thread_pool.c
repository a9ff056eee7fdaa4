/* The kernels' thread pool (kernels/thread_pool.h) and the kernels on it.
 *
 * - zpool_create refuses 0, -1 and ZPOOL_MAX_THREADS + 1 threads and a NULL out, with a message.
 * - Pools of 1-4 threads run every task of a job exactly once, for 0, 1, 2, 3, 7 and 1000 tasks; a pool of
 *   n threads really runs a job on n distinct threads (the first n tasks wait, up to 10 s, until n
 *   distinct threads are inside one, which only n threads taking part can satisfy); a zpool_for from
 *   inside a task, and two threads calling zpool_for on one pool at once, run every task exactly once.
 * - Idle workers sleep: over a 200 ms sleep right after a job on a 3-thread pool, the process uses under
 *   20 ms of CPU time (an idle spinning worker would use ~200 ms; blocked workers use ~0; 20 ms is a
 *   generous bound for timer ticks and other threads of the process).
 * - The kernels (zadam_step with a decay mask and bf16 param_out, zaxpy_f32, the casts, zscale_inplace,
 *   zgrad_stats) over 5 * 65536 + 123 elements give bit-identical results on 1, 2 and 3 threads, through
 *   zkernels_set_threads (the default pool) and through a pool of the caller's made current with
 *   zkernels_use_pool; the default pool is not used while another pool is current. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu_kernels.h"
#include "kernels/thread_pool.h"
#include "zt.h"

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           r.ru_stime.tv_usec * 1e-6;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- the pool itself */
#define MAX_TASKS 1000
typedef struct count_job {
    atomic_int hits[MAX_TASKS];
    zpool *nested; /* if set, each task runs a small job on this pool from inside the task */
    atomic_int nested_hits;
} count_job;

static void nested_task(void *ctx, size_t k) {
    (void)k;
    atomic_fetch_add(&((count_job *)ctx)->nested_hits, 1);
}

static void count_task(void *ctx, size_t k) {
    count_job *j = (count_job *)ctx;
    atomic_fetch_add(&j->hits[k], 1);
    if (j->nested) zpool_for(j->nested, 3, nested_task, j);
}

static int all_once(count_job *j, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (atomic_load(&j->hits[k]) != 1) return 0;
    for (size_t k = n; k < MAX_TASKS; k++)
        if (atomic_load(&j->hits[k]) != 0) return 0;
    return 1;
}

/* The first `want` tasks each wait until `want` distinct threads are inside a task. */
typedef struct distinct_job {
    int want;
    pthread_mutex_t mu;
    pthread_t ids[8];
    int nids;
    int timed_out;
} distinct_job;

static void distinct_task(void *ctx, size_t k) {
    distinct_job *j = (distinct_job *)ctx;
    pthread_mutex_lock(&j->mu);
    int seen = 0;
    for (int i = 0; i < j->nids; i++) seen |= pthread_equal(j->ids[i], pthread_self());
    if (!seen && j->nids < 8) j->ids[j->nids++] = pthread_self();
    pthread_mutex_unlock(&j->mu);
    if ((int)k >= j->want) return;
    double t0 = now();
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int n = j->nids;
        pthread_mutex_unlock(&j->mu);
        if (n >= j->want) return;
        if (now() - t0 > 10.0) {
            j->timed_out = 1;
            return;
        }
        usleep(100);
    }
}

typedef struct hammer_arg {
    zpool *p;
    int bad;
} hammer_arg;

static void *hammer(void *arg) {
    hammer_arg *h = (hammer_arg *)arg;
    count_job *j = malloc(sizeof *j);
    for (int r = 0; r < 200; r++) {
        memset(j, 0, sizeof *j);
        zpool_for(h->p, 37, count_task, j);
        if (!all_once(j, 37)) h->bad++;
    }
    free(j);
    return NULL;
}

static void test_pool(void) {
    zpool *p = NULL;
    ZT_ERR(zpool_create(0, &p), ZINC_ERR_INVALID_ARG, "want 1 to");
    ZT_ERR(zpool_create(-1, &p), ZINC_ERR_INVALID_ARG, "want 1 to");
    ZT_ERR(zpool_create(ZPOOL_MAX_THREADS + 1, &p), ZINC_ERR_INVALID_ARG, "want 1 to");
    ZT_ERR(zpool_create(2, NULL), ZINC_ERR_INVALID_ARG, "out is NULL");
    ZT_CHECK(p == NULL, "pool set on failure");
    ZT_CHECK(zpool_threads(NULL) == 1, "zpool_threads(NULL) %d", zpool_threads(NULL));
    zpool_destroy(NULL);

    static const size_t sizes[] = {0, 1, 2, 3, 7, MAX_TASKS};
    count_job *j = malloc(sizeof *j);
    for (int nt = 1; nt <= 4; nt++) {
        p = NULL;
        ZT_OK(zpool_create(nt, &p));
        if (!p) continue;
        ZT_CHECK(zpool_threads(p) == nt, "zpool_threads %d, want %d", zpool_threads(p), nt);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            memset(j, 0, sizeof *j);
            zpool_for(p, sizes[s], count_task, j);
            ZT_CHECK(all_once(j, sizes[s]), "%d threads, %zu tasks: not every task ran exactly once", nt, sizes[s]);
        }
        memset(j, 0, sizeof *j);
        j->nested = p;
        zpool_for(p, 50, count_task, j);
        ZT_CHECK(all_once(j, 50) && atomic_load(&j->nested_hits) == 150,
                 "%d threads: nested zpool_for: nested hits %d, want 150", nt, atomic_load(&j->nested_hits));

        distinct_job d = {.want = nt, .mu = PTHREAD_MUTEX_INITIALIZER};
        zpool_for(p, 64, distinct_task, &d);
        ZT_CHECK(!d.timed_out && d.nids == nt, "%d-thread pool ran a job on %d distinct threads (timed out: %d)", nt,
                 d.nids, d.timed_out);

        hammer_arg h[2] = {{p, 0}, {p, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, hammer, &h[i]);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        ZT_CHECK(h[0].bad == 0 && h[1].bad == 0, "%d threads, two callers at once: %d + %d bad jobs", nt, h[0].bad,
                 h[1].bad);

        zpool_stats ps;
        zpool_get_stats(p, &ps);
        /* the sizes, the nested job (outer + one per task), the distinct-threads job, 2 callers x 200 */
        ZT_CHECK(ps.calls == 6 + 1 + 50 + 1 + 400, "%d threads: %llu calls counted", nt, (unsigned long long)ps.calls);
        ZT_CHECK(nt == 1 ? ps.parallel_calls == 0 : ps.parallel_calls > 0, "%d threads: %llu parallel calls", nt,
                 (unsigned long long)ps.parallel_calls);
        zpool_destroy(p);
    }
    free(j);
}

/* Workers block between jobs: CPU time over a sleep after a job. */
static void test_idle(void) {
    zpool *p = NULL;
    ZT_OK(zpool_create(3, &p));
    if (!p) return;
    count_job *j = malloc(sizeof *j);
    memset(j, 0, sizeof *j);
    zpool_for(p, MAX_TASKS, count_task, j);
    double c0 = cpu_seconds();
    usleep(200000);
    double used = cpu_seconds() - c0;
    fprintf(stderr, "idle 3-thread pool: %.2f ms CPU over a 200 ms sleep\n", used * 1e3);
    ZT_CHECK(used < 0.020, "idle pool used %.1f ms of CPU over a 200 ms sleep (want < 20 ms)", used * 1e3);
    free(j);
    zpool_destroy(p);
}

/* ---------------------------------------------------------------- kernels at 1, 2, 3 threads */
enum { KN = 5 * 65536 + 123 };
typedef struct kout {
    float p[KN], m[KN], v[KN], acc[KN], back[KN];
    uint16_t po[KN], cast[KN], scaled[KN];
    zgrad_stats st;
} kout;

static void run_kernels(const float *g, const uint16_t *g16, const uint8_t *mask, kout *o) {
    for (size_t i = 0; i < KN; i++) {
        o->p[i] = 0.01f * (float)((int)(i % 201) - 100);
        o->m[i] = o->v[i] = 0;
        o->acc[i] = g[KN - 1 - i];
    }
    zadam_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                       .bias_correction1 = 0.1f, .bias_correction2 = 0.001f, .grad_factor = 0.5f, .adamw = 1};
    for (int s = 0; s < 2; s++) zadam_step(&h, KN, o->p, o->m, o->v, g16, ZINC_BF16, o->po, ZINC_BF16, mask);
    zaxpy_f32(o->acc, g16, ZINC_BF16, 0.25f, KN, 1);
    zcast_from_f32(o->cast, ZINC_FP16, o->acc, KN);
    zcast_to_f32(o->back, o->cast, ZINC_FP16, KN);
    memcpy(o->scaled, o->cast, sizeof o->scaled);
    zscale_inplace(o->scaled, ZINC_FP16, 3.0f, KN);
    zgrad_stats(g, ZINC_FP32, KN, &o->st);
}

static int same(const kout *a, const kout *b) {
    return !memcmp(a->p, b->p, sizeof a->p) && !memcmp(a->m, b->m, sizeof a->m) && !memcmp(a->v, b->v, sizeof a->v) &&
           !memcmp(a->po, b->po, sizeof a->po) && !memcmp(a->acc, b->acc, sizeof a->acc) &&
           !memcmp(a->cast, b->cast, sizeof a->cast) && !memcmp(a->back, b->back, sizeof a->back) &&
           !memcmp(a->scaled, b->scaled, sizeof a->scaled) && !memcmp(&a->st, &b->st, sizeof a->st);
}

static void test_kernels(uint64_t *rng) {
    float *g = malloc(KN * sizeof *g);
    uint16_t *g16 = malloc(KN * sizeof *g16);
    uint8_t *mask = malloc(KN / ZADAM_MASK_GROUP + 1);
    kout *ref = malloc(sizeof *ref), *got = malloc(sizeof *got);
    for (size_t i = 0; i < KN; i++) {
        g[i] = (float)zt_rand_normal(rng);
        g16[i] = zinc_f32_to_bf16(g[i]);
    }
    for (size_t i = 0; i <= KN / ZADAM_MASK_GROUP; i++) mask[i] = (uint8_t)(zt_rand_u64(rng) & 1);

    zkernels_set_threads(1);
    ZT_CHECK(zkernels_threads() == 1, "set_threads(1) -> %d", zkernels_threads());
    run_kernels(g, g16, mask, ref);
    for (int nt = 2; nt <= 3; nt++) {
        zkernels_set_threads(nt);
        ZT_CHECK(zkernels_threads() == nt, "set_threads(%d) -> %d", nt, zkernels_threads());
        run_kernels(g, g16, mask, got);
        ZT_CHECK(same(ref, got), "kernels on the default pool: %d threads differ from 1 thread", nt);
    }
    zpool_stats before, after;
    zpool_get_stats(zkernels_default_pool(), &before);
    ZT_CHECK(before.parallel_calls > 0, "the default 3-thread pool ran no parallel job");
    for (int nt = 1; nt <= 3; nt++) {
        zpool *p = NULL;
        ZT_OK(zpool_create(nt, &p));
        if (!p) continue;
        zpool *prev = zkernels_use_pool(p);
        ZT_CHECK(prev == NULL, "a pool was current before zkernels_use_pool");
        ZT_CHECK(zkernels_threads() == nt, "with a %d-thread pool current, zkernels_threads %d", nt, zkernels_threads());
        run_kernels(g, g16, mask, got);
        ZT_CHECK(zkernels_use_pool(prev) == p, "zkernels_use_pool does not return the current pool");
        ZT_CHECK(same(ref, got), "kernels on an own %d-thread pool differ from 1 thread", nt);
        zpool_stats ps;
        zpool_get_stats(p, &ps);
        ZT_CHECK(nt == 1 || ps.parallel_calls >= 6, "own %d-thread pool: %llu parallel calls, want >= 6", nt,
                 (unsigned long long)ps.parallel_calls);
        zpool_destroy(p);
    }
    zpool_get_stats(zkernels_default_pool(), &after);
    ZT_CHECK(after.calls == before.calls, "the default pool ran %llu jobs while another pool was current",
             (unsigned long long)(after.calls - before.calls));
    zkernels_set_threads(0);
    ZT_CHECK(zkernels_threads() == zkernels_cpu_count(), "default threads %d, CPUs %d", zkernels_threads(),
             zkernels_cpu_count());
    free(g);
    free(g16);
    free(mask);
    free(ref);
    free(got);
}

int main(void) {
    zt_name = "test_thread_pool";
    uint64_t rng = zt_seed();
    test_pool();
    test_idle();
    test_kernels(&rng);
    return zt_finish();
}
