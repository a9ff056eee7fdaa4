/* See trace_summary.h. */
#include "cli/trace/trace_summary.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct ivl {
    double a, b;
} ivl;

typedef struct ivls {
    ivl *v;
    size_t n, cap;
} ivls;

static int push(ivls *l, double a, double b) {
    if (b <= a) return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        ivl *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv, l->cap = nc;
    }
    l->v[l->n++] = (ivl){a, b};
    return 0;
}

static int cmp_ivl(const void *x, const void *y) {
    const ivl *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* Sorts and merges in place; returns the covered length. */
static double merge(ivls *l) {
    if (!l->n) return 0;
    qsort(l->v, l->n, sizeof *l->v, cmp_ivl);
    size_t k = 0;
    for (size_t i = 1; i < l->n; i++) {
        if (l->v[i].a <= l->v[k].b) {
            if (l->v[i].b > l->v[k].b) l->v[k].b = l->v[i].b;
        } else {
            l->v[++k] = l->v[i];
        }
    }
    l->n = k + 1;
    double len = 0;
    for (size_t i = 0; i < l->n; i++) len += l->v[i].b - l->v[i].a;
    return len;
}

/* The length of the intersection of two merged lists. */
static double overlap(const ivls *x, const ivls *y) {
    double len = 0;
    for (size_t i = 0, j = 0; i < x->n && j < y->n;) {
        double a = fmax(x->v[i].a, y->v[j].a), b = fmin(x->v[i].b, y->v[j].b);
        if (b > a) len += b - a;
        if (x->v[i].b < y->v[j].b)
            i++;
        else
            j++;
    }
    return len;
}

/* The self-time pieces of rank r's spans, per cat: on each track a stack of open spans, each with the
 * point up to which its own time was handed out. */
static int self_pieces(const zcli_trace *t, int r, ivls *per_cat) {
    const zcli_tspan **stack = NULL;
    double *cursor = NULL;
    size_t cap = 0, top = 0, lo = t->rank_first[r], hi = t->rank_first[r + 1]; /* rank r's spans alone */
    int bad = 0;
    for (size_t i = lo; i <= hi && !bad; i++) {
        const zcli_tspan *s = i < hi ? &t->spans[i] : NULL;
        bool new_track = !s || i == lo || s->track != t->spans[i - 1].track;
        while (top && (new_track || stack[top - 1]->ts + stack[top - 1]->dur <= s->ts)) {
            const zcli_tspan *p = stack[--top];
            bad |= push(&per_cat[p->cat], cursor[top], p->ts + p->dur);
        }
        if (!s) continue;
        if (top) {
            bad |= push(&per_cat[stack[top - 1]->cat], cursor[top - 1], s->ts);
            cursor[top - 1] = s->ts + s->dur;
        }
        if (top == cap) {
            size_t nc = cap ? 2 * cap : 16;
            const zcli_tspan **ns = realloc(stack, nc * sizeof *ns);
            double *nc2 = ns ? realloc(cursor, nc * sizeof *nc2) : NULL;
            if (ns) stack = ns;
            if (!nc2) {
                bad = 1;
                break;
            }
            cursor = nc2, cap = nc;
        }
        stack[top] = s;
        cursor[top++] = s->ts;
    }
    free(stack);
    free(cursor);
    return bad ? -1 : 0;
}

static bool compute_cat(int c) {
    return c == ZTRACE_FORWARD || c == ZTRACE_BACKWARD || c == ZTRACE_RECOMPUTE || c == ZTRACE_OPTIMIZER ||
           c == ZTRACE_GPU || c == ZTRACE_POOL;
}

static json_t *rank_summary(const zcli_trace *t, int r, double *mean_ms) {
    ivls per_cat[ZCLI_TRACE_CATS] = {{0}};
    json_t *o = NULL;
    if (self_pieces(t, r, per_cat)) goto done;
    double step_us = 0, first = INFINITY, last = -INFINITY;
    int64_t steps = 0, samples = 0;
    for (size_t i = t->rank_first[r]; i < t->rank_first[r + 1]; i++) {
        const zcli_tspan *s = &t->spans[i];
        first = fmin(first, s->ts), last = fmax(last, s->ts + s->dur);
        if (s->cat == ZTRACE_STEP) /* samples < 2^31 per span (trace_load.c): saturated, never wrapped */
            step_us += s->dur, steps++, samples = samples > INT64_MAX - s->samples ? INT64_MAX : samples + s->samples;
    }
    /* without step spans (a trace of setup only) the rank's whole extent is the base */
    double base = steps ? step_us : (last > first ? last - first : 0);
    double len[ZCLI_TRACE_CATS];
    for (int c = 0; c < ZCLI_TRACE_CATS; c++) len[c] = merge(&per_cat[c]);
    ivls compute = {0};
    for (int c = 0; c < ZCLI_TRACE_CATS; c++)
        if (compute_cat(c))
            for (size_t k = 0; k < per_cat[c].n; k++)
                if (push(&compute, per_cat[c].v[k].a, per_cat[c].v[k].b)) goto done;
    merge(&compute);
    double hidden = overlap(&per_cat[ZTRACE_COMM], &compute);
    free(compute.v);
    *mean_ms = steps ? step_us / 1e3 / (double)steps : 0;
    json_t *ph = json_object();
    for (int k = 0; k < ZCLI_TRACE_CATS; k++) {
        int c = zcli_trace_order[k]; /* from nvme on, a phase with no time is left out */
        if (c == ZTRACE_STEP || (len[c] == 0 && k >= 6)) continue;
        json_object_set_new(ph, zcli_tcat_name(c),
                            json_pack("{s:f, s:f}", "ms", len[c] / 1e3, "pct", base > 0 ? 100 * len[c] / base : 0.0));
    }
    o = json_pack("{s:i, s:I, s:I, s:f, s:f, s:o, s:f, s:f, s:f}", "rank", r, "steps", (json_int_t)steps, "samples",
                  (json_int_t)samples, "step_ms_total", step_us / 1e3, "mean_step_ms", *mean_ms, "phases", ph,
                  "comm_hidden_ms", hidden / 1e3, "comm_exposed_ms", (len[ZTRACE_COMM] - hidden) / 1e3, "untracked_ms",
                  len[ZTRACE_STEP] / 1e3);
    if (o && t->flops_per_sample > 0 && step_us > 0)
        json_object_set_new(o, "flops_per_s", json_real(t->flops_per_sample * (double)samples / (step_us / 1e6)));
done:
    for (int c = 0; c < ZCLI_TRACE_CATS; c++) free(per_cat[c].v);
    return o;
}

/* Per module (the names of forward/backward/recompute spans, in order of first appearance): self time
 * summed over ranks, and FLOPs = the module's per-sample declaration x each rank's samples. */
static json_t *modules(const zcli_trace *t, const int64_t *samples) {
    json_t *list = json_array(), *index = json_object();
    for (size_t i = 0; i < t->n; i++) {
        const zcli_tspan *s = &t->spans[i];
        if (s->cat != ZTRACE_FORWARD && s->cat != ZTRACE_BACKWARD && s->cat != ZTRACE_RECOMPUTE) continue;
        json_t *m = json_object_get(index, s->name);
        if (!m) {
            m = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "name", s->name, "forward_ms", 0.0, "backward_ms", 0.0,
                          "recompute_ms", 0.0, "forward_flops", 0.0, "backward_flops", 0.0);
            json_array_append_new(list, m);
            json_object_set(index, s->name, m);
        }
        const char *key = s->cat == ZTRACE_FORWARD    ? "forward_ms"
                          : s->cat == ZTRACE_BACKWARD ? "backward_ms"
                                                      : "recompute_ms";
        json_object_set_new(m, key, json_real(json_real_value(json_object_get(m, key)) + s->self / 1e3));
    }
    json_decref(index);
    double all_samples = 0;
    for (int r = 0; r < t->world; r++) all_samples += (double)samples[r];
    size_t k;
    json_t *m;
    json_array_foreach(list, k, m) {
        json_t *decl =
            t->module_flops ? json_object_get(t->module_flops, json_string_value(json_object_get(m, "name"))) : NULL;
        if (!json_is_array(decl) || json_array_size(decl) != 2) continue;
        double ff = json_number_value(json_array_get(decl, 0)) * all_samples;
        double fb = json_number_value(json_array_get(decl, 1)) * all_samples;
        double tf = json_real_value(json_object_get(m, "forward_ms")) / 1e3;
        double tb = json_real_value(json_object_get(m, "backward_ms")) / 1e3;
        json_object_set_new(m, "forward_flops", json_real(ff));
        json_object_set_new(m, "backward_flops", json_real(fb));
        if (tf > 0) json_object_set_new(m, "forward_flops_per_s", json_real(ff / tf));
        if (tb > 0) json_object_set_new(m, "backward_flops_per_s", json_real(fb / tb));
        if (tf + tb > 0) json_object_set_new(m, "flops_per_s", json_real((ff + fb) / (tf + tb)));
    }
    return list;
}

