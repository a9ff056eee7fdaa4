/* Parses a ds_config into zinc_config by walking the schema tables. Every problem is collected (one line
 * each, "FILE: PATH: what is wrong; what is allowed") so a user fixes a file in one pass, not one error at
 * a time. Resolution of derived values (batch triad, dtypes) is in config_resolve.c. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config/config_internal.h"
#include "base/config/config_schema.h"
#include "base/core/error.h"
#include "base/core/signals.h"

/* "|a|b|" lists of paths. */
static void list_add(char *list, size_t cap, const char *path) {
    size_t n = strlen(list), k = strlen(path);
    if (n == 0 && k + 2 < cap)
        snprintf(list, cap, "|%s|", path);
    else if (n && n + k + 2 < cap)
        snprintf(list + n, cap - n, "%s|", path);
}

static bool list_has(const char *list, const char *path, bool prefix) {
    size_t k = strlen(path);
    for (const char *p = strstr(list, path); p; p = strstr(p + 1, path))
        if (p > list && p[-1] == '|' && (p[k] == '|' || (prefix && (p[k] == '.' || p[k] == '[')))) return true;
    return false;
}

bool zcfg_had_problem(const zcfg_loader *L, const char *path) { return list_has(L->bad, path, true); }

void zcfg_problem(zcfg_loader *L, const char *path, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->nerr++;
    list_add(L->bad, sizeof L->bad, path);
    size_t need = strlen(L->origin) + strlen(path) + strlen(msg) + 8;
    if (L->elen + need >= L->ecap) {
        size_t cap = (L->ecap + need) * 2;
        char *p = realloc(L->err, cap);
        if (!p) return; /* keep what we have; the count still says something is wrong */
        L->err = p;
        L->ecap = cap;
    }
    L->elen += (size_t)snprintf(L->err + L->elen, L->ecap - L->elen, "%s%s: %s%s%s", L->elen ? "\n" : "", L->origin,
                                path, *path ? ": " : "", msg);
}

void zcfg_mark_given(zinc_config *c, const char *path) {
    if (zcfg_given(c, path)) return;
    size_t n = strlen(c->given), k = strlen(path);
    if (n == 0 && k + 2 < sizeof c->given) {
        snprintf(c->given, sizeof c->given, "|%s|", path);
    } else if (n + k + 2 < sizeof c->given) {
        snprintf(c->given + n, sizeof c->given - n, "%s|", path);
    }
}

bool zcfg_given(const zinc_config *c, const char *path) {
    size_t k = strlen(path);
    for (const char *p = strstr(c->given, path); p; p = strstr(p + 1, path))
        if (p > c->given && p[-1] == '|' && p[k] == '|') return true;
    return false;
}

int zcfg_shortest_digits(double x) {
    char b[40];
    for (int p = 1; p < 17; p++) {
        snprintf(b, sizeof b, "%.*g", p, x);
        if (strtod(b, NULL) == x) return p;
    }
    return 17;
}

/* A number as written by a person: the shortest text that reads back exactly. */
static void num_text(double x, char *buf, size_t n) {
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, n, "%.0f", x);
    else
        snprintf(buf, n, "%.*g", zcfg_shortest_digits(x), x);
}

/* A short rendering of a JSON value for messages (cut at a character boundary when long). */
static void show(const json_t *v, char *buf, size_t n) {
    if (json_is_real(v)) {
        num_text(json_real_value(v), buf, n);
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!s) {
        snprintf(buf, n, "(value)");
        return;
    }
    size_t len = strlen(s);
    if (len > 60) {
        size_t cut = 57;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--; /* not inside a UTF-8 sequence */
        snprintf(buf, n, "%.*s...", (int)cut, s);
    } else {
        snprintf(buf, n, "%s", s);
    }
    free(s);
}

/* What a number key allows, for messages: "0 to 3", "at least 1". */
static void range_text(const zkey_key *k, char *buf, size_t n) {
    char lo[40], hi[40];
    num_text(k->lo, lo, sizeof lo);
    num_text(k->hi, hi, sizeof hi);
    if (k->kind == ZKEY_BETAS)
        snprintf(buf, n, "%s to below 1", lo);
    else if (k->hi >= 0x1p63)
        snprintf(buf, n, "at least %s", lo);
    else
        snprintf(buf, n, "%s to %s", lo, hi);
}

