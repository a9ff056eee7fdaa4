/* zinc mem measure, shared by its two files: the run (mem_measure.c) and its output (mem_measure_print.c). */
#ifndef ZINC_CLI_MEM_MEASURE_H
#define ZINC_CLI_MEM_MEASURE_H

#include <jansson.h>
#include <stdint.h>

#include "cli/mem/mem_cli.h"
#include "runtime/mem/mem_estimate.h"
#include "zinc.h"

/* The real peak: each rank's resident bytes before zinc_build (VmHWM reset to VmRSS there where the
 * kernel allows) and VmHWM after the steps, from /proc/self/status. */
enum { PROC_BASE, PROC_PEAK, PROC_OK, PROC_RESET, PROC_N };

/* One measurement: the engine, the model's parameters, and what the ranks counted against the estimate. */
typedef struct meas_run {
    const mopts *o;
    const mmodel *m;
    const char *origin;
    zinc_engine *e;
    zinc_param **ps;
    zinc_memory_report before, after, *all; /* all: every rank's report */
    uint64_t proc[PROC_N], *procs;          /* this rank's and every rank's /proc figures */
    zinc_step_info info;
    int world, rank;
    zest_estimate est;
    uint64_t meas[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT]; /* the largest over the ranks */
    int bad, ranks_differ;                                      /* rows that differ; ranks that differ */
    uint64_t rss_est, rss_allow;
    int rss_bad, rss_unknown;
    json_t *rows, *prow; /* the rows and the per-rank process figures */
} meas_run;

/* Rank 0: the result as JSON, CSV or tables (o->json, o->csv). */
void mc_measure_print(const meas_run *r);

#endif
