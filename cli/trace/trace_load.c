/* See trace_load.h. */
#include "cli/trace/trace_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/core/safe_file.h"

const int zcli_trace_order[ZCLI_TRACE_CATS] = {ZTRACE_FORWARD,    ZTRACE_BACKWARD,  ZTRACE_RECOMPUTE, ZTRACE_COMM,
                                               ZTRACE_WAIT,       ZTRACE_OPTIMIZER, ZTRACE_NVME,      ZTRACE_COPY,
                                               ZTRACE_CHECKPOINT, ZTRACE_DATA,      ZTRACE_ENGINE,    ZTRACE_GPU,
                                               ZTRACE_POOL,       ZCLI_TRACE_OTHER, ZTRACE_STEP};

/* ztrace_cat_name names what is outside its table "other". */
const char *zcli_tcat_name(int cat) { return cat >= 0 ? ztrace_cat_name((ztrace_cat)cat) : "?"; }

static int cat_of(const char *s) {
    int c = ztrace_cat_find(s);
    return c < 0 ? ZCLI_TRACE_OTHER : c;
}

#define FAIL_WHY(...)                                                                                                  \
    do {                                                                                                               \
        snprintf(why, cap, __VA_ARGS__);                                                                               \
        return -1;                                                                                                     \
    } while (0)

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

/* The limits of a trace's numbers (a trace is untrusted input, like a checkpoint): what does not fit is an
 * error naming the event, so no sum or product later can overflow. 1e15 us is 31 years. */
#define TS_LIMIT 1e15
#define SAMPLES_LIMIT 2147483647.0    /* per step span: the sum over every span of a file stays below 2^63 */
#define STEP_LIMIT 9007199254740992.0 /* 2^53 */
#define BYTES_LIMIT 1e18
#define DEPTH_LIMIT 1000       /* spans nested deeper on one track: no zinc trace does that */
#define BYTES_PER_RANK 64      /* every rank's part of a zinc trace is at least its process_name event (74 bytes) */
#define TRACK_ID_LIMIT 1048576 /* pids and tids: ranks (below world_size) and a process's threads */

/* A whole number in [0, limit): else -1. */
static int whole(double v, double limit) { return v >= 0 && v < limit && v == floor(v) ? 0 : -1; }

typedef struct tmeta {
    int pid, tid;
    const char *name;
} tmeta;

static int read_other(zcli_trace *t, json_t *other, const char *path, long long fsize, char *why, size_t cap) {
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
    if ((long long)t->world * BYTES_PER_RANK > fsize)
        FAIL_WHY("%s: otherData.world_size %d is more ranks than a file of %lld bytes holds (each rank's events "
                 "take at least %d bytes): the file is damaged or not written by zinc train --trace",
                 path, t->world, fsize, BYTES_PER_RANK);
    json_t *steps = json_object_get(other, "trace_steps");
    t->step_first = t->step_last = -1;
    if (json_is_array(steps) && json_array_size(steps) == 2) {
        json_int_t a = json_integer_value(json_array_get(steps, 0)), b = json_integer_value(json_array_get(steps, 1));
        if (a < 0 || b < a || (double)b >= STEP_LIMIT)
            FAIL_WHY("%s: otherData.trace_steps [%lld, %lld] is not a window of steps (0 <= first <= last < 2^53)",
                     path, (long long)a, (long long)b);
        t->step_first = a, t->step_last = b;
    }
    json_t *f = json_object_get(other, "flops_per_sample");
    t->flops_per_sample = json_is_number(f) ? json_number_value(f) : 0;
    if (!(t->flops_per_sample >= 0 && t->flops_per_sample <= 1e30))
        FAIL_WHY("%s: otherData.flops_per_sample %g is out of range (0 to 1e30)", path, t->flops_per_sample);
    json_t *mf = json_object_get(other, "module_flops");
    t->module_flops = json_is_object(mf) ? mf : NULL;
    return 0;
}

