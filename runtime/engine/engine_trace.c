/* The engine's side of the timeline (zinc_options.trace_path; base/core/trace.h records): the ranks'
 * clocks aligned at zinc_create, the module and step spans, and every rank's spans gathered to rank 0 and
 * written once, when the step window ends or at zinc_destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/memtrack.h"
#include "base/core/safe_file.h"
#include "base/core/trace.h"
#include "runtime/engine/engine_internal.h"

struct zengine_trace {
    char *path;
    char *rank_path;   /* trace_per_rank: this rank's own file (path.rank<R>.json), else NULL */
    unsigned flags;    /* ZFILE_REPLACE with trace_replace */
    char *config_path; /* an input the trace never replaces */
    ztrace_window win;
    int64_t offset_ns;         /* this rank's clock minus rank 0's */
    int64_t *offsets, *errors; /* every rank's offset and its bound (0: rank 0's kernel, the same clock) */
    int64_t origin_ns;         /* the job's start on rank 0's clock */
    int64_t *module_t0;        /* [module][phase]: where the open span began (0: none) */
    int *module_dev;           /* [module][phase]: its device span on the compute stream (-1: none) */
    int nmodules;
    bool written;
    char **names; /* the model's span names (zinc_trace_end), copied once each */
    int nnames, cap_names;
    /* memory counters, one per traced step's end: the process's RSS and the tracker's bytes per kind */
    struct trace_mem {
        int64_t t_ns, step;
        uint64_t rss, kinds[ZINC_MEMKIND_COUNT];
    } * mem;
    int nmem, cap_mem;
};

/* A memory sample at the end of a traced step (a Chrome counter event when written). */
static void sample_memory(zinc_engine *e, zengine_trace *t) {
    if (t->nmem == t->cap_mem) {
        int cap = t->cap_mem ? 2 * t->cap_mem : 16;
        struct trace_mem *m = realloc(t->mem, (size_t)cap * sizeof *m);
        if (!m) return; /* a counter less; the spans are what matters */
        t->mem = m, t->cap_mem = cap;
    }
    struct trace_mem *m = &t->mem[t->nmem];
    uint64_t hwm = 0;
    m->rss = 0;
    if (!zmem_proc_rss(&m->rss, &hwm)) m->rss = 0;
    zinc_memory_report rep;
    if (zinc_memory_get(e, &rep) != ZINC_OK) memset(&rep, 0, sizeof rep);
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) m->kinds[k] = rep.current_total[k];
    m->t_ns = ztrace_now_ns();
    m->step = e->steps;
    t->nmem++;
}

/* Appends the memory counters ("ph":"C", name "memory", MiB) to a rank's serialized events. */
static zinc_status append_counters(const zinc_engine *e, const zengine_trace *t, int64_t origin_ns, char **text,
                                   size_t *n) {
    size_t per = 96 + 48 * ZINC_MEMKIND_COUNT, cap = *n + (size_t)t->nmem * per + 1;
    char *p = realloc(*text, cap);
    if (!p) return ZERR(ZINC_ERR_NOMEM, "out of memory for the trace's memory counters");
    *text = p;
    for (int i = 0; i < t->nmem; i++) {
        const struct trace_mem *m = &t->mem[i];
        *n +=
            (size_t)snprintf(p + *n, cap - *n,
                             "%s{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"name\":\"memory\",\"args\":"
                             "{\"rss_mib\":%.3f",
                             *n ? ",\n" : "", e->rank, (double)(m->t_ns - origin_ns) / 1e3, (double)m->rss / 1048576.0);
        for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
            *n += (size_t)snprintf(p + *n, cap - *n, ",\"%s_mib\":%.3f", zinc_mem_kind_name((zinc_mem_kind)k),
                                   (double)m->kinds[k] / 1048576.0);
        *n += (size_t)snprintf(p + *n, cap - *n, "}}");
    }
    return ZINC_OK;
}

/* This kernel's boot id: processes that share it share CLOCK_MONOTONIC (other network namespaces and
 * containers included). "" when unreadable. */
