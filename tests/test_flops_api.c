/* The FLOPs declarations (include/zinc.h, "FLOPs"), through the public API: per module and for the model,
 * kept and read back, the model's total as the modules' sum unless set, replaced when set again, and every
 * bad argument (NULL engine, unknown module, negative, NaN, infinite, absurdly large) refused with a message
 * naming the call and the value, leaving the earlier declaration in place. White-box: the members the trace
 * writer appends to otherData (zengine_flops_trace_json) parse as JSON and hold the declarations. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "zinc.h"
#include "zt.h"

static const char *CONFIG = "{\"train_batch_size\": 2, \"train_micro_batch_size_per_gpu\": 2,"
                            " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";

static zinc_status init_ones(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u, (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = 1.0f;
    return ZINC_OK;
}

int main(void) {
    zinc_options o = zinc_default_options();
    o.config_json = CONFIG;
    o.log_level = ZINC_LOG_OFF;
    o.cpu_threads = 1;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    char *none;
    ZT_OK(zengine_flops_trace_json(e, &none));
    ZT_CHECK(none && !none[0], "nothing declared: no members");
    free(none);
    int a = zinc_module_add(e, "a"), b = zinc_module_add(e, "b");
    ZT_CHECK(zinc_param_add(e, b, "b.w", 1, (int64_t[]){4}, ZINC_PARAM_DECAY) != NULL, "param");
    ZT_CHECK(zinc_flops_per_sample(e) == 0, "nothing declared: 0");

    /* before zinc_build */
    ZT_OK(zinc_module_flops(e, a, 100, 200));
    ZT_OK(zinc_build(e, init_ones, NULL));
    /* and after */
    ZT_OK(zinc_module_flops(e, b, 1e12, 2.5e12));
    double f, g;
    ZT_OK(zinc_module_flops_get(e, a, &f, &g));
    ZT_CHECK(f == 100 && g == 200, "a: %g %g", f, g);
    ZT_OK(zinc_module_flops_get(e, b, &f, &g));
    ZT_CHECK(f == 1e12 && g == 2.5e12, "b: %g %g", f, g);
    ZT_CHECK(zinc_flops_per_sample(e) == 100 + 200 + 1e12 + 2.5e12, "sum: %.17g", zinc_flops_per_sample(e));

    ZT_OK(zinc_module_flops(e, a, 7, 0)); /* replaced */
    ZT_CHECK(zinc_flops_per_sample(e) == 7 + 1e12 + 2.5e12, "replaced: %.17g", zinc_flops_per_sample(e));
    ZT_OK(zinc_model_flops(e, 42));
    ZT_CHECK(zinc_flops_per_sample(e) == 42, "the model's own total wins: %g", zinc_flops_per_sample(e));
    ZT_OK(zinc_model_flops(e, 0));
    ZT_CHECK(zinc_flops_per_sample(e) == 7 + 1e12 + 2.5e12, "0 clears it: %g", zinc_flops_per_sample(e));

    ZT_ERR(zinc_module_flops(e, 2, 1, 1), ZINC_ERR_INVALID_ARG, "module 2 does not exist (2 modules added)");
    ZT_ERR(zinc_module_flops(e, -1, 1, 1), ZINC_ERR_INVALID_ARG, "module -1 does not exist");
    ZT_ERR(zinc_module_flops(e, a, -1, 1), ZINC_ERR_INVALID_ARG, "forward_per_sample -1 is not a FLOP count");
    ZT_ERR(zinc_module_flops(e, a, 1, NAN), ZINC_ERR_INVALID_ARG, "backward_per_sample nan");
    ZT_ERR(zinc_module_flops(e, a, INFINITY, 1), ZINC_ERR_INVALID_ARG, "forward_per_sample inf");
    ZT_ERR(zinc_module_flops(e, a, 1e31, 1), ZINC_ERR_INVALID_ARG, "0..1e30");
    ZT_ERR(zinc_model_flops(e, -5), ZINC_ERR_INVALID_ARG, "zinc_model_flops: flops_per_sample -5");
    ZT_ERR(zinc_module_flops_get(e, a, NULL, &g), ZINC_ERR_INVALID_ARG, "NULL output");
    ZT_ERR(zinc_module_flops_get(e, 9, &f, &g), ZINC_ERR_INVALID_ARG, "module 9 does not exist");
    ZT_OK(zinc_module_flops_get(e, a, &f, &g));
    ZT_CHECK(f == 7 && g == 0, "refused calls leave the declaration: %g %g", f, g);

    char *text;
    ZT_OK(zengine_flops_trace_json(e, &text));
    char doc[1024];
    snprintf(doc, sizeof doc, "{\"format\":\"x\"%s}", text);
    json_t *j = json_loads(doc, 0, NULL);
    ZT_CHECK(j != NULL, "otherData members parse: %s", doc);
    ZT_CHECK(json_number_value(json_object_get(j, "flops_per_sample")) == 7 + 1e12 + 2.5e12, "flops_per_sample: %s",
             doc);
    json_t *mb = json_object_get(json_object_get(j, "module_flops"), "b");
    ZT_CHECK(json_number_value(json_array_get(mb, 0)) == 1e12 && json_number_value(json_array_get(mb, 1)) == 2.5e12,
             "module_flops.b: %s", doc);
    json_decref(j);
    free(text);

    ZT_ERR(zinc_module_flops(NULL, 0, 1, 1), ZINC_ERR_INVALID_ARG, "NULL engine");
    ZT_ERR(zinc_model_flops(NULL, 1), ZINC_ERR_INVALID_ARG, "NULL engine");
    ZT_CHECK(zinc_flops_per_sample(NULL) == -1.0, "NULL engine: -1");
    ZT_CHECK(strstr(zinc_last_error(), "zinc_flops_per_sample: NULL engine") != NULL, "message: %s", zinc_last_error());
    zinc_destroy(e);
    return zt_finish();
}
