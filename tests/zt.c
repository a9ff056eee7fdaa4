#include "zt.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int zt_passed, zt_failed;
const char *zt_name = "test";

void zt_fail_at(const char *file, int line, const char *fmt, ...) {
    zt_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void zt_check_err(zinc_status got, zinc_status want, const char *needle, const char *what, const char *file,
                  int line) {
    const char *msg = zinc_last_error();
    if (got != want) {
        zt_fail_at(file, line, "%s -> %s, wanted %s (message: %s)", what, zinc_status_name(got),
                   zinc_status_name(want), msg);
        return;
    }
    if (needle && !strstr(msg, needle)) {
        zt_fail_at(file, line, "%s: message lacks \"%s\": %s", what, needle, msg);
        return;
    }
    zt_passed++;
}

int zt_near(double a, double b, double atol, double rtol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

uint64_t zt_seed(void) {
    static uint64_t s;
    if (s) return s;
    const char *e = getenv("ZT_SEED");
    s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + 1;
    fprintf(stderr, "%s: ZT_SEED=%llu\n", zt_name, (unsigned long long)s);
    return s;
}

uint64_t zt_rand_u64(uint64_t *st) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double zt_rand_uniform(uint64_t *st) { return (double)(zt_rand_u64(st) >> 11) * 0x1.0p-53; }

double zt_rand_normal(uint64_t *st) {
    double u1 = zt_rand_uniform(st), u2 = zt_rand_uniform(st);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int zt_finish(void) {
    printf("%s: %d passed, %d failed\n", zt_name, zt_passed, zt_failed);
    return zt_failed ? 1 : 0;
}

int zt_skip(const char *why) {
    printf("%s: skipped: %s\n", zt_name, why);
    return 77;
}

const char *zt_build_dir(void) {
    const char *d = getenv("ZINC_BINARY_DIR");
    return d ? d : ".";
}

const char *zt_source_dir(void) {
    const char *d = getenv("ZINC_SOURCE_DIR");
    return d ? d : "..";
}

int zt_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

int zt_find_run_dir(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, "zinc-", 5) && snprintf(out, cap, "%s/%s", dir, de->d_name) < (int)cap) n++;
    closedir(d);
    return n == 1;
}

void zt_logcap_init(zt_logcap *c, zinc_log_level echo) {
    memset(c, 0, sizeof *c);
    c->echo = echo;
}

void zt_logcap_clear(zt_logcap *c) {
    c->n = 0;
    memset(c->count, 0, sizeof c->count);
}

/* Engines log from their worker threads too. */
static pthread_mutex_t logcap_lock = PTHREAD_MUTEX_INITIALIZER;

void zt_logcap_fn(void *cap, zinc_log_level level, int rank, const char *msg) {
    zt_logcap *c = cap;
    pthread_mutex_lock(&logcap_lock);
    if (level >= ZINC_LOG_DEBUG && level <= ZINC_LOG_OFF) c->count[level]++;
    int i = c->n < ZT_LOGCAP_MAX ? c->n++ : ZT_LOGCAP_MAX - 1;
    c->level[i] = level;
    c->rank[i] = rank;
    snprintf(c->msg[i], sizeof c->msg[i], "%s", msg);
    if (getenv("ZT_VERBOSE") || (level >= c->echo && (rank == 0 || c->echo_all_ranks)))
        fprintf(stderr, "[zinc r%d] %s\n", rank, msg);
    pthread_mutex_unlock(&logcap_lock);
}

static int logcap_count(const zt_logcap *c, zinc_log_level lo, zinc_log_level hi, const char *needle) {
    int k = 0;
    for (int i = 0; i < c->n; i++)
        if (c->level[i] >= lo && c->level[i] <= hi && (!needle || strstr(c->msg[i], needle))) k++;
    return k;
}
int zt_logcap_count(const zt_logcap *c, zinc_log_level level, const char *needle) {
    return logcap_count(c, level, level, needle);
}
int zt_logcap_count_from(const zt_logcap *c, zinc_log_level level, const char *needle) {
    return logcap_count(c, level, ZINC_LOG_OFF, needle);
}

const char *zt_logcap_first(const zt_logcap *c, zinc_log_level level, const char *needle) {
    for (int i = 0; i < c->n; i++)
        if (c->level[i] >= level && (!needle || strstr(c->msg[i], needle))) return c->msg[i];
    return "";
}
const char *zt_logcap_last(const zt_logcap *c, zinc_log_level level, const char *needle) {
    for (int i = c->n - 1; i >= 0; i--)
        if (c->level[i] >= level && (!needle || strstr(c->msg[i], needle))) return c->msg[i];
    return "";
}