static void boot_id(char out[40]) {
    memset(out, 0, 40);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f) return;
    if (!fgets(out, 40, f)) out[0] = 0;
    fclose(f);
    out[strcspn(out, "\n")] = 0;
}

/* Rank 0's clock is the job's. A rank under rank 0's kernel reads the same clock (offset 0). Any other
 * estimates its offset: in each round rank 0 reads its clock (a), broadcasts it, every rank reads its own
 * (r) on receipt, and rank 0 reads its clock again (b) once all have answered; r happened between a and b
 * on rank 0's clock, so the offset is r - (a + b) / 2 within (b - a) / 2. The tightest of a few rounds. */
#define ALIGN_ROUNDS 8
typedef struct clock_sample {
    char boot[40];
    int64_t offset, error;
} clock_sample;

static zinc_status align_clocks(zinc_engine *e, zengine_trace *t) {
    zinc_status st = ZINC_OK;
    int64_t *got = NULL;
    clock_sample mine = {.offset = 0, .error = INT64_MAX}, *all = NULL;
    const char *estimate = zenv_get(ZENV_TRACE_TEST_ESTIMATE_CLOCK);
    if (!estimate || strcmp(estimate, "1")) boot_id(mine.boot);
    TRY_ALLOC(got, e->world, "the clock alignment");
    TRY_ALLOC(all, e->world, "the clock alignment");
    TRY(zcomm_barrier(e->comm));
    for (int i = 0; i < ALIGN_ROUNDS; i++) {
        int64_t a = ztrace_now_ns(), r;
        TRY(zcomm_bcast(e->comm, &a, sizeof a, 0));
        r = ztrace_now_ns();
        TRY(zcomm_allgather_bytes(e->comm, &r, got, sizeof r));
        int64_t b = ztrace_now_ns();
        TRY(zcomm_bcast(e->comm, &b, sizeof b, 0));
        if ((b - a) / 2 < mine.error) {
            mine.error = (b - a) / 2;
            mine.offset = r - a - mine.error;
        }
    }
    TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
    for (int q = 0; q < e->world; q++)
        if (q == 0 || (all[q].boot[0] && !strcmp(all[q].boot, all[0].boot))) all[q].offset = all[q].error = 0;
    for (int q = 1; q < e->world && e->rank == 0; q++)
        if (all[q].error)
            ZLOG_DEBUG(&e->log, "--trace: rank %d's clock is %+.3f ms from rank 0's (within %.3f ms)", q,
                       1e-6 * (double)all[q].offset, 1e-6 * (double)all[q].error);
    t->offset_ns = all[e->rank].offset;
    for (int q = 0; q < e->world; q++) {
        t->offsets[q] = all[q].offset;
        t->errors[q] = all[q].error;
    }
    int64_t origin = ztrace_now_ns() - t->offset_ns;
    TRY(zcomm_bcast(e->comm, &origin, sizeof origin, 0));
    t->origin_ns = origin;
fail:
    free(got);
    free(all);
    return st;
}

static void trace_free(zengine_trace *t) {
    if (!t) return;
    free(t->path);
    free(t->config_path);
    free(t->rank_path);
    free(t->mem);
    free(t->module_t0);
    free(t->module_dev);
    free(t->offsets);
    for (int i = 0; i < t->nnames; i++) free(t->names[i]);
    free(t->names);
    free(t);
}

