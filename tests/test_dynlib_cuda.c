/* NCCL and cuBLAS are loaded at first use, not linked (base/core/dynlib.h, comm_nccl.c, the MLP's
 * cuBLAS in examples/mlp/mlp_cuda.c):
 * - the loader: definitions already in the process first, then dlopen of each name in turn, the
 *   environment's file instead; a file that cannot be loaded or lacks a function is an error naming it,
 *   the reason and the fix, and the table is left as it was;
 * - NCCL: a missing or wrong ZINC_NCCL_LIBRARY fails zcomm_create_nccl with the message; without it the
 *   communicator is made (GPU or emulation), or in a real build without a GPU the call gets past the
 *   loading (libnccl is mapped only after that first call) and fails for want of a device;
 * - cuBLAS: a missing ZINC_CUBLAS_LIBRARY fails the MLP on the GPU with the message in the engine's log;
 *   without it the MLP trains (on the emulation, or on a GPU). Skipped without a (real or emulated) GPU.
 * Built with the CUDA backend and against the emulation (tests/cuda.cmake, tests/cuda_emulated.cmake). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "base/comm/comm_nccl.h"
#include "base/device/device.h"
#include "base/core/dynlib.h"
#include "zt.h"

/* 1 when a mapping of this process names `lib` (a file name such as "libnccl.so"). */
static int mapped(const char *lib) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (!f) return -1;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

static void test_loader(void) {
    static const char *const missing[] = {"libzinc-missing-a.so.1", "libzinc-missing-b.so", NULL};
    static const char *const libm[] = {"libm.so.6", NULL};
    static const char *const trig[] = {"cos", "sin", NULL};
    static const char *const odd[] = {"cos", "zinc_no_such_function", NULL};
    zdynlib lib = {.what = "the test needs libtrig", .names = missing, .symbols = trig, .fix = "FIX-IT"};
    void *fns[2] = {NULL, NULL};
    void *fcos = (void *)&cos, *fsin = (void *)&sin;

    /* In the process already (the test links libm): found there, no file needed. */
    ZT_OK(zdynlib_load(&lib, fns, NULL));
    ZT_CHECK(fns[0] == fcos && fns[1] == fsin, "cos and sin from the process");

    /* Not in the process: every name is tried, each reason and the fix are given, fns unchanged. */
    lib.symbols = odd;
    fns[0] = fns[1] = NULL;
    ZT_ERR(zdynlib_load(&lib, fns, NULL), ZINC_ERR_DEVICE,
           "the test needs libtrig: cannot load libzinc-missing-a.so.1 or libzinc-missing-b.so (dlopen: ");
    ZT_CHECK(strstr(zinc_last_error(), "libzinc-missing-b.so: cannot open shared object file") != NULL,
             "the second name's reason: %s", zinc_last_error());
    ZT_CHECK(strstr(zinc_last_error(), "; FIX-IT") != NULL, "the fix: %s", zinc_last_error());
    ZT_CHECK(!fns[0] && !fns[1], "fns unchanged after a failure");

    /* A file that loads but lacks a function. */
    lib.names = libm;
    ZT_ERR(zdynlib_load(&lib, fns, NULL), ZINC_ERR_DEVICE,
           "the test needs libtrig: libm.so.6 was loaded but has no function zinc_no_such_function");
    ZT_CHECK(!fns[0] && !fns[1], "fns unchanged after a failure");

    /* The environment names the file: only that one, even where the process has the functions. */
    lib.names = missing;
    lib.symbols = trig;
    lib.env = "ZINC_NCCL_LIBRARY"; /* a variable of the env table (base/core/env.c) */
    setenv("ZINC_NCCL_LIBRARY", "libm.so.6", 1);
    ZT_OK(zdynlib_load(&lib, fns, NULL));
    ZT_CHECK(fns[0] == fcos && fns[1] == fsin, "cos and sin from ZINC_NCCL_LIBRARY=libm.so.6");
    setenv("ZINC_NCCL_LIBRARY", "/nonexistent/libtrig.so", 1);
    ZT_ERR(zdynlib_load(&lib, fns, NULL), ZINC_ERR_DEVICE,
           "cannot load ZINC_NCCL_LIBRARY=/nonexistent/libtrig.so (dlopen: /nonexistent/libtrig.so: cannot open");
    unsetenv("ZINC_NCCL_LIBRARY");
}

