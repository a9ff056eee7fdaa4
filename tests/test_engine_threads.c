/* The CPU kernel thread count is per engine (white-box: reads the engine's device pool).
 *
 * Two engines in one process, cpu_threads 1 and 3, train the same 300,000-parameter model (5 of the
 * kernels' 64K-element chunks) on the same gradients for 3 steps:
 * - each device's pool has its engine's count, and making the 3-thread engine adds exactly 2 threads to
 *   the process (/proc/self/task), which go away when it is destroyed;
 * - each engine's steps run on its own pool (the 3-thread pool ran parallel jobs; the 1-thread engine's
 *   steps and the 3-thread engine's never touched the kernels' process default pool, whose job count
 *   stays the same), and the engines' steps interleave without changing each other's count;
 * - the master weights of the two engines are bit-identical (results do not depend on the thread count);
 * - cpu_threads -1 and ZPOOL_MAX_THREADS + 1 are refused with ZINC_ERR_INVALID_ARG naming the option. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "kernels/thread_pool.h"
#include "zinc.h"
#include "zt.h"

#define NPARAM 300000

static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static zinc_status init_small(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u, (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = 0.001f * (float)(i % 97);
    return ZINC_OK;
}

typedef struct eng {
    zinc_engine *e;
    int mod;
    zinc_param *w;
} eng;

static zinc_status make(int threads, eng *out) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, "
                    "\"weight_decay\": 0.1}}, \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": 0}}";
    o.device = ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = threads;
    *out = (eng){0};
    zinc_status st = zinc_create(&o, &out->e);
    if (st != ZINC_OK) return st;
    out->mod = zinc_module_add(out->e, "layer");
    out->w = zinc_param_add(out->e, out->mod, "w", 1, (int64_t[]){NPARAM}, ZINC_PARAM_DECAY);
    if (!out->w) return ZINC_ERR_INTERNAL;
    return zinc_build(out->e, init_small, NULL);
}

static zinc_status step(eng *g, int s) {
    zinc_status st;
    if ((st = zinc_module_enter(g->e, g->mod, ZINC_FORWARD)) != ZINC_OK) return st;
    if ((st = zinc_module_exit(g->e, g->mod, ZINC_FORWARD)) != ZINC_OK) return st;
    if ((st = zinc_module_enter(g->e, g->mod, ZINC_BACKWARD)) != ZINC_OK) return st;
    float *gr = (float *)zinc_param_grad(g->w);
    if (!gr) return ZINC_ERR_STATE;
    for (int i = 0; i < NPARAM; i++) gr[i] += 0.01f * (float)((i * 7 + s) % 13) - 0.06f;
    if ((st = zinc_module_exit(g->e, g->mod, ZINC_BACKWARD)) != ZINC_OK) return st;
    return zinc_step(g->e, NULL);
}

int main(void) {
    zt_name = "test_engine_threads";
    zinc_options bad = zinc_default_options();
    bad.config_json = "{\"train_batch_size\": 1}";
    bad.log_level = ZINC_LOG_OFF;
    zinc_engine *none = NULL;
    bad.cpu_threads = -1;
    ZT_ERR(zinc_create(&bad, &none), ZINC_ERR_INVALID_ARG, "cpu_threads -1");
    bad.cpu_threads = ZPOOL_MAX_THREADS + 1;
    ZT_ERR(zinc_create(&bad, &none), ZINC_ERR_INVALID_ARG, "cpu_threads");
    ZT_CHECK(none == NULL, "engine set on failure");

    eng a, b;
    ZT_OK(make(1, &a));
    if (!a.e || !a.w) return zt_finish();
    zpool_stats d0, d1, pa, pb;
    zpool_get_stats(zkernels_default_pool(), &d0);
    int tasks_a = task_count();
    ZT_OK(make(3, &b));
    if (!b.e || !b.w) return zt_finish();
    int tasks_b = task_count();
    ZT_CHECK(zpool_threads(a.e->dev->pool) == 1, "engine a: %d threads, want 1", zpool_threads(a.e->dev->pool));
    ZT_CHECK(zpool_threads(b.e->dev->pool) == 3, "engine b: %d threads, want 3", zpool_threads(b.e->dev->pool));
    ZT_CHECK(tasks_b - tasks_a == 2, "a 3-thread engine added %d threads to the process, want 2", tasks_b - tasks_a);

    for (int s = 0; s < 3; s++) {
        ZT_OK(step(&a, s));
        ZT_OK(step(&b, s));
    }
    ZT_CHECK(zpool_threads(a.e->dev->pool) == 1 && zpool_threads(b.e->dev->pool) == 3,
             "counts changed by the other engine's steps: %d and %d", zpool_threads(a.e->dev->pool),
             zpool_threads(b.e->dev->pool));
    zpool_get_stats(a.e->dev->pool, &pa);
    zpool_get_stats(b.e->dev->pool, &pb);
    zpool_get_stats(zkernels_default_pool(), &d1);
    ZT_CHECK(pa.parallel_calls == 0, "the 1-thread engine's pool ran %llu parallel jobs", (unsigned long long)pa.parallel_calls);
    /* Per step at least the gradient statistics and Adam over 5 chunks. */
    ZT_CHECK(pb.parallel_calls >= 6, "the 3-thread engine's pool ran %llu parallel jobs in 3 steps, want >= 6",
             (unsigned long long)pb.parallel_calls);
    ZT_CHECK(d1.calls == d0.calls, "the engines' steps ran %llu jobs on the process default pool",
             (unsigned long long)(d1.calls - d0.calls));

    float *ma = malloc(NPARAM * sizeof *ma), *mb = malloc(NPARAM * sizeof *mb);
    ZT_OK(zinc_gather_master(a.e, ma, NPARAM));
    ZT_OK(zinc_gather_master(b.e, mb, NPARAM));
    ZT_CHECK(!memcmp(ma, mb, NPARAM * sizeof *ma), "master weights differ between 1 and 3 threads");
    ZT_CHECK(ma[1] != 0.001f, "the steps did not change the weights");
    free(ma);
    free(mb);

    zinc_destroy(b.e);
    ZT_CHECK(task_count() == tasks_a, "after destroying the 3-thread engine: %d threads, want %d", task_count(),
             tasks_a);
    zinc_destroy(a.e);
    return zt_finish();
}