zinc_status zengine_trace_create(zinc_engine *e, const zinc_options *o) {
    zinc_status st = ZINC_OK, mine = ZINC_OK;
    bool started = false;
    if (!o->trace_path) return ZINC_OK;
    zengine_trace *t = NULL;
    if (!*o->trace_path) {
        mine = ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: options.trace_path is empty: give a file name or NULL");
    } else if (o->trace_first_step < 1 || o->trace_last_step < o->trace_first_step) {
        mine = ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: the trace's steps %lld:%lld (options.trace_first_step, trace_last_step) are no "
                    "window: want 1 <= first <= last (steps count from 1)",
                    (long long)o->trace_first_step, (long long)o->trace_last_step);
    } else if (o->trace_replace != 0 && o->trace_replace != 1) {
        mine = ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: options.trace_replace %d: want 0 or 1", o->trace_replace);
    } else if (o->trace_per_rank != 0 && o->trace_per_rank != 1) {
        mine = ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: options.trace_per_rank %d: want 0 or 1", o->trace_per_rank);
    } else {
        /* rank 0 writes the file, each rank its own with trace_per_rank: refused now, before any training */
        const char *inputs[2] = {o->config_path, NULL};
        unsigned fl = o->trace_replace ? ZFILE_REPLACE : 0;
        if (e->rank == 0) mine = zfile_check_target("--trace", o->trace_path, fl, inputs);
        if (mine == ZINC_OK && o->trace_per_rank) {
            char rp[4096];
            if (snprintf(rp, sizeof rp, "%s.rank%d.json", o->trace_path, e->rank) >= (int)sizeof rp)
                mine = ZERR(ZINC_ERR_INVALID_ARG, "--trace %s: the path is too long for its per-rank files",
                            o->trace_path);
            else
                mine = zfile_check_target("--trace (per rank)", rp, fl, inputs);
        }
    }
    TRY(zcomm_agree_status(e->comm, mine));
    TRY_ALLOC(t, 1, "the trace's settings");
    if (o->trace_per_rank) {
        size_t cap = strlen(o->trace_path) + 32;
        TRY_ALLOC(t->rank_path, cap, "the trace's per-rank path");
        snprintf(t->rank_path, cap, "%s.rank%d.json", o->trace_path, e->rank);
    }
    t->path = strdup(o->trace_path);
    t->config_path = o->config_path ? strdup(o->config_path) : NULL;
    if (!t->path || (o->config_path && !t->config_path)) FAIL(ZINC_ERR_NOMEM, "out of memory for the trace's path");
    t->flags = o->trace_replace ? ZFILE_REPLACE : 0;
    t->win = (ztrace_window){o->trace_first_step, o->trace_last_step};
    TRY_ALLOC(t->offsets, 2 * (size_t)e->world, "the ranks' clock offsets");
    t->errors = t->offsets + e->world;
    const char *cap = zenv_get(ZENV_TRACE_TEST_MAX_EVENTS); /* a test hook: a cap a test can fill */
    int64_t max_events = cap ? atoll(cap) : 0;
    if (max_events < 0 || max_events > ZTRACE_DEFAULT_MAX_EVENTS) max_events = 0;
    TRY(zcomm_agree_status(e->comm, ztrace_start(t->win, max_events)));
    started = true;
    TRY(align_clocks(e, t));
    e->trace = t;
    return ZINC_OK;
fail:
    if (started) ztrace_reset();
    trace_free(t);
    return st;
}

void zengine_trace_module_enter(zinc_engine *e, int module, int phase) {
    zengine_trace *t = e->trace;
    if (!t->module_t0) {
        t->module_t0 = calloc((size_t)e->nmodules * 2, sizeof *t->module_t0);
        t->module_dev = malloc((size_t)e->nmodules * 2 * sizeof *t->module_dev);
        if (!t->module_t0 || !t->module_dev) {
            free(t->module_t0);
            free(t->module_dev);
            t->module_t0 = NULL;
            t->module_dev = NULL;
            return;
        }
        for (int i = 0; i < 2 * e->nmodules; i++) t->module_dev[i] = -1;
        t->nmodules = e->nmodules;
    }
    ztrace_step_begin();
    t->module_t0[2 * module + phase] = ztrace_now_ns();
    /* on a GPU also the model's kernels on the compute stream between enter and exit */
    t->module_dev[2 * module + phase] = zdev_trace_begin(e->dev, ZDEV_STREAM_COMPUTE);
}

int64_t zengine_trace_module_exit(zinc_engine *e, int module, int phase) {
    zengine_trace *t = e->trace;
    if (!t->module_t0) return 0;
    int64_t *t0 = &t->module_t0[2 * module + phase], start = *t0;
    /* a forward inside an open backward recomputes activations (activation checkpointing) */
    ztrace_cat cat = phase == ZINC_BACKWARD ? ZTRACE_BACKWARD
                     : e->open_backward > 0 ? ZTRACE_RECOMPUTE
                                            : ZTRACE_FORWARD;
    ztrace_span(*t0, cat, e->modules[module].name, 0, NULL, 0, NULL, 0);
    *t0 = 0;
    int *dev = &t->module_dev[2 * module + phase];
    zdev_trace_end(e->dev, *dev, cat, e->modules[module].name, NULL, 0);
    *dev = -1;
    return start;
}

