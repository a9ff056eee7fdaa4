/* Training with "optimizer": {"type": "Lion"} end to end, against a float64 Lion over the same gradient
 * function (issue 14): ZeRO stages 0-3 on this run's rank count, gradient accumulation 1 and 2, a small
 * reduce bucket, optimizer offload to CPU (stages 1-3), weight decay on the weights and not on the biases
 * (the decay mask). Also: a checkpoint saved after 3 steps and loaded into a fresh engine continues
 * bit for bit as the uninterrupted run (exp_avg is restored), and the optimizer state is one fp32 master +
 * one exp_avg that the engine actually uses (exp_avg_sq stays zero: Lion has no second moment).
 *
 * Tolerance: Lion moves every element by exactly lr (or 0) per step plus its decay, so fp32 and float64
 * agree to a few fp32 roundings (|a - b| <= 1e-5, parameters ~0.5, lr 0.01, 6 steps) wherever the sign
 * of the momentum interpolation c is unambiguous. Where the float64 |c| came within 1e-5 of 0 at some
 * step, the fp32 sum of the gradient over ranks and micro-steps may round to the other sign, moving the
 * element by 2 lr: those elements are not compared (counted; the test fails if they are more than 2%).
 * With ZINC_TEST_DEVICE=cuda (the CUDA emulation) the engine runs on the cuda device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "optim_engine.h"
#include "zinc.h"
#include "zt.h"

static const double LR = 0.01, B1 = 0.9, B2 = 0.99, WD = 0.1;


/* ---------------------------------------------------------------- float64 Lion */
static double *ref_p[2 * NMOD], *ref_minc[2 * NMOD];

static void ref_train(void) {
    for (int k = 0; k < 2 * NMOD; k++) {
        int64_t n = oe_numel_of(k);
        ref_p[k] = malloc((size_t)n * sizeof(double));
        ref_minc[k] = malloc((size_t)n * sizeof(double));
        double *m = calloc((size_t)n, sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            ref_p[k][i] = oe_init_value(k, i);
            ref_minc[k][i] = INFINITY;
        }
        for (int t = 0; t < STEPS; t++)
            for (int64_t i = 0; i < n; i++) {
                double g = 0, w = ref_p[k][i];
                for (int64_t j = 0; j < BATCH; j++) g += oe_grad_fn(k, i, w, (int64_t)t * BATCH + j);
                g /= BATCH;
                double c = B1 * m[i] + (1 - B1) * g;
                if (fabs(c) < ref_minc[k][i]) ref_minc[k][i] = fabs(c);
                if (k % 2 == 0) w *= 1 - LR * WD; /* weights decayed, biases not */
                ref_p[k][i] = w - LR * (c > 0 ? 1 : c < 0 ? -1 : 0);
                m[i] = B2 * m[i] + (1 - B2) * g;
            }
        free(m);
    }
}

/* ---------------------------------------------------------------- the model (optim_engine.c) */
typedef oe_run run;
typedef oe_model model;

static void optimizer_json(const run *r, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\"type\": \"%s\", \"params\": {\"lr\": %g, \"betas\": [%g, %g], \"weight_decay\": %g}}",
             r->type ? r->type : "Lion", LR, B1, B2, WD);
}
static const oe_optimizer optimizer = {optimizer_json, ", \"offload_optimizer\": {\"device\": \"cpu\"}"};
static zinc_status model_create(const run *r, model *md) { return oe_model_create(&optimizer, r, md); }
static zinc_status train(const run *r, float *out) { return oe_train(&optimizer, r, out); }

/* ---------------------------------------------------------------- tests */
static size_t g_ambiguous, g_compared;

static void compare_ref(const float *x, const char *what) {
    int64_t off = 0;
    double worst = 0;
    size_t bad = 0;
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < oe_numel_of(k); i++, off++) {
            g_compared++;
            if (ref_minc[k][i] < 1e-5) {
                g_ambiguous++;
                continue;
            }
            double d = fabs((double)x[off] - ref_p[k][i]);
            if (!(d <= worst)) worst = d;
            bad += !(d <= 1e-5);
        }
    ZT_CHECK(bad == 0, "%s: %zu elements differ from the float64 Lion by more than 1e-5 (worst %.3g)", what, bad,
             worst);
}

