/* See train_flops.h. */
#include "cli/train/train_flops.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common/cli_files.h"
#include "base/core/clock.h"

#define CALIBRATE_S 0.4
#define CALIBRATE_N 384 /* square sgemm: large enough to run near the core's rate, small enough for 0.4 s */
/* The rate is over the thread's CPU time, and the best of short windows: over wall time, or averaged with
 * the first product's JIT, the peak measured on a shared machine was what the calibration got of the cores
 * (half of them under a load of 4), and the run's less contended stretches then printed MFU 103.8-120%. */
#define CALIBRATE_WINDOW_S 0.025
#define CALIBRATE_MIN_CPU_S 0.005 /* a window the thread barely ran in says nothing */

int zcli_peak_parse(const char *text, double *per_rank, int *measure, char *why, size_t cap) {
    *per_rank = 0, *measure = 0;
    if (!strcmp(text, "sgemm")) {
        *measure = 1;
        return 0;
    }
    char *end;
    double v = strtod(text, &end);
    if (end != text && !*end && isfinite(v) && v > 0 && v < 1e21) {
        *per_rank = v;
        return 0;
    }
    snprintf(why, cap,
             "--peak-flops \"%s\": give the peak FLOP/s of one rank (a number such as 9.9e14 for an H100's bf16 dense "
             "peak) or \"sgemm\" to measure it",
             text);
    return -1;
}

typedef struct calib {
    double *flops; /* per task */
    int failed;
    zcli_gemm_fn gemm; /* NULL: cblas_sgemm */
    zcli_gemm_bf16_fn gemm_bf16;
} calib;

static void one_product(const calib *c, size_t n, float *a) {
    int64_t k = (int64_t)n;
    if (c->gemm_bf16) {
        uint16_t *h = (uint16_t *)(a + 2 * n * n); /* bf16 A and B after C (3 n^2 floats hold 2 n^2 + n^2 halves) */
        c->gemm_bf16('N', 'N', k, k, k, 1.0f, h, k, h + n * n, k, 0.0f, a, k);
    } else if (c->gemm) {
        c->gemm('N', 'N', k, k, k, 1.0f, a, k, a + n * n, k, 0.0f, a + 2 * n * n, k);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, a + n * n,
                    (int)n, 0.0f, a + 2 * n * n, (int)n);
    }
}

static void sgemm_task(void *ctx, int64_t lo, int64_t hi) {
    calib *c = ctx;
    size_t n = CALIBRATE_N, bytes = n * n * sizeof(float);
    for (int64_t k = lo; k < hi; k++) {
        float *a = malloc(3 * bytes);
        if (!a) {
            c->failed = 1;
            continue;
        }
        for (size_t i = 0; i < 3 * n * n; i++) a[i] = (float)(i % 7) * 0.25f;
        if (c->gemm_bf16) {
            uint16_t *h = (uint16_t *)(a + 2 * n * n);
            for (size_t i = 0; i < 2 * n * n; i++) h[i] = (uint16_t)(0x3e80u + (unsigned)(i % 7)); /* ~0.25.. */
        }
        double start = zclock_now_s(), best = 0, now = start;
        while (now - start < CALIBRATE_S) {
            double t0 = now, cpu0 = zclock_thread_cpu_s(), done = 0;
            do {
                one_product(c, n, a);
                done += 2.0 * (double)n * (double)n * (double)n;
                now = zclock_now_s();
            } while (now - t0 < CALIBRATE_WINDOW_S);
            double cpu = zclock_thread_cpu_s() - cpu0;
            if (cpu >= CALIBRATE_MIN_CPU_S) best = fmax(best, done / cpu);
        }
        if (!(best > 0)) c->failed = 1;
        c->flops[k] = best;
        free(a);
    }
}

/* This rank's product rate: one single-threaded product per engine thread at once (how GPT-2's matrix
 * products run), summed, on the model's backend (t->gemm, t->gemm_bf16; else OpenBLAS). */
static int measure_rank(const zcli_train *t, double *rate) {
    zinc_engine *e = t->e;
    int threads = zinc_cpu_threads(e);
    calib c = {.flops = calloc((size_t)threads, sizeof(double)), .gemm = t->gemm, .gemm_bf16 = t->gemm_bf16};
    if (!c.flops) return -1;
    openblas_set_num_threads(1);
    zinc_status st = zinc_parallel_for(e, threads, sgemm_task, &c);
    *rate = 0;
    for (int i = 0; i < threads; i++) *rate += c.flops[i];
    free(c.flops);
    return st != ZINC_OK || c.failed ? -1 : 0;
}

static const char *calib_name(const zcli_train *t) { return t->gemm_name ? t->gemm_name : "OpenBLAS sgemm"; }

