/* Equivalence: stages 0-3 x fp32/bf16/fp16 on this run's rank count train K steps at one
 * train_batch_size and must match the 1-rank stage-0 reference of the same dtype (written by the
 * `--write-ref` run, a CTest fixture) within the tolerances below; the same run twice is bitwise equal.
 *
 * Tolerances (max |a-b| over all fp32 master weights, parameters ~0.1-0.25 in magnitude, lr 3e-3,
 * K = 8 steps): fp32 1e-5 (reduction order only), bf16 and fp16 2e-2 (16-bit gradients summed in a
 * different order round differently, and Adam normalises small gradients, so a rounding flip can move a
 * weight by up to ~lr per step). The 1-rank stage-0 run against itself is exact.
 *
 * With ZINC_DEVICE_COMM=staged in the environment the device collectives go through host staging
 * (comm_staged.h); the test checks that the engine says so and holds it to the same tolerances.
 * With ZINC_CPU_DISCRETE=1 (the cpu device presented as a discrete one), no staging and at most 2 ranks,
 * every run must also equal, bit for bit, the same run on the plain cpu device: the same kernels in the
 * same order. (With 3+ ranks they may differ in rounding: the discrete device issues non-blocking
 * collectives where the plain one blocks, and Open MPI's non-blocking algorithms add 3+ contributions in
 * another order; both stay within the tolerances above.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zt.h"

#define STEPS 8

static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};

static void ref_path(zinc_dtype t, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/equiv_ref_%s.bin", zt_build_dir(), eu_dtype_name(t));
}

static zt_logcap probe_log = {.echo = ZINC_LOG_WARN}; /* the probe engine's start-up lines */
static const char *g_comm_want;                       /* the device communicator its start-up line must name */
static int g_discrete_vs_plain; /* compare each run on the discrete device with the plain cpu device */

static double tolerance(zinc_dtype t) { return t == ZINC_FP32 ? 1e-5 : 2e-2; }

int main(int argc, char **argv) {
    zt_name = "engine_equiv";
    int write_ref = argc > 1 && !strcmp(argv[1], "--write-ref");
    int rank = 0, world = 1;
    const char *dc = getenv("ZINC_DEVICE_COMM");
    g_comm_want = dc && !strcmp(dc, "staged") ? "(mpi-staged)" : NULL;
    const char *disc = getenv("ZINC_CPU_DISCRETE");
    g_discrete_vs_plain = disc && !strcmp(disc, "1") && !g_comm_want;
    for (int d = 0; d < 3; d++) {
        zinc_dtype t = dtypes[d];
        char path[4096];
        ref_path(t, path, sizeof path);
        if (write_ref) {
            eu_run r = {.stage = 0, .dtype = t};
            float *p = NULL;
            size_t n = 0;
            ZT_OK(eu_train(&r, STEPS, &p, &n));
            FILE *f = fopen(path, "wb");
            ZT_CHECK(f && fwrite(p, sizeof(float), n, f) == n, "cannot write %s", path);
            if (f) fclose(f);
            free(p);
            continue;
        }
        size_t nref = 0;
        float *ref = NULL;
        FILE *f = fopen(path, "rb");
        if (!f) return zt_skip("the reference files are missing: run with --write-ref first (CTest fixture)");
        fseek(f, 0, SEEK_END);
        nref = (size_t)ftell(f) / sizeof(float);
        fseek(f, 0, SEEK_SET);
        ref = malloc(nref * sizeof(float));
        ZT_CHECK(fread(ref, sizeof(float), nref, f) == nref, "short reference file %s", path);
        fclose(f);
        for (int stage = 0; stage <= 3; stage++) {
            /* Variant 2 (stages 2-3): buckets of 1000 elements, smaller than fc2 (2352), whose gradients then
             * go through the landing buffer in three chunks on alternating slots. */
            for (int variant = 0; variant <= (stage >= 2 ? 2 : 1); variant++) {
                int overlap = variant >= 1;
                eu_run r = {.stage = stage, .dtype = t, .overlap_comm = overlap, .bucket = variant == 2 ? 1000 : 0};
                float *p = NULL, *q = NULL;
                size_t n = 0, n2 = 0;
                zinc_engine *probe = NULL;
                mlp_model *pm = NULL;
                eu_run pr = r;
                pr.log = &probe_log;
                zt_logcap_clear(&probe_log);
                ZT_OK(eu_create(&pr, &probe, &pm));
                if (g_comm_want)
                    ZT_CHECK(zt_logcap_count_from(&probe_log, ZINC_LOG_DEBUG, g_comm_want),
                             "the engine did not report %s collectives", g_comm_want);
                if (probe) {
                    rank = zinc_rank(probe);
                    world = zinc_world_size(probe);
                }
                mlp_destroy(pm);
                zinc_destroy(probe);
                ZT_OK(eu_train(&r, STEPS, &p, &n));
                ZT_CHECK(n == nref, "element count %zu vs reference %zu", n, nref);
                double maxdiff = 0;
                for (size_t i = 0; p && i < n && i < nref; i++) {
                    double dd = fabs((double)p[i] - (double)ref[i]);
                    if (!(dd <= maxdiff)) maxdiff = dd; /* NaN propagates */
                }
                ZT_CHECK(maxdiff <= tolerance(t), "ranks %d stage %d %s overlap %d bucket %d: max |diff| %.3g > %.3g",
                         world, stage, eu_dtype_name(t), overlap, r.bucket ? r.bucket : 3000, maxdiff, tolerance(t));
                if (rank == 0)
                    printf("ranks %d stage %d %-4s overlap %d bucket %4d: max |diff| vs 1-rank stage 0 = %.3g\n", world,
                           stage, eu_dtype_name(t), overlap, r.bucket ? r.bucket : 3000, maxdiff);
                if (g_discrete_vs_plain && world <= 2) {
                    float *c = NULL;
                    size_t nc = 0;
                    unsetenv("ZINC_CPU_DISCRETE");
                    ZT_OK(eu_train(&r, STEPS, &c, &nc));
                    setenv("ZINC_CPU_DISCRETE", "1", 1);
                    ZT_CHECK(p && c && n == nc && memcmp(p, c, n * sizeof(float)) == 0,
                             "ranks %d stage %d %s overlap %d: discrete device differs from plain cpu", world, stage,
                             eu_dtype_name(t), overlap);
                    free(c);
                }
                if (variant != 1) {
                    ZT_OK(eu_train(&r, STEPS, &q, &n2));
                    ZT_CHECK(p && q && n == n2 && memcmp(p, q, n * sizeof(float)) == 0,
                             "ranks %d stage %d %s: two identical runs differ", world, stage, eu_dtype_name(t));
                }
                free(p);
                free(q);
            }
        }
        free(ref);
    }
    return zt_finish();
}
