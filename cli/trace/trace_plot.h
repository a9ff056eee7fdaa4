/* `zinc trace plot`: the trace as a Gantt chart, one row per rank and track (thread, stream), one box per
 * span coloured by its phase (cat), nested spans drawn thinner inside their parents; drawn by gnuplot as
 * the plots of `zinc mem` are (cli/common/plot.h), with the data (OUT.dat) and script (OUT.gp) beside the image. */
#ifndef ZINC_CLI_TRACE_PLOT_H
#define ZINC_CLI_TRACE_PLOT_H

#include <stdbool.h>

#include "cli/trace/trace_load.h"

/* 0 when drawn (or gnuplot missing, said), -1 after printing why. `input` is the trace file, which no
 * output may replace; force lets OUT, OUT.dat and OUT.gp replace existing files. */
int zcli_trace_plot(const zcli_trace *t, const char *input, const char *out, bool force);

#endif
