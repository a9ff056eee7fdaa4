/* The model's registration (zinc_module_add, zinc_param_add) and its parameters as the model sees them
 * (zinc_param_find, _get_info, _data, _grad), with the flat element -> parameter lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int zinc_module_add(zinc_engine *e, const char *name) {
    if (!e || !name || !*name) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_add: engine and a non-empty name are required");
        return -1;
    }
    char fn[300];
    snprintf(fn, sizeof fn, "zinc_module_add(\"%s\")", name);
    if (zengine_registration_open(e, fn, "modules") != ZINC_OK) return -1;
    for (int i = 0; i < e->nmodules; i++)
        if (strcmp(e->modules[i].name, name) == 0) {
            ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_add: a module named \"%s\" already exists", name);
            return -1;
        }
    if (e->nmodules == e->cap_modules) {
        int cap = e->cap_modules ? 2 * e->cap_modules : 16;
        zmodule *m = realloc(e->modules, (size_t)cap * sizeof *m);
        if (!m) {
            ZERR(ZINC_ERR_NOMEM, "zinc_module_add: out of memory");
            return -1;
        }
        e->modules = m;
        e->cap_modules = cap;
    }
    zmodule *m = &e->modules[e->nmodules];
    memset(m, 0, sizeof *m);
    m->name = dupstr(name);
    if (!m->name) {
        ZERR(ZINC_ERR_NOMEM, "zinc_module_add: out of memory");
        return -1;
    }
    m->first_param = e->nparams;
    return e->nmodules++;
}

zinc_param *zinc_param_add(zinc_engine *e, int module, const char *name, int ndim, const int64_t *shape,
                           unsigned flags) {
    if (!e || !name || !*name || !shape) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_add: engine, name and shape are required");
        return NULL;
    }
    char fn[300];
    snprintf(fn, sizeof fn, "zinc_param_add(\"%s\")", name);
    if (zengine_registration_open(e, fn, "parameters") != ZINC_OK) return NULL;
    if (module < 0 || module >= e->nmodules) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_add(\"%s\"): module %d does not exist (%d modules added)", name, module,
             e->nmodules);
        return NULL;
    }
    if (module != e->nmodules - 1) {
        ZERR(ZINC_ERR_STATE,
             "zinc_param_add(\"%s\"): parameters must be added to the most recently added module (\"%s\"), "
             "so every module's parameters are contiguous in forward order",
             name, e->modules[e->nmodules - 1].name);
        return NULL;
    }
    if (ndim < 1 || ndim > ZINC_MAX_DIMS) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_add(\"%s\"): ndim %d is out of range 1..%d", name, ndim, ZINC_MAX_DIMS);
        return NULL;
    }
    if ((flags & ZINC_PARAM_MUON) && ndim != 2) {
        ZERR(ZINC_ERR_INVALID_ARG,
             "zinc_param_add(\"%s\"): ZINC_PARAM_MUON needs a 2-D matrix (rows, cols), the shape has %d dimensions; "
             "view a convolution's filters as (out, in * kh * kw), or leave the flag off",
             name, ndim);
        return NULL;
    }
    if (zinc_param_find(e, name)) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_add: a parameter named \"%s\" already exists", name);
        return NULL;
    }
    int64_t numel = 1;
    const int64_t max_numel = (int64_t)1 << 45;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > ((int64_t)1 << 40)) {
            ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_add(\"%s\"): shape[%d] = %lld is out of range 1..2^40", name, i,
                 (long long)shape[i]);
            return NULL;
        }
        /* checked before multiplying: a product past int64 would wrap to a small, wrong count */
        if (numel > max_numel / shape[i]) {
            ZERR(ZINC_ERR_INVALID_ARG,
                 "zinc_param_add(\"%s\"): the shape's product exceeds 2^45 elements at dimension %d (%lld x %lld); "
                 "a parameter holds at most 2^45 elements",
                 name, i, (long long)numel, (long long)shape[i]);
            return NULL;
        }
        numel *= shape[i];
    }
    if (e->nparams == e->cap_params) {
        int cap = e->cap_params ? 2 * e->cap_params : 64;
        zinc_param **p = realloc(e->params, (size_t)cap * sizeof *p);
        if (!p) {
            ZERR(ZINC_ERR_NOMEM, "zinc_param_add: out of memory");
            return NULL;
        }
        e->params = p;
        e->cap_params = cap;
    }
    zinc_param *p = calloc(1, sizeof *p);
    if (!p || !(p->name = dupstr(name))) {
        free(p);
        ZERR(ZINC_ERR_NOMEM, "zinc_param_add: out of memory");
        return NULL;
    }
    p->e = e;
    p->module = module;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->numel = numel;
    p->flags = flags;
    p->index = e->nparams;
    p->flat_offset = -1;
    e->params[e->nparams++] = p;
    e->modules[module].nparams++;
    return p;
}

zinc_param *zinc_param_find(zinc_engine *e, const char *name) {
    if (!e || !name) return NULL;
    for (int i = 0; i < e->nparams; i++)
        if (strcmp(e->params[i]->name, name) == 0) return e->params[i];
    return NULL;
}

zinc_status zinc_param_get_info(const zinc_param *p, zinc_param_info *out) {
    if (!p || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->name = p->name;
    out->module = p->module;
    out->ndim = p->ndim;
    memcpy(out->shape, p->shape, sizeof out->shape);
    out->numel = p->numel;
    out->flat_offset = p->flat_offset;
    out->flags = p->flags;
    out->index = p->index;
    return ZINC_OK;
}

zinc_param *zengine_param_at(const zinc_engine *e, int64_t x) {
    int lo = 0, hi = e->nparams - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        zinc_param *p = e->params[mid];
        if (x < p->flat_offset)
            hi = mid - 1;
        else if (x >= p->flat_offset + p->numel)
            lo = mid + 1;
        else
            return p;
    }
    return NULL;
}

const void *zinc_param_data(const zinc_param *p) {
    if (!p) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_data: NULL parameter");
        return NULL;
    }
    const zinc_engine *e = p->e;
    char fn[300];
    snprintf(fn, sizeof fn, "zinc_param_data(\"%s\")", p->name);
    if (zengine_require_built(e, fn) != ZINC_OK) return NULL;
    const zmodule *m = &e->modules[p->module];
    if (!m->in_phase[0] && !m->in_phase[1]) {
        /* Refused at every stage, not only where stage 3 has released the parameters, so a model that
         * works at one stage works at all of them. */
        ZERR(ZINC_ERR_STATE,
             "zinc_param_data(\"%s\"): parameters are readable only between zinc_module_enter and "
             "zinc_module_exit of their module (\"%s\"), at every ZeRO stage (stage 3 frees them on exit); enter "
             "the module again where the parameter is used a second time (a tied weight), or read the fp32 "
             "master weights with zinc_gather_master",
             p->name, m->name);
        return NULL;
    }
    size_t csz = zinc_dtype_size(e->compute_dtype);
    if (e->stage <= 2) return (const char *)e->params_full + (size_t)p->flat_offset * csz;
    return (const char *)zgather_module_data(&e->gather, p->module) + (size_t)(p->flat_offset - m->flat_begin) * csz;
}

void *zinc_param_grad(const zinc_param *p) {
    if (!p) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_param_grad: NULL parameter");
        return NULL;
    }
    if (!p->grad)
        ZERR(ZINC_ERR_STATE,
             "zinc_param_grad(\"%s\"): gradients exist only between zinc_module_enter and zinc_module_exit of "
             "the module's backward",
             p->name);
    return p->grad;
}