json_t *zcli_trace_summarize(const zcli_trace *t) {
    json_t *ranks = json_array();
    int64_t *samples = calloc((size_t)t->world, sizeof *samples);
    if (!ranks || !samples) goto nomem;
    int slow = -1, fast = -1;
    double slow_ms = 0, fast_ms = 0;
    for (int r = 0; r < t->world; r++) {
        double mean;
        json_t *rs = rank_summary(t, r, &mean);
        if (!rs) goto nomem;
        samples[r] = json_integer_value(json_object_get(rs, "samples"));
        json_array_append_new(ranks, rs);
        if (mean > 0 && (slow < 0 || mean > slow_ms)) slow = r, slow_ms = mean;
        if (mean > 0 && (fast < 0 || mean < fast_ms)) fast = r, fast_ms = mean;
    }
    json_t *o = json_pack("{s:i, s:I, s:o, s:o}", "world_size", t->world, "spans", (json_int_t)t->n, "ranks", ranks,
                          "modules", modules(t, samples));
    free(samples);
    if (!o) return NULL;
    if (slow >= 0)
        json_object_set_new(o, "slowest_rank",
                            json_pack("{s:i, s:f, s:i, s:f}", "rank", slow, "mean_step_ms", slow_ms, "fastest_rank",
                                      fast, "fastest_mean_step_ms", fast_ms));
    if (t->flops_per_sample > 0) json_object_set_new(o, "flops_per_sample", json_real(t->flops_per_sample));
    if (t->step_first >= 0)
        json_object_set_new(o, "trace_steps", json_pack("[I, I]", (json_int_t)t->step_first, (json_int_t)t->step_last));
    return o;
nomem:
    json_decref(ranks);
    free(samples);
    return NULL;
}

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static void si(double v, char *out, size_t cap) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (v >= 1000 && u < 6) v /= 1000, u++;
    snprintf(out, cap, "%.3g %s", v, units[u]);
}