/* Rank 0's file: the header, every rank's events (received in rank order), the trailer. */
static zinc_status write_file(zinc_engine *e, zengine_trace *t, const char *mine, size_t n, const int64_t *sizes,
                              const int64_t *dropped) {
    zinc_status st = ZINC_OK;
    zfile_out out;
    char *buf = NULL;
    int64_t most = 0;
    for (int r = 0; r < e->world; r++) most = sizes[r] > most ? sizes[r] : most;
    TRY_ALLOC(buf, (size_t)most + 1, "a rank's trace events");
    zinc_status opened =
        e->rank == 0 ? zfile_out_open(&out, "--trace", t->path, t->flags, (const char *const[]){t->config_path, NULL})
                     : ZINC_OK;
    if (e->rank == 0 && opened == ZINC_OK) {
        static const char head[] = "{\"traceEvents\":[\n";
        opened = zfile_out_write(&out, head, sizeof head - 1);
        if (opened == ZINC_OK) opened = zfile_out_write(&out, mine, n);
    }
    /* every rank takes part in the broadcasts even when rank 0 cannot write, then all return its status */
    for (int r = 1; r < e->world; r++) {
        if (e->rank == r) memcpy(buf, mine, n);
        st = zcomm_bcast(e->comm, buf, (size_t)sizes[r], r);
        if (st != ZINC_OK) break;
        if (e->rank == 0 && opened == ZINC_OK && sizes[r] > 0) {
            opened = zfile_out_write(&out, ",\n", 2);
            if (opened == ZINC_OK) opened = zfile_out_write(&out, buf, (size_t)sizes[r]);
        }
    }
    if (e->rank == 0 && opened == ZINC_OK && st == ZINC_OK) {
        int64_t total_dropped = 0;
        for (int r = 0; r < e->world; r++) total_dropped += dropped[r];
        size_t cap = 512 + 3 * 24 * (size_t)e->world, k = 0;
        char *tail = malloc(cap);
        if (!tail) opened = ZERR(ZINC_ERR_NOMEM, "out of memory for the trace's last lines");
        const int64_t *arrays[3] = {dropped, t->offsets, t->errors};
        static const char *const keys[3] = {"dropped_events_per_rank", "clock_offset_ns", "clock_error_ns"};
        if (tail) {
            k += (size_t)snprintf(tail + k, cap - k,
                                  "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":\"zinc-trace 1\","
                                  "\"world_size\":%d,\"trace_steps\":[%lld,%lld],\"zinc_version\":\"%s\",\"clock\":"
                                  "\"ranks aligned at start\",\"zero_stage\":%d,\"dropped_events\":%lld",
                                  e->world, (long long)t->win.first, (long long)t->win.last, zinc_version(), e->stage,
                                  (long long)total_dropped);
            for (int q = 0; q < 3; q++) {
                k += (size_t)snprintf(tail + k, cap - k, ",\"%s\":[", keys[q]);
                for (int r = 0; r < e->world; r++)
                    k += (size_t)snprintf(tail + k, cap - k, "%s%lld", r ? "," : "", (long long)arrays[q][r]);
                k += (size_t)snprintf(tail + k, cap - k, "]");
            }
            opened = zfile_out_write(&out, tail, strlen(tail));
            free(tail);
            /* the model's FLOPs (engine_flops.c): zinc trace summary's per-module FLOP/s */
            char *flops = NULL;
            if (opened == ZINC_OK) opened = zengine_flops_trace_json(e, &flops);
            if (opened == ZINC_OK) opened = zfile_out_write(&out, flops, strlen(flops));
            free(flops);
            if (opened == ZINC_OK) opened = zfile_out_write(&out, "}}\n", 3);
        }
        if (opened == ZINC_OK) opened = zfile_out_commit(&out);
        if (opened != ZINC_OK) zfile_out_abort(&out);
        if (opened == ZINC_OK && total_dropped)
            ZLOG_WARN(&e->log,
                      "--trace %s: %lld spans did not fit in the trace's buffers and were dropped: trace fewer "
                      "steps (--trace-steps A:B)",
                      t->path, (long long)total_dropped);
        else if (opened == ZINC_OK)
            ZLOG_INFO(&e->log, "--trace %s: the timeline of steps %lld to %lld, %d rank%s", t->path,
                      (long long)t->win.first, (long long)t->win.last, e->world, e->world == 1 ? "" : "s");
    } else if (e->rank == 0) { /* a rank's events did not arrive, or the file could not be written */
        zfile_out_abort(&out);
    }
    /* a file rank 0 cannot write (a full disk) costs the trace, never the step, the checkpoint or the report:
     * every rank took part in the broadcasts, so they stay in step (zinc.h, trace_path) */
    if (st == ZINC_OK && opened != ZINC_OK)
        ZLOG_WARN(&e->log, "--trace %s was not written: %s; training goes on without it", t->path, zinc_last_error());
fail:
    free(buf);
    return st;
}

