/* The kernels never print: an unusable ZINC_SIMD value (the one thing they report today) is kept for
 * zkernels_warning, the default SIMD path is kept, nothing is written to stderr, and zinc_create logs it
 * through the engine's own log callback as one WARN naming the value and the valid ones. The environment
 * is set before the first kernel call (the SIMD path is chosen once, on first use). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu_kernels.h"
#include "zinc.h"
#include "zt.h"

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};

int main(void) {
    zt_name = "test_kernels_log";
    setenv("ZINC_SIMD", "sse9", 1);

    /* stderr into a file for the first kernel call and an engine's creation: it must stay empty. */
    char path[] = "/tmp/zinc-kernels-log-XXXXXX";
    int fd = mkstemp(path);
    ZT_CHECK(fd >= 0, "mkstemp failed");
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    const char *name = zkernels_simd_name();
    const char *said = zkernels_warning();
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1}";
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &log_cap;
    o.log_level = ZINC_LOG_DEBUG;
    zinc_engine *e = NULL;
    zinc_status st = zinc_create(&o, &e);
    zinc_destroy(e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t written = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(path);

    ZT_CHECK(st == ZINC_OK, "zinc_create: %s", zinc_last_error());
    ZT_CHECK(written == 0, "%lld bytes were written to stderr", (long long)written);
    ZT_CHECK(said && strstr(said, "ZINC_SIMD=sse9") && strstr(said, "scalar, avx2 or avx512") && strstr(said, "using "),
             "zkernels_warning names neither the value nor the valid ones: \"%s\"", said ? said : "(null)");
    int warns = zt_logcap_count(&log_cap, ZINC_LOG_WARN, "ZINC_SIMD");
    const char *last = zt_logcap_last(&log_cap, ZINC_LOG_WARN, "ZINC_SIMD");
    ZT_CHECK(warns == 1 && !strcmp(last, said ? said : ""), "the engine's log got %d such warnings (\"%s\")", warns,
             last);
    ZT_CHECK(!strcmp(name, "scalar") || !strcmp(name, "avx2") || !strcmp(name, "avx512"),
             "unknown default path \"%s\"", name);
    zinc_finalize();
    return zt_finish();
}
