/* The resolved config as JSON, generated from the schema tables so every implemented key appears with
 * its effective value; "_defaults" lists the keys the file did not write. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config_internal.h"
#include "base/config/config_schema.h"

json_t *zcfg_key_json(const zinc_config *c, const zkey_key *k) {
    const char *base = (const char *)c;
    switch (k->kind) {
    case ZKEY_BOOL: return json_boolean(*(const bool *)(base + k->off));
    case ZKEY_INT: return json_integer(*(const int *)(base + k->off));
    case ZKEY_I64:
    case ZKEY_SIZE: return json_integer((json_int_t) * (const int64_t *)(base + k->off));
    case ZKEY_F64: return json_real(*(const double *)(base + k->off));
    case ZKEY_ENUM: return json_string(k->names[*(const int *)(base + k->off)]);
    case ZKEY_DTYPE: return json_string(zinc_dtype_name(*(const zinc_dtype *)(base + k->off)));
    case ZKEY_STR: return json_string(base + k->off);
    case ZKEY_BETAS: {
        const double *b = (const double *)(base + k->off);
        return json_pack("[ff]", b[0], b[1]);
    }
    case ZKEY_NAMES: {
        unsigned mask = *(const unsigned *)(base + k->off);
        json_t *a = json_array();
        for (int i = 0; a && k->names[i]; i++)
            if (mask & (1u << i)) json_array_append_new(a, json_string(k->names[i]));
        return a;
    }
    default: return NULL;
    }
}

static void dump_table(const zinc_config *c, const zkey_table *t, json_t *out, json_t *defaults) {
    char path[512];
    for (size_t i = 0; i < t->nkeys; i++) {
        const zkey_key *k = &t->keys[i];
        if (k->mask && !(k->mask & (1u << c->scheduler.type))) continue;
        if (*t->path)
            snprintf(path, sizeof path, "%s.%s", t->path, k->name);
        else
            snprintf(path, sizeof path, "%s", k->name);
        if (k->kind == ZKEY_OBJECT) {
            if (!strcmp(path, "scheduler.params") && c->scheduler.type == ZSCHED_NONE) continue;
            json_t *sub = json_object();
            dump_table(c, k->sub, sub, defaults);
            json_object_set_new(out, k->name, sub);
            continue;
        }
        if (!strcmp(t->path, "optimizer.params") && !zkey_optimizer_takes(c->optimizer.type, k)) continue;
        json_t *v = zcfg_key_json(c, k);
        if (!v) continue;
        json_object_set_new(out, k->name, v);
        if (!zcfg_given(c, path)) json_array_append_new(defaults, json_string(path));
    }
}

/* The digits the dump needs so that every real reads back exactly: the most any one value needs, so
 * 0.001 prints as 0.001 rather than 0.0010000000000000000208. */
static int digits_needed(const zinc_config *c, const zkey_table *t, int most) {
    for (size_t i = 0; i < t->nkeys; i++) {
        const zkey_key *k = &t->keys[i];
        const double *d = (const double *)((const char *)c + k->off);
        if (k->kind == ZKEY_OBJECT)
            most = digits_needed(c, k->sub, most);
        else if (k->kind == ZKEY_F64 || k->kind == ZKEY_BETAS)
            for (int j = 0; j < (k->kind == ZKEY_BETAS ? 2 : 1); j++) {
                int p = zcfg_shortest_digits(d[j]);
                if (p > most) most = p;
            }
    }
    return most;
}

char *zcfg_dump_json(const zinc_config *c) {
    json_t *root = json_object(), *defaults = json_array();
    if (!root || !defaults) {
        json_decref(root);
        json_decref(defaults);
        return NULL;
    }
    json_object_set_new(root, "_source", json_string(c->source));
    json_object_set_new(root, "_world_size", json_integer(c->world_size));
    json_object_set_new(root, "_compute_dtype", json_string(zinc_dtype_name(c->compute_dtype)));
    dump_table(c, &zkey_top, root, defaults);
    json_object_set_new(root, "_defaults", defaults);
    /* "_filled": each "auto" filled at load time and how its value was chosen */
    json_t *filled = json_object();
    for (const char *p = c->filled; filled && *p;) {
        const char *tab = strchr(p, '\t'), *nl = tab ? strchr(tab, '\n') : NULL;
        if (!nl) break;
        char key[512], how[1024];
        snprintf(key, sizeof key, "%.*s", (int)(tab - p), p);
        snprintf(how, sizeof how, "%.*s", (int)(nl - tab - 1), tab + 1);
        json_object_set_new(filled, key, json_string(how));
        p = nl + 1;
    }
    if (filled) json_object_set_new(root, "_filled", filled);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(digits_needed(c, &zkey_top, 1)));
    json_decref(root);
    return s;
}