/* Settings given through another spelling (an alias or a legacy key): who set them, for "keep one". */
static void via_add(zcfg_loader *L, const char *canon, const char *spelling) {
    size_t n = strlen(L->via);
    if (n + strlen(canon) + strlen(spelling) + 3 < sizeof L->via)
        snprintf(L->via + n, sizeof L->via - n, "%s=%s|", canon, spelling);
}

static const char *via_get(const zcfg_loader *L, const char *canon, char *buf, size_t n) {
    size_t k = strlen(canon);
    for (const char *p = L->via; *p;) {
        const char *bar = strchr(p, '|');
        if (!bar) break;
        if (!strncmp(p, canon, k) && p[k] == '=') {
            snprintf(buf, n, "%.*s", (int)(bar - p - (ptrdiff_t)k - 1), p + k + 1);
            return buf;
        }
        p = bar + 1;
    }
    return NULL;
}

static void join(char *out, size_t n, const char *prefix, const char *key) {
    if (*prefix)
        snprintf(out, n, "%s.%s", prefix, key);
    else
        snprintf(out, n, "%s", key);
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static void unknown_key(zcfg_loader *L, const zkey_table *t, const char *key, const char *path) {
    /* A key that exists elsewhere in the schema: say where it belongs. */
    const zkey_table *all[32];
    size_t nt = zkey_all_tables(all, 32);
    for (size_t i = 0; i < nt && i < 32; i++) {
        if (all[i] == t || !zkey_find(all[i], key)) continue;
        if (!*all[i]->path)
            zcfg_problem(L, path, "unknown key here; \"%s\" belongs at the top level", key);
        else
            zcfg_problem(L, path, "unknown key here; \"%s\" belongs inside \"%s\"", key, all[i]->path);
        return;
    }
    const char *best = NULL;
    size_t bestd = 99;
    for (size_t i = 0; i < t->nkeys; i++) {
        size_t d = edit_distance(key, t->keys[i].name);
        if (d < bestd) bestd = d, best = t->keys[i].name;
    }
    size_t len = strlen(key);
    if (best && bestd <= (len < 9 ? 2 : len / 4 + 1)) {
        zcfg_problem(L, path, "unknown key; did you mean \"%s\"?", best);
        return;
    }
    /* DeepSpeed ignores unknown top-level keys (people keep notes, launcher settings and their own options
     * there); inside its sections it forbids them, and so does zinc. */
    if (t == &zkey_top) {
        ZLOG_WARN(L->log, "%s: %s: unknown key, ignored; DeepSpeed ignores unknown top-level keys too", L->origin,
                  path);
        return;
    }
    char list[1024] = "";
    size_t n = 0;
    for (size_t i = 0; i < t->nkeys && n < sizeof list - 64; i++) {
        if (t->keys[i].kind != ZKEY_ALIAS && t->keys[i].kind != ZKEY_LEGACY && t->keys[i].kind != ZKEY_IGNORED &&
            t->keys[i].kind != ZKEY_REFUSED)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", t->keys[i].name);
    }
    zcfg_problem(L, path, "unknown key; the keys allowed %s%s%s are: %s", *t->path ? "in \"" : "at the top level",
                 t->path, *t->path ? "\"" : "", list);
}

/* Whether a refused or ignored key is switched on: true, a number above 1 (1, 0 and -1 are the "off"
 * values of the ZeRO++/MiCS sizes), a non-empty string, or an object with "enabled": true somewhere (or
 * no "enabled" at all and some content). */
static bool has_enabled(const json_t *o, bool *found) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (!strcmp(k, "enabled")) {
            *found = true;
            if (json_is_true(v)) return true;
        } else if (json_is_object(v) && has_enabled(v, found)) {
            return true;
        }
    }
    return false;
}

static bool active(const json_t *v) {
    if (json_is_true(v)) return true;
    if (json_is_number(v)) return json_number_value(v) > 1;
    /* "auto" leaves a key at DeepSpeed's default, which for these keys is off */
    if (json_is_string(v)) return json_string_length(v) > 0 && strcmp(json_string_value(v), "auto") != 0;
    if (json_is_array(v)) return json_array_size(v) > 0;
    if (json_is_object(v)) {
        bool found = false;
        if (has_enabled(v, &found)) return true;
        return !found && json_object_size(v) > 0;
    }
    return false;
}

