/* See trace_load.h. */
#include "cli/trace_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/safe_file.h"

static const char *const CAT_NAMES[ZCLI_TC_COUNT] = {"forward",   "backward", "recompute", "comm",       "wait",
                                                     "optimizer", "nvme",     "copy",      "checkpoint", "data",
                                                     "engine",    "gpu",      "pool",      "other",      "step"};

const char *zcli_tcat_name(int cat) { return cat >= 0 && cat < ZCLI_TC_COUNT ? CAT_NAMES[cat] : "?"; }

static int cat_of(const char *s) {
    for (int i = 0; i < ZCLI_TC_COUNT; i++)
        if (i != ZCLI_TC_OTHER && !strcmp(s, CAT_NAMES[i])) return i;
    return ZCLI_TC_OTHER;
}

#define FAIL_WHY(...)                                                                                                  \
    do {                                                                                                               \
        snprintf(why, cap, __VA_ARGS__);                                                                               \
        return -1;                                                                                                     \
    } while (0)

static int track_index(zcli_trace *t, int pid, int tid) {
    for (int i = 0; i < t->ntracks; i++)
        if (t->tracks[i].pid == pid && t->tracks[i].tid == tid) return i;
    zcli_ttrack *nt = realloc(t->tracks, (size_t)(t->ntracks + 1) * sizeof *nt);
    if (!nt) return -1;
    t->tracks = nt;
    nt[t->ntracks] = (zcli_ttrack){.pid = pid, .tid = tid};
    snprintf(nt[t->ntracks].name, sizeof nt[0].name, "tid %d", tid);
    return t->ntracks++;
}

static int cmp_track(const void *a, const void *b) {
    const zcli_ttrack *x = a, *y = b;
    return x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid) : (x->tid > y->tid) - (x->tid < y->tid);
}

static int cmp_span(const void *a, const void *b) {
    const zcli_tspan *x = a, *y = b;
    if (x->track != y->track) return (x->track > y->track) - (x->track < y->track);
    if (x->ts != y->ts) return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->dur < y->dur) - (x->dur > y->dur); /* the parent (longer) first */
}

/* "the 12th event (\"name\")": how a message names an event. */
static void event_name(char *out, size_t cap, size_t i, json_t *ev) {
    const char *n = json_string_value(json_object_get(ev, "name"));
    snprintf(out, cap, "traceEvents[%zu]%s%s%s", i, n ? " (\"" : "", n ? n : "", n ? "\")" : "");
}

static int need_number(json_t *ev, const char *key, double *v) {
    json_t *x = json_object_get(ev, key);
    if (!json_is_number(x)) return -1;
    *v = json_number_value(x);
    return 0;
}

static int read_other(zcli_trace *t, json_t *other, const char *path, char *why, size_t cap) {
    const char *fmt = json_string_value(json_object_get(other, "format"));
    if (!fmt)
        FAIL_WHY("%s: not a zinc trace: no otherData.format (zinc train --trace FILE writes one; a trace from another "
                 "tool has none)",
                 path);
    if (strcmp(fmt, "zinc-trace 1"))
        FAIL_WHY("%s: otherData.format is \"%s\"; this zinc reads \"zinc-trace 1\"", path, fmt);
    json_t *w = json_object_get(other, "world_size");
    if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 1 << 20)
        FAIL_WHY("%s: otherData.world_size must be a whole number of ranks >= 1", path);
    t->world = (int)json_integer_value(w);
    json_t *steps = json_object_get(other, "trace_steps");
    t->step_first = t->step_last = -1;
    if (json_is_array(steps) && json_array_size(steps) == 2) {
        t->step_first = json_integer_value(json_array_get(steps, 0));
        t->step_last = json_integer_value(json_array_get(steps, 1));
    }
    json_t *f = json_object_get(other, "flops_per_sample");
    t->flops_per_sample = json_is_number(f) ? json_number_value(f) : 0;
    json_t *mf = json_object_get(other, "module_flops");
    t->module_flops = json_is_object(mf) ? mf : NULL;
    return 0;
}

static int read_meta(zcli_trace *t, json_t *ev) {
    const char *what = json_string_value(json_object_get(ev, "name"));
    const char *name = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
    if (!what || !name || strcmp(what, "thread_name")) return 0;
    json_t *pid = json_object_get(ev, "pid"), *tid = json_object_get(ev, "tid");
    if (!json_is_integer(pid) || !json_is_integer(tid)) return 0;
    int k = track_index(t, (int)json_integer_value(pid), (int)json_integer_value(tid));
    if (k < 0) return -1;
    snprintf(t->tracks[k].name, sizeof t->tracks[k].name, "%s", name);
    return 0;
}

