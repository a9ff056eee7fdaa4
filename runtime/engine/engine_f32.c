/* fp32 views for models that compute in fp32 while the engine keeps bf16/fp16 parameters and gradients:
 * whole-tensor conversions through the device's vectorised casts, instead of one zinc_load_f32 /
 * zinc_add_f32 call per element. */
#include <math.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "kernels/cpu_kernels.h"

/* Elements converted per pass through the device scratch when the device is not host-addressable. */
enum { F32_CHUNK = 1 << 20, F32_TILE = 4096 };

zinc_status zinc_param_to_f32(const zinc_param *p, float *out) {
    if (!p || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_to_f32: NULL argument");
    const void *src = zinc_param_data(p);
    if (!src) return ZINC_ERR_STATE; /* zinc_param_data said why */
    zinc_engine *e = p->e;
    return e->dev->ops->cast_to_f32(e->dev, out, src, e->compute_dtype, (size_t)p->numel);
}

/* The device scratch for conversions on a device the host cannot address (allocated once, 4 MiB). */
static zinc_status scratch(zinc_engine *e, float **out) {
    zinc_status st = ZINC_OK;
    if (!e->f32_scratch)
        TRY(zengine_alloc(e, ZINC_MEM_STAGING, (size_t)F32_CHUNK * sizeof(float),
                          "the fp32 gradient conversion scratch (zinc_grad_add_f32)", (void **)&e->f32_scratch));
    *out = e->f32_scratch;
    return ZINC_OK;
fail:
    return st;
}

/* g x factor x the loss scale into the gradient: the factor and the scale multiplied in double, rounded to
 * float once (exact for a power-of-two scale), then the same axpy as the unscaled add (factor 1: its bits). */
static zinc_status grad_add(zinc_param *p, const float *g, float factor, const char *fn) {
    zinc_status st = ZINC_OK;
    if (!p || !g) return ZERR(ZINC_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (!isfinite(factor)) return ZERR(ZINC_ERR_INVALID_ARG, "%s: factor %g is not finite", fn, (double)factor);
    void *dst = zinc_param_grad(p);
    if (!dst) return ZINC_ERR_STATE; /* zinc_param_grad said why */
    zinc_engine *e = p->e;
    zdevice *d = e->dev;
    float scale = (float)((double)factor * e->scaler.cur_scale);
    size_t n = (size_t)p->numel, gs = zinc_dtype_size(e->grad_dtype);
    if (e->grad_dtype == ZINC_FP32) return d->ops->axpy_f32(d, dst, g, ZINC_FP32, scale, n, 1);
    if (d->host_addressable) { /* widen a tile, add, round once: the bits of a fused kernel */
        float tile[F32_TILE];
        for (size_t i = 0; i < n; i += F32_TILE) {
            size_t k = n - i < F32_TILE ? n - i : F32_TILE;
            char *x = (char *)dst + i * gs;
            zcast_to_f32(tile, x, e->grad_dtype, k);
            zaxpy_f32(tile, g + i, ZINC_FP32, scale, k, 1);
            zcast_from_f32(x, e->grad_dtype, tile, k);
        }
        return ZINC_OK;
    }
    float *tmp;
    TRY(scratch(e, &tmp));
    for (size_t i = 0; i < n; i += F32_CHUNK) {
        size_t k = n - i < F32_CHUNK ? n - i : F32_CHUNK;
        char *x = (char *)dst + i * gs;
        TRY(d->ops->cast_to_f32(d, tmp, x, e->grad_dtype, k));
        TRY(d->ops->axpy_f32(d, tmp, g + i, ZINC_FP32, scale, k, 1));
        TRY(d->ops->cast_from_f32(d, x, e->grad_dtype, tmp, k));
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zinc_grad_add_f32(zinc_param *p, const float *g) { return grad_add(p, g, 1.0f, "zinc_grad_add_f32"); }

zinc_status zinc_grad_add_scaled_f32(zinc_param *p, const float *g, float factor) {
    return grad_add(p, g, factor, "zinc_grad_add_scaled_f32");
}

void zengine_f32_free(zinc_engine *e) {
    zengine_free(e, ZINC_MEM_STAGING, e->f32_scratch, (size_t)F32_CHUNK * sizeof(float));
    e->f32_scratch = NULL;
}

/* ---------------------------------------------------------------- whole modules, unpadded */

/* The module's parameters are contiguous in registration order (zinc_param_add), so the unpadded module
 * layout is each parameter's numel floats back to back: the layout of zinc_gather_master, one module. */
static zinc_status module_params(zinc_engine *e, int module, const char *fn, int *first, int *count) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: engine is NULL", fn);
    zinc_status built = zengine_require_built(e, fn);
    if (built != ZINC_OK) return built;
    if (module < 0 || module >= e->nmodules)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: module %d does not exist (%d modules)", fn, module, e->nmodules);
    *first = e->modules[module].first_param;
    *count = e->modules[module].nparams;
    return ZINC_OK;
}

int64_t zinc_module_numel(const zinc_engine *e, int module) {
    if (!e || module < 0 || module >= e->nmodules) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_numel: %s", !e ? "engine is NULL" : "no such module");
        return -1;
    }
    int64_t n = 0;
    for (int i = 0; i < e->modules[module].nparams; i++) n += e->params[e->modules[module].first_param + i]->numel;
    return n;
}

zinc_status zinc_module_to_f32(zinc_engine *e, int module, float *out) {
    zinc_status st = ZINC_OK;
    int first, count;
    TRY(module_params(e, module, "zinc_module_to_f32", &first, &count));
    if (!out && count > 0) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_to_f32: out is NULL");
    for (int i = 0; i < count; i++) {
        const zinc_param *p = e->params[first + i];
        TRY(zinc_param_to_f32(p, out));
        out += p->numel;
    }
fail:
    return st;
}

static zinc_status module_grad_add(zinc_engine *e, int module, const float *g, float factor, const char *fn) {
    zinc_status st = ZINC_OK;
    int first, count;
    TRY(module_params(e, module, fn, &first, &count));
    if (!g && count > 0) return ZERR(ZINC_ERR_INVALID_ARG, "%s: g is NULL", fn);
    for (int i = 0; i < count; i++) {
        zinc_param *p = e->params[first + i];
        TRY(grad_add(p, g, factor, fn));
        g += p->numel;
    }
fail:
    return st;
}

zinc_status zinc_module_grad_add_f32(zinc_engine *e, int module, const float *g) {
    return module_grad_add(e, module, g, 1.0f, "zinc_module_grad_add_f32");
}

zinc_status zinc_module_grad_add_scaled_f32(zinc_engine *e, int module, const float *g, float factor) {
    return module_grad_add(e, module, g, factor, "zinc_module_grad_add_scaled_f32");
}
