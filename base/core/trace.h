/* The timeline recorder behind `zinc train --trace` (zinc_options.trace_path): spans of the engine's
 * work (modules, collectives, waits, the optimizer's chunks, NVMe requests, copies, checkpoints, data) on
 * a monotonic clock in nanoseconds, written as one Chrome Trace Event file for all ranks
 * (docs/profiling.md; the file's contract is TRACE_FORMAT in the docs).
 *
 * One recorder per process. Each thread appends to buffers of its own (registered once, at its first
 * span): no lock on the hot path. Buffers grow in blocks up to a cap of the whole process's events, past
 * which spans are dropped and counted, never grown. Off, a call site costs one predictable branch
 * (ztrace_active) and allocates nothing.
 *
 * A call site:
 *     int64_t t0 = ztrace_begin();              (0 when not recording)
 *     ... the work ...
 *     if (t0) ztrace_span(t0, ZTRACE_COMM, "reduce_scatter", track, "bytes", n, NULL, 0);
 *
 * Gathering the ranks' events and aligning their clocks is the engine's (runtime/engine/engine_trace.c):
 * this file only records and turns one process's spans into JSON text. */
#ifndef ZINC_RUNTIME_CORE_TRACE_H
#define ZINC_RUNTIME_CORE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

/* The "cat" of a span (the per-phase breakdown groups by it); names in ztrace_cat_name. */
typedef enum ztrace_cat {
    ZTRACE_STEP = 0,
    ZTRACE_FORWARD,
    ZTRACE_BACKWARD,
    ZTRACE_RECOMPUTE,
    ZTRACE_COMM,
    ZTRACE_WAIT,
    ZTRACE_OPTIMIZER,
    ZTRACE_NVME,
    ZTRACE_COPY,
    ZTRACE_CHECKPOINT,
    ZTRACE_DATA,
    ZTRACE_GPU,
    ZTRACE_ENGINE,
    ZTRACE_POOL, /* a thread-pool worker's part of a job (the thread that posted it has its own span) */
    ZTRACE_CAT_COUNT
} ztrace_cat;

const char *ztrace_cat_name(ztrace_cat c);
/* The category named `name`, or -1. */
int ztrace_cat_find(const char *name);

/* Recording now: tracing is on and the current step lies in the window. Read at every call site. */
extern _Atomic bool ztrace_recording;
/* Tracing is on at all (the window aside): for rare spans that are kept whatever the step (checkpoints). */
extern _Atomic bool ztrace_enabled;

static inline bool ztrace_active(void) { return atomic_load_explicit(&ztrace_recording, memory_order_relaxed); }

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t ztrace_now_ns(void);

/* A span's start: the clock when recording, else 0 (which ztrace_span ignores, so a span begun before the
 * window opened is not recorded). */
static inline int64_t ztrace_begin(void) { return ztrace_active() ? ztrace_now_ns() : 0; }
/* The same for spans kept outside the step window (checkpoints). */
static inline int64_t ztrace_begin_always(void) {
    return atomic_load_explicit(&ztrace_enabled, memory_order_relaxed) ? ztrace_now_ns() : 0;
}

/* Records a span [t0, now) on this thread's track, or on `track` (> 0, from ztrace_track) for work that
 * outlives the call that started it (a collective in flight). Up to two integer arguments (k1, k2 NULL
 * for none). `name` and the keys must stay valid until ztrace_serialize (string literals, module names). */
void ztrace_span(int64_t t0, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1, const char *k2,
                 int64_t v2);
/* The same with the end given (spans resolved later: GPU events). */
void ztrace_span_at(int64_t t0, int64_t t1, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1,
                    const char *k2, int64_t v2);

/* Flows (a trace viewer's arrows): a span that starts work another span finishes (a collective's issue, its
 * wait) carries the same id from ztrace_flow_id, the first ZTRACE_FLOW_OUT, the other ZTRACE_FLOW_IN; the
 * serializer writes a flow start ("ph":"s") bound to the first and a flow end ("ph":"f", "bp":"e") bound to
 * the second, ids unique over the file's ranks. 0 when tracing is off (no flow). */
