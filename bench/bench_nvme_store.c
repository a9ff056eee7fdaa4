/* Throughput of the NVMe optimizer-state store: times a WRITE pass (initialisation), a READ_WRITE pass
 * (what the optimizer step does, with a trivial update instead of Adam so the disk is what is timed) and
 * a READ pass, over one rank's state kept under DIR.
 *
 *   bench_nvme_store [--dir DIR] [--mib M] [--chunk ELEMS] [--queue-depth Q] [--block BYTES] [--buffers B]
 *                    [--verbose 0|1]
 *
 * Defaults: DIR ./nvme_bench, 1024 MiB of state (master + m + v, 12 bytes per element), 4Mi-element chunks
 * (sub_group_size), DeepSpeed's aio defaults (queue depth 8, 1 MiB blocks), 4 buffers. --verbose 1 logs at
 * debug level (the store's set-up line and each pass's read/written MiB and time, the build's pass included).
 *
 * What each pass moves: WRITE writes 12 B/element (nothing is read), READ_WRITE reads and writes 12 B/element
 * each, READ reads 12 B/element. Compare the WRITE pass with a sequential-write benchmark and the READ pass
 * with a sequential-read one (bench/run_nvme_vs_fio.sh). The timed WRITE pass overwrites blocks the build's
 * WRITE pass already wrote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "runtime/engine/engine_internal.h"
#include "offload/state_nvme.h"
#include "zinc.h"

/* One pass over the store; in READ_WRITE passes every element gets +1 so the write-back is real. */
static double pass(zstate *s, zstate_mode mode) {
    double t0 = bench_now_s();
    if (zstate_pass_begin(s, mode) != ZINC_OK) return -1;
    for (int64_t i = 0; i < s->nchunks; i++) {
        zstate_view v;
        if (zstate_acquire(s, i, &v) != ZINC_OK) return -1;
        if (mode != ZSTATE_READ)
            for (int64_t j = 0; j < v.n; j++) v.master[j] += 1.0f, v.m[j] += 1.0f, v.v[j] += 1.0f;
        if (zstate_release(s, i) != ZINC_OK) return -1;
    }
    if (zstate_pass_end(s) != ZINC_OK) return -1;
    return bench_now_s() - t0;
}

int main(int argc, char **argv) {
    const char *dir = "nvme_bench";
    double mib = 1024;
    long long chunk = 4 << 20, block = 1 << 20;
    int qd = 8, buffers = 4, verbose = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--mib")) mib = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) chunk = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--queue-depth")) qd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block")) block = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--buffers")) buffers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--verbose")) verbose = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_nvme_store: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int64_t n = (int64_t)(mib * 1048576.0 / 12.0) / 1024 * 1024;
    char cfg[8192], absdir[3072];
    dir = bench_abs_dir(dir, absdir, sizeof absdir);
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": 1, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3, "
             "\"sub_group_size\": %lld, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", "
             "\"buffer_count\": %d}}, \"aio\": {\"block_size\": %lld, \"queue_depth\": %d}}",
             chunk, dir, buffers, block, qd);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_level = verbose ? ZINC_LOG_DEBUG : ZINC_LOG_WARN;
    zinc_engine *e = NULL;
    if (zinc_create(&o, &e) != ZINC_OK) goto fail;
    int mod = zinc_module_add(e, "state");
    if (!zinc_param_add(e, mod, "x", 1, (int64_t[]){n}, 0)) goto fail;
    double t_init = bench_now_s();
    if (zinc_build(e, bench_zero_init, NULL) != ZINC_OK) goto fail; /* includes the WRITE pass that initialises */
    t_init = bench_now_s() - t_init;
    zstate *s = e->state;
    double bytes = 12.0 * (double)s->n / 1048576.0;
    double tw = pass(s, ZSTATE_WRITE), trw = pass(s, ZSTATE_READ_WRITE), tr = pass(s, ZSTATE_READ);
    if (tw < 0 || trw < 0 || tr < 0) goto fail;
    printf("nvme store: %.0f MiB of optimizer state (%lld elements) under %s, %lld chunks of %lld, aio block %lld, "
           "queue depth %d, %d buffers\n",
           bytes, (long long)s->n, dir, (long long)s->nchunks, (long long)s->chunk, block, qd, buffers);
    printf("  build (incl. first WRITE pass) %.3f s\n", t_init);
    printf("  WRITE pass       %.3f s  %6.0f MiB/s written\n", tw, bytes / tw);
    printf("  READ_WRITE pass  %.3f s  %6.0f MiB/s each way\n", trw, bytes / trw);
    printf("  READ pass        %.3f s  %6.0f MiB/s read\n", tr, bytes / tr);
    zstate_nvme_stats ns;
    if (zstate_nvme_stats_get(s, &ns) == ZINC_OK)
        printf("  alignment %u, %s; blocked on IO %.3f s in all; up to %d reads ahead, %d writes behind\n", ns.align,
               ns.direct ? "O_DIRECT" : "buffered", ns.wait_s, ns.max_reads_ahead, ns.max_writes_behind);
    zinc_destroy(e);
    return 0;
fail:
    fprintf(stderr, "bench_nvme_store: %s\n", zinc_last_error());
    zinc_destroy(e);
    return 1;
}
