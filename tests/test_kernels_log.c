/* The kernels report through a log sink, never by printing: an unusable ZINC_SIMD value (the one thing
 * they report today) reaches the sink set with zkernels_set_log as one WARN line naming the value and the
 * valid ones, the default SIMD path is kept, and nothing is written to stderr. The environment is set
 * before the first kernel call (the SIMD path is chosen once, on first use). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu_kernels.h"
#include "runtime/core/log.h"
#include "zt.h"

static int calls, warns;
static char last[512];

static void capture(void *userdata, zinc_log_level level, int rank, const char *msg) {
    (void)userdata;
    (void)rank;
    calls++;
    if (level == ZINC_LOG_WARN) warns++;
    snprintf(last, sizeof last, "%s", msg);
}

int main(void) {
    zt_name = "test_kernels_log";
    setenv("ZINC_SIMD", "sse9", 1);
    zlog sink = {capture, NULL, ZINC_LOG_DEBUG, 0};
    zkernels_set_log(&sink);

    /* stderr into a file for the first kernel call: it must stay empty. */
    char path[] = "/tmp/zinc-kernels-log-XXXXXX";
    int fd = mkstemp(path);
    ZT_CHECK(fd >= 0, "mkstemp failed");
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    const char *name = zkernels_simd_name();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t written = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(path);

    ZT_CHECK(written == 0, "the kernels wrote %lld bytes to stderr", (long long)written);
    ZT_CHECK(calls == 1 && warns == 1, "expected one WARN through the sink, got %d calls, %d warnings", calls, warns);
    ZT_CHECK(strstr(last, "ZINC_SIMD=sse9") && strstr(last, "scalar, avx2 or avx512") && strstr(last, "using "),
             "the message names neither the value nor the valid ones: \"%s\"", last);
    ZT_CHECK(!strcmp(name, "scalar") || !strcmp(name, "avx2") || !strcmp(name, "avx512"),
             "unknown default path \"%s\"", name);

    /* Chosen once: later calls report nothing more. */
    zkernels_simd_name();
    ZT_CHECK(calls == 1, "the warning was repeated (%d calls)", calls);
    zkernels_set_log(NULL); /* back to the default sink */
    return zt_finish();
}
