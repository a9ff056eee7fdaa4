/* Bad use of the engine API returns clear errors; good use of the accessors works. */
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zt.h"

static zinc_status init_zero(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u;
    (void)seed;
    memset(out, 0, (size_t)p->numel * sizeof *out);
    return ZINC_OK;
}

static zinc_engine *create(int stage) {
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": %d}}", stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_level = ZINC_LOG_ERROR;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    return e;
}

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};

/* The example MLP refuses its GPU path where there is none, and a `compute` value out of range. */
static void mlp_compute_errors(void) {
    for (int c = 0; c < 2; c++) {
        eu_run r = {.stage = 1,
                    .dtype = ZINC_FP32,
                    .log = &log_cap,
                    .mlp_compute = c == 0 ? MLP_COMPUTE_DEVICE : (mlp_compute_at)7};
        zinc_engine *e = NULL;
        mlp_model *m = NULL;
        zt_logcap_clear(&log_cap);
        zinc_status st = eu_create(&r, &e, &m);
        const char *logged = zt_logcap_last(&log_cap, ZINC_LOG_ERROR, NULL);
        if (c == 1) {
            ZT_CHECK(st == ZINC_ERR_INVALID_ARG, "compute 7: %s, want ZINC_ERR_INVALID_ARG", zinc_status_name(st));
            continue;
        }
#ifdef ZINC_HAVE_CUDA
        ZT_CHECK(st == ZINC_ERR_INVALID_ARG && strstr(logged, "device cuda"),
                 "compute DEVICE on a cpu engine: %s, logged \"%s\"", zinc_status_name(st), logged);
#else
        ZT_CHECK(st == ZINC_ERR_UNSUPPORTED && strstr(logged, "CUDA backend"),
                 "compute DEVICE without CUDA: %s, logged \"%s\"", zinc_status_name(st), logged);
#endif
        ZT_CHECK(e == NULL && m == NULL, "the engine is destroyed when the model cannot be made");
    }
}