static int read_span(zcli_trace *t, json_t *ev, size_t i, const char *path, char *why, size_t cap) {
    char en[160];
    event_name(en, sizeof en, i, ev);
    double pid, tid;
    zcli_tspan s = {.step = -1, .samples = -1};
    static const char *const need[] = {"pid", "tid", "ts", "dur"};
    double *dst[] = {&pid, &tid, &s.ts, &s.dur};
    for (int k = 0; k < 4; k++)
        if (need_number(ev, need[k], dst[k]))
            FAIL_WHY("%s: %s: \"%s\" is missing or not a number (a complete event needs pid, tid, ts, dur, name, cat)",
                     path, en, need[k]);
    s.name = json_string_value(json_object_get(ev, "name"));
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    if (!s.name || !cat) FAIL_WHY("%s: %s: \"%s\" is missing or not a string", path, en, s.name ? "cat" : "name");
    if (pid < 0 || pid >= t->world || pid != (int)pid)
        FAIL_WHY("%s: %s: pid %g is not a rank of otherData.world_size %d", path, en, pid, t->world);
    if (s.dur < 0) FAIL_WHY("%s: %s: negative dur %g", path, en, s.dur);
    s.pid = (int)pid;
    s.cat = cat_of(cat);
    json_t *args = json_object_get(ev, "args");
    json_t *v;
    if (json_is_integer(v = json_object_get(args, "step"))) s.step = json_integer_value(v);
    if (json_is_integer(v = json_object_get(args, "samples"))) s.samples = json_integer_value(v);
    if (json_is_number(v = json_object_get(args, "bytes"))) s.bytes = json_number_value(v);
    if (s.cat == ZCLI_TC_STEP && s.samples < 0)
        FAIL_WHY("%s: %s: a step span needs args.samples (the samples this rank did in the step)", path, en);
    if ((s.track = track_index(t, s.pid, (int)tid)) < 0) FAIL_WHY("%s: out of memory", path);
    s.track = (int)tid; /* the tid for now: tracks are sorted below */
    t->spans[t->n++] = s;
    return 0;
}

/* Depth and self time on each track: a stack of open spans; a span that starts inside the top one is its
 * child (its time leaves the parent's self time); one that would end after its parent is cut there. */
static void nest(zcli_trace *t) {
    zcli_tspan **stack = NULL;
    size_t cap = 0, top = 0;
    for (size_t i = 0; i < t->n; i++) {
        zcli_tspan *s = &t->spans[i];
        if (i == 0 || s->track != t->spans[i - 1].track) top = 0;
        while (top && stack[top - 1]->ts + stack[top - 1]->dur <= s->ts) top--;
        s->self = s->dur;
        if (top) {
            zcli_tspan *p = stack[top - 1];
            double end = p->ts + p->dur;
            if (s->ts + s->dur > end + 1e-3) {
                t->clamped++;
                s->dur = end - s->ts;
                s->self = s->dur;
            }
            p->self -= s->dur;
        }
        s->depth = (int)top;
        if (top == cap) {
            size_t nc = cap ? 2 * cap : 16;
            zcli_tspan **ns = realloc(stack, nc * sizeof *ns);
            if (!ns) break; /* depth beyond memory: leave the rest flat */
            stack = ns, cap = nc;
        }
        stack[top++] = s;
    }
    free(stack);
}

int zcli_trace_load(const char *path, zcli_trace *t, char *why, size_t cap) {
    memset(t, 0, sizeof *t);
    FILE *f;
    if (zfile_fopen_input("trace", path, &f) != ZINC_OK) FAIL_WHY("%s", zinc_last_error());
    json_error_t je;
    t->root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!t->root)
        FAIL_WHY("%s: not valid JSON at line %d, column %d: %s%s", path, je.line, je.column, je.text,
                 strstr(je.text, "end of") ? " (the file is cut short: was the run killed while writing it?)" : "");
    json_t *events = json_object_get(t->root, "traceEvents");
    if (!json_is_array(events))
        FAIL_WHY("%s: not a trace: no \"traceEvents\" array (zinc trace reads what zinc train --trace FILE writes)",
                 path);
    if (read_other(t, json_object_get(t->root, "otherData"), path, why, cap)) return -1;
    size_t ne = json_array_size(events);
    t->spans = calloc(ne ? ne : 1, sizeof *t->spans);
    if (!t->spans) FAIL_WHY("%s: out of memory for %zu events", path, ne);
    for (size_t i = 0; i < ne; i++) {
        json_t *ev = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        if (!json_is_object(ev) || !ph) FAIL_WHY("%s: traceEvents[%zu] is not an event (no \"ph\")", path, i);
        if (!strcmp(ph, "M")) {
            if (read_meta(t, ev)) FAIL_WHY("%s: out of memory", path);
        } else if (!strcmp(ph, "X")) {
            if (read_span(t, ev, i, path, why, cap)) return -1;
        } /* instants, counters, flows: not used by the tools */
    }
    qsort(t->tracks, (size_t)t->ntracks, sizeof *t->tracks, cmp_track);
    for (size_t i = 0; i < t->n; i++) /* the tid -> the track's index in sorted order */
        for (int k = 0; k < t->ntracks; k++)
            if (t->tracks[k].pid == t->spans[i].pid && t->tracks[k].tid == t->spans[i].track) {
                t->spans[i].track = k;
                break;
            }
    qsort(t->spans, t->n, sizeof *t->spans, cmp_span);
    nest(t);
    return 0;
}

void zcli_trace_free(zcli_trace *t) {
    free(t->spans);
    free(t->tracks);
    json_decref(t->root);
    memset(t, 0, sizeof *t);
}