/* trace_per_rank: this rank's spans with PyTorch profiler's distributedInfo and ProfilerStep markers, in
 * its own file (HolisticTraceAnalysis reads one file per rank and takes the rank from distributedInfo). */
static zinc_status write_rank_file(zinc_engine *e, zengine_trace *t) {
    zinc_status st = ZINC_OK;
    char *text = NULL, head[256];
    size_t n = 0;
    zfile_out out;
    bool opened = false;
    TRY(ztrace_serialize_profiler(e->rank, t->origin_ns + t->offset_ns, &text, &n));
    TRY(append_counters(e, t, t->origin_ns + t->offset_ns, &text, &n));
    snprintf(head, sizeof head,
             "{\"distributedInfo\":{\"backend\":\"%s\",\"rank\":%d,\"world_size\":%d},\"traceEvents\":[\n",
             e->comm->ops->name ? e->comm->ops->name : "none", e->rank, e->world);
    TRY(zfile_out_open(&out, "--trace (per rank)", t->rank_path, t->flags,
                       (const char *const[]){t->config_path, NULL}));
    opened = true;
    TRY(zfile_out_write(&out, head, strlen(head)));
    TRY(zfile_out_write(&out, text, n));
    static const char tail[] = "\n],\n\"displayTimeUnit\":\"ms\"}\n";
    TRY(zfile_out_write(&out, tail, sizeof tail - 1));
    TRY(zfile_out_commit(&out));
    opened = false;
fail:
    if (opened) zfile_out_abort(&out);
    free(text);
    return st;
}

/* Collective: every rank's spans to rank 0, which writes the file. */
static zinc_status gather_and_write(zinc_engine *e) {
    zinc_status st = ZINC_OK, mine;
    zengine_trace *t = e->trace;
    char *text = NULL;
    size_t n = 0;
    int64_t *sizes = NULL, *dropped = NULL;
    t->written = true;
    ztrace_stop();
    mine = ztrace_serialize(e->rank, t->origin_ns + t->offset_ns, &text, &n);
    if (mine == ZINC_OK) mine = append_counters(e, t, t->origin_ns + t->offset_ns, &text, &n);
    TRY(zcomm_agree_status(e->comm, mine));
    TRY_ALLOC(sizes, 2 * (size_t)e->world, "the ranks' trace sizes");
    dropped = sizes + e->world;
    int64_t both[2] = {(int64_t)n, ztrace_dropped()}, *all = NULL;
    TRY_ALLOC(all, 2 * (size_t)e->world, "the ranks' trace sizes");
    st = zcomm_allgather_bytes(e->comm, both, all, sizeof both);
    for (int r = 0; r < e->world; r++) {
        sizes[r] = all[2 * r];
        dropped[r] = all[2 * r + 1];
    }
    free(all);
    TRY(st);
    TRY(write_file(e, t, text, n, sizes, dropped));
    if (t->rank_path) TRY(zcomm_agree_status(e->comm, write_rank_file(e, t)));
fail:
    free(text);
    free(sizes);
    ztrace_reset();
    return st;
}

