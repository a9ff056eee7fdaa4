/* What a model tells the engine about memory before zinc_build, and the end-of-run read without a second copy
 * (run under mpirun, 1-2 ranks):
 *   - zinc_memory_declare: its bytes are in the engine's plan and estimate (zengine_estimate) and, once built,
 *     in zinc_memory_get's current and peak; the pre-flight refuses a build whose declared activations do not
 *     fit (a faked MemAvailable that fits the engine alone), naming them, and builds without them; a wrong
 *     category or kind, or a call after zinc_build, is refused with a message;
 *   - zinc_module_reentered: a module entered twice in one backward at stages 2-3 keeps its gradients in a
 *     buffer of its own; declared, every peak after two steps equals the plan's (that buffer included), where
 *     the undeclared one is larger than the plan by it (the issue the declaration fixes);
 *   - zinc_master_foreach: at stages 0-3 every piece (at most ZINC_INIT_PIECE elements, in registration order,
 *     covering every parameter once) equals zinc_gather_master's values, for a model with a tensor spanning
 *     several pieces. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/engine/engine_mem.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"
#include "zt.h"

static zinc_status init_fn(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u;
    uint64_t s = seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = (float)(zt_rand_uniform(&s) - 0.5);
    return ZINC_OK;
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_ERROR};

static zinc_engine *make(int stage) {
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 2,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}},"
             " \"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": 1000,"
             " \"stage3_param_persistence_threshold\": 10}}",
             stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.device = ZINC_DEVICE_CPU;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    return e;
}

/* "embed" (300 elements), "mid" (2000), "head" (70) */
static int add_model(zinc_engine *e, zinc_param **ps, int64_t big) {
    const char *names[3] = {"embed", "mid", "head"};
    int64_t n[3] = {300, big, 70};
    for (int i = 0; i < 3; i++) {
        int m = zinc_module_add(e, names[i]);
        char pn[32];
        snprintf(pn, sizeof pn, "%s.w", names[i]);
        ps[i] = zinc_param_add(e, m, pn, 1, (int64_t[]){n[i]}, ZINC_PARAM_DECAY);
        if (!ps[i]) return -1;
    }
    return 0;
}

static void add_grad(zinc_engine *e, zinc_param *p, uint64_t *s) {
    zinc_param_info info;
    zinc_param_get_info(p, &info);
    void *g = zinc_param_grad(p);
    for (int64_t j = 0; g && j < info.numel; j++)
        zinc_add_f32(g, zinc_grad_dtype(e), (size_t)j, (float)zt_rand_normal(s) * zinc_loss_scale(e) * 1e-3f);
}

