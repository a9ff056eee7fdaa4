/* The optimizer step with NVMe offload on the CPU: a READ_WRITE pass over one rank's optimizer state on
 * disk (fp32 master + exp_avg + exp_avg_sq, 12 B/param) with real Adam (zadam_step, multi-threaded, on each
 * chunk while the next is read and the previous written), an fp32 gradient and a bf16 param_out in memory,
 * as the engine's step does (runtime/engine/engine_step_pass.c, chunk_elementwise, state not on the device), against the floor
 * of the disk: read_bytes / read bandwidth + write_bytes / write bandwidth (one disk serves both), with the
 * bandwidths measured by fio in the same script (bench/run_nvme_step.sh).
 *
 *   bench_nvme_step [--dir DIR] [--n ELEMS] [--chunk ELEMS] [--param ELEMS] [--steps S] [--queue-depth Q]
 *                   [--block BYTES] [--buffers B] [--threads T] [--adam-reps R]
 *                   [--fio-read-mibs MIB_PER_S --fio-write-mibs MIB_PER_S] [--between CMD]
 *
 * Defaults: DIR ./nvme_bench, N 1e9 parameters (12 GB of state on disk), chunk (sub_group_size) 1e8, the
 * parameters registered as N/param tensors of 1e8 in one module each (a model's layers), 3 steps, aio
 * defaults (queue depth 8, 1 MiB blocks), 4 swap buffers, the kernels' default thread count.
 * The engine is built with ZeRO-3, bf16, AdamW lr 1e-3, weight decay 0.1 (its build initialises the store
 * with a WRITE pass, not timed as a step). Per step it prints the bytes read and written (from the store's
 * statistics), the time, GB/s, the time blocked on IO, in Adam and in the rest (CRC32C, submission), and
 * the ratio to the floor when fio's bandwidths are given. For reference: Adam alone over the same N
 * elements on in-memory chunks of the same size, and CRC32C's throughput on one thread (the store checks
 * every byte read and sums every byte written on the stepping thread).
 *
 * --between CMD runs the shell command CMD before every step and after the last (with ZINC_BENCH_ROUND set
 * to 1 .. S+1 in its environment), so a script can measure the disk with fio right next to each step: a
 * virtual disk's bandwidth drifts (burst credits, host caches) over the minutes a 1e9-parameter run takes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "runtime/engine/engine_internal.h"
#include "kernels/cpu_kernels.h"
#include "base/core/crc32c.h"
#include "offload/state_nvme.h"
#include "zinc.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The hyperparameters of step t (1-based), as zengine_step computes them (no clipping, no loss scale). */
static zadam_hparams hparams(const zinc_engine *e, int t) {
    const zcfg_optimizer *o = &e->cfg.optimizer;
    return (zadam_hparams){
        .lr = (float)o->lr,
        .beta1 = (float)o->beta1,
        .beta2 = (float)o->beta2,
        .eps = (float)o->eps,
        .weight_decay = (float)o->weight_decay,
        .bias_correction1 = o->bias_correction ? 1.0 - pow(o->beta1, t) : 1.0,
        .bias_correction2 = o->bias_correction ? 1.0 - pow(o->beta2, t) : 1.0,
        .grad_factor = 1.0f,
        .adamw = o->adam_w_mode,
    };
}

/* Runs the --between command with ZINC_BENCH_ROUND=round; returns its exit status (-1: could not run). */
static int run_between(const char *cmd, int round) {
    char r[16];
    snprintf(r, sizeof r, "%d", round);
    setenv("ZINC_BENCH_ROUND", r, 1);
    fflush(stdout);
    double t0 = bench_now_s();
    int rc = system(cmd);
    printf("  (between-steps command, round %d: %.1f s, exit status %d)\n", round, bench_now_s() - t0, rc);
    fflush(stdout);
    return rc;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_nvme_step [--dir DIR] [--n ELEMS] [--chunk ELEMS] [--param ELEMS] [--steps S] "
                    "[--queue-depth Q] [--block BYTES] [--buffers B] [--threads T] [--adam-reps R] "
                    "[--fio-read-mibs MIBS --fio-write-mibs MIBS] [--between CMD]\n");
}

