/* `zinc trace summary`: per rank, where the steps' time went by phase (the spans' cat), with the
 * communication split into the part hidden behind compute and the exposed part; the mean step time per
 * rank and the slowest rank; per module, forward/backward/recompute time and, when the trace carries the
 * model's FLOPs (otherData.module_flops), FLOPs and FLOP/s. Time is self time (a span's duration less its
 * children's on its track), united over a rank's tracks: a phase busy on two threads at once counts once. */
#ifndef ZINC_CLI_TRACE_SUMMARY_H
#define ZINC_CLI_TRACE_SUMMARY_H

#include <jansson.h>
#include <stdio.h>

#include "cli/trace/trace_load.h"

/* The summary as JSON (the object --json prints): NULL when out of memory. */
json_t *zcli_trace_summarize(const zcli_trace *t);
/* The same for people. */
void zcli_trace_print(const char *path, const zcli_trace *t, const json_t *summary, FILE *f);
/* Its per-module table alone (nothing when the trace has no module spans). */
void zcli_trace_print_modules(const zcli_trace *t, const json_t *summary, FILE *f);
/* The per-module table of the trace file `path` (zinc train's end of a traced run): 0, or -1 after printing
 * "<who>: <why>". */
int zcli_trace_module_table(const char *who, const char *path, FILE *f);

#endif