/* Forward in order; backward head, embed (the tied use), mid, embed again. */
static zinc_status steps_with_reentry(zinc_engine *e, zinc_param **ps, int steps) {
    uint64_t s = 11;
    zinc_status st;
    for (int k = 0; k < steps; k++) {
        for (int64_t micro = 0; micro < zinc_grad_accum_steps(e); micro++) {
            for (int m = 0; m < 3; m++) {
                if ((st = zinc_module_enter(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
                if ((st = zinc_module_exit(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
            }
            const int order[4] = {2, 0, 1, 0};
            for (int i = 0; i < 4; i++) {
                if ((st = zinc_module_enter(e, order[i], ZINC_BACKWARD)) != ZINC_OK) return st;
                add_grad(e, ps[order[i]], &s);
                if ((st = zinc_module_exit(e, order[i], ZINC_BACKWARD)) != ZINC_OK) return st;
            }
        }
        if ((st = zinc_step(e, NULL)) != ZINC_OK) return st;
    }
    return ZINC_OK;
}

static void test_declare(void) {
    zinc_engine *e = make(1);
    zinc_param *ps[3];
    ZT_CHECK(add_model(e, ps, 2000) == 0, "model");
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_PARAMS, ZINC_MEMKIND_HOST, 10, "x"), ZINC_ERR_INVALID_ARG,
           "ZINC_MEM_ACTIVATIONS or ZINC_MEM_SCRATCH");
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_NVME, 10, "x"), ZINC_ERR_INVALID_ARG,
           "not host, pinned or device");
    const uint64_t act = 3u << 20, scr = 12345;
    ZT_OK(zinc_memory_declare(e, ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, act, "test activations"));
    ZT_OK(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, scr, "test scratch"));
    ZT_OK(zinc_build(e, init_fn, NULL));
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, 10, "late"), ZINC_ERR_STATE,
           "before zinc_build");
    zest_estimate est;
    ZT_OK(zengine_estimate(e, &est));
    ZT_CHECK(est.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_ACTIVATIONS] == act &&
                 est.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_SCRATCH] == scr && est.declared[ZINC_MEMKIND_HOST] == act + scr,
             "the estimate holds the declared bytes (%llu, %llu)",
             (unsigned long long)est.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_ACTIVATIONS],
             (unsigned long long)est.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_SCRATCH]);
    zinc_memory_report r;
    ZT_OK(zinc_memory_get(e, &r));
    ZT_CHECK(r.current[ZINC_MEMKIND_HOST][ZINC_MEM_ACTIVATIONS] == act &&
                 r.peak[ZINC_MEMKIND_HOST][ZINC_MEM_SCRATCH] == scr,
             "zinc_memory_get reports the declared bytes");
    /* the process's growth: the steps hold them, the build's moment does not */
    zest_estimate none = est;
    none.declared[ZINC_MEMKIND_HOST] = 0;
    none.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_ACTIVATIONS] = none.bytes[ZINC_MEMKIND_HOST][ZINC_MEM_SCRATCH] = 0;
    none.step_total[ZINC_MEMKIND_HOST] -= act + scr;
    ZT_CHECK(zest_rss(&est, true) == zest_rss(&none, true) + act + scr,
             "zest_rss adds the declared bytes to the steps");
    zinc_destroy(e);

    /* the pre-flight: MemAvailable that holds the engine but not the declared activations */
    uint64_t engine_only = zest_rss(&none, true);
    char fake[32];
    snprintf(fake, sizeof fake, "%llu", (unsigned long long)(engine_only * 2 + (1u << 20)));
    setenv("ZINC_FAKE_MEM_AVAILABLE", fake, 1);
    e = make(1);
    ZT_CHECK(add_model(e, ps, 2000) == 0, "model");
    ZT_OK(zinc_memory_declare(e, ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, (uint64_t)64 << 20, "big activations"));
    ZT_ERR(zinc_build(e, init_fn, NULL), ZINC_ERR_NOMEM, "activations");
    /* Issue 34: a failed build leaves the engine for zinc_destroy only, and every call says why */
    ZT_CHECK(zinc_module_add(e, "late") < 0 && strstr(zinc_last_error(), "zinc_build failed") &&
                 strstr(zinc_last_error(), "activations") && strstr(zinc_last_error(), "zinc_destroy"),
             "zinc_module_add after a failed build: %s", zinc_last_error());
    ZT_CHECK(zinc_param_add(e, 0, "late.w", 1, (int64_t[]){4}, 0) == NULL &&
                 strstr(zinc_last_error(), "zinc_build failed"),
             "zinc_param_add after a failed build: %s", zinc_last_error());
    ZT_ERR(zinc_module_reentered(e, 0), ZINC_ERR_STATE, "zinc_build failed");
    ZT_ERR(zinc_build(e, init_fn, NULL), ZINC_ERR_STATE, "zinc_build failed");
    zinc_step_info failed_info;
    ZT_ERR(zinc_step(e, &failed_info), ZINC_ERR_STATE, "zinc_build failed");
    ZT_ERR(zinc_module_enter(e, 0, ZINC_FORWARD), ZINC_ERR_STATE, "zinc_build failed");
    float one;
    ZT_ERR(zinc_gather_master(e, &one, 1), ZINC_ERR_STATE, "zinc_build failed");
    ZT_ERR(zinc_save_checkpoint(e, "never_written", NULL), ZINC_ERR_STATE, "zinc_build failed");
    zinc_destroy(e);
    e = make(1);
    ZT_CHECK(add_model(e, ps, 2000) == 0, "model");
    ZT_OK(zinc_build(e, init_fn, NULL));
    zinc_destroy(e);
    unsetenv("ZINC_FAKE_MEM_AVAILABLE");
}

/* Whether the tracker's peaks equal the estimate's (the plan at the steps, and at the build with its
 * initialisation scratch); the first difference, tracker less estimate, in *held_extra. */
static bool peaks_match_plan(zinc_engine *e, uint64_t *held_extra) {
    zest_estimate est;
    *held_extra = 0;
    if (zengine_estimate(e, &est) != ZINC_OK) return false;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            if (e->mem.peak[k][c] != est.bytes[k][c]) {
                *held_extra = e->mem.peak[k][c] - est.bytes[k][c];
                return false;
            }
    return true;
}