void zcli_trace_print(const char *path, const zcli_trace *t, const json_t *sum, FILE *f) {
    fprintf(f, "%s: %d rank%s, %zu spans", path, t->world, t->world == 1 ? "" : "s", t->n);
    if (t->step_first >= 0) fprintf(f, ", steps %lld..%lld traced", (long long)t->step_first, (long long)t->step_last);
    fprintf(f, "\n");
    if (t->clamped)
        fprintf(f, "note: %d span%s ended after %s parent on the same track and %s cut at the parent's end\n",
                t->clamped, t->clamped == 1 ? "" : "s", t->clamped == 1 ? "its" : "their",
                t->clamped == 1 ? "was" : "were");
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(sum, "ranks"), k, r) {
        fprintf(f, "\nrank %d: %lld steps, mean step %.3f ms", (int)json_integer_value(json_object_get(r, "rank")),
                (long long)json_integer_value(json_object_get(r, "steps")), num(r, "mean_step_ms"));
        char b[32];
        if (json_object_get(r, "flops_per_s")) {
            si(num(r, "flops_per_s"), b, sizeof b);
            fprintf(f, ", %sFLOP/s", b);
        }
        fprintf(f, "\n  %-12s %12s %10s\n", "phase", "ms", "% of step");
        const char *key;
        json_t *p;
        json_object_foreach(json_object_get(r, "phases"), key, p) {
            fprintf(f, "  %-12s %12.3f %9.1f%%", key, num(p, "ms"), num(p, "pct"));
            if (!strcmp(key, "comm"))
                fprintf(f, "   hidden behind compute %.3f ms, exposed %.3f ms", num(r, "comm_hidden_ms"),
                        num(r, "comm_exposed_ms"));
            fprintf(f, "\n");
        }
        double steps_ms = num(r, "step_ms_total");
        fprintf(f, "  %-12s %12.3f %9.1f%%   (step time in no span)\n", "untracked", num(r, "untracked_ms"),
                steps_ms > 0 ? 100 * num(r, "untracked_ms") / steps_ms : 0.0);
    }
    json_t *slow = json_object_get(sum, "slowest_rank");
    if (slow && t->world > 1) {
        double s = num(slow, "mean_step_ms"), q = num(slow, "fastest_mean_step_ms");
        fprintf(f, "\nslowest rank: %d (mean step %.3f ms, %.1f%% above the fastest, rank %d at %.3f ms)\n",
                (int)json_integer_value(json_object_get(slow, "rank")), s, q > 0 ? 100 * (s / q - 1) : 0.0,
                (int)json_integer_value(json_object_get(slow, "fastest_rank")), q);
    }
    zcli_trace_print_modules(t, sum, f);
}

