/* Training with "optimizer": {"type": "Lamb"} end to end, against a float64 LAMB (DeepSpeed's FusedLamb:
 * per-tensor trust ratio ||p|| / ||u|| clamped to [min_coeff, max_coeff]) over the same gradient function
 * (issue 14): ZeRO stages 0-3 on this run's rank count (stages 1-3 split tensors across ranks: the norms
 * are summed over the pieces), gradient accumulation 1 and 2, CPU offload with small sub_group_size chunks
 * (tensors split across chunks too), weight decay on the weights only, a clamp that binds (min_coeff 0.5:
 * every tensor's ratio is below it) and one that does not. A checkpoint round trip continues bit for bit.
 * The same program runs on the emulated cuda device (ZINC_TEST_DEVICE=cuda: the device passes, and the
 * staged host passes of the offloaded runs) and on the cpu presented as a discrete device.
 *
 * Tolerance: |a - b| <= 2e-6 over all weights (parameters ~0.5, lr 0.01, 6 steps: the fp32 moments, the
 * norms and the update carry a few fp32 roundings per step; gradient sums over ranks add reordering). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "optim_engine.h"
#include "zinc.h"
#include "zt.h"

static const double LR = 0.01, B1 = 0.9, B2 = 0.999, WD = 0.01, EPS = 1e-6;
static double g_max_coeff = 10.0, g_min_coeff = 0.01;


/* ---------------------------------------------------------------- float64 LAMB */
static double *ref_p[2 * NMOD];

static void ref_train(void) {
    double *m[2 * NMOD], *v[2 * NMOD], *u[2 * NMOD];
    for (int k = 0; k < 2 * NMOD; k++) {
        int64_t n = oe_numel_of(k);
        free(ref_p[k]);
        ref_p[k] = malloc((size_t)n * sizeof(double));
        m[k] = calloc((size_t)n, sizeof(double));
        v[k] = calloc((size_t)n, sizeof(double));
        u[k] = calloc((size_t)n, sizeof(double));
        for (int64_t i = 0; i < n; i++) ref_p[k][i] = oe_init_value(k, i);
    }
    double b1 = (double)(float)B1, b2 = (double)(float)B2; /* the engine's float betas */
    for (int t = 1; t <= STEPS; t++)
        for (int k = 0; k < 2 * NMOD; k++) {
            int64_t n = oe_numel_of(k);
            double W = 0, U = 0, wd = k % 2 == 0 ? (double)(float)WD : 0; /* weights decayed, biases not */
            for (int64_t i = 0; i < n; i++) {
                double g = 0, w = ref_p[k][i];
                for (int64_t j = 0; j < BATCH; j++) g += oe_grad_fn(k, i, w, (int64_t)(t - 1) * BATCH + j);
                g /= BATCH;
                m[k][i] = b1 * m[k][i] + (1 - b1) * g;
                v[k][i] = b2 * v[k][i] + (1 - b2) * g * g;
                u[k][i] = m[k][i] / (sqrt(v[k][i]) + (double)(float)EPS) + wd * w;
                W += w * w;
                U += u[k][i] * u[k][i];
            }
            double r = 1;
            if (W > 0 && U > 0) {
                r = sqrt(W) / sqrt(U);
                if (r > g_max_coeff) r = g_max_coeff;
                if (r < g_min_coeff) r = g_min_coeff;
            }
            double step = (double)(float)LR * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
            for (int64_t i = 0; i < n; i++) ref_p[k][i] -= step * r * u[k][i];
        }
    for (int k = 0; k < 2 * NMOD; k++) {
        free(m[k]);
        free(v[k]);
        free(u[k]);
    }
}

/* ---------------------------------------------------------------- the model (optim_engine.c) */
typedef oe_run run;
typedef oe_model model;

static void optimizer_json(const run *r, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\"type\": \"%s\", \"params\": {\"lr\": %g, \"betas\": [%g, %g], \"weight_decay\": %g, "
             "\"eps\": %g, \"max_coeff\": %g, \"min_coeff\": %g}}",
             r->type ? r->type : "Lamb", LR, B1, B2, WD, EPS, g_max_coeff, g_min_coeff);
}
static const oe_optimizer optimizer = {optimizer_json, ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"sub_group_size\": 2000"};
static zinc_status model_create(const run *r, model *md) { return oe_model_create(&optimizer, r, md); }
static zinc_status train(const run *r, float *out) { return oe_train(&optimizer, r, out); }