/* "\"a\", \"b\", \"c\"", or with last = " or ": "\"a\", \"b\" or \"c\"". */
static void enum_list_sep(const char *const *names, const char *last, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; names[i] && k < n - 32; i++)
        k += (size_t)snprintf(out + k, n - k, "%s\"%s\"", !i ? "" : names[i + 1] ? ", " : last, names[i]);
}

static void enum_list(const char *const *names, char *out, size_t n) { enum_list_sep(names, ", ", out, n); }

bool zcfg_parse_dtype(const char *s, zinc_dtype *out) {
    static const struct {
        const char *name;
        zinc_dtype t;
    } tab[] = {
        {"fp32", ZINC_FP32},    {"float32", ZINC_FP32}, {"float", ZINC_FP32}, {"fp16", ZINC_FP16},
        {"float16", ZINC_FP16}, {"half", ZINC_FP16},    {"bf16", ZINC_BF16},  {"bfloat16", ZINC_BF16},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcasecmp(s, tab[i].name) || (!strncmp(s, "torch.", 6) && !strcasecmp(s + 6, tab[i].name))) {
            *out = tab[i].t;
            return true;
        }
    return false;
}

/* Reads a number into a double, or reports why not. Integers beyond 2^53 stay exact through json_integer. */
static bool number(zcfg_loader *L, const zkey_key *k, const json_t *v, const char *path, double *out) {
    char s[80], r[100];
    show(v, s, sizeof s);
    range_text(k, r, sizeof r);
    if (!json_is_number(v)) {
        zcfg_problem(L, path, "expected a number (%s), got %s", r, s);
        return false;
    }
    double x = json_number_value(v);
    if (!isfinite(x)) {
        zcfg_problem(L, path, "%s is not a finite number; allowed: %s", s, r);
        return false;
    }
    /* (double)INT64_MAX is 2^63, one past the largest int64: a float there cannot be converted */
    bool int_kind = k->kind == ZKEY_INT || k->kind == ZKEY_I64 || k->kind == ZKEY_SIZE;
    if (x < k->lo || x > k->hi || (int_kind && json_is_real(v) && x >= 0x1p63)) {
        zcfg_problem(L, path, "%s is out of range; allowed: %s", s, r);
        return false;
    }
    *out = x;
    return true;
}