/* A thread_name event: its (pid, tid) and name, kept until the tracks are made. */
static int read_meta(json_t *ev, size_t i, tmeta *out, size_t *nmeta, const char *path, char *why, size_t cap) {
    const char *what = json_string_value(json_object_get(ev, "name"));
    const char *name = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
    if (!what || !name || strcmp(what, "thread_name")) return 0;
    json_t *pid = json_object_get(ev, "pid"), *tid = json_object_get(ev, "tid");
    if (!json_is_integer(pid) || !json_is_integer(tid)) return 0;
    json_int_t p = json_integer_value(pid), q = json_integer_value(tid);
    if (p < 0 || p >= TRACK_ID_LIMIT || q < 0 || q >= TRACK_ID_LIMIT)
        FAIL_WHY("%s: traceEvents[%zu] (thread_name): pid %lld, tid %lld out of range (0 to %d)", path, i, (long long)p,
                 (long long)q, TRACK_ID_LIMIT - 1);
    out[(*nmeta)++] = (tmeta){(int)p, (int)q, name};
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
    if (whole(pid, t->world))
        FAIL_WHY("%s: %s: pid %g is not a rank of otherData.world_size %d", path, en, pid, t->world);
    if (whole(tid, TRACK_ID_LIMIT))
        FAIL_WHY("%s: %s: tid %g is not a thread number (a whole number, 0 to %d)", path, en, tid, TRACK_ID_LIMIT - 1);
    if (!(fabs(s.ts) <= TS_LIMIT))
        FAIL_WHY("%s: %s: ts %g is out of range (within 1e15 us of the start)", path, en, s.ts);
    if (s.dur < 0) FAIL_WHY("%s: %s: negative dur %g", path, en, s.dur);
    if (!(s.dur <= TS_LIMIT)) FAIL_WHY("%s: %s: dur %g is out of range (at most 1e15 us)", path, en, s.dur);
    s.pid = (int)pid;
    s.cat = cat_of(cat);
    json_t *args = json_object_get(ev, "args");
    json_t *v;
    if (json_is_integer(v = json_object_get(args, "step"))) s.step = json_integer_value(v);
    if (json_is_integer(v = json_object_get(args, "samples"))) s.samples = json_integer_value(v);
    if (json_is_number(v = json_object_get(args, "bytes"))) s.bytes = json_number_value(v);
    if (s.step < -1 || (double)s.step >= STEP_LIMIT)
        FAIL_WHY("%s: %s: args.step %lld is out of range (0 to 2^53)", path, en, (long long)s.step);
    if (s.samples < -1 || (double)s.samples > SAMPLES_LIMIT)
        FAIL_WHY("%s: %s: args.samples %lld is out of range (0 to 2^31-1)", path, en, (long long)s.samples);
    if (!(s.bytes >= 0 && s.bytes <= BYTES_LIMIT))
        FAIL_WHY("%s: %s: args.bytes %g is out of range (0 to 1e18)", path, en, s.bytes);
    if (s.cat == ZTRACE_STEP && s.samples < 0)
        FAIL_WHY("%s: %s: a step span needs args.samples (the samples this rank did in the step)", path, en);
    s.track = (int)tid; /* the tid for now: the tracks are made after the last event */
    t->spans[t->n++] = s;
    return 0;
}

/* Depth and self time on each track: a stack of open spans; a span that starts inside the top one is its
 * child (its time leaves the parent's self time); one that would end after its parent is cut there. */
static int nest(zcli_trace *t) {
    zcli_tspan **stack = NULL;
    size_t cap = 0, top = 0;
    int deep = 0;
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
        if (top >= DEPTH_LIMIT) {
            deep = 1;
            break;
        }
        if (top == cap) {
            size_t nc = cap ? 2 * cap : 16;
            zcli_tspan **ns = realloc(stack, nc * sizeof *ns);
            if (!ns) {
                deep = -1;
                break;
            }
            stack = ns, cap = nc;
        }
        stack[top++] = s;
    }
    free(stack);
    return deep;
}

static int find_track(const zcli_trace *t, int pid, int tid) {
    zcli_ttrack key = {.pid = pid, .tid = tid};
    const zcli_ttrack *k = bsearch(&key, t->tracks, (size_t)t->ntracks, sizeof *t->tracks, cmp_track);
    return k ? (int)(k - t->tracks) : -1;
}

/* The tracks: every (pid, tid) of a span or a thread_name, sorted and unique (n log n, whatever the count);
 * each span's tid becomes its track's index; the last thread_name of a track names it; each rank's spans
 * are one range (rank_first). */
