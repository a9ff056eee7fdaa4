/* runtime/monitor on its own: the files DeepSpeed's csvMonitor and TensorBoard's SummaryWriter would write
 * (CSV text byte for byte, event records decoded back with their CRCs checked), appending as DeepSpeed does,
 * and every refusal: a link or a foreign file where a file goes, a file another run is writing, a directory
 * others can write, an output_path that cannot be a directory, a disk that fills up mid-run (a warning,
 * then nothing more: training goes on). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/core/crc32c.h"
#include "base/core/safe_file.h"
#include "runtime/monitor/monitor.h"
#include "runtime/monitor/tb_event.pb-c.h"
#include "zt.h"

static char root[1024];
static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};
static const zlog quiet = {.fn = zt_logcap_fn, .userdata = &log_cap, .level = ZINC_LOG_DEBUG};
#define nwarn zt_logcap_count_from(&log_cap, ZINC_LOG_WARN, NULL)
#define warned zt_logcap_last(&log_cap, ZINC_LOG_WARN, NULL)

static zcfg_monitor mon(bool on, const char *out, const char *job) {
    zcfg_monitor m = {.enabled = on};
    snprintf(m.output_path, sizeof m.output_path, "%s", out);
    snprintf(m.job_name, sizeof m.job_name, "%s", job);
    return m;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = malloc(1 << 20);
    *n = fread(b, 1, (1 << 20) - 1, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* The event files in dir (sorted names into names[], returns how many). */
static int event_files(const char *dir, char names[][512], int max) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && n < max;)
        if (!strncmp(de->d_name, "events.out.tfevents.", 20)) snprintf(names[n++], 512, "%s/%s", dir, de->d_name);
    if (d) closedir(d);
    return n;
}

static uint32_t masked(const void *p, size_t n) {
    uint32_t c = zcrc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Decodes every record of an event file, checking both CRCs; fills tags/values/steps of the scalars. */
static int read_events(const char *path, char *version, char tags[][64], float *values, long long *steps, int max) {
    size_t n;
    unsigned char *b = (unsigned char *)slurp(path, &n);
    int k = 0;
    size_t at = 0;
    ZT_CHECK(b != NULL, "cannot read %s", path);
    while (b && at + 12 <= n) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)b[at + i] << (8 * i);
        ZT_CHECK(le32(b + at + 8) == masked(b + at, 8), "%s: length CRC at %zu", path, at);
        ZT_CHECK(at + 16 + len <= n, "%s: record at %zu runs past the end", path, at);
        if (at + 16 + len > n) break;
        ZT_CHECK(le32(b + at + 12 + len) == masked(b + at + 12, len), "%s: data CRC at %zu", path, at);
        ZmonTb__Event *ev = zmon_tb__event__unpack(NULL, len, b + at + 12);
        ZT_CHECK(ev != NULL, "%s: record at %zu does not decode", path, at);
        if (ev && ev->what_case == ZMON_TB__EVENT__WHAT_FILE_VERSION) snprintf(version, 64, "%s", ev->file_version);
        if (ev && ev->what_case == ZMON_TB__EVENT__WHAT_SUMMARY && k < max) {
            ZT_CHECK(ev->summary->n_value == 1 && ev->summary->value[0]->value_case ==
                                                      ZMON_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE,
                     "one simple_value per event");
            ZT_CHECK(ev->wall_time > 1.6e9, "wall_time %f is the epoch clock", ev->wall_time);
            snprintf(tags[k], 64, "%s", ev->summary->value[0]->tag);
            values[k] = ev->summary->value[0]->simple_value;
            steps[k++] = (long long)ev->step;
        }
        if (ev) zmon_tb__event__free_unpacked(ev, NULL);
        at += 16 + len;
    }
    ZT_CHECK(at == n, "%s: %zu bytes after the last whole record", path, n - at);
    free(b);
    return k;
}

static void expect_file(const char *path, const char *want) {
    size_t n;
    char *got = slurp(path, &n);
    ZT_CHECK(got && !strcmp(got, want), "%s:\n%s\nwanted:\n%s", path, got ? got : "(missing)", want);
    free(got);
}