static void set_scalar(zcfg_loader *L, const zkey_key *k, const json_t *v, const char *path) {
    char *base = (char *)L->c;
    char s[80];
    show(v, s, sizeof s);
    double x = 0;
    switch (k->kind) {
    case ZKEY_BOOL:
        if (!json_is_boolean(v))
            zcfg_problem(L, path, "expected true or false, got %s", s);
        else
            *(bool *)(base + k->off) = json_is_true(v);
        return;
    case ZKEY_INT:
    case ZKEY_I64:
    case ZKEY_SIZE:
        if (!number(L, k, v, path, &x)) return;
        if (json_is_real(v) && x != floor(x)) {
            if (k->kind != ZKEY_SIZE) {
                char r[100];
                range_text(k, r, sizeof r);
                zcfg_problem(L, path, "%s must be a whole number (%s)", s, r);
                return;
            }
            ZLOG_WARN(L->log, "%s: %s: %s is not a whole number; rounded to %.0f", L->origin, path, s, round(x));
            x = round(x);
        }
        if (k->kind == ZKEY_INT)
            *(int *)(base + k->off) = (int)x;
        else
            *(int64_t *)(base + k->off) = json_is_integer(v) ? (int64_t)json_integer_value(v) : (int64_t)x;
        return;
    case ZKEY_F64:
        if (number(L, k, v, path, &x)) *(double *)(base + k->off) = x;
        return;
    case ZKEY_ENUM: {
        char list[512];
        enum_list(k->names, list, sizeof list);
        if (json_is_string(v))
            for (int i = 0; k->names[i]; i++)
                if (!strcasecmp(json_string_value(v), k->names[i])) {
                    *(int *)(base + k->off) = i;
                    return;
                }
        zcfg_problem(L, path, "%s is not one of %s (case-insensitive)", s, list);
        return;
    }
    case ZKEY_DTYPE: {
        zinc_dtype t;
        if (!json_is_string(v) || !zcfg_parse_dtype(json_string_value(v), &t)) {
            zcfg_problem(L, path, "%s is not a dtype; allowed: \"fp32\", \"fp16\", \"bf16\"", s);
            return;
        }
        *(zinc_dtype *)(base + k->off) = t;
        if (k->aux_off) *(bool *)(base + k->aux_off) = true;
        return;
    }
    case ZKEY_STR:
        if (!json_is_string(v))
            zcfg_problem(L, path, "expected a string, got %s", s);
        else if (json_string_length(v) >= ZCFG_PATH_MAX)
            zcfg_problem(L, path, "the string is %zu bytes; at most %d allowed", json_string_length(v),
                         ZCFG_PATH_MAX - 1);
        else if (strlen(json_string_value(v)) != json_string_length(v))
            zcfg_problem(L, path, "the string contains a NUL character");
        else
            snprintf(base + k->off, ZCFG_PATH_MAX, "%s", json_string_value(v));
        return;
    case ZKEY_BETAS: {
        double b[2];
        if (!json_is_array(v) || json_array_size(v) != 2) {
            zcfg_problem(L, path, "expected [beta1, beta2], two numbers in [0, 1), got %s", s);
            return;
        }
        char p2[600];
        for (size_t i = 0; i < 2; i++) {
            snprintf(p2, sizeof p2, "%s[%zu]", path, i);
            if (!number(L, k, json_array_get(v, i), p2, &b[i])) return;
        }
        ((double *)(base + k->off))[0] = b[0];
        ((double *)(base + k->off))[1] = b[1];
        return;
    }
    case ZKEY_NAMES: {
        char list[512];
        enum_list(k->names, list, sizeof list);
        if (!json_is_array(v)) {
            zcfg_problem(L, path, "expected a list of op names (any of %s), got %s", list, s);
            return;
        }
        unsigned mask = 0;
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            int found = -1;
            for (int j = 0; json_is_string(item) && k->names[j]; j++)
                if (!strcmp(json_string_value(item), k->names[j])) found = j;
            if (found < 0) {
                char p2[600], sx[80];
                snprintf(p2, sizeof p2, "%s[%zu]", path, i);
                show(item, sx, sizeof sx);
                zcfg_problem(L, p2, "%s is not an op zinc issues; the valid names are %s", sx, list);
                return;
            }
            mask |= 1u << found;
        }
        *(unsigned *)(base + k->off) = mask;
        return;
    }
    default: return;
    }
}

static void walk(zcfg_loader *L, const zkey_table *t, const json_t *obj, const char *prefix);

/* The deprecated ZeRO offload flags, translated to the keys that replaced them. Setting the same thing
 * both ways is an error whichever comes first (the other order is caught in one_key through L->via). */
static void legacy(zcfg_loader *L, const zkey_key *k, const json_t *v, const char *path) {
    zinc_config *c = L->c;
    char s[80];
    if (json_is_null(v)) return;
    show(v, s, sizeof s);
    if (!json_is_boolean(v)) {
        zcfg_problem(L, path, "expected true or false, got %s (deprecated; use zero_optimization.%s)", s, k->target);
        return;
    }
    const char *targets[2] = {NULL, NULL};
    if (!strcmp(k->name, "cpu_offload")) {
        targets[0] = "zero_optimization.offload_optimizer.device";
    } else if (!strcmp(k->name, "cpu_offload_param")) {
        targets[0] = "zero_optimization.offload_param.device";
    } else {
        targets[0] = "zero_optimization.offload_optimizer.pin_memory";
        targets[1] = "zero_optimization.offload_param.pin_memory";
    }
    for (int i = 0; i < 2 && targets[i]; i++)
        if (zcfg_given(c, targets[i])) {
            zcfg_problem(L, path, "sets %s, which is also given; keep one (%s is deprecated)", targets[i], k->name);
            return;
        }
    ZLOG_WARN(L->log, "%s: %s is deprecated; use zero_optimization.%s instead", L->origin, path, k->target);
    bool on = json_is_true(v);
    if (!strcmp(k->name, "cpu_offload")) {
        if (on) c->zero.offload_optimizer.device = ZOFFLOAD_CPU;
    } else if (!strcmp(k->name, "cpu_offload_param")) {
        if (on) c->zero.offload_param.device = ZOFFLOAD_CPU;
    } else {
        c->zero.offload_optimizer.pin_memory = c->zero.offload_param.pin_memory = on;
    }
    for (int i = 0; i < 2 && targets[i]; i++) {
        zcfg_mark_given(c, targets[i]);
        via_add(L, targets[i], path);
    }
}