static int make_tracks(zcli_trace *t, tmeta *meta, size_t nmeta) {
    size_t n = t->n + nmeta, k = 0;
    t->tracks = malloc((n ? n : 1) * sizeof *t->tracks);
    t->rank_first = calloc((size_t)t->world + 1, sizeof *t->rank_first);
    if (!t->tracks || !t->rank_first) return -1;
    for (size_t i = 0; i < t->n; i++) t->tracks[k++] = (zcli_ttrack){.pid = t->spans[i].pid, .tid = t->spans[i].track};
    for (size_t i = 0; i < nmeta; i++) t->tracks[k++] = (zcli_ttrack){.pid = meta[i].pid, .tid = meta[i].tid};
    qsort(t->tracks, n, sizeof *t->tracks, cmp_track);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || cmp_track(&t->tracks[u - 1], &t->tracks[i])) t->tracks[u++] = t->tracks[i];
    t->ntracks = (int)u;
    for (int i = 0; i < t->ntracks; i++)
        snprintf(t->tracks[i].name, sizeof t->tracks[i].name, "tid %d", t->tracks[i].tid);
    for (size_t i = 0; i < nmeta; i++) { /* in file order: a later thread_name of a track wins */
        int q = find_track(t, meta[i].pid, meta[i].tid);
        if (q >= 0) snprintf(t->tracks[q].name, sizeof t->tracks[q].name, "%s", meta[i].name);
    }
    for (size_t i = 0; i < t->n; i++) t->spans[i].track = find_track(t, t->spans[i].pid, t->spans[i].track);
    qsort(t->spans, t->n, sizeof *t->spans, cmp_span);
    /* sorted by track, the tracks by pid: rank r's spans are [rank_first[r], rank_first[r + 1]) */
    size_t at = 0;
    for (int r = 0; r <= t->world; r++) {
        while (at < t->n && t->spans[at].pid < r) at++;
        t->rank_first[r] = at;
    }
    return 0;
}

/* The events: spans and thread names; others (process names, instants, counters, flows) are not used. */
static int read_events(zcli_trace *t, json_t *events, tmeta *meta, size_t *nmeta, const char *path, char *why,
                       size_t cap) {
    size_t ne = json_array_size(events);
    for (size_t i = 0; i < ne; i++) {
        json_t *ev = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        if (!json_is_object(ev) || !ph) FAIL_WHY("%s: traceEvents[%zu] is not an event (no \"ph\")", path, i);
        if (!strcmp(ph, "M")) {
            if (read_meta(ev, i, meta, nmeta, path, why, cap)) return -1;
        } else if (!strcmp(ph, "X")) {
            if (read_span(t, ev, i, path, why, cap)) return -1;
        }
    }
    return 0;
}

int zcli_trace_load(const char *path, zcli_trace *t, char *why, size_t cap) {
    memset(t, 0, sizeof *t);
    FILE *f;
    struct stat sb;
    if (zfile_fopen_input("trace", path, &f) != ZINC_OK) FAIL_WHY("%s", zinc_last_error());
    long long fsize = fstat(fileno(f), &sb) == 0 ? (long long)sb.st_size : 0;
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
    if (read_other(t, json_object_get(t->root, "otherData"), path, fsize, why, cap)) return -1;
    size_t ne = json_array_size(events), nspans = 0, nmeta = 0;
    for (size_t i = 0; i < ne; i++) { /* the spans and thread names counted first: memory for them alone */
        const char *ph = json_string_value(json_object_get(json_array_get(events, i), "ph"));
        nspans += ph && !strcmp(ph, "X");
        nmeta += ph && !strcmp(ph, "M");
    }
    t->spans = calloc(nspans ? nspans : 1, sizeof *t->spans);
    tmeta *meta = calloc(nmeta ? nmeta : 1, sizeof *meta);
    if (!t->spans || !meta) {
        free(meta);
        FAIL_WHY("%s: out of memory for %zu events", path, ne);
    }
    nmeta = 0;
    int bad = read_events(t, events, meta, &nmeta, path, why, cap);
    if (!bad && make_tracks(t, meta, nmeta)) {
        snprintf(why, cap, "%s: out of memory for the tracks", path);
        bad = -1;
    }
    free(meta);
    if (bad) return -1;
    int deep = nest(t);
    if (deep > 0)
        FAIL_WHY("%s: spans nest more than %d deep on one track: the file is damaged or not written by zinc train "
                 "--trace",
                 path, DEPTH_LIMIT);
    if (deep < 0) FAIL_WHY("%s: out of memory nesting the spans", path);
    return 0;
}

void zcli_trace_free(zcli_trace *t) {
    free(t->spans);
    free(t->tracks);
    free(t->rank_first);
    json_decref(t->root);
    memset(t, 0, sizeof *t);
}
