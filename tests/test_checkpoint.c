/* Checkpoint resume matrix. `--phase save` (run with W ranks) trains every scenario whose source has W
 * ranks for K steps and saves it; `--phase resume` (run with W' ranks, a CTest fixture after the saves)
 * runs, for every scenario whose target has W' ranks, the uninterrupted 2K-step run at the target
 * config and a run that loads the step-K checkpoint and trains steps K..2K-1, and compares the fp32 master
 * weights, the step counters and the loss scale.
 *
 * Every run has an inf injected into the gradient at step 1 and step K+2 (a skipped step on each side
 * of the checkpoint: fp16 loss-scale hysteresis and steps_skipped must survive it), a WarmupLR schedule
 * (the lr depends on steps_taken), gradient clipping and, for fp16, loss_scale_window 3 (the scale grows
 * across the checkpoint).
 *
 * Same rank count, stage and offload on both sides: bitwise equal. Otherwise the first K steps ran with a
 * different reduction order, so the weights differ by rounding: max |a-b| over the weights (about
 * 0.1-0.25 in magnitude, lr <= 3e-3, 2K = 12 steps) must stay within 5e-5 for fp32 and 3e-2 for bf16/fp16
 * (the engine equivalence test's bounds with margin for the longer run: a 16-bit rounding flip can move
 * a weight by up to ~lr per step since Adam normalises). Counters and the loss scale must match exactly.
 *
 * `--set nvme` runs the scenarios with the optimizer state on NVMe (offload_optimizer.device nvme); they
 * skip (exit 77) when this build's NVMe store is not available. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zt.h"

#define K 6

enum { OFF_NONE = 0, OFF_CPU = 1, OFF_NVME = 2 };

typedef struct scenario {
    const char *name;
    zinc_dtype dtype;
    int src_w, src_stage, src_off;
    int dst_w, dst_stage, dst_off;
    int nvme_set;
    int use_latest; /* resume from DIR (its latest) rather than DIR/step6; also saves an earlier tag */
} scenario;

static const scenario scenarios[] = {
    {"w1s0_fp32", ZINC_FP32, 1, 0, OFF_NONE, 1, 0, OFF_NONE, 0, 1},
    {"w2s0_fp16", ZINC_FP16, 2, 0, OFF_NONE, 2, 0, OFF_NONE, 0, 0},
    {"w2s1_bf16", ZINC_BF16, 2, 1, OFF_NONE, 2, 1, OFF_NONE, 0, 0},
    {"w2s2_fp16", ZINC_FP16, 2, 2, OFF_NONE, 2, 2, OFF_NONE, 0, 1},
    {"w2s3_fp32", ZINC_FP32, 2, 3, OFF_NONE, 2, 3, OFF_NONE, 0, 0},
    {"w2s3_fp16", ZINC_FP16, 2, 3, OFF_NONE, 2, 3, OFF_NONE, 0, 0},
    {"w3s2_bf16", ZINC_BF16, 3, 2, OFF_NONE, 3, 2, OFF_NONE, 0, 0},
    {"w2s1_to_w3s3_fp32", ZINC_FP32, 2, 1, OFF_NONE, 3, 3, OFF_NONE, 0, 0},
    {"w4s3_to_w1s0_fp16", ZINC_FP16, 4, 3, OFF_NONE, 1, 0, OFF_NONE, 0, 0},
    {"w3s2_to_w2s1_bf16", ZINC_BF16, 3, 2, OFF_NONE, 2, 1, OFF_NONE, 0, 0},
    {"w1s2_to_w4s2_fp32", ZINC_FP32, 1, 2, OFF_NONE, 4, 2, OFF_NONE, 0, 0},
    {"w3s0_to_w4s3_bf16", ZINC_BF16, 3, 0, OFF_NONE, 4, 3, OFF_NONE, 0, 0},
    {"w4s1_to_w3s0_fp16", ZINC_FP16, 4, 1, OFF_NONE, 3, 0, OFF_NONE, 0, 0},
    {"cpu_w2s2_fp32", ZINC_FP32, 2, 2, OFF_CPU, 2, 2, OFF_CPU, 0, 0},
    {"cpu_w1s1_bf16", ZINC_BF16, 1, 1, OFF_CPU, 1, 1, OFF_CPU, 0, 0},
    {"cpu_w2s3_to_w3s1_fp16", ZINC_FP16, 2, 3, OFF_CPU, 3, 1, OFF_NONE, 0, 0},
    {"w4s1_to_cpu_w2s3_bf16", ZINC_BF16, 4, 1, OFF_NONE, 2, 3, OFF_CPU, 0, 0},
    {"nvme_w2s2_fp32", ZINC_FP32, 2, 2, OFF_NVME, 2, 2, OFF_NVME, 1, 0},
    {"nvme_w2s3_to_w2s1_fp16", ZINC_FP16, 2, 3, OFF_NVME, 2, 1, OFF_NONE, 1, 0},
};
#define NSCEN ((int)(sizeof scenarios / sizeof *scenarios))