static void test_reentry(void) {
    for (int stage = 2; stage <= 3; stage++) {
        uint64_t extra[2];
        for (int declared = 0; declared < 2; declared++) {
            zinc_engine *e = make(stage);
            zinc_param *ps[3];
            ZT_CHECK(add_model(e, ps, 2000) == 0, "model");
            ZT_ERR(zinc_module_reentered(e, 7), ZINC_ERR_INVALID_ARG, "module 7 of 3");
            if (declared) ZT_OK(zinc_module_reentered(e, 0));
            ZT_OK(zinc_build(e, init_fn, NULL));
            ZT_ERR(zinc_module_reentered(e, 0), ZINC_ERR_STATE, "before zinc_build");
            ZT_OK(steps_with_reentry(e, ps, 2));
            bool ok = peaks_match_plan(e, &extra[declared]);
            if (declared)
                ZT_CHECK(ok && e->plan.buf[ZPLAN_HELD].bytes == 304 * sizeof(float),
                         "stage %d, embed declared re-entered: every peak equals the plan (its %llu-byte buffer "
                         "included)",
                         stage, (unsigned long long)e->plan.buf[ZPLAN_HELD].bytes);
            else
                ZT_CHECK(!ok && extra[0] == 304 * sizeof(float),
                         "stage %d, undeclared: the peak exceeds the plan by the module's buffer (%llu bytes)", stage,
                         (unsigned long long)extra[0]);
            zinc_destroy(e);
        }
    }
}

typedef struct pieces {
    const float *all;
    const int64_t *start; /* each parameter's first element in `all` */
    int64_t seen, bad, biggest;
    int last_param;
    int64_t last_end;
} pieces;

static zinc_status check_piece(void *u, int param, int64_t offset, const float *v, int64_t n) {
    pieces *p = u;
    if (n > p->biggest) p->biggest = n;
    bool in_order = param > p->last_param ? offset == 0 : param == p->last_param && offset == p->last_end;
    if (!in_order || memcmp(v, p->all + p->start[param] + offset, (size_t)n * sizeof *v)) p->bad++;
    p->last_param = param;
    p->last_end = offset + n;
    p->seen += n;
    return ZINC_OK;
}

static void test_foreach(void) {
    const int64_t big = ZINC_INIT_PIECE * 2 + 12345;
    for (int stage = 0; stage <= 3; stage++) {
        zinc_engine *e = make(stage);
        zinc_param *ps[3];
        ZT_CHECK(add_model(e, ps, big) == 0, "model");
        ZT_OK(zinc_build(e, init_fn, NULL));
        uint64_t s = 5;
        for (int m = 0; m < 3; m++) {
            ZT_OK(zinc_module_enter(e, m, ZINC_FORWARD));
            ZT_OK(zinc_module_exit(e, m, ZINC_FORWARD));
        }
        for (int64_t micro = 0; micro < zinc_grad_accum_steps(e); micro++) {
            if (micro) {
                for (int m = 0; m < 3; m++) {
                    ZT_OK(zinc_module_enter(e, m, ZINC_FORWARD));
                    ZT_OK(zinc_module_exit(e, m, ZINC_FORWARD));
                }
            }
            for (int m = 2; m >= 0; m--) {
                ZT_OK(zinc_module_enter(e, m, ZINC_BACKWARD));
                add_grad(e, ps[m], &s);
                ZT_OK(zinc_module_exit(e, m, ZINC_BACKWARD));
            }
        }
        ZT_OK(zinc_step(e, NULL)); /* the master weights differ from the initial values now */
        int64_t n = zinc_numel_total(e);
        float *all = malloc((size_t)n * sizeof *all);
        int64_t start[3] = {0, 300, 300 + big};
        ZT_OK(zinc_gather_master(e, all, (size_t)n));
        pieces p = {.all = all, .start = start, .last_param = -1};
        ZT_OK(zinc_master_foreach(e, check_piece, &p));
        ZT_CHECK(p.bad == 0 && p.seen == n && p.biggest <= ZINC_INIT_PIECE,
                 "stage %d, rank %d: zinc_master_foreach gave %lld of %lld elements in order, %lld pieces differing "
                 "from zinc_gather_master, pieces of at most %lld",
                 stage, zinc_rank(e), (long long)p.seen, (long long)n, (long long)p.bad, (long long)p.biggest);
        free(all);
        zinc_destroy(e);
    }
}

int main(void) {
    test_declare();
    test_reentry();
    test_foreach();
    return zt_finish();
}
