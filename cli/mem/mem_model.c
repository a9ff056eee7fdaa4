/* zinc mem: the model description (--params, --gpt2, --shapes) as modules and parameter shapes. */
#include <errno.h>
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem/mem_cli.h"
#include "cli/train/train_gpt2.h"
#include "base/core/safe_file.h"

void mc_model_free(mmodel *m) {
    free(m->p);
    for (int i = 0; i < m->nmodules; i++) free(m->modules[i]);
    free(m->modules);
    memset(m, 0, sizeof *m);
}

static int model_module(mmodel *m, const char *name) {
    if (m->nmodules && !strcmp(m->modules[m->nmodules - 1], name)) return m->nmodules - 1;
    for (int i = 0; i < m->nmodules; i++)
        if (!strcmp(m->modules[i], name)) return -2; /* seen before, not the last: not contiguous */
    if (m->nmodules == m->mcap) {
        m->mcap = m->mcap ? 2 * m->mcap : 64;
        char **nm = realloc(m->modules, (size_t)m->mcap * sizeof *nm);
        if (!nm) return -1;
        m->modules = nm;
    }
    m->modules[m->nmodules] = strdup(name);
    return m->modules[m->nmodules] ? m->nmodules++ : -1;
}

static int model_add(mmodel *m, const char *module, const char *name, int ndim, const int64_t *shape) {
    int mod = model_module(m, module);
    if (mod == -2) {
        fprintf(stderr,
                "zinc mem: module \"%s\" appears again after other modules; a module's parameters must be "
                "listed together\n",
                module);
        return -1;
    }
    if (mod < 0 || ndim < 1 || ndim > ZINC_MAX_DIMS) return -1;
    /* Untrusted numbers (a --shapes file): each tensor and the model at most 2^45 elements, checked before
     * any product or sum can overflow. */
    const int64_t lim = (int64_t)1 << 45;
    int64_t numel = 1, total = mc_model_total(m);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > lim / numel) {
            fprintf(stderr,
                    "zinc mem: parameter \"%s\": its shape has more than 2^45 elements (or a dimension below "
                    "1)\n",
                    name);
            return -1;
        }
        numel *= shape[i];
    }
    if (numel > lim - total) {
        fprintf(stderr, "zinc mem: parameter \"%s\": the model would have more than 2^45 elements\n", name);
        return -1;
    }
    if (m->n >= (1 << 24)) {
        fprintf(stderr, "zinc mem: more than 2^24 parameters\n");
        return -1;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        mparam *np = realloc(m->p, (size_t)m->cap * sizeof *np);
        if (!np) return -1;
        m->p = np;
    }
    mparam *p = &m->p[m->n++];
    memset(p, 0, sizeof *p);
    p->module = mod;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= shape[i];
    }
    return 0;
}

int64_t mc_model_total(const mmodel *m) {
    int64_t t = 0;
    for (int i = 0; i < m->n; i++) t += m->p[i].numel;
    return t;
}

/* N parameters in modules of at most L elements (one 1-D tensor each). */
static int model_params(mmodel *m, int64_t n, int64_t l) {
    if (n / l > 200000) {
        fprintf(stderr,
                "zinc mem: --params %" PRId64 " with --largest-layer %" PRId64 " makes more than 200000 "
                "modules; give a larger --largest-layer\n",
                n, l);
        return -1;
    }
    int i = 0;
    for (int64_t left = n; left > 0; left -= l, i++) {
        char mod[32], name[48];
        snprintf(mod, sizeof mod, "layer%d", i);
        snprintf(name, sizeof name, "layer%d.weight", i);
        int64_t sz = left < l ? left : l;
        if (model_add(m, mod, name, 1, &sz)) return -1;
    }
    m->params_only = true;
    snprintf(m->desc, sizeof m->desc, "%" PRId64 " parameters in %d modules of at most %" PRId64, n, i, l);
    return 0;
}

/* A GPT-2-style transformer as Hugging Face's GPT2Model holds it (the model DeepSpeed users estimate): wte,
 * wpe (two modules), one module per block, ln_f; the LM head is tied to wte; the vocabulary unpadded. Not zinc
 * train's example (one embed module, wte padded): `zinc mem estimate --model gpt2` asks that one's adapter
 * (cli/train/train_gpt2_memory.c). Its vocabulary and context defaults are train_gpt2.h's. */
