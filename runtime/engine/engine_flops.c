/* The model's FLOPs declarations (zinc_module_flops, zinc_model_flops): kept per module and for the model,
 * read back by the zinc program (FLOP/s, MFU) and written into the trace's otherData (per-module FLOP/s in
 * zinc trace summary). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"

/* Larger than any model's FLOPs per sample: a bigger value is a units mistake, not a model. */
#define FLOPS_MAX 1e30

static zinc_status check_count(const char *fn, const char *what, double v) {
    if (isfinite(v) && v >= 0 && v <= FLOPS_MAX) return ZINC_OK;
    return ZERR(ZINC_ERR_INVALID_ARG, "%s: %s %g is not a FLOP count: give a finite number in 0..1e30", fn, what, v);
}

static zinc_status check_module(const zinc_engine *e, const char *fn, int module) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: NULL engine", fn);
    if (module < 0 || module >= e->nmodules)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: module %d does not exist (%d modules added)", fn, module, e->nmodules);
    return ZINC_OK;
}

zinc_status zinc_module_flops(zinc_engine *e, int module, double forward_per_sample, double backward_per_sample) {
    zinc_status st = check_module(e, "zinc_module_flops", module);
    if (st == ZINC_OK) st = check_count("zinc_module_flops", "forward_per_sample", forward_per_sample);
    if (st == ZINC_OK) st = check_count("zinc_module_flops", "backward_per_sample", backward_per_sample);
    if (st != ZINC_OK) return st;
    e->modules[module].flops_fwd = forward_per_sample;
    e->modules[module].flops_bwd = backward_per_sample;
    return ZINC_OK;
}

zinc_status zinc_module_flops_get(const zinc_engine *e, int module, double *forward_per_sample,
                                  double *backward_per_sample) {
    zinc_status st = check_module(e, "zinc_module_flops_get", module);
    if (st != ZINC_OK) return st;
    if (!forward_per_sample || !backward_per_sample)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_flops_get: NULL output");
    *forward_per_sample = e->modules[module].flops_fwd;
    *backward_per_sample = e->modules[module].flops_bwd;
    return ZINC_OK;
}

zinc_status zinc_model_flops(zinc_engine *e, double flops_per_sample) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_model_flops: NULL engine");
    zinc_status st = check_count("zinc_model_flops", "flops_per_sample", flops_per_sample);
    if (st != ZINC_OK) return st;
    e->model_flops = flops_per_sample;
    return ZINC_OK;
}

double zinc_flops_per_sample(const zinc_engine *e) {
    if (!e) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_flops_per_sample: NULL engine");
        return -1.0;
    }
    if (e->model_flops > 0) return e->model_flops;
    double sum = 0;
    for (int i = 0; i < e->nmodules; i++) sum += e->modules[i].flops_fwd + e->modules[i].flops_bwd;
    return sum;
}

zinc_status zengine_flops_trace_json(const zinc_engine *e, char **out) {
    *out = NULL;
    double total = zinc_flops_per_sample(e);
    json_t *o = json_object(), *mods = json_object();
    if (!o || !mods) goto nomem;
    for (int i = 0; i < e->nmodules; i++) {
        const zmodule *m = &e->modules[i];
        if (m->flops_fwd > 0 || m->flops_bwd > 0)
            json_object_set_new(mods, m->name, json_pack("[f, f]", m->flops_fwd, m->flops_bwd));
    }
    if (total > 0) json_object_set_new(o, "flops_per_sample", json_real(total));
    if (json_object_size(mods)) json_object_set(o, "module_flops", mods);
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER);
    if (!text) goto nomem;
    /* "{...}" -> ",..." (nothing when empty), to follow the other members */
    size_t n = strlen(text);
    if (n <= 2) {
        text[0] = 0;
    } else {
        text[0] = ',';
        text[n - 1] = 0;
    }
    *out = text;
    json_decref(o);
    json_decref(mods);
    return ZINC_OK;
nomem:
    json_decref(o);
    json_decref(mods);
    return ZERR(ZINC_ERR_NOMEM, "out of memory for the model's FLOPs in the trace");
}