/* A scheduler parameter that does not belong to the scheduler's type. */
static void scheduler_param_mismatch(zcfg_loader *L, const zkey_table *t, const char *path) {
    zcfg_scheduler_type type = L->c->scheduler.type;
    if (L->sched_type_bad) return; /* the type's own problem says it all */
    if (type == ZSCHED_NONE) {
        if (!L->sched_params_reported)
            zcfg_problem(L, "scheduler.type",
                         "missing (or \"none\"), but scheduler.params is given; give one of "
                         "\"WarmupLR\", \"WarmupDecayLR\", \"WarmupCosineLR\", \"OneCycle\", \"LRRangeTest\"");
        L->sched_params_reported = true;
        return;
    }
    char list[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < t->nkeys && n < sizeof list - 64; i++)
        if ((t->keys[i].mask & (1u << type)) && t->keys[i].kind != ZKEY_IGNORED)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", t->keys[i].name);
    zcfg_problem(L, path, "not a parameter of the %s schedule; its parameters are: %s", zkey_scheduler_names[type],
                 list);
}

/* DeepSpeed's other optimizers: one message, and their parameters are not checked against Adam's. */
static bool refused_optimizer(zcfg_loader *L, const char *name, const char *path) {
    static const struct {
        const char *name, *why;
    } tab[] = {
        {"OneBitAdam", "1-bit Adam compresses the gradient communication, which zinc does not implement"},
        {"OneBitLamb", "1-bit LAMB compresses the gradient communication, which zinc does not implement"},
        {"ZeroOneAdam", "0/1 Adam compresses the gradient communication, which zinc does not implement"},
        {"MuAdam", "muP optimizers are not implemented in zinc"},
        {"MuAdamW", "muP optimizers are not implemented in zinc"},
        {"MuSGD", "muP optimizers are not implemented in zinc"},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcasecmp(name, tab[i].name)) {
            char ours[256];
            enum_list_sep(zkey_optimizer_names, " or ", ours, sizeof ours);
            zcfg_problem(L, path, "\"%s\": %s; use %s (its parameters are not checked)", name, tab[i].why, ours);
            L->optimizer_refused = true;
            return true;
        }
    return false;
}