typedef enum ztrace_flow_dir { ZTRACE_FLOW_OUT = 1, ZTRACE_FLOW_IN = 2 } ztrace_flow_dir;
int64_t ztrace_flow_id(void);
/* ztrace_span with a flow end (id 0: none, as ztrace_span). */
void ztrace_span_flow(int64_t t0, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1,
                      const char *k2, int64_t v2, int64_t flow, ztrace_flow_dir dir);
/* A flow's end alone, bound to the span that starts at t0 on `track` (0: this thread's): for a span recorded
 * before the work it led to was known (the backward span whose gradients completed a bucket, recorded before
 * the bucket's reduce-scatter is issued), or for a span that already carries a flow (that reduce-scatter's
 * issue, which also starts the flow to its wait). Nothing when t0 or flow is 0. */
void ztrace_flow_at(int64_t t0, int track, int64_t flow, ztrace_flow_dir dir);

/* A span of device work (cat "gpu") on a stream's track; `kind` (the work's own category: forward, comm,
 * copy...) goes into args.kind. */
void ztrace_gpu_span_at(int64_t t0, int64_t t1, ztrace_cat kind, const char *name, int track, const char *k1,
                        int64_t v1);

/* A named track that is not a thread (a bucket's collectives, a CUDA stream): its id for ztrace_span.
 * The same name gives the same id. Returns 0 (the caller's own thread) when tracing is off or the table
 * is full. */
int ztrace_track(const char *name);
/* Names the calling thread's track ("pool 3", "nvme"); the first thread to record is "main" unless named. */
void ztrace_thread_name(const char *name);

/* The step window. Steps count from 1: step k is the work of the k-th zinc_step. */
typedef struct ztrace_window {
    int64_t first, last;
} ztrace_window;

/* Turns the recorder on for steps [w.first, w.last] with room for `max_events` spans in the process
 * (0: the default, ZTRACE_DEFAULT_MAX_EVENTS). ZINC_ERR_STATE if it is already on (one traced engine per
 * process). The calling thread becomes the "main" track. */
#define ZTRACE_DEFAULT_MAX_EVENTS ((int64_t)1 << 20) /* 64 MiB of spans */
zinc_status ztrace_start(ztrace_window w, int64_t max_events);
/* The step now being worked on (1-based); recording follows the window. */
void ztrace_set_step(int64_t step);
int64_t ztrace_step(void);
/* Marks where the current step began, if not marked yet (the first module entered, or the caller's data
 * fetch before it); ztrace_step_end records the step's span from there. */
void ztrace_step_begin(void);
void ztrace_step_begin_at(int64_t t0);
void ztrace_step_end(int64_t samples);
/* Stops recording (spans are kept for ztrace_serialize). */
void ztrace_stop(void);
/* Frees every buffer and turns the recorder off. */
void ztrace_reset(void);

/* Counts n spans dropped elsewhere (a device's full table of events). */
void ztrace_count_dropped(int64_t n);
/* Spans dropped because the process's buffers were full; spans recorded. */
int64_t ztrace_dropped(void);
int64_t ztrace_recorded(void);

/* This process's metadata and spans as JSON event objects separated by commas (no brackets), pid = `pid`,
 * times in microseconds from `origin_ns` on this process's clock. *out is malloc'ed (NUL-terminated). */
zinc_status ztrace_serialize(int pid, int64_t origin_ns, char **out, size_t *len);
/* The same with PyTorch profiler's step markers for tools that find iterations by them (HolisticTraceAnalysis):
 * each step span is followed by a copy named "ProfilerStep#<step>", cat "user_annotation"; and module spans
 * named "<module> <phase>" ("block0 forward", args.module the module), so forward and backward differ by name. */
zinc_status ztrace_serialize_profiler(int pid, int64_t origin_ns, char **out, size_t *len);

#endif