zinc_status zengine_trace_step_end(zinc_engine *e, bool ok) {
    zengine_trace *t = e->trace;
    if (t->written) return ZINC_OK;
    /* the device's spans of this step (the host waits for its streams here) */
    zinc_status dev = ztrace_active() && e->dev->ops->trace_flush ? e->dev->ops->trace_flush(e->dev) : ZINC_OK;
    if (dev != ZINC_OK)
        ZLOG_WARN(&e->log, "--trace: the device's spans of step %lld are lost: %s", (long long)e->steps,
                  zinc_last_error());
    if (ztrace_active()) sample_memory(e, t);
    ztrace_step_end(e->cfg.train_micro_batch_size_per_gpu * e->cfg.gradient_accumulation_steps);
    ztrace_set_step(e->steps + 1);
    if (!ok || e->steps < t->win.last) return ZINC_OK;
    return zcomm_agree_status(e->comm, gather_and_write(e));
}

/* The model's span names outlive its buffers: each distinct name is copied once (a model has a few). */
static const char *intern(zengine_trace *t, const char *name) {
    for (int i = t->nnames - 1; i >= 0; i--)
        if (!strcmp(t->names[i], name)) return t->names[i];
    if (t->nnames == t->cap_names) {
        int cap = t->cap_names ? 2 * t->cap_names : 16;
        char **n = realloc(t->names, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        t->names = n;
        t->cap_names = cap;
    }
    char *copy = strdup(name);
    if (copy) t->names[t->nnames++] = copy;
    return copy;
}

int64_t zinc_trace_begin(const zinc_engine *e) { return e && e->trace ? ztrace_begin() : 0; }

zinc_status zinc_trace_end(zinc_engine *e, int64_t start, const char *category, const char *name) {
    int cat = ztrace_cat_find(category);
    if (!e || !name ||
        !(cat == ZTRACE_DATA || cat == ZTRACE_FORWARD || cat == ZTRACE_BACKWARD || cat == ZTRACE_RECOMPUTE ||
          cat == ZTRACE_ENGINE))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_trace_end: category \"%s\" (want data, forward, backward, recompute or engine), a "
                    "non-NULL engine and name",
                    category ? category : "(null)");
    if (!start || !e->trace) return ZINC_OK;
    const char *kept = intern(e->trace, name);
    if (!kept) return ZERR(ZINC_ERR_NOMEM, "zinc_trace_end: out of memory keeping the span name \"%s\"", name);
    if (cat == ZTRACE_DATA) ztrace_step_begin_at(start); /* the step's work begins with its batch */
    ztrace_span(start, (ztrace_cat)cat, kept, 0, NULL, 0, NULL, 0);
    return ZINC_OK;
}

void zengine_trace_sync_step(zinc_engine *e) {
    if (e->trace && !e->trace->written) ztrace_set_step(e->steps + 1);
}

void zengine_trace_destroy(zinc_engine *e) {
    zengine_trace *t = e->trace;
    if (!t) return;
    /* a run shorter than the window: what it recorded (a broken engine's ranks may no longer meet) */
    if (!t->written && !e->broken[0] && gather_and_write(e) != ZINC_OK)
        ZLOG_ERROR(&e->log, "--trace %s was not written: %s", t->path, zinc_last_error());
    if (atomic_load(&ztrace_enabled)) ztrace_reset();
    trace_free(t);
    e->trace = NULL;
}

/* The trace's observer (engine_observe.c): created at zinc_create, a step's end after every zinc_step
 * while there is a trace, destroyed at zinc_destroy. */
static zinc_status trace_step_end(zinc_engine *e, const zinc_step_info *info, bool ok) {
    (void)info;
    return e->trace ? zengine_trace_step_end(e, ok) : ZINC_OK;
}

const zengine_observer zengine_observer_trace = {.name = "trace",
                                                 .create = zengine_trace_create,
                                                 .step_end = trace_step_end,
                                                 .destroy = zengine_trace_destroy};