/* ---------------------------------------------------------------- tests */
static double max_diff(const float *x) {
    int64_t off = 0;
    double worst = 0;
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < oe_numel_of(k); i++, off++) {
            double d = fabs((double)x[off] - ref_p[k][i]);
            if (!(d <= worst)) worst = d; /* NaN propagates */
        }
    return worst;
}

static void test_matrix(void) {
    float *x = malloc((size_t)oe_total_numel() * sizeof *x);
    int runs = 0;
    double worst_all = 0;
    for (int clamp = 0; clamp < 2; clamp++) {
        g_min_coeff = clamp ? 0.5 : 0.01; /* 0.5: every tensor's ratio (~0.1-0.35: |p_i| ~ 0.35, |u_i| >~ 1) is raised */
        ref_train();
        for (int stage = 0; stage <= 3; stage++)
            for (int gas = 1; gas <= 2; gas++)
                for (int off = 0; off <= (stage > 0); off++) {
                    run r = {.stage = stage, .gas = gas, .bucket = gas == 1 ? 100 : 1000, .offload = off};
                    char what[128];
                    snprintf(what, sizeof what, "Lamb min_coeff %g stage %d gas %d bucket %d%s", g_min_coeff, stage,
                             gas, r.bucket, off ? " offload cpu, sub_group_size 2000" : "");
                    zinc_status st = train(&r, x);
                    ZT_CHECK(st == ZINC_OK, "%s: %s (%s)", what, zinc_status_name(st), zinc_last_error());
                    if (st != ZINC_OK) continue;
                    double d = max_diff(x);
                    if (!(d <= worst_all)) worst_all = d;
                    ZT_CHECK(d <= 2e-6, "%s: max |zinc - float64 LAMB| = %.3g (tolerance 2e-6)", what, d);
                    runs++;
                }
    }
    free(x);
    if (oe_rank == 0) fprintf(stderr, "lamb engine: %d runs, worst |zinc - float64| %.3g\n", runs, worst_all);
}

/* The clamp binds in the min_coeff 0.5 runs: the float64 model with min_coeff 0.01 ends elsewhere. */
static void test_clamp_matters(void) {
    g_min_coeff = 0.01;
    ref_train();
    double *loose = malloc((size_t)oe_total_numel() * sizeof *loose);
    int64_t off = 0;
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < oe_numel_of(k); i++) loose[off++] = ref_p[k][i];
    g_min_coeff = 0.5;
    ref_train();
    double d = 0;
    off = 0;
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < oe_numel_of(k); i++, off++) d = fmax(d, fabs(loose[off] - ref_p[k][i]));
    ZT_CHECK(d > 1e-3, "min_coeff 0.5 vs 0.01 changes the float64 result by only %.3g: the clamp test is vacuous", d);
    free(loose);
}

/* Save after 3 steps, load into a fresh engine, 3 more: bitwise the uninterrupted run. */
static void test_checkpoint(void) {
    g_min_coeff = 0.01;
    for (int stage = 1; stage <= 3; stage += 2) {
        run r = {.stage = stage, .gas = 1, .bucket = 1000, .offload = 0};
        int64_t n = oe_total_numel();
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        ZT_OK(train(&r, a));
        char dir[512], path[600];
        snprintf(dir, sizeof dir, "%s/lamb_ckpt_np%d_s%d", zt_build_dir(), oe_world, stage);
        model md;
        ZT_OK(model_create(&r, &md));
        ZT_OK(oe_train_steps(&md, &r, 0, 3));
        ZT_OK(zinc_save_checkpoint(md.e, dir, "step3"));
        zinc_destroy(md.e);
        ZT_OK(model_create(&r, &md));
        snprintf(path, sizeof path, "%s/step3", dir);
        ZT_OK(zinc_load_checkpoint(md.e, path));
        ZT_OK(oe_train_steps(&md, &r, 3, STEPS));
        ZT_OK(zinc_gather_master(md.e, b, (size_t)n));
        zinc_destroy(md.e);
        ZT_CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0, "stage %d: resumed Lamb run differs from the uninterrupted one",
                 stage);
        free(a);
        free(b);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zt_name = "engine_lamb";
    test_clamp_matters();
    test_matrix();
    test_checkpoint();
    for (int k = 0; k < 2 * NMOD; k++) free(ref_p[k]);
    return zt_finish();
}