static int model_gpt2(mmodel *m, int64_t layers, int64_t w, int64_t vocab, int64_t ctx, const char *preset) {
    char mod[32], name[96];
    if (model_add(m, "wte", "wte.weight", 2, (int64_t[]){vocab, w}) ||
        model_add(m, "wpe", "wpe.weight", 2, (int64_t[]){ctx, w}))
        return -1;
    static const char *names[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                                  "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                                  "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    int64_t shapes[12][2] = {{w, 0}, {w, 0}, {w, 3 * w}, {3 * w, 0}, {w, w},     {w, 0},
                             {w, 0}, {w, 0}, {w, 4 * w}, {4 * w, 0}, {4 * w, w}, {w, 0}};
    for (int64_t l = 0; l < layers; l++) {
        snprintf(mod, sizeof mod, "h.%" PRId64, l);
        for (int k = 0; k < 12; k++) {
            snprintf(name, sizeof name, "h.%" PRId64 ".%s", l, names[k]);
            if (model_add(m, mod, name, shapes[k][1] ? 2 : 1, shapes[k])) return -1;
        }
    }
    if (model_add(m, "ln_f", "ln_f.weight", 1, &w) || model_add(m, "ln_f", "ln_f.bias", 1, &w)) return -1;
    snprintf(m->desc, sizeof m->desc,
             "GPT-2%s%s (%" PRId64 " layers, width %" PRId64 ", vocabulary %" PRId64 ", context %" PRId64
             ", tied LM head)",
             preset ? " " : "", preset ? preset : "", layers, w, vocab, ctx);
    return 0;
}

/* One parameter per line: MODULE NAME DIM [DIM...] (dims may also be written 768x2304); '#' comments. */
static int model_shapes(mmodel *m, const char *path) {
    FILE *f = NULL;
    if (zfile_fopen_input("zinc mem: --shapes", path, &f) != ZINC_OK) {
        fprintf(stderr, "%s\n", zinc_last_error());
        return -1;
    }
    char line[4096];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h) *h = 0;
        char *tok[ZINC_MAX_DIMS + 8];
        int nt = 0;
        for (char *s = strtok(line, " \t\r\nx,:[]()"); s && nt < ZINC_MAX_DIMS + 8; s = strtok(NULL, " \t\r\nx,:[]()"))
            tok[nt++] = s;
        if (nt == 0) continue;
        int64_t shape[ZINC_MAX_DIMS];
        int nd = nt - 2;
        bool ok = nt >= 3 && nd <= ZINC_MAX_DIMS;
        for (int i = 0; ok && i < nd; i++) {
            char *end;
            errno = 0;
            long long v = strtoll(tok[2 + i], &end, 10);
            ok = *end == 0 && v >= 1 && errno == 0;
            shape[i] = v;
        }
        if (!ok || model_add(m, tok[0], tok[1], nd, shape)) {
            fprintf(stderr, "%s:%d: expected \"MODULE NAME DIM [DIM...]\" with 1 to %d positive dimensions\n", path, ln,
                    ZINC_MAX_DIMS);
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (!rc && m->n == 0) {
        fprintf(stderr, "zinc mem: %s lists no parameters\n", path);
        rc = -1;
    }
    snprintf(m->desc, sizeof m->desc, "shapes from %s", path);
    return rc;
}

int mc_model_arrays(const mmodel *m, int64_t **numel, int **module) {
    *numel = malloc((size_t)m->n * sizeof **numel);
    *module = malloc((size_t)m->n * sizeof **module);
    if (!*numel || !*module) return -1;
    for (int i = 0; i < m->n; i++) {
        (*numel)[i] = m->p[i].numel;
        (*module)[i] = m->p[i].module;
    }
    return 0;
}

int mc_build_model(const mopts *o, mmodel *m) {
    int given = (o->params > 0) + (o->preset || o->layers > 0) + (o->shapes != NULL);
    if (given != 1) {
        fprintf(stderr, "zinc mem: give exactly one model: --params N, --gpt2 PRESET (or --layers/--width), or "
                        "--shapes FILE\n");
        return -1;
    }
    if (o->params > 0) {
        int64_t l = o->largest > 0 ? o->largest : (o->params + MC_PARAMS_MODULES - 1) / MC_PARAMS_MODULES;
        if (l > o->params) l = o->params;
        return model_params(m, o->params, l);
    }
    if (o->shapes) return model_shapes(m, o->shapes);
    static const struct {
        const char *name;
        int64_t layers, width;
    } presets[] = {{"small", 12, 768}, {"medium", 24, 1024}, {"large", 36, 1280}, {"xl", 48, 1600}};
    int64_t layers = o->layers, width = o->width;
    if (o->preset) {
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(o->preset, presets[i].name)) k = i;
        if (k < 0) {
            fprintf(stderr, "zinc mem: --gpt2 takes small, medium, large or xl, got \"%s\"\n", o->preset);
            return -1;
        }
        layers = presets[k].layers;
        width = presets[k].width;
    } else if (width <= 0) {
        fprintf(stderr, "zinc mem: --layers needs --width\n");
        return -1;
    }
    int64_t vocab = o->vocab > 0 ? o->vocab : ZCLI_GPT2_VOCAB,
            ctx = o->context > 0 ? o->context : ZCLI_GPT2_MAX_CONTEXT;
    return model_gpt2(m, layers, width, vocab, ctx, o->preset);
}
