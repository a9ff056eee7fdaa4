/* A tiny test harness: each test program counts checks and exits 0 (all passed), 1 (some failed) or
 * 77 (skipped). Failures print file:line and the message; the summary line is "N passed, N failed". */
#ifndef ZINC_TESTS_ZT_H
#define ZINC_TESTS_ZT_H

#include <stdint.h>
#include <stdio.h>

#include "zinc.h"

extern int zt_passed, zt_failed;
extern const char *zt_name;

void zt_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define ZT_CHECK(cond, ...)                                                                                \
    do {                                                                                                   \
        if (cond) zt_passed++;                                                                             \
        else zt_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                                  \
    } while (0)

/* Checks a zinc call returned ZINC_OK; prints zinc_last_error() otherwise. */
#define ZT_OK(expr)                                                                                        \
    do {                                                                                                   \
        zinc_status zt_st_ = (expr);                                                                       \
        ZT_CHECK(zt_st_ == ZINC_OK, "%s -> %s: %s", #expr, zinc_status_name(zt_st_), zinc_last_error());    \
    } while (0)

/* Checks a call failed with `code` and that the message contains `needle` (NULL: any message). */
#define ZT_ERR(expr, code, needle) zt_check_err((expr), (code), (needle), #expr, __FILE__, __LINE__)
void zt_check_err(zinc_status got, zinc_status want, const char *needle, const char *what, const char *file,
                  int line);

/* |a-b| <= atol + rtol*|b| */
#define ZT_NEAR(a, b, atol, rtol, ...) ZT_CHECK(zt_near((double)(a), (double)(b), (atol), (rtol)), __VA_ARGS__)
int zt_near(double a, double b, double atol, double rtol);

/* Deterministic random numbers (splitmix64). Tests seed from ZT_SEED in the environment or from time,
 * and print the seed so a failure can be replayed. */
uint64_t zt_seed(void);
uint64_t zt_rand_u64(uint64_t *state);
double zt_rand_uniform(uint64_t *state);  /* [0, 1) */
double zt_rand_normal(uint64_t *state);

/* Prints the summary and returns the exit code (0, or 1 when anything failed). */
int zt_finish(void);
/* Prints why and returns 77. */
int zt_skip(const char *why);
/* A path under the build directory for test files (ZINC_BINARY_DIR or "."). */
const char *zt_build_dir(void);
const char *zt_source_dir(void);

/* Entries in a directory other than . and .. (-1 if it cannot be opened). */
int zt_count_entries(const char *dir);
/* The single zinc-* run directory (an NVMe store's) under dir, into out; 0 if there is not exactly one. */
int zt_find_run_dir(const char *dir, char *out, size_t cap);

/* Log capture, the one log callback of the tests: cfg.log_fn = zt_logcap_fn, cfg.log_userdata = &cap (a
 * zt_logcap; zeroed by zt_logcap_init). Every line is counted by level and kept (the first ZT_LOGCAP_MAX; when
 * full the last slot takes each newer line, so the first and the last line are always there). Lines at or
 * above `echo` are printed to stderr, on rank 0 only unless `echo_all_ranks`; ZT_VERBOSE=1 in the environment
 * prints every line. */
#define ZT_LOGCAP_MAX 512
typedef struct zt_logcap {
    zinc_log_level echo; /* ZINC_LOG_OFF: print nothing */
    int echo_all_ranks;
    int n;                       /* lines kept */
    int count[ZINC_LOG_OFF + 1]; /* lines seen, by level (all of them, kept or not) */
    zinc_log_level level[ZT_LOGCAP_MAX];
    int rank[ZT_LOGCAP_MAX];
    char msg[ZT_LOGCAP_MAX][1024];
} zt_logcap;

/* Empties `c` and sets what it prints. */
void zt_logcap_init(zt_logcap *c, zinc_log_level echo);
/* Forgets the lines and counts, keeps the echo settings. */
void zt_logcap_clear(zt_logcap *c);
void zt_logcap_fn(void *cap, zinc_log_level level, int rank, const char *msg);
/* Kept lines at exactly `level` (zt_logcap_count) or at or above it (zt_logcap_count_from) that contain
 * `needle` (NULL: any). */
int zt_logcap_count(const zt_logcap *c, zinc_log_level level, const char *needle);
int zt_logcap_count_from(const zt_logcap *c, zinc_log_level level, const char *needle);
/* The first / last kept line at or above `level` that contains `needle` (NULL: any); "" if none. */
const char *zt_logcap_first(const zt_logcap *c, zinc_log_level level, const char *needle);
const char *zt_logcap_last(const zt_logcap *c, zinc_log_level level, const char *needle);

/* Whether DIR's file system takes O_DIRECT through zinc's io_uring reader (a probe file written and removed;
 * tests/zt_aio.c, linked by the NVMe tests alone): they check the direct path where it exists and the
 * buffered fallback elsewhere. */
int zt_direct_io_supported(const char *dir);

#endif