int zcli_flops_start(zcli_train *t) {
    const zcli_train_opts *o = t->o;
    t->flops_per_sample = zinc_flops_per_sample(t->e);
    t->peak_flops = 0;
    if (!o->peak_flops) return 0;
    double per_rank;
    int measure;
    char why[256];
    if (zcli_peak_parse(o->peak_flops, &per_rank, &measure, why, sizeof why)) {
        fprintf(stderr, "zinc train: %s\n", why);
        return -1;
    }
    int W = zinc_world_size(t->e);
    if (!measure) {
        t->peak_flops = per_rank * W;
        return 0;
    }
    if (zinc_device(t->e) != ZINC_DEVICE_CPU) {
        fprintf(stderr, "zinc train: --peak-flops sgemm measures the CPU; on a GPU give the GPU's peak FLOP/s\n");
        return -1;
    }
    double v[1] = {0};
    int bad = measure_rank(t, &v[0]);
    if (bad) v[0] = NAN; /* every rank still takes part in the sum, which then says it failed */
    if (zinc_allreduce_sum(t->e, v, 1) != ZINC_OK) return zcli_train_fail("summing the ranks' sgemm rates");
    if (!(v[0] > 0)) {
        fprintf(stderr, "zinc train: --peak-flops sgemm: the calibration failed (out of memory on a rank?)\n");
        return -1;
    }
    t->peak_flops = v[0];
    if (zinc_rank(t->e) == 0)
        zinc_log(t->e, ZINC_LOG_INFO, "peak %.4g FLOP/s (%s %dx%d for %.1f s on %d rank%s x %d threads)", t->peak_flops,
                 calib_name(t), CALIBRATE_N, CALIBRATE_N, CALIBRATE_S, W, W == 1 ? "" : "s", zinc_cpu_threads(t->e));
    return 0;
}

static void si(double v, char *out, size_t cap) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (v >= 1000 && u < 6) v /= 1000, u++;
    snprintf(out, cap, "%.3g %sFLOP/s", v, units[u]);
}

void zcli_flops_text(zcli_train *t, double samples, double seconds, char *out, size_t cap) {
    out[0] = 0;
    if (!(t->flops_per_sample > 0) || !(seconds > 0)) return;
    double rate = t->flops_per_sample * samples / seconds;
    char r[32];
    si(rate, r, sizeof r);
    double mfu = t->peak_flops > 0 ? rate / t->peak_flops : 0;
    if (mfu > 1 && !t->mfu_warned && zinc_rank(t->e) == 0) {
        t->mfu_warned = true;
        fprintf(stderr,
                "zinc train: warning: MFU %.1f%% is above 100%%: the run does more FLOP/s than the peak (%.4g FLOP/s, "
                "%s); the peak is too low for these products (give the hardware's --peak-flops X) or the "
                "model's declared FLOPs are too high\n",
                100 * mfu, t->peak_flops,
                t->o->peak_flops && !strcmp(t->o->peak_flops, "sgemm") ? calib_name(t) : "given by --peak-flops");
    }
    if (t->peak_flops > 0)
        snprintf(out, cap, " | %s | MFU %.1f%%%s", r, 100 * mfu, mfu > 1 ? " (above peak)" : "");
    else
        snprintf(out, cap, " | %s", r);
}

int zcli_flops_report(const zcli_train *t, json_t *j) {
    if (!(t->flops_per_sample > 0)) return 0;
    double samples = (double)((t->o->steps - t->start) * zinc_train_batch_size(t->e));
    double rate = t->train_s > 0 ? t->flops_per_sample * samples / t->train_s : 0;
    int bad = json_object_set_new(j, "flops_per_sample", json_real(t->flops_per_sample));
    bad |= json_object_set_new(j, "flops_per_s", json_real(rate));
    bad |= json_object_set_new(j, "flops_train_seconds", json_real(t->train_s)); /* the time flops_per_s is over */
    if (t->peak_flops > 0) {
        bad |= json_object_set_new(j, "peak_flops_per_s", json_real(t->peak_flops));
        bad |=
            json_object_set_new(j, "peak_source", json_string(strcmp(t->o->peak_flops, "sgemm") ? "given" : "sgemm"));
        bad |= json_object_set_new(j, "mfu", json_real(rate / t->peak_flops));
        bad |= json_object_set_new(j, "mfu_above_peak", json_boolean(rate > t->peak_flops));
        if (!strcmp(t->o->peak_flops, "sgemm"))
            bad |= json_object_set_new(j, "peak_backend", json_string(calib_name(t)));
    }
    return bad ? -1 : 0;
}
