/* Bound tensors: a model whose layers own their weight and gradient arrays (darknet's l.weights,
 * l.weight_updates) binds them once, and three whole-model calls replace the per-tensor enter / copy / exit
 * loops of every step. Each call is exactly the documented per-tensor sequence (zinc.h), so a bound model
 * trains bit for bit as the hand-written loop does; the binding only remembers the arrays. */
#include <math.h>

#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"

zinc_status zinc_param_bind_f32(zinc_param *p, float *weights, const float *grad, float grad_factor) {
    if (!p) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_bind_f32: parameter is NULL");
    if (!weights && grad)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_param_bind_f32: \"%s\": a gradient array without a weights array; bind both, or "
                    "both NULL to unbind",
                    p->name);
    if (!isfinite(grad_factor))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_bind_f32: \"%s\": grad_factor %g is not finite", p->name,
                    (double)grad_factor);
    p->bound_w = weights;
    p->bound_g = grad;
    p->bound_factor = grad_factor;
    return ZINC_OK;
}

/* The bound calls walk every module in and out, so none may be open, and the engine must be built. */
static zinc_status check_bound_call(zinc_engine *e, const char *fn) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: engine is NULL", fn);
    zinc_status st = zengine_require_built(e, fn);
    if (st != ZINC_OK) return st;
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[ZINC_FORWARD] || e->modules[m].in_phase[ZINC_BACKWARD])
            return ZERR(ZINC_ERR_STATE,
                        "%s: module \"%s\" is still entered: exit every module first (the call enters and exits "
                        "each module with bound tensors itself)",
                        fn, e->modules[m].name);
    return ZINC_OK;
}

static bool module_bound(const zinc_engine *e, int m, bool need_grad) {
    for (int i = 0; i < e->modules[m].nparams; i++) {
        const zinc_param *p = e->params[e->modules[m].first_param + i];
        if (p->bound_w && (!need_grad || p->bound_g)) return true;
    }
    return false;
}

zinc_status zinc_bound_set_master(zinc_engine *e) {
    zinc_status st = check_bound_call(e, "zinc_bound_set_master");
    if (st != ZINC_OK) return st;
    for (int i = 0; i < e->nparams; i++)
        if (e->params[i]->bound_w) TRY(zinc_param_set_master(e, e->params[i], e->params[i]->bound_w));
fail:
    return st;
}

zinc_status zinc_bound_to_f32(zinc_engine *e) {
    zinc_status st = check_bound_call(e, "zinc_bound_to_f32");
    if (st != ZINC_OK) return st;
    int open = -1; /* a module this call entered: exited on failure too, so the engine stays usable */
    for (int m = 0; m < e->nmodules; m++) {
        if (!module_bound(e, m, false)) continue;
        TRY(zinc_module_enter(e, m, ZINC_FORWARD));
        open = m;
        for (int i = 0; i < e->modules[m].nparams; i++) {
            const zinc_param *p = e->params[e->modules[m].first_param + i];
            if (p->bound_w) TRY(zinc_param_to_f32(p, p->bound_w));
        }
        open = -1;
        TRY(zinc_module_exit(e, m, ZINC_FORWARD));
    }
fail:
    if (open >= 0) (void)zinc_module_exit(e, open, ZINC_FORWARD);
    return st;
}

zinc_status zinc_bound_grad_add_f32(zinc_engine *e) {
    zinc_status st = check_bound_call(e, "zinc_bound_grad_add_f32");
    if (st != ZINC_OK) return st;
    int open = -1;
    for (int m = e->nmodules - 1; m >= 0; m--) { /* backward order: the last module's gradients first */
        if (!module_bound(e, m, true)) continue;
        TRY(zinc_module_enter(e, m, ZINC_BACKWARD));
        open = m;
        for (int i = 0; i < e->modules[m].nparams; i++) {
            zinc_param *p = e->params[e->modules[m].first_param + i];
            if (p->bound_g) TRY(zinc_grad_add_scaled_f32(p, p->bound_g, p->bound_factor));
        }
        open = -1;
        TRY(zinc_module_exit(e, m, ZINC_BACKWARD));
    }
fail:
    if (open >= 0) (void)zinc_module_exit(e, open, ZINC_BACKWARD);
    return st;
}