static void one_key(zcfg_loader *L, const zkey_table *t, const char *key, const json_t *v, const char *prefix) {
    char path[512], cpath[512], other[512];
    join(path, sizeof path, prefix, *key ? key : "\"\"");
    const zkey_key *k = zkey_find(t, key);
    if (!k) {
        unknown_key(L, t, key, path);
        return;
    }
    if (k->mask && !(k->mask & (1u << L->c->scheduler.type))) {
        scheduler_param_mismatch(L, t, path);
        return;
    }
    if (k->kind == ZKEY_ALIAS) {
        const zkey_key *canon = zkey_find(t, k->target);
        join(cpath, sizeof cpath, prefix, k->target);
        if (zcfg_given(L->c, cpath)) {
            zcfg_problem(L, path, "the same setting as \"%s\", which is also given; keep one", k->target);
            return;
        }
        if (k->deprecated) ZLOG_WARN(L->log, "%s: %s is a deprecated spelling; use \"%s\"", L->origin, path, k->target);
        via_add(L, cpath, path);
        k = canon;
    } else {
        snprintf(cpath, sizeof cpath, "%s", path);
        if (zcfg_given(L->c, cpath)) {
            const char *who = via_get(L, cpath, other, sizeof other);
            zcfg_problem(L, path, "also given as \"%s\"; keep one", who ? who : "another spelling");
            return;
        }
    }
    char s[80];
    switch (k->kind) {
    case ZKEY_LEGACY: legacy(L, k, v, path); return;
    case ZKEY_IGNORED:
        if (active(v)) ZLOG_WARN(L->log, "%s: %s: %s", L->origin, path, k->status);
        return;
    case ZKEY_REFUSED:
        if (json_is_object(v) && active(v)) {
            /* name the techniques switched on (compression_training.weight_quantization, ...) */
            char on[400] = "";
            size_t n = 0;
            const char *ck;
            json_t *cv;
            json_object_foreach((json_t *)v, ck, cv) {
                bool found = false; /* only sub-sections switched on by an explicit "enabled": true */
                if (json_is_object(cv) && has_enabled(cv, &found) && n < sizeof on - 80)
                    n += (size_t)snprintf(on + n, sizeof on - n, "%s%s.%s", n ? ", " : "", path, ck);
            }
            if (n) {
                zcfg_problem(L, path,
                             "%s %s switched on, but zinc does not implement it and ignoring it would change "
                             "training: %s. Remove the key or switch it off",
                             on, strchr(on, ',') ? "are" : "is", k->status);
                return;
            }
        }
        if (!strcmp(k->name, "keep_in_fp32_modules") && json_is_null(v)) {
            zcfg_problem(L, path,
                         "null is not allowed (DeepSpeed 0.19.8 takes \"auto\" or a list of name patterns): "
                         "remove the key");
            return;
        }
        if (active(v) || (!strcmp(k->name, "max_grad_norm") && !json_is_null(v))) {
            show(v, s, sizeof s);
            zcfg_problem(L, path,
                         "%s is set, but zinc does not implement it and ignoring it would change "
                         "training: %s. Remove the key or switch it off",
                         s, k->status);
        }
        return;
    case ZKEY_OBJECT:
        if (json_is_null(v)) return;
        if (json_is_boolean(v) && !strcmp(cpath, "zero_optimization")) {
            /* DeepSpeed's deprecated form: "zero_optimization": true is stage 1 (read_zero_config_deprecated) */
            L->c->zero.stage = json_is_true(v) ? 1 : 0;
            ZLOG_WARN(L->log, "%s: zero_optimization: %s is DeepSpeed's deprecated form; use {\"stage\": %d}",
                      L->origin, json_is_true(v) ? "true" : "false", L->c->zero.stage);
            zcfg_mark_given(L->c, cpath);
            zcfg_mark_given(L->c, "zero_optimization.stage");
            return;
        }
        if (!json_is_object(v)) {
            show(v, s, sizeof s);
            zcfg_problem(L, path, "expected an object ({...}), got %s", s);
            return;
        }
        zcfg_mark_given(L->c, cpath);
        walk(L, k->sub, v, cpath);
        return;
    default: break;
    }
    if (json_is_null(v)) return; /* null: the default, as DeepSpeed's Optional fields */
    if (json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
        zcfg_mark_auto(L, cpath); /* filled after the walk (config_auto.c), when every written value is known */
        return;
    }
    if (!strcmp(cpath, "optimizer.type") && json_is_string(v) && refused_optimizer(L, json_string_value(v), path))
        return;
    int before = L->nerr;
    set_scalar(L, k, v, path);
    if (L->nerr == before)
        zcfg_mark_given(L->c, cpath);
    else if (!strcmp(cpath, "scheduler.type"))
        L->sched_type_bad = true;
}

static void walk(zcfg_loader *L, const zkey_table *t, const json_t *obj, const char *prefix) {
    const char *key;
    json_t *v;
    /* "type" first: a scheduler's parameters are checked against its type. */
    json_t *type = json_object_get(obj, "type");
    if (type && zkey_find(t, "type")) one_key(L, t, "type", type, prefix);
    json_object_foreach((json_t *)obj, key, v) {
        if (type && !strcmp(key, "type") && zkey_find(t, "type")) continue;
        if (L->optimizer_refused && !strcmp(prefix, "optimizer") && !strcmp(key, "params")) continue;
        one_key(L, t, key, v, prefix);
    }
}

void zcfg_mark_auto(zcfg_loader *L, const char *path) { list_add(L->autos, sizeof L->autos, path); }

