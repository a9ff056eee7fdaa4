/* zinc trace summary|plot: read the timeline that zinc train --trace FILE writes (docs/profiling.md). */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/common/commands.h"
#include "cli/common/options.h"
#include "cli/trace/trace_load.h"
#include "cli/trace/trace_plot.h"
#include "cli/trace/trace_summary.h"

typedef struct trace_opts {
    const char *path, *out;
    bool json, force;
} trace_opts;

#define O(f) offsetof(trace_opts, f)
static const zcli_opt summary_options[] = {{"--json", ZCLI_FLAG, O(json), NULL, 0, 0, NULL,
                                            "print the summary as one JSON object (the same numbers)"},
                                           {0}};
static const zcli_opt plot_options[] =
    {{"--out", ZCLI_TEXT, O(out), "FILE", 0, 0, NULL,
      "the picture to write: FILE.svg or FILE.png (required); its data and\ngnuplot script go beside it as FILE.dat "
      "and FILE.gp"},
     {"--force", ZCLI_FLAG, O(force), NULL, 0, 0, NULL,
      "replace existing FILE, FILE.dat, FILE.gp (regular files only, never\nthe trace)"},
     {0}};
#undef O
static const zcli_table summary_table = {"summary:", summary_options, NULL}, plot_table = {"plot:", plot_options, NULL};

static const char trace_usage[] = "usage: zinc trace summary TRACE.json [--json]\n"
                                  "       zinc trace plot TRACE.json --out FILE.svg [--force]";
static const char trace_about[] =
    "TRACE.json is the timeline zinc train --trace FILE writes (one Chrome Trace Event file for all ranks;\n"
    "it also opens in Perfetto and chrome://tracing). summary prints, per rank, the steps' time by phase\n"
    "(forward, backward, recompute, comm, wait, optimizer, nvme, copy, checkpoint, data, engine), the\n"
    "communication hidden behind compute and the exposed part, the mean step time and the slowest rank,\n"
    "and per module the forward/backward time, FLOPs and FLOP/s. plot draws a Gantt chart per rank and\n"
    "track with gnuplot. docs/profiling.md says how to read both.";

static void usage(FILE *f) {
    trace_opts o = {0}; /* the defaults (none but off) */
    zcli_cmd c = {.name = "zinc trace",
                  .usage = trace_usage,
                  .about = trace_about,
                  .tables = {&summary_table, &plot_table},
                  .dst = {&o, &o}};
    zcli_help(&c, f);
}

int zcli_cmd_trace(int argc, char **argv) {
    static const zcli_subs subs = {"zinc trace", "summary|plot", "subcommand", true, usage};
    int rc, sub = zcli_subcommand(&subs, argc, argv, &rc);
    if (sub < 0) return rc;
    bool summary = sub == 0;
    trace_opts o = {0};
    zcli_cmd c = {.name = summary ? "zinc trace summary" : "zinc trace plot",
                  .usage = trace_usage,
                  .about = trace_about,
                  .positional = "TRACE.json",
                  .tables = {summary ? &summary_table : &plot_table},
                  .dst = {&o},
                  .pos_dst = &o.path};
    int pr = zcli_parse(&c, 2, argc, argv);
    if (pr) return pr == 1 ? 0 : 2;
    if (!o.path) return zcli_usage_error(&c, "the trace file is required (zinc train --trace FILE writes one)");
    if (!summary && !o.out) return zcli_usage_error(&c, "--out FILE.svg is required");
    zcli_trace t;
    char why[1024];
    if (zcli_trace_load(o.path, &t, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", c.name, why);
        zcli_trace_free(&t);
        return 1;
    }
    rc = 0;
    if (summary) {
        json_t *s = zcli_trace_summarize(&t);
        if (!s) {
            fprintf(stderr, "%s: out of memory\n", c.name);
            rc = 1;
        } else if (o.json) {
            json_dumpf(s, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
            fputc('\n', stdout);
        } else {
            zcli_trace_print(o.path, &t, s, stdout);
        }
        json_decref(s);
    } else {
        rc = zcli_trace_plot(&t, o.path, o.out, o.force) ? 1 : 0;
    }
    zcli_trace_free(&t);
    return rc;
}