static const char *extra =
    "\"gradient_clipping\": 1.0, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0.0, "
    "\"warmup_max_lr\": 0.003, \"warmup_num_steps\": 10, \"warmup_type\": \"linear\"}}";

static char zero_extra_buf[2][4400];
static const char *g_tree = "ckpt_test"; /* under the build directory; --tree changes it */

static eu_run make_run(const scenario *s, int stage, int off, int slot, int rank) {
    eu_run r = {.stage = stage, .dtype = s->dtype, .extra = extra, .fp16_extra = "\"loss_scale_window\": 3",
                .nonfinite_skip = 1};
    if (off == OFF_CPU) {
        r.zero_extra = "\"offload_optimizer\": {\"device\": \"cpu\"}, \"sub_group_size\": 1024";
    } else if (off == OFF_NVME) {
        snprintf(zero_extra_buf[slot], sizeof zero_extra_buf[slot],
                 "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s/%s/nvme_swap_%d\"}, "
                 "\"sub_group_size\": 1024",
                 zt_build_dir(), g_tree, rank);
        r.zero_extra = zero_extra_buf[slot];
    }
    return r;
}

static void dir_of(const scenario *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s/%s", zt_build_dir(), g_tree, s->name);
}

/* Trains steps [from, to), injecting an inf on the last rank at steps 1 and K+2. */
static zinc_status train(zinc_engine *e, mlp_model *m, int from, int to, zinc_step_info *info) {
    for (int s = from; s < to; s++) {
        if ((s == 1 || s == K + 2) && zinc_rank(e) == zinc_world_size(e) - 1) mlp_inject_grad(m, INFINITY);
        zinc_status st = mlp_train_step(m, s, info, NULL);
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

static float *gather(zinc_engine *e, size_t *n) {
    *n = (size_t)zinc_numel_total(e);
    float *p = malloc(*n * sizeof *p);
    if (p && zinc_gather_master(e, p, *n) != ZINC_OK) {
        free(p);
        return NULL;
    }
    return p;
}

static int g_rank, g_world;

/* A throwaway engine tells this process's rank and rank count. */
static int probe(void) {
    eu_run r = {.stage = 0, .dtype = ZINC_FP32};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&r, &e, &m) != ZINC_OK) return -1;
    g_rank = zinc_rank(e);
    g_world = zinc_world_size(e);
    mlp_destroy(m);
    zinc_destroy(e);
    return 0;
}

/* NVMe scenarios skip when the store is missing. Returns 1 to skip. */
static int nvme_unavailable(zinc_status st) {
    if (st != ZINC_ERR_UNSUPPORTED) return 0;
    if (g_rank == 0) printf("NVMe optimizer-state store not available in this build: %s\n", zinc_last_error());
    return 1;
}

static int save_phase(int nvme_set) {
    int ran = 0;
    for (int i = 0; i < NSCEN; i++) {
        const scenario *s = &scenarios[i];
        if (s->src_w != g_world || s->nvme_set != nvme_set) continue;
        char dir[4200];
        dir_of(s, dir, sizeof dir);
        eu_run r = make_run(s, s->src_stage, s->src_off, 0, g_rank);
        zinc_engine *e = NULL;
        mlp_model *m = NULL;
        zinc_status st = eu_create(&r, &e, &m);
        if (nvme_set && nvme_unavailable(st)) return zt_skip("NVMe store not available (offload/state_nvme.c)");
        ZT_OK(st);
        if (!e) continue;
        zinc_step_info info;
        if (s->use_latest) {
            ZT_OK(train(e, m, 0, K - 2, &info));
            ZT_OK(zinc_save_checkpoint(e, dir, "early"));
            ZT_OK(train(e, m, K - 2, K, &info));
        } else {
            ZT_OK(train(e, m, 0, K, &info));
        }
        ZT_OK(zinc_save_checkpoint(e, dir, NULL));
        if (g_rank == 0) {
            char p[4300], buf[64] = "";
            snprintf(p, sizeof p, "%s/latest", dir);
            FILE *f = fopen(p, "r");
            ZT_CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "step6\n"), "%s: latest holds \"%s\"", s->name,
                     buf);
            if (f) fclose(f);
            printf("saved %-24s %d rank%s stage %d %s%s: step %lld, loss scale %g\n", s->name, g_world,
                   g_world == 1 ? "" : "s", s->src_stage, zinc_dtype_name(s->dtype),
                   s->src_off == OFF_CPU ? " cpu-offload" : s->src_off == OFF_NVME ? " nvme" : "",
                   (long long)info.step, (double)info.loss_scale);
        }
        mlp_destroy(m);
        zinc_destroy(e);
        ran++;
    }
    if (!ran) return zt_skip("no scenario saves with this rank count");
    return zt_finish();
}

static double tolerance(zinc_dtype t) { return t == ZINC_FP32 ? 5e-5 : 3e-2; }

