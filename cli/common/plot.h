/* gnuplot for every room that draws (zinc mem's and zinc trace's plots): the safe data file, the escaped
 * strings, the run without a shell, and the memory plots' drawing (`zinc mem estimate --plot`, `zinc mem plan
 * --plot`): four lines (stages 0-3) of a data file
 * the caller wrote (column 1 the rank or GPU count, columns 2-5 the stages, already in `unit`), on log-log
 * axes, with the GPU capacity as a dashed line when known. Any file name works: names reach gnuplot as
 * escaped strings and gnuplot is started without a shell. */
#ifndef ZINC_CLI_COMMON_PLOT_H
#define ZINC_CLI_COMMON_PLOT_H

#include <stdbool.h>
#include <stdio.h>

#include "base/core/safe_file.h"

typedef struct zcli_plot {
    const char *out;      /* FILE.svg or FILE.png */
    const char *dat;      /* the data file */
    const char *script;   /* the gnuplot script to write */
    const char *title;    /* first title line */
    const char *subtitle; /* the model and config: wrapped to the picture's width */
    const char *xlabel, *ylabel;
    const char *unit;  /* "GiB" or "GB": the capacity's unit */
    double capacity;   /* the GPU's memory in `unit`; 0 = not drawn */
    const char *input; /* the command's input (--config) that no output may replace, or NULL */
} zcli_plot;

/* 0 when `out` ends in .svg or .png, else -1 with a message naming the choices. */
int zcli_plot_check_name(const char *who, const char *out);
/* Writes the script and runs gnuplot on it. 0 when drawn or when gnuplot is not installed (said on stderr
 * with the data and script left for later), -1 on failure (said on stderr). */
int zcli_plot_render(const char *who, const zcli_plot *p);
/* Runs gnuplot on `script`, which draws into img's temporary file, and puts the image in place (img is
 * committed, or aborted on failure). 0 when drawn or when gnuplot is not installed (said, naming `dat` and
 * the script), -1 after printing why. */
int zcli_gnuplot_run(const char *who, const char *script, const char *dat, zfile_out *img, bool png);

/* s as a gnuplot double-quoted string (escaped: any file name or label is safe in a script). */
void zcli_gnuplot_string(FILE *f, const char *s);

/* A plot's data file through the safe writer (base/core/safe_file.h): an existing regular file is replaced
 * (plots are redrawn), a link, FIFO, device or `input` never. NULL after printing why. Finish with
 * zcli_plot_close (0, or -1 after printing why), which puts the file in place. */
FILE *zcli_plot_open(const char *who, const char *path, const char *input, zfile_out *o);
int zcli_plot_close(const char *who, FILE *f, zfile_out *o);

#endif