/* The files of a first run: where they go (output_path made, job directory inside), what they hold. */
static void test_write(void) {
    char out[1200], dir[1300], p[1400];
    snprintf(out, sizeof out, "%s/made/by/run", root);
    zcfg_monitor tb = mon(true, out, "job"), csv = mon(true, out, "job");
    const char *tags[] = {"Train/Samples/train_loss", "Train/Samples/lr", NULL};
    zmon *m = NULL;
    ZT_OK(zmon_open(&tb, &csv, tags, &quiet, &m));
    snprintf(dir, sizeof dir, "%s/job", out);
    ZT_CHECK(m && !strcmp(zmon_output_dir(m, "tensorboard"), dir) && !strcmp(zmon_output_dir(m, "csv_monitor"), dir),
             "both write into output_path/job_name");
    /* Python's repr of each value, as DeepSpeed's csv.writer prints it */
    const double v[] = {2.3025851249694824, 0.1, 1e-05, 65536, 0.0, 1e16, 123456789012345678.0, 3e-4, -0.5};
    for (int i = 0; i < 9; i++) zmon_scalar(m, "Train/Samples/train_loss", v[i], 8 * i);
    zmon_scalar(m, "Train/Samples/lr", 0.001, 8);
    zmon_scalar(m, "Train/Samples/loss_scale", 32768, 8); /* not declared: opened at its first scalar */
    zmon_close(m);
    snprintf(p, sizeof p, "%s/Train_Samples_train_loss.csv", dir);
    expect_file(p, "step,train_loss\r\n0,2.3025851249694824\r\n8,0.1\r\n16,1e-05\r\n24,65536.0\r\n32,0.0\r\n"
                   "40,1e+16\r\n48,1.2345678901234568e+17\r\n56,0.0003\r\n64,-0.5\r\n");
    snprintf(p, sizeof p, "%s/Train_Samples_lr.csv", dir);
    expect_file(p, "step,lr\r\n8,0.001\r\n");
    snprintf(p, sizeof p, "%s/Train_Samples_loss_scale.csv", dir);
    expect_file(p, "step,loss_scale\r\n8,32768.0\r\n");
    char names[4][512], version[64] = "", tg[16][64];
    float val[16];
    long long st[16];
    ZT_CHECK(event_files(dir, names, 4) == 1, "one event file");
    int k = read_events(names[0], version, tg, val, st, 16);
    ZT_CHECK(!strcmp(version, "brain.Event:2"), "file_version %s", version);
    ZT_CHECK(k == 11, "11 scalars, got %d", k);
    ZT_CHECK(k == 11 && !strcmp(tg[0], "Train/Samples/train_loss") && val[0] == (float)v[0] && st[0] == 0 &&
                 val[4] == 0.0f && st[8] == 64 && !strcmp(tg[9], "Train/Samples/lr") && val[9] == 0.001f &&
                 st[9] == 8 && val[10] == 32768.0f,
             "the scalars read back");
    ZT_CHECK(nwarn == 0, "no warning: %s", warned);
}

/* A second run into the same job: a new event file beside the first, the CSV files continued (no second
 * header) as DeepSpeed appends; a line cut short by a dead run is ended first. */
static void test_append(void) {
    char out[1200], dir[1300], p[1400];
    snprintf(out, sizeof out, "%s/made/by/run", root);
    snprintf(dir, sizeof dir, "%s/job", out);
    snprintf(p, sizeof p, "%s/Train_Samples_lr.csv", dir);
    int fd = open(p, O_WRONLY | O_APPEND);
    ZT_CHECK(fd >= 0 && write(fd, "16,0.0", 6) == 6, "cut a line short");
    close(fd);
    zcfg_monitor tb = mon(true, out, "job"), csv = mon(true, out, "job");
    const char *tags[] = {"Train/Samples/lr", NULL};
    zmon *m = NULL;
    ZT_OK(zmon_open(&tb, &csv, tags, &quiet, &m));
    zmon_scalar(m, "Train/Samples/lr", 0.002, 24);
    zmon_close(m);
    expect_file(p, "step,lr\r\n8,0.001\r\n16,0.0\r\n24,0.002\r\n");
    char names[4][512];
    ZT_CHECK(event_files(dir, names, 4) == 2, "a second event file beside the first");
}

static void expect_refused(const char *what, const zcfg_monitor *tb, const zcfg_monitor *csv, const char *needle) {
    const char *tags[] = {"Train/Samples/lr", NULL};
    zmon *m = (zmon *)1;
    zinc_status st = zmon_open(tb, csv, tags, &quiet, &m);
    ZT_CHECK(st != ZINC_OK && m == NULL && strstr(zinc_last_error(), needle), "%s: status %d, message: %s (wanted %s)",
             what, (int)st, zinc_last_error(), needle);
}