static int resume_phase(int nvme_set) {
    int ran = 0;
    for (int i = 0; i < NSCEN; i++) {
        const scenario *s = &scenarios[i];
        if (s->dst_w != g_world || s->nvme_set != nvme_set) continue;
        char dir[4200], path[4300];
        dir_of(s, dir, sizeof dir);
        if (s->use_latest) snprintf(path, sizeof path, "%s", dir);
        else snprintf(path, sizeof path, "%s/step%d", dir, K);
        eu_run r = make_run(s, s->dst_stage, s->dst_off, 1, g_rank);
        bool bitwise = s->src_w == s->dst_w && s->src_stage == s->dst_stage && s->src_off == s->dst_off;

        /* the uninterrupted run at the target config */
        zinc_engine *e = NULL;
        mlp_model *m = NULL;
        zinc_step_info ref_info = {0}, res_info = {0};
        float *ref = NULL, *res = NULL;
        size_t n = 0, n2 = 0;
        zinc_status st = eu_create(&r, &e, &m);
        if (nvme_set && nvme_unavailable(st)) return zt_skip("NVMe store not available (offload/state_nvme.c)");
        ZT_OK(st);
        if (!e) continue;
        ZT_OK(train(e, m, 0, 2 * K, &ref_info));
        ref = gather(e, &n);
        mlp_destroy(m);
        zinc_destroy(e);

        /* the resumed run */
        ZT_OK(eu_create(&r, &e, &m));
        if (!e) continue;
        ZT_OK(zinc_load_checkpoint(e, path));
        ZT_CHECK(zinc_step_count(e) == K, "%s: resumed at step %lld, expected %d", s->name,
                 (long long)zinc_step_count(e), K);
        ZT_OK(train(e, m, K, 2 * K, &res_info));
        res = gather(e, &n2);
        mlp_destroy(m);
        zinc_destroy(e);

        ZT_CHECK(ref && res && n == n2, "%s: gathering the weights failed", s->name);
        double maxdiff = 0;
        for (size_t k = 0; ref && res && k < n && k < n2; k++) {
            double d = fabs((double)ref[k] - (double)res[k]);
            if (!(d <= maxdiff)) maxdiff = d;
        }
        if (bitwise)
            ZT_CHECK(ref && res && n == n2 && memcmp(ref, res, n * sizeof(float)) == 0,
                     "%s: resumed run differs from the uninterrupted one (max |diff| %.3g), expected bitwise equal",
                     s->name, maxdiff);
        else
            ZT_CHECK(maxdiff <= tolerance(s->dtype), "%s: max |diff| %.3g > %.3g", s->name, maxdiff,
                     tolerance(s->dtype));
        ZT_CHECK(ref_info.step == res_info.step && ref_info.steps_taken == res_info.steps_taken &&
                     ref_info.steps_skipped == res_info.steps_skipped,
                 "%s: steps %lld/%lld/%lld vs uninterrupted %lld/%lld/%lld", s->name, (long long)res_info.step,
                 (long long)res_info.steps_taken, (long long)res_info.steps_skipped, (long long)ref_info.step,
                 (long long)ref_info.steps_taken, (long long)ref_info.steps_skipped);
        ZT_CHECK(ref_info.loss_scale == res_info.loss_scale, "%s: loss scale %g vs uninterrupted %g", s->name,
                 (double)res_info.loss_scale, (double)ref_info.loss_scale);
        ZT_CHECK(ref_info.lr == res_info.lr, "%s: lr %g vs uninterrupted %g", s->name, res_info.lr, ref_info.lr);
        if (g_rank == 0)
            printf("resumed %-24s %d/s%d -> %d/s%d %s: %s (max |diff| %.3g), steps %lld (%lld skipped), loss scale "
                   "%g\n",
                   s->name, s->src_w, s->src_stage, s->dst_w, s->dst_stage, zinc_dtype_name(s->dtype),
                   bitwise ? "bitwise" : "tolerance", maxdiff, (long long)res_info.step,
                   (long long)res_info.steps_skipped, (double)res_info.loss_scale);
        free(ref);
        free(res);
        ran++;
    }
    if (!ran) return zt_skip("no scenario resumes with this rank count");
    return zt_finish();
}

int main(int argc, char **argv) {
    zt_name = "checkpoint";
    const char *phase = NULL;
    int nvme_set = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--phase") && i + 1 < argc) phase = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) nvme_set = !strcmp(argv[++i], "nvme");
        else if (!strcmp(argv[i], "--tree") && i + 1 < argc) g_tree = argv[++i];
    }
    if (!phase || (strcmp(phase, "save") && strcmp(phase, "resume"))) {
        fprintf(stderr, "usage: test_checkpoint --phase save|resume [--set main|nvme] [--tree DIR]\n");
        return 2;
    }
    if (probe() != 0) {
        fprintf(stderr, "cannot create an engine: %s\n", zinc_last_error());
        return 1;
    }
    return !strcmp(phase, "save") ? save_phase(nvme_set) : resume_phase(nvme_set);
}
