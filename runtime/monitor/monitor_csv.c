/* CSV files as DeepSpeed's csvMonitor writes them (deepspeed/monitor/csv_monitor.py): one file per tag,
 * named after the tag with '/' and ' ' as '_', a header "step,<the tag's last part>", then one
 * "samples,value" line per scalar, through Python's csv module: CRLF line ends, floats as Python's repr. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/core/error.h"
#include "runtime/monitor/monitor_internal.h"

void zmon_csv_name(const char *tag, char *name, size_t cap) {
    snprintf(name, cap, "%s.csv", tag);
    for (char *c = name; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
}

const char *zmon_csv_column(const char *tag) {
    const char *slash = strrchr(tag, '/');
    return slash ? slash + 1 : tag;
}

/* Python's repr of a float: the fewest digits that read back exactly, exponent form outside [1e-4, 1e16),
 * and ".0" on whole numbers, so the lines are the ones DeepSpeed's csv.writer would print. */
static void py_float(double v, char *out, size_t cap) {
    if (isnan(v) || isinf(v)) {
        snprintf(out, cap, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    char e[64];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    int x = atoi(strchr(e, 'e') + 1);
    if (x < -4 || x >= 16) {
        snprintf(out, cap, "%s", e);
        return;
    }
    snprintf(out, cap, "%.*f", p - 1 - x > 0 ? p - 1 - x : 0, v);
    if (!strchr(out, '.') && strlen(out) + 3 <= cap) strcat(out, ".0");
}

/* An existing file is appended to (DeepSpeed opens it "a+") when it is this user's regular file with one
 * link, starts with this tag's header and no other process writes it (flock). Its header is not repeated
 * (DeepSpeed writes it again in every process, which CSV readers then take for a row). */
static zinc_status append_existing(const zmon_dir *d, const char *name, const char *header, zmon_file *f) {
    int fd = openat(d->fd, name, O_RDWR | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ZERR(ZINC_ERR_IO, "csv_monitor: %s exists and cannot be appended to: %s%s", f->path, strerror(errno),
                    errno == ELOOP ? " (it is a symbolic link: refused)" : "");
    zinc_status st = ZINC_OK;
    struct stat sb;
    char head[160] = "", last = '\n';
    size_t hn = strlen(header);
    if (fstat(fd, &sb) != 0) FAIL(ZINC_ERR_IO, "csv_monitor: %s: %s", f->path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        FAIL(ZINC_ERR_IO, "csv_monitor: %s exists and is not a regular file: refused; choose another job_name",
             f->path);
    if (sb.st_uid != geteuid())
        FAIL(ZINC_ERR_IO, "csv_monitor: %s belongs to user %ld, not to this user: refused; choose another job_name",
             f->path, (long)sb.st_uid);
    if (sb.st_nlink != 1)
        FAIL(ZINC_ERR_IO, "csv_monitor: %s has %ld hard links: refused (appending would change the other names' file)",
             f->path, (long)sb.st_nlink);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        FAIL(ZINC_ERR_IO,
             "csv_monitor: %s is being written by another process (a run with the same csv_monitor.output_path and "
             "job_name?); give this run another csv_monitor.job_name",
             f->path);
    if (sb.st_size > 0 && (pread(fd, head, hn, 0) != (ssize_t)hn || memcmp(head, header, hn) != 0))
        FAIL(ZINC_ERR_IO,
             "csv_monitor: %s exists and does not start with the line \"%.*s\": not this tag's CSV file; refused "
             "(zinc appends only to its own); move it away or choose another job_name",
             f->path, (int)hn - 2, header);
    if (sb.st_size > 0 && pread(fd, &last, 1, sb.st_size - 1) != 1)
        FAIL(ZINC_ERR_IO, "csv_monitor: cannot read %s: %s", f->path, strerror(errno));
    fcntl(fd, F_SETFL, O_APPEND); /* blocking writes from here on */
    f->fd = fd;
    f->failed = false;
    f->created = false;
    f->err = 0;
    f->size = sb.st_size;
    /* a line cut short by a run that died mid-write is ended, so the next one starts on its own line */
    if (sb.st_size == 0 ? !zmon_file_write(f, header, hn, NULL, "csv_monitor")
                        : last != '\n' && !zmon_file_write(f, "\r\n", 2, NULL, "csv_monitor"))
        return ZERR(ZINC_ERR_IO, "csv_monitor: cannot write %s: %s", f->path, strerror(f->err));
    return ZINC_OK;
fail:
    close(fd);
    return st;
}

static zinc_status open_tag(zmon_csv *c, struct zmon_csv_tag *t) {
    char name[300], header[160];
    zmon_csv_name(t->tag, name, sizeof name);
    snprintf(header, sizeof header, "step,%s\r\n", zmon_csv_column(t->tag));
    if (zmon_file_create(&c->dir, name, &t->file) == ZINC_OK) {
        if (!zmon_file_write(&t->file, header, strlen(header), NULL, "csv_monitor"))
            return ZERR(ZINC_ERR_IO, "csv_monitor: cannot write %s: %s", t->file.path, strerror(t->file.err));
        return ZINC_OK;
    }
    if (t->file.err != EEXIST) return ZINC_ERR_IO; /* the message is zmon_file_create's */
    return append_existing(&c->dir, name, header, &t->file);
}

/* The tag's entry, its file opened at the first use (NULL when it cannot be: said once, in a warning). */
static struct zmon_csv_tag *tag_entry(zmon_csv *c, const char *tag, const zlog *log) {
    for (int i = 0; i < c->ntags; i++)
        if (!strcmp(c->tags[i].tag, tag)) return &c->tags[i];
    if (c->ntags == ZMON_MAX_TAGS || strlen(tag) >= sizeof c->tags[0].tag) return NULL;
    struct zmon_csv_tag *t = &c->tags[c->ntags++];
    snprintf(t->tag, sizeof t->tag, "%s", tag);
    t->file.fd = -1;
    if (open_tag(c, t) != ZINC_OK) {
        t->file.failed = true;
        if (log) ZLOG_WARN(log, "%s; the tag %s is not written", zinc_last_error(), tag);
    }
    return t;
}

zinc_status zmon_csv_open(zmon_csv *c, const zcfg_monitor *m, const char *const *tags) {
    c->dir.block = "csv_monitor";
    c->ntags = 0;
    zinc_status st = zmon_dir_open(&c->dir, m);
    for (int i = 0; st == ZINC_OK && tags && tags[i]; i++) {
        struct zmon_csv_tag *t = tag_entry(c, tags[i], NULL);
        if (t && t->file.failed) st = ZINC_ERR_IO; /* open_tag's message */
    }
    return st;
}

void zmon_csv_scalar(zmon_csv *c, const char *tag, double value, int64_t samples, const zlog *log) {
    struct zmon_csv_tag *t = tag_entry(c, tag, log);
    if (!t) return;
    char v[64], line[128];
    py_float(value, v, sizeof v);
    int n = snprintf(line, sizeof line, "%lld,%s\r\n", (long long)samples, v);
    zmon_file_write(&t->file, line, (size_t)n, log, "csv_monitor");
}

void zmon_csv_close(zmon_csv *c, const zlog *log) {
    for (int i = 0; i < c->ntags; i++) zmon_file_close(&c->tags[i].file, log, "csv_monitor");
    c->ntags = 0;
    zmon_dir_close(&c->dir);
}