static void test_nccl(int emulated) {
    zcomm *c = NULL;
    ZT_CHECK(mapped("libnccl.so") == 0, "libnccl is not mapped before the first NCCL communicator");
    setenv("ZINC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    ZT_ERR(zcomm_create_nccl(NULL, NULL, NULL, &c), ZINC_ERR_DEVICE,
           "device cuda needs NCCL for its collectives: cannot load ZINC_NCCL_LIBRARY=/nonexistent/libnccl.so.2");
    ZT_CHECK(strstr(zinc_last_error(), "install NCCL 2") && strstr(zinc_last_error(), "ZINC_DEVICE_COMM=staged"),
             "the fixes: %s", zinc_last_error());
    setenv("ZINC_NCCL_LIBRARY", "libm.so.6", 1);
    ZT_ERR(zcomm_create_nccl(NULL, NULL, NULL, &c), ZINC_ERR_DEVICE,
           "libm.so.6 was loaded but has no function ncclGetErrorString");
    ZT_CHECK(c == NULL, "no communicator after a failed load");
    unsetenv("ZINC_NCCL_LIBRARY");

    zinc_status st = zcomm_create_nccl(NULL, NULL, NULL, &c);
    if (st == ZINC_OK) {
        ZT_CHECK(c && c->size == 1 && !strcmp(c->ops->name, "nccl"), "a one-rank NCCL communicator");
        ZT_OK(zcomm_barrier(c));
        zcomm_destroy(c);
    } else {
        /* A real build on a machine without a GPU: NCCL loaded, then no device. */
        ZT_CHECK(!emulated && st == ZINC_ERR_DEVICE && strstr(zinc_last_error(), "no CUDA device"),
                 "only the device may be missing: %s", zinc_last_error());
    }
    /* The emulation's NCCL is this process's own; a real build has loaded libnccl by now. */
    ZT_CHECK(mapped("libnccl.so") == !emulated, "libnccl mapped after the first communicator: %d (emulated %d)",
             mapped("libnccl.so"), emulated);
}

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};

static void test_cublas(int emulated) {
    eu_run r = {.stage = 1, .dtype = ZINC_FP32, .cuda = 1, .mlp_compute = MLP_COMPUTE_DEVICE, .log = &log_cap};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_CHECK(mapped("libcublas") == 0, "cuBLAS is not mapped before the first MLP on the GPU");
    setenv("ZINC_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.13", 1);
    ZT_ERR(eu_create(&r, &e, &m), ZINC_ERR_DEVICE, NULL);
    const char *g_log = zt_logcap_first(&log_cap, ZINC_LOG_ERROR, NULL);
    ZT_CHECK(strstr(g_log, "mlp (cuda) needs cuBLAS: cannot load ZINC_CUBLAS_LIBRARY=/nonexistent/libcublas.so.13 "
                           "(dlopen: /nonexistent/libcublas.so.13: cannot open") &&
                 strstr(g_log, "MLP_COMPUTE_HOST"),
             "the message in the engine's log: %s", g_log);
    ZT_CHECK(!e && !m, "no engine or MLP after the failure (eu_create destroys them)");
    unsetenv("ZINC_CUBLAS_LIBRARY");

    float *w = NULL;
    size_t n = 0;
    ZT_OK(eu_train(&r, 2, &w, &n));
    ZT_CHECK(n > 0 && isfinite(w[0]), "the MLP trained on the GPU path (%zu weights)", n);
    free(w);
    ZT_CHECK(mapped("libcublas") == !emulated, "cuBLAS mapped after the first MLP on the GPU (emulated %d)", emulated);
}

int main(void) {
    zt_name = "dynlib_cuda";
    const char *em = getenv("ZINC_CUDA_EMULATED");
    int emulated = em && !strcmp(em, "1");
    test_loader();
    test_nccl(emulated);
    if (zdev_cuda_count() > 0)
        test_cublas(emulated);
    else
        printf("dynlib_cuda: no GPU: the MLP's cuBLAS loading not run\n");
    return zt_finish();
}