/* What is there already decides: links, foreign files, other users' writers are refused, never followed. */
static void test_refusals(void) {
    char out[1200], p[1400], q[1500];
    snprintf(out, sizeof out, "%s/ref", root);
    mkdir(out, 0755);
    zcfg_monitor off = mon(false, out, "x");
    /* the job directory is a link */
    snprintf(p, sizeof p, "%s/linked", out);
    ZT_CHECK(symlink(root, p) == 0, "symlink");
    zcfg_monitor tb = mon(true, out, "linked");
    expect_refused("job dir link", &tb, &off, "is a symbolic link: refused");
    /* the job directory is a file */
    snprintf(p, sizeof p, "%s/plain", out);
    close(open(p, O_WRONLY | O_CREAT, 0644));
    tb = mon(true, out, "plain");
    expect_refused("job dir file", &tb, &off, "exists and is not a directory");
    /* output_path is a file */
    tb = mon(true, p, "job");
    expect_refused("output_path file", &tb, &off, "is not a directory");
    /* output_path that cannot be made, even by root */
    tb = mon(true, "/proc/zinc_monitor_test/out", "job");
    expect_refused("output_path in /proc", &tb, &off, "cannot create /proc/zinc_monitor_test");
    /* a directory every user can write (not sticky) */
    snprintf(p, sizeof p, "%s/open", out);
    mkdir(p, 0777);
    chmod(p, 0777);
    zcfg_monitor csv = mon(true, p, "job");
    expect_refused("world-writable output_path", &off, &csv, "writable by every user");
    /* a CSV file name taken by a link, a FIFO, a hard-linked file, another tool's file */
    snprintf(p, sizeof p, "%s/job1", out);
    mkdir(p, 0755);
    snprintf(q, sizeof q, "%s/Train_Samples_lr.csv", p);
    ZT_CHECK(symlink("/etc/passwd", q) == 0, "symlink");
    csv = mon(true, out, "job1");
    expect_refused("csv link", &off, &csv, "symbolic link: refused");
    unlink(q);
    ZT_CHECK(mkfifo(q, 0644) == 0, "mkfifo");
    expect_refused("csv fifo", &off, &csv, "not a regular file");
    unlink(q);
    snprintf(p, sizeof p, "%s/other.csv", out);
    FILE *f = fopen(p, "w");
    fputs("step,lr\r\n", f);
    fclose(f);
    ZT_CHECK(link(p, q) == 0, "link");
    expect_refused("csv hard link", &off, &csv, "2 hard links");
    unlink(q);
    f = fopen(q, "w");
    fputs("epoch,accuracy\n1,0.5\n", f);
    fclose(f);
    expect_refused("foreign csv", &off, &csv, "does not start with the line \"step,lr\"");
    unlink(q);
    /* another run writing the same files */
    const char *tags[] = {"Train/Samples/lr", NULL};
    zmon *first = NULL;
    ZT_OK(zmon_open(&off, &csv, tags, &quiet, &first));
    expect_refused("concurrent run", &off, &csv, "being written by another process");
    zmon_close(first);
    zmon *none = (zmon *)1;
    ZT_OK(zmon_open(&off, NULL, tags, &quiet, &none));
    ZT_CHECK(none == NULL, "nothing enabled: no monitor");
    zmon_scalar(NULL, "x", 1, 1);
    zmon_close(NULL);
    if (geteuid() != 0) { /* root may write anywhere: this refusal is for users */
        snprintf(p, sizeof p, "%s/ro", out);
        mkdir(p, 0555);
        tb = mon(true, p, "job");
        expect_refused("read-only output_path", &tb, &off, "ro/job");
        chmod(p, 0755);
    }
}

/* A disk that fills up mid-run: one warning naming the file, nothing more written, no error. */
static void test_disk_full(void) {
    char out[1200];
    snprintf(out, sizeof out, "%s/full", root);
    zcfg_monitor tb = mon(true, out, "job"), off = mon(false, out, "job");
    struct rlimit old, small;
    getrlimit(RLIMIT_FSIZE, &old);
    small = old;
    small.rlim_cur = 400;
    signal(SIGXFSZ, SIG_IGN);
    zmon *m = NULL;
    ZT_OK(zmon_open(&tb, &off, NULL, &quiet, &m));
    setrlimit(RLIMIT_FSIZE, &small);
    zt_logcap_clear(&log_cap);
    for (int i = 0; i < 100; i++) zmon_scalar(m, "Train/Samples/lr", 0.001 * i, i);
    setrlimit(RLIMIT_FSIZE, &old);
    zmon_close(m);
    ZT_CHECK(nwarn == 1 && strstr(warned, "writing") && strstr(warned, "training goes on"),
             "one warning, got %d: %s", nwarn, warned);
    char dir[1300], names[2][512], version[64], tg[128][64];
    float val[128];
    long long st[128];
    snprintf(dir, sizeof dir, "%s/job", out);
    ZT_CHECK(event_files(dir, names, 2) == 1, "the event file");
    int k = read_events(names[0], version, tg, val, st, 128);
    ZT_CHECK(k > 0 && k < 100, "the records before the limit are whole: %d", k);
}

int main(void) {
    zt_name = "test_monitor";
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/zinc_monitor_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return fprintf(stderr, "mkdtemp: %s\n", strerror(errno)), 1;
    umask(022);
    test_write();
    test_append();
    test_refusals();
    test_disk_full();
    if (!zt_failed) zfile_rmtree(root);
    return zt_finish();
}
