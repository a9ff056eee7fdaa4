/* `zinc trace`: a trace file (Chrome Trace Event JSON as zinc train --trace writes it; the contract is
 * docs/profiling.md, "The file") read into spans per rank and track, checked on the way: a file that is not
 * JSON, is cut short, is not a zinc trace, or has an event without a field the tools need is refused with
 * a message naming the event and the field. Spans on one track nest; each span gets its depth and its
 * self time (its duration less its children's), which the summary and the plot use. A trace is untrusted
 * input: every number is range-checked (what does not fit is an error naming the event), the world size is
 * bounded by the file's size, nesting by a depth limit, and the work by the file's size (n log n). */
#ifndef ZINC_CLI_TRACE_LOAD_H
#define ZINC_CLI_TRACE_LOAD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/core/trace.h"

/* A span's phase: its "cat" as the recorder's table names it (ztrace_cat, base/core/trace.h), or
 * ZCLI_TRACE_OTHER for a cat the contract does not name. */
#define ZCLI_TRACE_OTHER ZTRACE_CAT_COUNT
#define ZCLI_TRACE_CATS (ZTRACE_CAT_COUNT + 1)
/* The phases in the order the summary prints them and the plot stacks them: the step last (its self time is
 * the step's time in no other span). */
extern const int zcli_trace_order[ZCLI_TRACE_CATS];
/* The phase's name: the recorder's, or "other". */
const char *zcli_tcat_name(int cat);

typedef struct zcli_tspan {
    double ts, dur, self; /* microseconds from the job's start; self: dur less the children's */
    int pid, track, cat, depth;
    const char *name; /* the event's (lives as long as the trace's JSON) */
    int64_t step, samples;
    double bytes;
} zcli_tspan;

typedef struct zcli_ttrack {
    int pid, tid;
    char name[64]; /* thread_name, or "tid N" */
} zcli_ttrack;

typedef struct zcli_trace {
    json_t *root;
    zcli_tspan *spans; /* sorted by (rank, track, ts, longest first) */
    size_t n;
    zcli_ttrack *tracks; /* sorted by (rank, tid) */
    int ntracks;
    int world;
    int64_t step_first, step_last; /* otherData.trace_steps (-1: not given) */
    double flops_per_sample;       /* otherData.flops_per_sample (0: not given) */
    json_t *module_flops;          /* otherData.module_flops {"name": [forward, backward]} per sample, or NULL */
    int clamped;                   /* spans that crossed their parent's end on one track, cut at it */
    size_t *rank_first;            /* world + 1 entries: rank r's spans are [rank_first[r], rank_first[r + 1]) */
} zcli_trace;

/* 0, or -1 with why (which names the file) filled. */
int zcli_trace_load(const char *path, zcli_trace *t, char *why, size_t cap);
void zcli_trace_free(zcli_trace *t);

#endif
