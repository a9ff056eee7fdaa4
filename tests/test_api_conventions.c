/* The public header's conventions (include/zinc.h, "Conventions of this header"), through the public API
 * only: zinc_options.struct_size (refused when 0 or larger than the library knows; a smaller, older struct
 * reads only its own fields), every accessor's answer to a NULL engine with its message, ZINC_MAX_DIMS,
 * and the reserved space of the structs the library fills coming back zeroed. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zinc.h"
#include "zt.h"

static const char *CONFIG = "{\"train_batch_size\": 2, \"train_micro_batch_size_per_gpu\": 2,"
                            " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";

static zinc_options quiet_options(void) {
    zinc_options o = zinc_default_options();
    o.config_json = CONFIG;
    o.log_level = ZINC_LOG_OFF;
    o.cpu_threads = 1;
    return o;
}

static zinc_status init_ones(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u, (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = 1.0f;
    return ZINC_OK;
}

static void struct_size_rules(void) {
    zinc_engine *e = NULL;
    zinc_options o = quiet_options();
    ZT_CHECK(o.struct_size == sizeof(zinc_options), "zinc_default_options sets struct_size");

    o.struct_size = 0;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "zinc_default_options()");
    ZT_CHECK(e == NULL, "no engine on error");

    o.struct_size = sizeof(zinc_options) + 8;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_UNSUPPORTED, "newer zinc.h");

    o.struct_size = 4;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "smaller than any zinc_options");

    /* A caller built against a header that ended before config_overrides: the bytes past its struct are
     * not its fields and must not be read. Here they hold an override that would make the config invalid. */
    const char *bad[] = {"train_batch_size=banana", NULL};
    o = quiet_options();
    o.config_overrides = bad;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_CONFIG, "train_batch_size");
    o.struct_size = offsetof(zinc_options, config_overrides);
    ZT_OK(zinc_create(&o, &e));
    ZT_CHECK(e && zinc_train_batch_size(e) == 2, "older struct: defaults for the fields it lacks");
    zinc_destroy(e);
}

static void null_accessors(void) {
    const zinc_engine *n = NULL;
#define NULL_GIVES(call, want)                                                                             \
    do {                                                                                                   \
        ZT_CHECK((call) == (want), "%s on NULL", #call);                                                   \
        ZT_CHECK(strstr(zinc_last_error(), "NULL engine") != NULL, "%s message: %s", #call, zinc_last_error()); \
    } while (0)
    NULL_GIVES(zinc_rank(n), -1);
    NULL_GIVES(zinc_world_size(n), -1);
    NULL_GIVES(zinc_zero_stage(n), -1);
    NULL_GIVES(zinc_micro_batch_size(n), -1);
    NULL_GIVES(zinc_grad_accum_steps(n), -1);
    NULL_GIVES(zinc_train_batch_size(n), -1);
    NULL_GIVES(zinc_steps_per_print(n), -1);
    NULL_GIVES(zinc_device_host_addressable(n), -1);
    NULL_GIVES(zinc_numel_total(n), -1);
    NULL_GIVES(zinc_step_count(n), -1);
    NULL_GIVES(zinc_loss_scale(n), 0.0f);
    NULL_GIVES(zinc_stream(n), NULL);
    NULL_GIVES(zinc_device(n), ZINC_DEVICE_AUTO);
    NULL_GIVES(zinc_compute_dtype(n), ZINC_FP32);
    NULL_GIVES(zinc_grad_dtype(n), ZINC_FP32);
    NULL_GIVES(zinc_flops_per_sample(n), -1.0);
#undef NULL_GIVES
    zinc_destroy(NULL);
    zinc_log(NULL, ZINC_LOG_ERROR, "nothing happens");
    zinc_memory_report r;
    ZT_ERR(zinc_memory_get(NULL, &r), ZINC_ERR_INVALID_ARG, "NULL");
    ZT_ERR(zinc_param_get_info(NULL, NULL), ZINC_ERR_INVALID_ARG, "NULL");
    ZT_CHECK(zinc_param_find(NULL, "x") == NULL, "zinc_param_find on NULL");
    ZT_CHECK(zinc_module_add(NULL, "m") == -1, "zinc_module_add on NULL");
}

static void dims_and_reserved(void) {
    zinc_engine *e = NULL;
    zinc_options o = quiet_options();
    ZT_OK(zinc_create(&o, &e));
    int m = zinc_module_add(e, "m");
    int64_t shape[ZINC_MAX_DIMS + 1];
    for (int i = 0; i <= ZINC_MAX_DIMS; i++) shape[i] = 1;
    shape[0] = 3;
    ZT_CHECK(zinc_param_add(e, m, "too_many", ZINC_MAX_DIMS + 1, shape, ZINC_PARAM_DECAY) == NULL,
             "ZINC_MAX_DIMS + 1 dimensions refused");
    ZT_CHECK(strstr(zinc_last_error(), "out of range") != NULL, "message: %s", zinc_last_error());
    zinc_param *p = zinc_param_add(e, m, "most", ZINC_MAX_DIMS, shape, ZINC_PARAM_DECAY);
    ZT_CHECK(p != NULL, "ZINC_MAX_DIMS dimensions accepted: %s", zinc_last_error());
    ZT_OK(zinc_build(e, init_ones, NULL));

    zinc_param_info info;
    memset(&info, 0xab, sizeof info);
    ZT_OK(zinc_param_get_info(p, &info));
    ZT_CHECK(info.ndim == ZINC_MAX_DIMS && info.shape[ZINC_MAX_DIMS - 1] == 1 && info.numel == 3, "info");
    for (size_t i = 0; i < sizeof info.reserved / sizeof info.reserved[0]; i++)
        ZT_CHECK(info.reserved[i] == 0, "zinc_param_info.reserved[%zu] zeroed", i);

    ZT_OK(zinc_module_enter(e, m, ZINC_FORWARD));
    ZT_OK(zinc_module_exit(e, m, ZINC_FORWARD));
    ZT_OK(zinc_module_enter(e, m, ZINC_BACKWARD));
    ZT_OK(zinc_module_exit(e, m, ZINC_BACKWARD));
    zinc_step_info si;
    memset(&si, 0xab, sizeof si);
    ZT_OK(zinc_step(e, &si));
    for (size_t i = 0; i < sizeof si.reserved / sizeof si.reserved[0]; i++)
        ZT_CHECK(si.reserved[i] == 0, "zinc_step_info.reserved[%zu] zeroed", i);

    zinc_memory_report r;
    memset(&r, 0xab, sizeof r);
    ZT_OK(zinc_memory_get(e, &r));
    for (size_t i = 0; i < sizeof r.reserved / sizeof r.reserved[0]; i++)
        ZT_CHECK(r.reserved[i] == 0, "zinc_memory_report.reserved[%zu] zeroed", i);
    zinc_destroy(e);
}

int main(void) {
    struct_size_rules();
    null_accessors();
    dims_and_reserved();
    zinc_finalize();
    return zt_finish();
}