void zcli_trace_print_modules(const zcli_trace *t, const json_t *sum, FILE *f) {
    json_t *mods = json_object_get(sum, "modules");
    size_t k;
    if (!json_array_size(mods)) return;
    fprintf(f, "\nmodules (self time summed over ranks%s):\n  %-16s %12s %12s %12s %12s %14s\n",
            t->module_flops ? "; FLOPs from the model's declaration" : "; no FLOPs in the trace", "module",
            "forward ms", "backward ms", "recompute ms", "FLOPs", "FLOP/s");
    json_t *m;
    json_array_foreach(mods, k, m) {
        char fl[32] = "-", rate[32] = "-";
        double flops = num(m, "forward_flops") + num(m, "backward_flops");
        if (flops > 0) si(flops, fl, sizeof fl);
        if (json_object_get(m, "flops_per_s")) si(num(m, "flops_per_s"), rate, sizeof rate);
        fprintf(f, "  %-16s %12.3f %12.3f %12.3f %12s %14s\n", json_string_value(json_object_get(m, "name")),
                num(m, "forward_ms"), num(m, "backward_ms"), num(m, "recompute_ms"), fl, rate);
    }
    /* A module rate far above the whole step's (the declared FLOPs over the step's time, which holds all the
     * work) means its spans do not hold its work: the model computes outside zinc_module_enter/exit (a
     * network run in one call) or declares more than it computes. Said, with the factor, so that the table
     * never shows such a rate unexplained. 10x: a module's share of a step's work can run a few times faster than
     * the step's average (which includes the optimizer and waits), not ten. */
    double step_rate = 0;
    json_t *r;
    json_array_foreach(json_object_get(sum, "ranks"), k, r) {
        if (num(r, "flops_per_s") > step_rate) step_rate = num(r, "flops_per_s");
    }
    json_array_foreach(mods, k, m) {
        double x = num(m, "flops_per_s") / (step_rate > 0 ? step_rate : 1);
        if (step_rate > 0 && x > 10) {
            char sr[32];
            si(step_rate, sr, sizeof sr);
            fprintf(f,
                    "note: module %s's FLOP/s is %.0fx the whole step's (%sFLOP/s): its spans are too short to hold "
                    "its declared FLOPs, so the model most likely computes outside its module entries (a network run "
                    "in one call) or declares more than it computes; that rate is FLOPs over span time, not a rate "
                    "the machine ran at\n",
                    json_string_value(json_object_get(m, "name")), x, sr);
        }
    }
}

int zcli_trace_module_table(const char *who, const char *path, FILE *f) {
    zcli_trace t;
    char why[1024];
    if (zcli_trace_load(path, &t, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", who, why);
        zcli_trace_free(&t);
        return -1;
    }
    json_t *s = zcli_trace_summarize(&t);
    if (s) zcli_trace_print_modules(&t, s, f);
    json_decref(s);
    zcli_trace_free(&t);
    return s ? 0 : -1;
}
