/* The memory plots' gnuplot script and its run (cli/common/plot.h). */
#include "cli/common/plot.h"

#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int zcli_plot_check_name(const char *who, const char *out) {
    const char *ext = strrchr(out, '.');
    if (ext && (!strcmp(ext, ".svg") || !strcmp(ext, ".png"))) return 0;
    fprintf(stderr, "%s: --plot %s: the file name must end in .svg or .png\n", who, out);
    return -1;
}

/* A gnuplot double-quoted string: backslash and quote escaped, newline as \n, and the backquote and every other
 * control byte as a three-digit octal escape. gnuplot runs a backquoted command found inside a double-quoted
 * string (`touch x` in a trace's thread name would run), and a carriage return would end the command line;
 * "\140" is a backquote only once the string is parsed, after the command substitution. */
static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '`' || c < 0x20 || c == 0x7f)
            fprintf(f, "\\%03o", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void zcli_gnuplot_string(FILE *f, const char *s) { put_string(f, s); }

/* The subtitle broken at spaces into lines of at most `width` characters (a longer word stays whole). */
static void wrap(char *dst, size_t cap, const char *s, size_t width) {
    size_t k = 0, col = 0;
    while (*s && k + 2 < cap) {
        size_t word = strcspn(s, " ");
        if (col > 0 && col + 1 + word > width) {
            dst[k++] = '\n';
            col = 0;
        } else if (col > 0) {
            dst[k++] = ' ';
            col++;
        }
        for (size_t i = 0; i < word && k + 2 < cap; i++) dst[k++] = s[i];
        col += word;
        s += word;
        while (*s == ' ') s++;
    }
    dst[k] = 0;
}

FILE *zcli_plot_open(const char *who, const char *path, const char *input, zfile_out *o) {
    const char *inputs[] = {input ? input : "", NULL};
    if (zfile_out_open(o, "plot", path, ZFILE_REPLACE, inputs) != ZINC_OK) {
        fprintf(stderr, "%s: %s\n", who, zinc_last_error());
        return NULL;
    }
    FILE *f = zfile_out_stream(o);
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, o->tmp, strerror(errno));
        zfile_out_abort(o);
    }
    return f;
}

int zcli_plot_close(const char *who, FILE *f, zfile_out *o) {
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, o->path, strerror(errno));
        zfile_out_abort(o);
        return -1;
    }
    if (zfile_out_commit(o) != ZINC_OK) {
        fprintf(stderr, "%s: %s\n", who, zinc_last_error());
        return -1;
    }
    return 0;
}

/* The script draws into `image` (the picture's temporary file, put in place after gnuplot succeeds). */
static int write_script(const zcli_plot *p, bool png, const char *image) {
    zfile_out o;
    FILE *f = zcli_plot_open("zinc mem", p->script, p->input, &o);
    if (!f) return -1;
    char sub[2048];
    wrap(sub, sizeof sub, p->subtitle ? p->subtitle : "", 95);
    int lines = 2;
    for (const char *c = sub; *c; c++) lines += *c == '\n';
    fprintf(f, "set terminal %s size 1000,640 noenhanced\nset output ", png ? "pngcairo" : "svg");
    put_string(f, image);
    fprintf(f, "\nset tmargin %d\nset title ", lines + 2);
    char title[2300];
    snprintf(title, sizeof title, "%s\n%s", p->title, sub);
    put_string(f, title);
    fprintf(f, " noenhanced\nset xlabel ");
    put_string(f, p->xlabel);
    fprintf(f, "\nset ylabel ");
    put_string(f, p->ylabel);
    fprintf(f, "\nset logscale xy 2\nset grid\nset key below horizontal noenhanced\n");
    fprintf(f, "plot for [s=0:3] ");
    put_string(f, p->dat);
    fprintf(f, " using 1:(column(s+2)) with linespoints title sprintf('stage %%d', s)");
    if (p->capacity > 0)
        fprintf(f, ", %.6g with lines dashtype 2 linewidth 2 title sprintf('GPU capacity %%.4g %s', %.6g)", p->capacity,
                p->unit, p->capacity);
    fprintf(f, "\n");
    return zcli_plot_close("zinc mem", f, &o);
}

int zcli_plot_render(const char *who, const zcli_plot *p) {
    if (zcli_plot_check_name(who, p->out)) return -1;
    const char *ext = strrchr(p->out, '.');
    zfile_out img;
    const char *inputs[] = {p->input ? p->input : "", NULL};
    if (zfile_out_open(&img, "plot", p->out, ZFILE_REPLACE, inputs) != ZINC_OK) {
        fprintf(stderr, "%s: %s\n", who, zinc_last_error());
        return -1;
    }
    if (write_script(p, !strcmp(ext, ".png"), img.tmp)) {
        zfile_out_abort(&img);
        return -1;
    }
    return zcli_gnuplot_run(who, p->script, p->dat, &img, !strcmp(ext, ".png"));
}

int zcli_gnuplot_run(const char *who, const char *script, const char *dat, zfile_out *img, bool png) {
    pid_t pid;
    char *argv[] = {"gnuplot", (char *)script, NULL};
    int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (err == ENOENT) {
        zfile_out_abort(img);
        fprintf(stderr,
                "%s: gnuplot is not installed (Debian: gnuplot-nox): skipped the plot; the data is in %s "
                "and the script in %s\n",
                who, dat, script);
        return 0;
    }
    int status = 0;
    if (err || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        zfile_out_abort(img);
        fprintf(stderr, "%s: gnuplot failed on %s%s\n", who, script,
                png ? " (the png terminal needs cairo: try .svg)" : "");
        return -1;
    }
    if (zfile_out_commit(img) != ZINC_OK) {
        fprintf(stderr, "%s: %s\n", who, zinc_last_error());
        return -1;
    }
    fprintf(stderr, "%s: wrote %s (data %s, script %s)\n", who, img->path, dat, script);
    return 0;
}
