/* --set PATH=VALUE: overrides applied to the parsed ds_config before it is validated, so an override is
 * checked exactly as the file's own value would be (its key, type and range). A dotted path names nested
 * keys; missing objects on the way are created. The value is JSON; a bare word that is not JSON (AdamW,
 * cpu) is taken as a string so shells need no extra quoting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config_internal.h"
#include "base/config/config_schema.h"

/* A short rendering of a JSON value for the log. */
static void render(const json_t *v, char *buf, size_t n) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!s) {
        snprintf(buf, n, "(value)");
        return;
    }
    if (strlen(s) > 80)
        snprintf(buf, n, "%.77s...", s);
    else
        snprintf(buf, n, "%s", s);
    free(s);
}

/* An override names a key zinc knows: a typo on the command line is an error, not a silently ignored key.
 * Below a key zinc ignores or refuses as a whole (tensorboard, amp), the rest of the path is not checked. */
static bool known_path(zcfg_loader *L, const char *what, const char *path) {
    const zkey_table *t = &zkey_top;
    char seg[512], at[512] = "";
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        snprintf(seg, sizeof seg, "%.*s", dot ? (int)(dot - p) : (int)strlen(p), p);
        const zkey_key *k = zkey_find(t, seg);
        if (k && k->kind == ZKEY_ALIAS) k = zkey_find(t, k->target);
        if (!k) {
            zcfg_problem(L, what,
                         "\"%s\" is not a key zinc knows %s%s%s; see zinc config check's output for the "
                         "keys and their paths",
                         seg, *at ? "inside \"" : "at the top level", at, *at ? "\"" : "");
            return false;
        }
        if (!dot || k->kind == ZKEY_IGNORED || k->kind == ZKEY_REFUSED) return true;
        if (k->kind != ZKEY_OBJECT) {
            zcfg_problem(L, what, "\"%s\" is a value, not a section: it has no key \"%s\"", seg, dot + 1);
            return false;
        }
        t = k->sub;
        snprintf(at, sizeof at, "%s", t->path);
        p = dot + 1;
    }
}

static void apply_one(zcfg_loader *L, json_t *root, const char *arg) {
    char what[600];
    snprintf(what, sizeof what, "--set %.500s", arg);
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        zcfg_problem(L, what,
                     "expected PATH=VALUE: a dotted key path and a JSON value, for example "
                     "--set train_micro_batch_size_per_gpu=4 or --set optimizer.params.betas=[0.9,0.95]");
        return;
    }
    size_t plen = (size_t)(eq - arg);
    char path[512];
    if (plen >= sizeof path) {
        zcfg_problem(L, what, "the key path is %zu characters; at most %zu allowed", plen, sizeof path - 1);
        return;
    }
    memcpy(path, arg, plen);
    path[plen] = 0;
    if (path[0] == '.' || path[plen - 1] == '.' || strstr(path, "..")) {
        zcfg_problem(L, what, "\"%s\" has an empty part; write keys separated by single dots", path);
        return;
    }
    if (!known_path(L, what, path)) return;
    const char *text = eq + 1;
    json_error_t je;
    json_t *v = *text ? json_loads(text, JSON_DECODE_ANY, &je) : NULL;
    if (!v) {
        /* Something that starts like JSON but does not parse is a typo, not a word. */
        if (!*text || strchr("[{\"", text[0])) {
            zcfg_problem(L, what,
                         "the value is not valid JSON%s%s; write a number, true/false, null, a string, "
                         "[...] or {...}",
                         *text ? ": " : " (it is empty)", *text ? je.text : "");
            return;
        }
        v = json_string(text);
        if (!v) {
            zcfg_problem(L, what, "the value is not valid UTF-8 text");
            return;
        }
    }
    json_t *o = root;
    char seg[512], walked[1100] = "";
    const char *p = path;
    for (const char *dot; (dot = strchr(p, '.')); p = dot + 1) {
        snprintf(seg, sizeof seg, "%.*s", (int)(dot - p), p);
        size_t wl = strlen(walked);
        snprintf(walked + wl, sizeof walked - wl, "%s%s", wl ? "." : "", seg);
        json_t *next = json_object_get(o, seg);
        if (!next) {
            next = json_object();
            json_object_set_new(o, seg, next);
        } else if (!json_is_object(next)) {
            char old[100];
            render(next, old, sizeof old);
            zcfg_problem(L, what, "%s is %s in the config, not an object ({...}), so it has no key \"%s\"", walked, old,
                         dot + 1);
            json_decref(v);
            return;
        }
        o = next;
    }
    char nv[100], old[100];
    snprintf(nv, sizeof nv, "%.96s", text); /* as the user wrote it */
    json_t *prev = json_object_get(o, p);
    if (!prev) {
        ZLOG_INFO(L->log, "%s: %s = %s (--set; the file does not have this key)", L->origin, path, nv);
    } else if (json_is_string(prev) && !strcmp(json_string_value(prev), "auto")) {
        ZLOG_INFO(L->log, "%s: %s = %s (--set fills its \"auto\")", L->origin, path, nv);
    } else {
        render(prev, old, sizeof old);
        ZLOG_INFO(L->log, "%s: %s = %s (--set overrides the file's %s)", L->origin, path, nv, old);
    }
    json_object_set_new(o, p, v);
}

void zcfg_apply_sets(zcfg_loader *L, json_t *root) {
    if (!L->opts->sets) return;
    for (size_t i = 0; L->opts->sets[i]; i++) apply_one(L, root, L->opts->sets[i]);
}