bool zcfg_is_auto(const zcfg_loader *L, const char *path) {
    return list_has(L->autos, path, false) && !zcfg_given(L->c, path);
}

/* A key's schema entry from its canonical dotted path. */
const zkey_key *zcfg_lookup(const char *path) {
    const zkey_table *t = &zkey_top;
    char seg[128];
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof seg) return NULL;
        memcpy(seg, p, n);
        seg[n] = 0;
        const zkey_key *k = zkey_find(t, seg);
        if (!k || !dot) return k;
        if (k->kind != ZKEY_OBJECT) return NULL;
        t = k->sub;
        p = dot + 1;
    }
}

void zcfg_fill(zcfg_loader *L, const char *path, json_t *v, const char *how) {
    const zkey_key *k = zcfg_lookup(path);
    int before = L->nerr;
    if (!k) {
        json_decref(v);
        return;
    }
    if (v) {
        set_scalar(L, k, v, path);
        json_decref(v);
    }
    if (L->nerr != before) return;
    zcfg_mark_given(L->c, path);
    char shown[80];
    json_t *now = zcfg_key_json(L->c, k);
    show(now, shown, sizeof shown);
    json_decref(now);
    size_t n = strlen(L->c->filled);
    if (n + strlen(path) + strlen(how) + 3 < sizeof L->c->filled)
        snprintf(L->c->filled + n, sizeof L->c->filled - n, "%s\t%s\n", path, how);
    ZLOG_WARN(L->log, "%s: %s: \"auto\" -> %s (%s)", L->origin, path, shown, how);
}

/* hjson-style comments (DeepSpeed reads ds_configs with hjson): "//" and "#" to the end of the line and
 block comments, outside strings, become spaces so that the parser's line:column positions stay right.
 Returns the offset of an unterminated block comment, or -1. */
static ptrdiff_t strip_comments(char *s) {
    bool in_str = false;
    for (size_t i = 0; s[i]; i++) {
        if (in_str) {
            if (s[i] == '\\' && s[i + 1])
                i++;
            else if (s[i] == '"')
                in_str = false;
        } else if (s[i] == '"') {
            in_str = true;
        } else if (s[i] == '#' || (s[i] == '/' && s[i + 1] == '/')) {
            while (s[i] && s[i] != '\n') s[i++] = ' ';
            if (!s[i]) break;
        } else if (s[i] == '/' && s[i + 1] == '*') {
            size_t start = i;
            s[i] = s[i + 1] = ' ';
            for (i += 2; s[i] && !(s[i] == '*' && s[i + 1] == '/'); i++)
                if (s[i] != '\n') s[i] = ' ';
            if (!s[i]) return (ptrdiff_t)start;
            s[i] = s[i + 1] = ' ';
            i++;
        }
    }
    return -1;
}

zinc_status zcfg_load_text(const char *json, const char *origin, int world_size, const zlog *log, zinc_config *out) {
    return zcfg_load_text_ex(json, origin, world_size, NULL, log, out);
}