int main(void) {
    zt_name = "engine_api";
    zinc_options o = zinc_default_options();
    zinc_engine *e = NULL;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "config_path");
    ZT_ERR(zinc_create(&o, NULL), ZINC_ERR_INVALID_ARG, "out is NULL");
    o.config_json = "{\"train_batch_size\": 4, \"zero_optimisation\": {\"stage\": 2}}";
    o.log_level = ZINC_LOG_OFF;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_CONFIG, "zero_optimization");
    ZT_CHECK(e == NULL, "engine set on failure");

    e = create(3);
    if (!e) return zt_finish();
    ZT_ERR(zinc_step(e, NULL), ZINC_ERR_STATE, "zinc_build first");
    ZT_ERR(zinc_build(e, init_zero, NULL), ZINC_ERR_STATE, "no parameters");
    ZT_CHECK(zinc_param_add(e, 0, "w", 1, (int64_t[]){4}, 0) == NULL, "param added to a missing module");
    ZT_CHECK(strstr(zinc_last_error(), "module 0 does not exist"), "message: %s", zinc_last_error());
    int m0 = zinc_module_add(e, "layer0");
    ZT_CHECK(m0 == 0, "first module id %d", m0);
    ZT_CHECK(zinc_module_add(e, "layer0") < 0 && strstr(zinc_last_error(), "already exists"), "duplicate module");
    ZT_CHECK(zinc_param_add(e, m0, "w", 0, (int64_t[]){4}, 0) == NULL && strstr(zinc_last_error(), "ndim"),
             "ndim 0 accepted");
    ZT_CHECK(zinc_param_add(e, m0, "w", 1, (int64_t[]){0}, 0) == NULL && strstr(zinc_last_error(), "shape[0]"),
             "zero shape accepted");
    zinc_param *w = zinc_param_add(e, m0, "layer0.w", 2, (int64_t[]){3, 5}, ZINC_PARAM_DECAY);
    ZT_CHECK(w != NULL, "param add: %s", zinc_last_error());
    ZT_CHECK(zinc_param_add(e, m0, "layer0.w", 1, (int64_t[]){4}, 0) == NULL, "duplicate parameter name accepted");
    int m1 = zinc_module_add(e, "empty"); /* gets a parameter below; modules without any are fine too */
    ZT_CHECK(zinc_param_add(e, m0, "late", 1, (int64_t[]){4}, 0) == NULL &&
                 strstr(zinc_last_error(), "most recently added module"),
             "param added to an earlier module");
    zinc_param *b = zinc_param_add(e, m1, "empty.b", 1, (int64_t[]){7}, 0);
    ZT_CHECK(b != NULL, "param add: %s", zinc_last_error());
    /* zinc_build(e, NULL, ...) builds with every weight 0 (tests/test_param_master.c) */
    ZT_OK(zinc_build(e, init_zero, NULL));
    ZT_ERR(zinc_build(e, init_zero, NULL), ZINC_ERR_STATE, "already built");
    ZT_CHECK(zinc_module_add(e, "late") < 0 && strstr(zinc_last_error(), "before zinc_build"), "module after build");
    ZT_CHECK(zinc_param_find(e, "nope") == NULL, "unknown parameter found");
    ZT_CHECK(zinc_param_find(e, "layer0.w") == w, "find by name");
    zinc_param_info info;
    ZT_OK(zinc_param_get_info(w, &info));
    ZT_CHECK(info.numel == 15 && info.flat_offset == 0 && info.ndim == 2, "info of layer0.w");
    ZT_OK(zinc_param_get_info(b, &info));
    ZT_CHECK(info.flat_offset == 16, "layer1.b starts on an 8-element boundary: %lld", (long long)info.flat_offset);

    /* Stage 3: data exists only inside enter/exit; gradients only inside backward. */
    ZT_CHECK(zinc_param_data(w) == NULL && strstr(zinc_last_error(), "only between"), "stage-3 data outside enter");
    ZT_CHECK(zinc_param_grad(w) == NULL && strstr(zinc_last_error(), "gradients exist only"), "grad outside bwd");
    ZT_ERR(zinc_module_exit(e, m0, ZINC_FORWARD), ZINC_ERR_STATE, "was not entered");
    ZT_ERR(zinc_module_enter(e, 9, ZINC_FORWARD), ZINC_ERR_INVALID_ARG, "module 9 does not exist");
    ZT_ERR(zinc_module_enter(e, m0, (zinc_phase)5), ZINC_ERR_INVALID_ARG, "phase 5");
    ZT_OK(zinc_module_enter(e, m0, ZINC_FORWARD));
    ZT_CHECK(zinc_param_data(w) != NULL, "stage-3 data inside enter: %s", zinc_last_error());
    ZT_ERR(zinc_module_enter(e, m0, ZINC_FORWARD), ZINC_ERR_STATE, "already in forward");
    ZT_ERR(zinc_step(e, NULL), ZINC_ERR_STATE, "still entered");
    ZT_OK(zinc_module_exit(e, m0, ZINC_FORWARD));
    ZT_OK(zinc_module_enter(e, m1, ZINC_BACKWARD));
    ZT_CHECK(zinc_param_grad(b) != NULL, "grad inside backward");
    ZT_OK(zinc_module_exit(e, m1, ZINC_BACKWARD));
    ZT_OK(zinc_module_enter(e, m0, ZINC_BACKWARD));
    ZT_OK(zinc_module_exit(e, m0, ZINC_BACKWARD));
    zinc_step_info si;
    ZT_OK(zinc_step(e, &si));
    ZT_CHECK(si.taken == 1 && si.step == 1, "step taken");
    float buf[22];
    ZT_ERR(zinc_gather_master(e, buf, 3), ZINC_ERR_INVALID_ARG, "22 elements");
    ZT_OK(zinc_gather_master(e, buf, 22));
    zinc_memory_report rep;
    ZT_OK(zinc_memory_get(e, &rep));
    ZT_CHECK(rep.current_total[ZINC_MEMKIND_HOST] > 0, "memory report empty");
    ZT_CHECK(zinc_zero_stage(e) == 3 && zinc_world_size(e) == 1 && zinc_rank(e) == 0, "accessors");
    ZT_CHECK(zinc_train_batch_size(e) == 4 && zinc_grad_accum_steps(e) == 1 && zinc_micro_batch_size(e) == 4,
             "batch accessors");
    zinc_destroy(e);
    zinc_destroy(NULL);
    mlp_compute_errors();
    return zt_finish();
}
