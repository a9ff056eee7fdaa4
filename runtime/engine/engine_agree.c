/* Ranks agree before they train (issue 18): at zinc_build every rank hashes what must be the same on all
 * of them — the resolved config (one item per key, so the message can name it), the registered model
 * (parameter names, shapes, flags, modules), the device and seed, and the caller's own items
 * (zinc_agree_add: steps, save and resume choices, ...) — and one all-gather compares them. A difference
 * is the same error on every rank, naming the first differing item and the ranks that differ from rank 0,
 * instead of a job whose ranks wait in different collectives forever. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

#define AGREE_MAX 512 /* items compared; config keys beyond it are folded into one */

typedef struct zagree_rec {
    char name[56];
    char shown[32]; /* a printable form of short values, for the message */
    uint64_t hash;
} zagree_rec;

typedef struct zagree_list {
    int32_t n;
    int32_t pad;
    zagree_rec it[AGREE_MAX];
} zagree_list;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

static void show(char *out, size_t cap, const void *data, size_t n) {
    const unsigned char *b = data;
    bool text = n > 0;
    for (size_t i = 0; i < n && text; i++) text = isprint(b[i]) || (i == n - 1 && b[i] == 0);
    if (text)
        snprintf(out, cap, "\"%.*s\"", (int)(n && !b[n - 1] ? n - 1 : n), (const char *)b);
    else if (n == 8) {
        int64_t v;
        memcpy(&v, data, 8);
        snprintf(out, cap, "%" PRId64, v);
    } else if (n == 4) {
        int32_t v;
        memcpy(&v, data, 4);
        snprintf(out, cap, "%" PRId32, v);
    } else
        snprintf(out, cap, "(%zu bytes)", n);
}

static void add(zagree_list *l, const char *name, const void *data, size_t n, const char *shown) {
    zagree_rec *r;
    if (l->n < AGREE_MAX - 1)
        r = &l->it[l->n++];
    else { /* fold the rest into the last item */
        r = &l->it[AGREE_MAX - 1];
        if (l->n == AGREE_MAX - 1) {
            memset(r, 0, sizeof *r);
            snprintf(r->name, sizeof r->name, "(further items)");
            r->hash = FNV0;
            l->n = AGREE_MAX;
        }
        r->hash = fnv(fnv(r->hash, name, strlen(name) + 1), data, n);
        return;
    }
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->hash = fnv(FNV0, data, n);
    if (shown)
        snprintf(r->shown, sizeof r->shown, "%s", shown);
    else
        show(r->shown, sizeof r->shown, data, n);
}

zinc_status zinc_agree_add(zinc_engine *e, const char *name, const void *data, size_t n) {
    if (!e || !name || !*name || (!data && n))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_agree_add: engine, name and data are required");
    if (e->built) return ZERR(ZINC_ERR_STATE, "zinc_agree_add(\"%s\"): call it before zinc_build", name);
    if (strlen(name) > 48)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_agree_add: name \"%.48s...\" is longer than 48", name);
    if (e->agree_n == e->agree_cap) {
        int cap = e->agree_cap ? 2 * e->agree_cap : 16;
        if (cap > 256) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_agree_add: more than 256 items");
        void *p = realloc(e->agree_items, (size_t)cap * sizeof(zagree_rec));
        if (!p) return ZERR(ZINC_ERR_NOMEM, "zinc_agree_add: out of memory");
        e->agree_items = p;
        e->agree_cap = cap;
    }
    zagree_rec *r = &((zagree_rec *)e->agree_items)[e->agree_n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->hash = fnv(FNV0, data, n);
    show(r->shown, sizeof r->shown, data, n);
    return ZINC_OK;
}

void zengine_agree_free(zinc_engine *e) {
    free(e->agree_items);
    e->agree_items = NULL;
    e->agree_n = e->agree_cap = 0;
}

/* Keys whose values may differ per node on purpose: NVMe paths (each node its own disk). */
static bool per_node(const char *key) { return strstr(key, "nvme_path") != NULL; }

static void add_json(zagree_list *l, const char *name, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s) return;
    char shown[32];
    size_t n = strlen(s);
    snprintf(shown, sizeof shown, "%.*s%s", n < 32 ? (int)n : 24, s, n < 32 ? "" : "...");
    add(l, name, s, n, shown);
    free(s);
}