zinc_status zcfg_load_text_ex(const char *json, const char *origin, int world_size, const zcfg_load_opts *opts,
                              const zlog *log, zinc_config *out) {
    zinc_status st = ZINC_OK;
    zcfg_load_opts none = {0};
    zcfg_loader L = {.origin = origin ? origin : "<json text>", .log = log, .opts = opts ? opts : &none};
    zinc_config *c = NULL;
    json_t *root = NULL;
    char *text = NULL;
    zlog quiet = {0};
    if (!L.log) L.log = &quiet;
    if (!json || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zcfg_load_text: json and out must not be NULL");
    if (world_size < 1)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: world size %d; it must be at least 1", L.origin, world_size);
    TRY_ALLOC(c, 1, "the config");
    zcfg_defaults(c);
    snprintf(c->source, sizeof c->source, "%s", L.origin);
    c->world_size = world_size;
    L.c = c;

    size_t len = strlen(json);
    TRY_ALLOC(text, len + 1, "the ds_config text");
    memcpy(text, json, len + 1);
    ptrdiff_t open = strip_comments(text);
    if (open >= 0) {
        int line = 1, col = 1;
        for (ptrdiff_t i = 0; i < open; i++) {
            if (json[i] == '\n')
                line++, col = 1;
            else
                col++;
        }
        FAIL(ZINC_ERR_CONFIG, "%s:%d:%d: not valid JSON: unterminated comment (\"/*\" without \"*/\")", L.origin, line,
             col);
    }
    json_error_t je;
    root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        FAIL(ZINC_ERR_CONFIG, "%s:%d:%d: not valid JSON: %s%s", L.origin, je.line, je.column, je.text,
             strstr(je.text, "duplicate") ? " (each key may appear once per object)" : "");
    if (!json_is_object(root)) FAIL(ZINC_ERR_CONFIG, "%s: the top level must be a JSON object ({...})", L.origin);

    zcfg_apply_sets(&L, root);
    walk(&L, &zkey_top, root, "");
    zcfg_fill_autos(&L);
    zcfg_resolve(&L); /* also after problems: every problem of the file in one run */
    if (L.nerr) {
        FAIL(ZINC_ERR_CONFIG, "invalid ds_config (%d problem%s):\n%s", L.nerr, L.nerr > 1 ? "s" : "",
             L.err ? L.err : "(out of memory formatting the messages)");
    }
    *out = *c;
fail:
    json_decref(root);
    free(L.err);
    free(text);
    free(c);
    return st;
}

#define ZCFG_FILE_MAX (64l << 20)

zinc_status zcfg_load_file(const char *path, int world_size, const zlog *log, zinc_config *out) {
    return zcfg_load_file_ex(path, world_size, NULL, log, out);
}

zinc_status zcfg_load_file_ex(const char *path, int world_size, const zcfg_load_opts *opts, const zlog *log,
                              zinc_config *out) {
    zinc_status st = ZINC_OK;
    int fd = -1;
    char *text = NULL;
    struct stat sb;
    if (!path) return ZERR(ZINC_ERR_INVALID_ARG, "zcfg_load_file: path is NULL");
    /* O_NONBLOCK: a FIFO with no writer yet would block the open, where no signal could end the wait */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) FAIL(ZINC_ERR_IO, "cannot open the ds_config \"%s\": %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) FAIL(ZINC_ERR_IO, "cannot stat \"%s\": %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) FAIL(ZINC_ERR_IO, "\"%s\" is a directory, not a regular file", path);
    /* Read to the end rather than trusting the size, so pipes (/dev/stdin) work too. */
    size_t n = 0, cap = S_ISREG(sb.st_mode) && sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096;
    if (cap > (size_t)ZCFG_FILE_MAX + 1) cap = (size_t)ZCFG_FILE_MAX + 1;
    TRY_ALLOC(text, cap, "the ds_config text");
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > (size_t)ZCFG_FILE_MAX) FAIL(ZINC_ERR_CONFIG, "\"%s\" is over 64 MiB; that is no ds_config", path);
            size_t ncap = cap * 2 > (size_t)ZCFG_FILE_MAX + 1 ? (size_t)ZCFG_FILE_MAX + 1 : cap * 2;
            char *p = realloc(text, ncap);
            if (!p) FAIL(ZINC_ERR_NOMEM, "out of memory reading \"%s\" (%zu bytes)", path, ncap);
            text = p;
            cap = ncap;
        }
        if (!S_ISREG(sb.st_mode)) {
            /* a pipe or FIFO (its writer may come later) or a terminal: wait for data in slices, so that a
             * SIGTERM/SIGINT/SIGUSR1 that a program deferring them recorded (zsig_defer) ends the wait */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int ready = poll(&pfd, 1, 100);
            if (zsig_pending())
                FAIL(ZINC_ERR_IO, "reading the ds_config \"%s\": stopped by signal %d while waiting for its writer",
                     path, zsig_pending());
            if (ready <= 0) continue;
        }
        ssize_t got = read(fd, text + n, cap - 1 - n);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got < 0) FAIL(ZINC_ERR_IO, "cannot read \"%s\": %s", path, strerror(errno));
        n += (size_t)got;
        if (got == 0) break;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) FAIL(ZINC_ERR_CONFIG, "%s: contains a NUL byte; is it a JSON file?", path);
    TRY(zcfg_load_text_ex(text, path, world_size, opts, log, out));
fail:
    if (fd >= 0) close(fd);
    free(text);
    return st;
}
