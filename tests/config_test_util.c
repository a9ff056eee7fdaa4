/* The ds_config loader tests' helpers (config_test.h). */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_test.h"
#include "zt.h"

logcap cap = {.echo = ZINC_LOG_OFF};
zinc_config cfg;

zinc_status load_w(const char *json, int world) {
    cap.n = 0;
    zlog l = {zt_logcap_fn, &cap, ZINC_LOG_DEBUG, 0};
    zinc_config tmp;
    memset(&tmp, 0xA5, sizeof tmp); /* poison: a failed load must not write out */
    zinc_status st = zcfg_load_text(json, "t.json", world, &l, &tmp);
    if (st == ZINC_OK) {
        cfg = tmp;
    } else {
        unsigned char poison[sizeof tmp];
        memset(poison, 0xA5, sizeof poison);
        if (memcmp(&tmp, poison, sizeof tmp))
            zt_fail_at(__FILE__, __LINE__, "a failed load wrote its output: %.200s", json);
    }
    return st;
}
zinc_status load(const char *json) { return load_w(json, 1); }

/* Log lines at exactly `lv` containing every non-NULL needle. */
int logged(zinc_log_level lv, const char *a, const char *b) {
    int k = 0;
    for (int i = 0; i < cap.n; i++)
        if (cap.level[i] == lv && (!a || strstr(cap.msg[i], a)) && (!b || strstr(cap.msg[i], b))) k++;
    return k;
}
int nwarn(void) { return logged(ZINC_LOG_WARN, NULL, NULL); }

void dump_log(void) {
    for (int i = 0; i < cap.n; i++) fprintf(stderr, "  log[%d] %d: %s\n", i, cap.level[i], cap.msg[i]);
}

/* Checks the last error contains every needle (NULL-terminated list). */
void check_msg(const char *file, int line, zinc_status st, zinc_status want, const char *const *needles) {
    const char *m = zinc_last_error();
    if (st != want) {
        zt_fail_at(file, line, "got %s, wanted %s: %s", zinc_status_name(st), zinc_status_name(want), m);
        return;
    }
    for (int i = 0; needles[i]; i++)
        if (!strstr(m, needles[i])) {
            zt_fail_at(file, line, "message lacks \"%s\": %s", needles[i], m);
            return;
        }
    zt_passed++;
}

/* Sets `path` (dotted) in `root` to `v` (stolen), creating objects on the way. */
void jset(json_t *root, const char *path, json_t *v) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *o = root;
    char *seg = buf;
    for (char *dot; (dot = strchr(seg, '.')); seg = dot + 1) {
        *dot = 0;
        json_t *next = json_object_get(o, seg);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(o, seg, next);
        }
        o = next;
    }
    json_object_set_new(o, seg, v);
}

json_t *jparse(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) {
        fprintf(stderr, "test bug: cannot parse %s: %s\n", text, e.text);
        abort();
    }
    return v;
}

/* {"train_batch_size": 8} + ctx (merged) + path = value (value NULL: key absent). malloc'd text. */
char *build(const char *ctx, const char *path, const char *value) {
    json_t *root = jparse("{\"train_batch_size\": 8}");
    if (ctx) {
        json_t *c = jparse(ctx);
        json_object_update_recursive(root, c);
        json_decref(c);
    }
    if (path && value) jset(root, path, jparse(value));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* The schema key at a canonical dotted path. */
const zkey_key *schema_key(const char *path, const zkey_table **tab) {
    const zkey_table *all[64];
    size_t n = zkey_all_tables(all, 64);
    const char *dot = strrchr(path, '.');
    char prefix[512] = "";
    if (dot) snprintf(prefix, sizeof prefix, "%.*s", (int)(dot - path), path);
    const char *name = dot ? dot + 1 : path;
    for (size_t i = 0; i < n && i < 64; i++)
        if (!strcmp(all[i]->path, prefix)) {
            if (tab) *tab = all[i];
            return zkey_find(all[i], name);
        }
    return NULL;
}

/* The value of key k in c, as JSON (independent of config_dump.c). */
json_t *field_json(const zinc_config *c, const zkey_key *k) {
    const char *b = (const char *)c + k->off;
    switch (k->kind) {
    case ZKEY_BOOL: return json_boolean(*(const bool *)b);
    case ZKEY_INT: return json_integer(*(const int *)b);
    case ZKEY_I64:
    case ZKEY_SIZE: return json_integer((json_int_t) * (const int64_t *)b);
    case ZKEY_F64: return json_real(*(const double *)b);
    case ZKEY_ENUM: return json_string(k->names[*(const int *)b]);
    case ZKEY_DTYPE: return json_string(zinc_dtype_name(*(const zinc_dtype *)b));
    case ZKEY_STR: return json_string(b);
    case ZKEY_BETAS: return json_pack("[ff]", ((const double *)b)[0], ((const double *)b)[1]);
    case ZKEY_NAMES: {
        json_t *a = json_array();
        for (int i = 0; k->names[i]; i++)
            if (*(const unsigned *)b & (1u << i)) json_array_append_new(a, json_string(k->names[i]));
        return a;
    }
    default: return NULL;
    }
}

/* Whether the field equals the expected JSON text (numbers compared exactly, enum names case-insensitively). */
bool field_is(const zinc_config *c, const zkey_key *k, const char *want_text, char *got_out, size_t n) {
    json_t *got = field_json(c, k), *want = jparse(want_text);
    char *gs = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(got_out, n, "%s", gs ? gs : "?");
    free(gs);
    bool eq;
    if (json_is_number(got) && json_is_number(want)) {
        if (json_is_integer(got) && json_is_integer(want))
            eq = json_integer_value(got) == json_integer_value(want);
        else
            eq = json_number_value(got) == json_number_value(want);
    } else if (json_is_string(got) && json_is_string(want)) {
        eq = !strcasecmp(json_string_value(got), json_string_value(want));
    } else if (k->kind == ZKEY_BETAS && json_is_array(got) && json_is_array(want) && json_array_size(want) == 2) {
        eq = json_number_value(json_array_get(got, 0)) == json_number_value(json_array_get(want, 0)) &&
             json_number_value(json_array_get(got, 1)) == json_number_value(json_array_get(want, 1));
    } else {
        eq = json_equal(got, want);
    }
    json_decref(got);
    json_decref(want);
    return eq;
}