static void test_matrix(void) {
    float *x = malloc((size_t)oe_total_numel() * sizeof *x);
    int runs = 0;
    for (int stage = 0; stage <= 3; stage++)
        for (int gas = 1; gas <= 2; gas++)
            for (int off = 0; off <= (stage > 0); off++) {
                run r = {.stage = stage, .gas = gas, .bucket = gas == 1 ? 100 : 1000, .offload = off};
                char what[96];
                snprintf(what, sizeof what, "Lion stage %d gas %d bucket %d%s", stage, gas, r.bucket,
                         off ? " offload cpu" : "");
                zinc_status st = train(&r, x);
                ZT_CHECK(st == ZINC_OK, "%s: %s (%s)", what, zinc_status_name(st), zinc_last_error());
                if (st == ZINC_OK) compare_ref(x, what);
                runs++;
            }
    free(x);
    ZT_CHECK(g_ambiguous * 50 < g_compared, "%zu of %zu elements had |c| < 1e-5: the comparison is too weak",
             g_ambiguous, g_compared);
    if (oe_rank == 0) fprintf(stderr, "lion engine: %d runs, %zu of %zu elements not compared (|c| < 1e-5)\n", runs,
                           g_ambiguous, g_compared);
}

/* Save after 3 steps, load into a fresh engine, 3 more: bitwise the uninterrupted run. The optimizer state
 * the engine reports is master + exp_avg + (unused) exp_avg_sq. */
static void test_checkpoint(void) {
    for (int stage = 1; stage <= 3; stage += 2) {
        run r = {.stage = stage, .gas = 1, .bucket = 1000, .offload = 0};
        int64_t n = oe_total_numel();
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        ZT_OK(train(&r, a));
        char dir[512];
        snprintf(dir, sizeof dir, "%s/lion_ckpt_np%d_s%d", zt_build_dir(), oe_world, stage);
        model md;
        ZT_OK(model_create(&r, &md));
        ZT_OK(oe_train_steps(&md, &r, 0, 3));
        ZT_OK(zinc_save_checkpoint(md.e, dir, "step3"));
        zinc_destroy(md.e);
        ZT_OK(model_create(&r, &md));
        char path[600];
        snprintf(path, sizeof path, "%s/step3", dir);
        ZT_OK(zinc_load_checkpoint(md.e, path));
        ZT_CHECK(zinc_step_count(md.e) == 3, "stage %d: step count after load %lld", stage,
                 (long long)zinc_step_count(md.e));
        ZT_OK(oe_train_steps(&md, &r, 3, STEPS));
        ZT_OK(zinc_gather_master(md.e, b, (size_t)n));
        zinc_destroy(md.e);
        ZT_CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0, "stage %d: resumed Lion run differs from the uninterrupted one",
                 stage);
        /* A Lion checkpoint into an AdamW run (and back) is refused before anything is touched. */
        run adam = r;
        adam.type = "AdamW";
        ZT_OK(model_create(&adam, &md));
        ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG, "saved by the Lion optimizer, this run uses Adam/AdamW");
        ZT_OK(zinc_save_checkpoint(md.e, dir, "adam"));
        zinc_destroy(md.e);
        ZT_OK(model_create(&r, &md));
        snprintf(path, sizeof path, "%s/adam", dir);
        ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG, "saved by the AdamW optimizer, this run uses Lion");
        zinc_destroy(md.e);
        free(a);
        free(b);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zt_name = "engine_lion";
    ref_train();
    test_matrix();
    test_checkpoint();
    for (int k = 0; k < 2 * NMOD; k++) {
        free(ref_p[k]);
        free(ref_minc[k]);
    }
    return zt_finish();
}
