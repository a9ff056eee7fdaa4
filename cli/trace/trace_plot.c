/* See trace_plot.h. */
#include "cli/trace/trace_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common/plot.h"

static const char *const COLOURS[ZCLI_TRACE_CATS] = {
    [ZTRACE_FORWARD] = "#4c72b0",    [ZTRACE_BACKWARD] = "#dd8452",
    [ZTRACE_RECOMPUTE] = "#ccb974",  [ZTRACE_COMM] = "#55a868",
    [ZTRACE_WAIT] = "#c44e52",       [ZTRACE_OPTIMIZER] = "#8172b3",
    [ZTRACE_NVME] = "#937860",       [ZTRACE_COPY] = "#da8bc3",
    [ZTRACE_CHECKPOINT] = "#8c8c8c", [ZTRACE_DATA] = "#64b5cd",
    [ZTRACE_ENGINE] = "#b07aa1",     [ZTRACE_GPU] = "#2ca02c",
    [ZTRACE_POOL] = "#9bbfe0",       [ZCLI_TRACE_OTHER] = "#000000",
    [ZTRACE_STEP] = "#e4e4e4", /* the light band behind everything */
};

#define MAX_DEPTH 6     /* deeper spans are drawn at this depth's height */
#define MAX_TRACKS 1024 /* rows of one picture */

static const char *WHO = "zinc trace plot";

static int open_out(zfile_out *o, const char *what, const char *path, const char *input, bool force, FILE **f) {
    const char *inputs[] = {input, NULL};
    if (zfile_out_open(o, what, path, force ? ZFILE_REPLACE : 0, inputs) != ZINC_OK) {
        fprintf(stderr, "%s: %s\n", WHO, zinc_last_error());
        return -1;
    }
    if (!f) return 0;
    if (!(*f = zfile_out_stream(o))) {
        fprintf(stderr, "%s: cannot write %s\n", WHO, o->tmp);
        zfile_out_abort(o);
        return -1;
    }
    return 0;
}

/* One block per (depth, cat) that has spans, shallow first, so children are drawn over their parents:
 * "x0 x1 row" in ms. used[depth * ZCLI_TRACE_CATS + cat] says which blocks were written; returns how many. */
static int write_data(const zcli_trace *t, FILE *f, bool *used) {
    int blocks = 0;
    for (int d = 0; d <= MAX_DEPTH; d++)
        for (int c = 0; c < ZCLI_TRACE_CATS; c++) {
            int c2 = c == 0 ? ZTRACE_STEP : zcli_trace_order[c - 1]; /* the steps' band first, under everything */
            bool any = false;
            for (size_t i = 0; i < t->n; i++) {
                const zcli_tspan *s = &t->spans[i];
                int sd = s->depth < MAX_DEPTH ? s->depth : MAX_DEPTH;
                if (sd != d || s->cat != c2) continue;
                fprintf(f, "%.6f %.6f %d\n", s->ts / 1e3, (s->ts + s->dur) / 1e3, t->ntracks - 1 - s->track);
                any = true;
            }
            used[d * ZCLI_TRACE_CATS + c2] = any;
            if (any) blocks++, fprintf(f, "\n\n"); /* gnuplot's index counts only blocks with data */
        }
    return blocks;
}

static void write_script(const zcli_trace *t, FILE *f, const char *input, const char *dat, const char *image, bool png,
                         const bool *used) {
    fprintf(f, "set terminal %s size 1200,%d noenhanced\nset output ", png ? "pngcairo" : "svg", 160 + 26 * t->ntracks);
    zcli_gnuplot_string(f, image);
    char title[512];
    snprintf(title, sizeof title, "%s: %d rank%s, %zu spans (zinc trace plot)", input, t->world,
             t->world == 1 ? "" : "s", t->n);
    fprintf(f, "\nset title ");
    zcli_gnuplot_string(f, title);
    fprintf(f, "\nset xlabel \"time since the job's start (ms)\"\nset yrange [-0.6:%f]\nset ytics (", t->ntracks - 0.4);
    for (int k = 0; k < t->ntracks; k++) {
        char lab[96];
        snprintf(lab, sizeof lab, "rank %d %s", t->tracks[k].pid, t->tracks[k].name);
        zcli_gnuplot_string(f, lab);
        fprintf(f, " %d%s", t->ntracks - 1 - k, k + 1 < t->ntracks ? ", " : "");
    }
    fprintf(f, ")\nset grid x\nset key below horizontal maxcols 7\nset style fill solid 1.0 border lc rgb "
               "\"#ffffff\"\nplot ");
    bool titled[ZCLI_TRACE_CATS] = {false}, first = true;
    for (int d = 0, block = -1; d <= MAX_DEPTH; d++)
        for (int c = 0; c < ZCLI_TRACE_CATS; c++) {
            int c2 = c == 0 ? ZTRACE_STEP : zcli_trace_order[c - 1];
            if (!used[d * ZCLI_TRACE_CATS + c2]) continue;
            block++;
            double h = 0.42 * pow(0.72, d);
            fprintf(f, "%s", first ? "" : ", \\\n     ");
            zcli_gnuplot_string(f, dat);
            fprintf(f, " index %d using (($1+$2)/2):3:1:2:($3-%.4f):($3+%.4f) with boxxyerror lc rgb \"%s\" ", block, h,
                    h, COLOURS[c2]);
            if (titled[c2])
                fprintf(f, "notitle");
            else
                fprintf(f, "title \"%s\"", zcli_tcat_name(c2));
            titled[c2] = true, first = false;
        }
    fprintf(f, "\n");
}

int zcli_trace_plot(const zcli_trace *t, const char *input, const char *out, bool force) {
    if (zcli_plot_check_name(WHO, out)) return -1;
    if (!t->n) {
        fprintf(stderr, "%s: %s holds no spans to draw\n", WHO, input);
        return -1;
    }
    if (t->ntracks > MAX_TRACKS) { /* the picture's height grows with them */
        fprintf(stderr, "%s: %s has %d tracks; a picture draws at most %d (zinc trace summary reads any number)\n", WHO,
                input, t->ntracks, MAX_TRACKS);
        return -1;
    }
    size_t L = strlen(out) + 8;
    char *dat = malloc(L), *gp = malloc(L);
    bool *used = calloc((MAX_DEPTH + 1) * ZCLI_TRACE_CATS, sizeof *used);
    zfile_out img, od, og;
    FILE *fd = NULL, *fg = NULL;
    int rc = -1;
    if (!dat || !gp || !used) goto done;
    snprintf(dat, L, "%s.dat", out);
    snprintf(gp, L, "%s.gp", out);
    if (open_out(&img, "--out", out, input, force, NULL)) goto done;
    if (open_out(&od, "the plot's data", dat, input, force, &fd)) goto abort_img;
    write_data(t, fd, used);
    if (zcli_plot_close(WHO, fd, &od)) goto abort_img;
    if (open_out(&og, "the plot's script", gp, input, force, &fg)) goto abort_img;
    write_script(t, fg, input, dat, img.tmp, !strcmp(strrchr(out, '.'), ".png"), used);
    if (zcli_plot_close(WHO, fg, &og)) goto abort_img;
    rc = zcli_gnuplot_run(WHO, gp, dat, &img, !strcmp(strrchr(out, '.'), ".png"));
    goto done;
abort_img:
    zfile_out_abort(&img);
done:
    free(dat);
    free(gp);
    free(used);
    return rc;
}