static zinc_status build_list(const zinc_engine *e, zagree_list *l) {
    memset(l, 0, sizeof *l);
    char *cfg = zcfg_dump_json(&e->cfg);
    json_t *root = cfg ? json_loads(cfg, 0, NULL) : NULL;
    free(cfg);
    if (!root) return ZERR(ZINC_ERR_NOMEM, "zinc_build: out of memory describing the config for the rank agreement");
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!strcmp(k, "_defaults") || !strcmp(k, "_source")) continue; /* where it came from may differ */
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) {
                char name[128];
                snprintf(name, sizeof name, "config %s.%s", k, k2);
                if (json_is_object(v2)) {
                    const char *k3;
                    json_t *v3;
                    json_object_foreach(v2, k3, v3) {
                        char n3[192];
                        snprintf(n3, sizeof n3, "config %s.%s.%s", k, k2, k3);
                        if (!per_node(n3)) add_json(l, n3, v3);
                    }
                } else if (!per_node(name))
                    add_json(l, name, v2);
            }
        } else {
            char name[128];
            snprintf(name, sizeof name, "config %s", k);
            add_json(l, name, v);
        }
    }
    json_decref(root);
    uint64_t h = FNV0;
    for (int i = 0; i < e->nparams; i++) {
        const zinc_param *p = e->params[i];
        h = fnv(h, p->name, strlen(p->name) + 1);
        h = fnv(h, &p->ndim, sizeof p->ndim);
        h = fnv(h, p->shape, (size_t)p->ndim * sizeof p->shape[0]);
        h = fnv(h, &p->flags, sizeof p->flags);
        h = fnv(h, &p->module, sizeof p->module);
    }
    char shown[32];
    snprintf(shown, sizeof shown, "%d tensors", e->nparams);
    add(l, "model parameters (names, shapes, order)", &h, sizeof h, shown);
    add(l, "device", e->dev->ops->name, strlen(e->dev->ops->name), NULL);
    add(l, "seed (zinc_options.seed)", &e->seed, sizeof e->seed, NULL);
    int32_t nf = (int32_t)e->nonfinite;
    add(l, "zinc_options.nonfinite", &nf, sizeof nf, NULL);
    const zagree_rec *u = e->agree_items;
    for (int i = 0; i < e->agree_n; i++) {
        if (l->n >= AGREE_MAX) break;
        l->it[l->n++] = u[i];
    }
    return ZINC_OK;
}

static const zagree_rec *find(const zagree_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->it[i].name, name)) return &l->it[i];
    return NULL;
}

zinc_status zengine_agree(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    zagree_list *mine = NULL, *all = NULL;
    if (e->world == 1) return ZINC_OK;
    TRY_ALLOC(mine, 1, "the rank agreement");
    TRY(build_list(e, mine));
    all = malloc((size_t)e->world * sizeof *all);
    if (!all) FAIL(ZINC_ERR_NOMEM, "out of memory for the rank agreement");
    TRY(zcomm_allgather_bytes(e->comm, mine, all, sizeof *mine));
    /* The first of rank 0's items (then of any rank's) that some rank lacks or has otherwise. */
    const zagree_list *r0 = &all[0];
    for (int pass = 0; pass < 2; pass++) {
        for (int src = 0; src < (pass ? e->world : 1); src++) {
            for (int i = 0; i < all[src].n; i++) {
                const zagree_rec *a = &all[src].it[i];
                char ranks[256] = "";
                size_t k = 0;
                int ndiff = 0;
                const zagree_rec *other = NULL;
                for (int r = 0; r < e->world; r++) {
                    const zagree_rec *b = find(&all[r], a->name);
                    if (b && b->hash == a->hash) continue;
                    if (!other) other = b;
                    if (ndiff++ < 16 && k < sizeof ranks - 16)
                        k += (size_t)snprintf(ranks + k, sizeof ranks - k, "%s%d", ndiff > 1 ? ", " : "", r);
                }
                if (!ndiff) continue;
                if (ndiff > 16) snprintf(ranks + k, sizeof ranks - k, " and %d more", ndiff - 16);
                FAIL(ZINC_ERR_CONFIG,
                     "the ranks were started with different settings: %s is %s on rank %d but %s on rank%s %s; "
                     "every rank must get the same config, model and command line (this check runs in zinc_build)",
                     a->name, a->shown[0] ? a->shown : "(set)", src,
                     other ? (other->shown[0] ? other->shown : "other") : "missing", ndiff > 1 ? "s" : "", ranks);
            }
        }
    }
    (void)r0;
fail:
    free(mine);
    free(all);
    return st;
}