int main(int argc, char **argv) {
    const char *dir = "nvme_bench", *between = NULL;
    double nd = 1e9, chunkd = 1e8, paramd = 1e8, fio_r = 0, fio_w = 0;
    long long block = 1 << 20;
    int qd = 8, buffers = 4, steps = 3, threads = 0, adam_reps = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--n")) nd = atof(v);
        else if (!strcmp(a, "--chunk")) chunkd = atof(v);
        else if (!strcmp(a, "--param")) paramd = atof(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--queue-depth")) qd = atoi(v);
        else if (!strcmp(a, "--block")) block = atoll(v);
        else if (!strcmp(a, "--buffers")) buffers = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--adam-reps")) adam_reps = atoi(v);
        else if (!strcmp(a, "--fio-read-mibs")) fio_r = atof(v);
        else if (!strcmp(a, "--fio-write-mibs")) fio_w = atof(v);
        else if (!strcmp(a, "--between")) between = v;
        else {
            usage();
            return 2;
        }
    }
    if (steps < 1) steps = 1;
    if (adam_reps < 0) adam_reps = 0;
    int64_t n = (int64_t)nd, chunk = (int64_t)chunkd, per = (int64_t)paramd;
    if (n < ZPART_PARAM_ALIGN || chunk < 1 || per < 1) {
        usage();
        return 2;
    }
    per = (per + ZPART_PARAM_ALIGN - 1) / ZPART_PARAM_ALIGN * ZPART_PARAM_ALIGN;
    zkernels_set_threads(threads);

    char cfg[8192], absdir[3072];
    dir = bench_abs_dir(dir, absdir, sizeof absdir);
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": 1, \"bf16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\", "
             "\"params\": {\"lr\": 1e-3, \"betas\": [0.9, 0.999], \"eps\": 1e-8, \"weight_decay\": 0.1}}, "
             "\"zero_optimization\": {\"stage\": 3, \"sub_group_size\": %lld, \"offload_optimizer\": {\"device\": "
             "\"nvme\", \"nvme_path\": \"%s\", \"buffer_count\": %d}}, \"aio\": {\"block_size\": %lld, "
             "\"queue_depth\": %d}}",
             (long long)chunk, dir, buffers, block, qd);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_level = ZINC_LOG_WARN;
    zinc_engine *e = NULL;
    float *ref = NULL;
    double *times = NULL;
    if (zinc_create(&o, &e) != ZINC_OK) goto fail;
    int64_t left = n;
    for (int k = 0; left > 0; k++) {
        int64_t m = left < per ? left : per;
        char name[64];
        snprintf(name, sizeof name, "layer%d", k);
        int mod = zinc_module_add(e, name);
        snprintf(name, sizeof name, "layer%d.weight", k);
        if (mod < 0 || !zinc_param_add(e, mod, name, 1, (int64_t[]){m}, ZINC_PARAM_DECAY)) goto fail;
        left -= m;
    }
    printf("bench_nvme_step: %lld parameters (%.2f GB of fp32 master + m + v on disk under %s), chunk "
           "(sub_group_size) %lld, aio block %lld, queue depth %d, %d swap buffers, Adam on %d threads (%s)\n",
           (long long)n, 12e-9 * (double)n, dir, (long long)chunk, block, qd, buffers, zkernels_threads(),
           zkernels_simd_name());
    fflush(stdout);
    double t_build = bench_now_s();
    if (zinc_build(e, bench_zero_init, NULL) != ZINC_OK) goto fail; /* includes the WRITE pass that initialises */
    t_build = bench_now_s() - t_build;
    zstate *s = e->state;
    zinc_dtype gdt;
    float *grad = (float *)zgrads_local(&e->grads, &gdt); /* the engine's own fp32 gradient shard */
    if (gdt != ZINC_FP32 || !grad) {
        fprintf(stderr, "bench_nvme_step: expected the engine's fp32 gradient shard\n");
        zinc_destroy(e);
        return 1;
    }
    uint64_t rng = 88172645463325252ull;
    for (int64_t i = 0; i < s->n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        grad[i] = (float)((double)(rng >> 11) * 0x1.0p-53 - 0.5) * 1e-2f;
    }
    char *pout = (char *)e->params_shard; /* bf16, the rank's slice of the parameters */
    size_t csz = zinc_dtype_size(e->compute_dtype);
    zstate_nvme_stats st0, st1;
    if (zstate_nvme_stats_get(s, &st0) != ZINC_OK) goto fail;
    printf("  build (allocation, initialisation, first WRITE pass of %.2f GB): %.3f s; %lld chunks of %lld, "
           "alignment %u, %s\n",
           (double)st0.bytes_written * 1e-9, t_build, (long long)s->nchunks, (long long)s->chunk, st0.align,
           st0.direct ? "O_DIRECT" : "buffered");
    fflush(stdout);

    times = calloc((size_t)(steps + adam_reps + 1), sizeof *times);
    if (!times) goto nomem;
    double floor_s = 0;
    for (int t = 1; t <= steps + 1; t++) {
        if (between && run_between(between, t) != 0) {
            fprintf(stderr, "bench_nvme_step: --between command failed before round %d\n", t);
            free(times);
            zinc_destroy(e);
            return 1;
        }
        if (t > steps) break;
        zadam_hparams h = hparams(e, t);
        double adam_s = 0;
        if (zstate_nvme_stats_get(s, &st0) != ZINC_OK) goto fail;
        double t0 = bench_now_s();
        if (zstate_pass_begin(s, ZSTATE_READ_WRITE) != ZINC_OK) goto fail;
        for (int64_t i = 0; i < s->nchunks; i++) {
            zstate_view v;
            if (zstate_acquire(s, i, &v) != ZINC_OK) goto fail_pass;
            /* As the step pass: in sub-blocks of ZSTATE_POLL_ELEMS, polling the store's IO between them. */
            for (int64_t sb = 0; sb < v.n; sb += ZSTATE_POLL_ELEMS) {
                size_t k = (size_t)(v.n - sb < ZSTATE_POLL_ELEMS ? v.n - sb : ZSTATE_POLL_ELEMS);
                double a0 = bench_now_s();
                zadam_step(&h, k, v.master + sb, v.m + sb, v.v + sb, grad + v.lo + sb, ZINC_FP32,
                           pout + (size_t)(v.lo + sb) * csz, e->compute_dtype,
                           e->decay_mask + (v.lo + sb) / ZADAM_MASK_GROUP);
                adam_s += bench_now_s() - a0;
                if (zstate_poll(s) != ZINC_OK) goto fail_pass;
            }
            if (zstate_release(s, i) != ZINC_OK) goto fail_pass;
        }
        if (zstate_pass_end(s) != ZINC_OK) goto fail;
        double dt = bench_now_s() - t0;
        times[t - 1] = dt;
        if (zstate_nvme_stats_get(s, &st1) != ZINC_OK) goto fail;
        double rb = (double)(st1.bytes_read - st0.bytes_read), wb = (double)(st1.bytes_written - st0.bytes_written);
        double wait = st1.wait_s - st0.wait_s;
        printf("  step %d: read %.3f GB, wrote %.3f GB in %.3f s = %.3f GB/s (%.0f MiB/s) total; blocked on IO "
               "%.3f s, Adam %.3f s, rest %.3f s",
               t, rb * 1e-9, wb * 1e-9, dt, (rb + wb) * 1e-9 / dt, (rb + wb) / 1048576.0 / dt, wait, adam_s,
               dt - wait - adam_s);
        if (fio_r > 0 && fio_w > 0) {
            floor_s = rb / (fio_r * 1048576.0) + wb / (fio_w * 1048576.0);
            printf("; floor %.3f s, ratio %.3f", floor_s, dt / floor_s);
        }
        printf("\n");
        fflush(stdout);
    }
    double med = median(times, steps);
    printf("  median step %.3f s over %d steps", med, steps);
    if (floor_s > 0) printf(", floor %.3f s (fio read %.1f MiB/s, write %.1f MiB/s), ratio %.3f", floor_s, fio_r, fio_w,
                            med / floor_s);
    printf("\n");
    fflush(stdout);

    /* Reference: Adam alone on in-memory chunks of the same size, over the same N elements and gradient. */
    if (adam_reps > 0) {
        size_t cn = (size_t)s->chunk;
        ref = malloc(3 * cn * sizeof *ref);
        if (!ref) goto nomem;
        for (size_t i = 0; i < 3 * cn; i++) ref[i] = i % 3 ? 1e-4f : 0.0f;
        zadam_hparams h = hparams(e, steps + 1);
        for (int r = 0; r < adam_reps; r++) {
            double t0 = bench_now_s();
            for (int64_t i = 0; i < s->nchunks; i++) {
                int64_t lo = i * s->chunk, m = s->n - lo < s->chunk ? s->n - lo : s->chunk;
                zadam_step(&h, (size_t)m, ref, ref + cn, ref + 2 * cn, grad + lo, ZINC_FP32, pout + (size_t)lo * csz,
                           e->compute_dtype, e->decay_mask + lo / ZADAM_MASK_GROUP);
            }
            times[r] = bench_now_s() - t0;
        }
        double am = median(times, adam_reps);
        printf("  reference: Adam alone over %lld elements in in-memory chunks of %lld: median %.3f s of %d "
               "(%.1f GB/s at 26 B/param: fp32 p/m/v/g in, p/m/v out, bf16 param_out)\n",
               (long long)s->n, (long long)s->chunk, am, adam_reps, 26e-9 * (double)s->n / am);
        /* CRC32C on one thread over one chunk's three arrays, as the store does for every byte moved. */
        double c0 = bench_now_s();
        uint32_t c = zcrc32c(0, ref, 3 * cn * sizeof(float));
        double cs = bench_now_s() - c0;
        double gbps = 12e-9 * (double)cn / cs;
        printf("  reference: CRC32C (%s) %.1f GB/s on one thread (crc 0x%08x): %.3f s for the 24 B/param a step "
               "reads and writes\n",
               zcrc32c_impl(), gbps, (unsigned)c, 24e-9 * (double)s->n / gbps);
    }
    free(ref);
    free(times);
    zinc_destroy(e);
    return 0;
nomem:
    fprintf(stderr, "bench_nvme_step: out of memory\n");
    free(ref);
    free(times);
    zinc_destroy(e);
    return 1;
fail_pass:
    zstate_pass_abort(e->state);
fail:
    fprintf(stderr, "bench_nvme_step: %s\n", zinc_last_error());
    free(ref);
    free(times);
    zinc_destroy(e);
    return 1;
}
