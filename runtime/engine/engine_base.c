/* The engine's floor: the helpers every runtime/engine file may call (allocation on the compute device, the
 * engine's state checks, the micro-step bookkeeping). They call no other engine file
 * (scripts/check_engine_graph.py, the ctest engine_graph). */
#include <stdio.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

zinc_mem_kind zengine_compute_kind(const zinc_engine *e) { return e->dev->mem_kind; }

zinc_status zengine_alloc(zinc_engine *e, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return e->dev->ops->alloc(e->dev, cat, bytes, what, out);
}

void zengine_free(zinc_engine *e, zinc_mem_category cat, void *p, size_t bytes) {
    if (p) e->dev->ops->free(e->dev, cat, p, bytes);
}

bool zengine_state_on_device(const zinc_engine *e) { return e->dev->host_addressable || e->state->device_resident; }

zinc_status zengine_build_failed_error(const zinc_engine *e, const char *fn) {
    return ZERR(ZINC_ERR_STATE,
                "%s: zinc_build failed (%s): a failed build leaves the engine only for zinc_destroy; create a new "
                "engine and register the model again",
                fn, e->build_failed);
}

zinc_status zengine_require_built(const zinc_engine *e, const char *fn) {
    if (e->build_failed[0]) return zengine_build_failed_error(e, fn);
    if (!e->built) return ZERR(ZINC_ERR_STATE, "%s: call zinc_build first", fn);
    return ZINC_OK;
}

zinc_status zengine_registration_open(const zinc_engine *e, const char *fn, const char *what) {
    if (e->build_failed[0]) return zengine_build_failed_error(e, fn);
    if (e->built) return ZERR(ZINC_ERR_STATE, "%s: %s must be added before zinc_build", fn, what);
    return ZINC_OK;
}

void zengine_micro_steps_reset(zinc_engine *e) {
    e->micro_steps = 0;
    e->in_backward_pass = false;
    e->last_phase = -1;
}

void zengine_mark_broken(zinc_engine *e, const char *what) {
    if (e->broken[0]) return;
    const char *msg = zinc_last_error();
    size_t n = strcspn(msg, "\n");
    snprintf(e->broken, sizeof e->broken, "%s failed part-way (%.*s)", what, (int)(n < 400 ? n : 400), msg);
}

zinc_status zengine_check_usable(const zinc_engine *e, const char *fn) {
    if (e->build_failed[0]) return zengine_build_failed_error(e, fn);
    if (!e->broken[0]) return ZINC_OK;
    return ZERR(ZINC_ERR_STATE,
                "%s: %s. The optimizer state may be partly updated, so this engine refuses to go on: load a "
                "checkpoint (zinc_load_checkpoint, zinc train --resume) or create a new engine",
                fn, e->broken);
}

double zengine_clip_factor(const zinc_engine *e, double norm) {
    double c = e->cfg.gradient_clipping > 0 ? (norm + 1e-6) / e->cfg.gradient_clipping : 1.0;
    return c > 1.0 ? c : 1.0; /* DeepSpeed's combined unscale-and-clip */
}
