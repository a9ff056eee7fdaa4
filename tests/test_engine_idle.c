/* Between steps the engine's CPU kernel threads sleep: they take no CPU time from the model's own threads.
 *
 * An engine with cpu_threads 2 (device cpu, one rank, fp32, stage 0) trains a 300,000-parameter model
 * (5 chunks of the kernels' 64K elements, so the step's gradient statistics and Adam run on 2 threads).
 * After each of 20 steps the process sleeps 10 ms, as a model doing its own work on other threads would;
 * the process CPU time (getrusage RUSAGE_SELF) is measured over those sleeps only, 200 ms in all, and
 * must stay under 20 ms. Then once more over one 200 ms sleep after a step. Blocked workers use ~0 ms;
 * 20 ms (10% of the sleeping time) is a generous bound for other threads of the process (MPI's) and
 * timer ticks. With the old OpenMP kernels (commit a12f847) libgomp's idle worker spins after every
 * parallel region: on the 2-core dev VM this test failed there with 65-83 ms over the 20 x 10 ms sleeps;
 * the single 200 ms sleep alone measured ~8.7 ms (libgomp spins a few ms, then blocks) and would not have
 * caught it. Now both measure under 1 ms. Uses only the public API, so it builds against either. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "zinc.h"
#include "zt.h"

#define NPARAM 300000

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           r.ru_stime.tv_usec * 1e-6;
}

static zinc_status init_small(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u, (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = 0.001f * (float)(i % 97);
    return ZINC_OK;
}

static zinc_status one_step(zinc_engine *e, int mod, zinc_param *w, int step) {
    zinc_status st;
    if ((st = zinc_module_enter(e, mod, ZINC_FORWARD)) != ZINC_OK) return st;
    if ((st = zinc_module_exit(e, mod, ZINC_FORWARD)) != ZINC_OK) return st;
    if ((st = zinc_module_enter(e, mod, ZINC_BACKWARD)) != ZINC_OK) return st;
    float *g = (float *)zinc_param_grad(w);
    if (!g) return ZINC_ERR_STATE;
    for (int i = 0; i < NPARAM; i++) g[i] += 0.01f * (float)((i + step) % 13) - 0.06f;
    if ((st = zinc_module_exit(e, mod, ZINC_BACKWARD)) != ZINC_OK) return st;
    return zinc_step(e, NULL);
}

int main(void) {
    zt_name = "test_engine_idle";
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}},"
                    " \"zero_optimization\": {\"stage\": 0}}";
    o.device = ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = 2;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    if (!e) return zt_finish();
    int mod = zinc_module_add(e, "layer");
    zinc_param *w = zinc_param_add(e, mod, "w", 1, (int64_t[]){NPARAM}, ZINC_PARAM_DECAY);
    ZT_CHECK(w != NULL, "param_add: %s", zinc_last_error());
    ZT_OK(zinc_build(e, init_small, NULL));
    ZT_OK(one_step(e, mod, w, 0));

    double idle = 0;
    for (int s = 1; s <= 20; s++) {
        ZT_OK(one_step(e, mod, w, s));
        double c0 = cpu_seconds();
        usleep(10000);
        idle += cpu_seconds() - c0;
    }
    fprintf(stderr, "CPU time over 20 x 10 ms sleeps after steps: %.2f ms\n", idle * 1e3);
    ZT_CHECK(idle < 0.020, "the engine used %.1f ms of CPU while the process slept 20 x 10 ms between steps "
                           "(want < 20 ms): its kernel threads do not sleep between steps", idle * 1e3);

    ZT_OK(one_step(e, mod, w, 21));
    double c0 = cpu_seconds();
    usleep(200000);
    double one = cpu_seconds() - c0;
    fprintf(stderr, "CPU time over a 200 ms sleep after a step: %.2f ms\n", one * 1e3);
    ZT_CHECK(one < 0.020, "the engine used %.1f ms of CPU over a 200 ms sleep after a step (want < 20 ms)",
             one * 1e3);
    zinc_destroy(e);
    return zt_finish();
}
