/* Training with "optimizer": {"type": "Lion"} end to end, against a float64 Lion over the same gradient
 * function (issue 14): ZeRO stages 0-3 on this run's rank count, gradient accumulation 1 and 2, a small
 * reduce bucket, optimizer offload to CPU (stages 1-3), weight decay on the weights and not on the biases
 * (the decay mask). Also: a checkpoint saved after 3 steps and loaded into a fresh engine continues
 * bit for bit as the uninterrupted run (exp_avg is restored), with the state in memory and on NVMe.
 * Memory: Lion's optimizer state is one fp32 master + one exp_avg; no exp_avg_sq is allocated (the memory
 * report shows none, and an AdamW engine of the same model holds exactly one master-sized array more).
 * NVMe offload (two files, no exp_avg_sq) trains bit for bit as the in-memory run. Checkpoints keep the
 * exp_avg_sq section (zeros) so the format does not depend on the optimizer; a Lion-labelled checkpoint
 * whose section is not zero is refused as corrupt.
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
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/engine/engine_internal.h"
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
/* run.offload 2: NVMe offload under the build directory, in chunks of 1024 elements (several per rank). The
 * members go into zero_optimization; the last one closes it and opens the top-level "zinc" section, whose
 * brace the config template closes (O_DIRECT may be refused by the build directory's file system). */
static char nvme_json[2048];
static const oe_optimizer optimizer_nvme = {optimizer_json, nvme_json};
static const oe_optimizer *optimizer_for(const run *r) { return r->offload == 2 ? &optimizer_nvme : &optimizer; }
static zinc_status model_create(const run *r, model *md) { return oe_model_create(optimizer_for(r), r, md); }
static zinc_status train(const run *r, float *out) { return oe_train(optimizer_for(r), r, out); }
static const char *offload_name(int off) { return off == 2 ? "nvme" : off == 1 ? "cpu" : "none"; }

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

/* Save after 3 steps, load into a fresh engine, 3 more: bitwise the uninterrupted run, with the state in
 * memory and on NVMe (2 files), and across them (the checkpoint format does not depend on where the state
 * lived). The checkpoint holds an exp_avg_sq section of zeros, as Adam's format has it. */
static void test_checkpoint(void) {
    for (int stage = 1; stage <= 3; stage += 2)
        for (int off = 0; off <= 2; off += 2) {
            run r = {.stage = stage, .gas = 1, .bucket = 1000, .offload = off};
            run other = r; /* loads the checkpoint with the state kept the other way */
            other.offload = 2 - off;
            int64_t n = oe_total_numel();
            float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * 4);
            ZT_OK(train(&r, a));
            char dir[512];
            snprintf(dir, sizeof dir, "%s/lion_ckpt_np%d_s%d_%s", zt_build_dir(), oe_world, stage, offload_name(off));
            model md;
            ZT_OK(model_create(&r, &md));
            ZT_OK(oe_train_steps(&md, &r, 0, 3));
            ZT_OK(zinc_save_checkpoint(md.e, dir, "step3"));
            zinc_destroy(md.e);
            char path[600];
            snprintf(path, sizeof path, "%s/step3", dir);
            const run *loads[2] = {&r, &other};
            float *outs[2] = {b, c};
            for (int l = 0; l < 2; l++) {
                ZT_OK(model_create(loads[l], &md));
                ZT_OK(zinc_load_checkpoint(md.e, path));
                ZT_CHECK(zinc_step_count(md.e) == 3, "stage %d: step count after load %lld", stage,
                         (long long)zinc_step_count(md.e));
                ZT_OK(oe_train_steps(&md, loads[l], 3, STEPS));
                ZT_OK(zinc_gather_master(md.e, outs[l], (size_t)n));
                zinc_destroy(md.e);
                ZT_CHECK(memcmp(a, outs[l], (size_t)n * sizeof *a) == 0,
                         "stage %d: Lion saved with offload %s, resumed with offload %s, differs from the "
                         "uninterrupted run",
                         stage, offload_name(off), offload_name(loads[l]->offload));
            }
            /* A Lion checkpoint into an AdamW run (and back) is refused before anything is touched. */
            run adam = r;
            adam.type = "AdamW";
            ZT_OK(model_create(&adam, &md));
            ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG,
                   "saved by the Lion optimizer, this run uses Adam/AdamW");
            ZT_OK(oe_train_steps(&md, &adam, 0, 2)); /* a second moment that is not zero */
            ZT_OK(zinc_save_checkpoint(md.e, dir, "adam"));
            zinc_destroy(md.e);
            ZT_OK(model_create(&r, &md));
            snprintf(path, sizeof path, "%s/adam", dir);
            ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG,
                   "saved by the AdamW optimizer, this run uses Lion");
            zinc_destroy(md.e);
            free(a);
            free(b);
            free(c);
        }
}

/* An AdamW checkpoint whose manifest is rewritten (and sealed again) to say Lion: its exp_avg_sq section
 * is not zero, so it was not saved by Lion, and the load refuses it, naming the file. */
static void test_checkpoint_forged(void) {
    run r = {.stage = 1, .gas = 1, .bucket = 1000, .offload = 0};
    char tagdir[600], file[700];
    snprintf(tagdir, sizeof tagdir, "%s/lion_ckpt_np%d_s1_none/adam", zt_build_dir(), oe_world);
    snprintf(file, sizeof file, "%s/" ZCKPT_MANIFEST, tagdir);
    model md;
    ZT_OK(model_create(&r, &md));
    if (!md.e) return;
    if (md.rank == 0) {
        json_error_t jerr;
        json_t *root = json_load_file(file, 0, &jerr);
        ZT_CHECK(root != NULL, "cannot read %s: %s", file, jerr.text);
        json_t *opt = json_object_get(json_object_get(root, "config"), "optimizer");
        ZT_CHECK(opt && json_object_set_new(opt, "type", json_string("Lion")) == 0, "%s: no config.optimizer", file);
        json_object_del(root, "manifest_crc32c");
        char *text = root ? zckpt_manifest_seal(root) : NULL;
        FILE *f = text ? fopen(file, "w") : NULL;
        ZT_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot rewrite %s", file);
        free(text);
        json_decref(root);
    }
    ZT_OK(zcomm_barrier(md.e->comm)); /* the manifest is rewritten before any rank reads it */
    ZT_ERR(zinc_load_checkpoint(md.e, tagdir), ZINC_ERR_CORRUPT, "of its exp_avg_sq section is");
    ZT_CHECK(strstr(zinc_last_error(), "keeps no second moment") && strstr(zinc_last_error(), ".zshard"),
             "the message does not say why or name the file: %s", zinc_last_error());
    zinc_destroy(md.e);
}

/* No exp_avg_sq anywhere in the memory report, and an AdamW engine of the same model and config holds
 * exactly one master-sized exp_avg_sq more, kind by kind (NVMe: the files and swap buffers are checked in
 * tests/test_store_nvme.c and test_mem_plan.c; here only that none is counted). */
static void test_memory(void) {
    for (int stage = 0; stage <= 3; stage++)
        for (int off = 0; off <= (stage > 0 ? 2 : 0); off++) {
            run r = {.stage = stage, .gas = 1, .bucket = 1000, .offload = off}, adam = r;
            adam.type = "AdamW";
            zinc_memory_report rep[2];
            const run *runs[2] = {&r, &adam};
            for (int k = 0; k < 2; k++) {
                model md;
                ZT_OK(model_create(runs[k], &md));
                if (!md.e) return;
                ZT_OK(oe_train_steps(&md, runs[k], 0, 2));
                ZT_OK(zinc_memory_get(md.e, &rep[k]));
                zinc_destroy(md.e);
            }
            const zinc_memory_report *l = &rep[0], *a = &rep[1];
            uint64_t sq = 0, master = 0;
            for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
                const char *kind = zinc_mem_kind_name((zinc_mem_kind)k);
                ZT_CHECK(l->current[k][ZINC_MEM_EXP_AVG_SQ] == 0 && l->peak[k][ZINC_MEM_EXP_AVG_SQ] == 0,
                         "stage %d offload %s: Lion holds %llu bytes of exp_avg_sq (%s, peak %llu)", stage,
                         offload_name(off), (unsigned long long)l->current[k][ZINC_MEM_EXP_AVG_SQ], kind,
                         (unsigned long long)l->peak[k][ZINC_MEM_EXP_AVG_SQ]);
                ZT_CHECK(a->current[k][ZINC_MEM_EXP_AVG_SQ] == l->current[k][ZINC_MEM_MASTER],
                         "stage %d offload %s: AdamW's exp_avg_sq (%llu bytes of %s) is not Lion's master (%llu)",
                         stage, offload_name(off), (unsigned long long)a->current[k][ZINC_MEM_EXP_AVG_SQ], kind,
                         (unsigned long long)l->current[k][ZINC_MEM_MASTER]);
                sq += a->current[k][ZINC_MEM_EXP_AVG_SQ];
                master += l->current[k][ZINC_MEM_MASTER];
                if (off != 2)
                    ZT_CHECK(a->current_total[k] - l->current_total[k] == a->current[k][ZINC_MEM_EXP_AVG_SQ] &&
                                 a->peak_total[k] - l->peak_total[k] == a->current[k][ZINC_MEM_EXP_AVG_SQ],
                             "stage %d offload %s: %s: AdamW holds %llu bytes (peak %llu), Lion %llu (peak %llu): "
                             "the difference is not AdamW's exp_avg_sq (%llu)",
                             stage, offload_name(off), kind, (unsigned long long)a->current_total[k],
                             (unsigned long long)a->peak_total[k], (unsigned long long)l->current_total[k],
                             (unsigned long long)l->peak_total[k],
                             (unsigned long long)a->current[k][ZINC_MEM_EXP_AVG_SQ]);
            }
            ZT_CHECK(sq > 0 && sq == master, "stage %d offload %s: AdamW exp_avg_sq %llu bytes, Lion master %llu",
                     stage, offload_name(off), (unsigned long long)sq, (unsigned long long)master);
            ZT_CHECK((off == 2) == (l->current[ZINC_MEMKIND_NVME][ZINC_MEM_EXP_AVG] > 0),
                     "stage %d offload %s: %llu bytes of exp_avg on NVMe", stage, offload_name(off),
                     (unsigned long long)l->current[ZINC_MEMKIND_NVME][ZINC_MEM_EXP_AVG]);
        }
}

/* NVMe offload trains bit for bit as the state in memory (the same Lion arithmetic on the same chunks). */
static void test_nvme(void) {
    int64_t n = oe_total_numel();
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (int stage = 1; stage <= 3; stage++)
        for (int gas = 1; gas <= 2; gas++) {
            run mem = {.stage = stage, .gas = gas, .bucket = 1000, .offload = 0}, nv = mem;
            nv.offload = 2;
            ZT_OK(train(&mem, a));
            zinc_status st = train(&nv, b);
            ZT_CHECK(st == ZINC_OK, "Lion stage %d gas %d, NVMe offload: %s (%s)", stage, gas, zinc_status_name(st),
                     zinc_last_error());
            ZT_CHECK(st != ZINC_OK || memcmp(a, b, (size_t)n * sizeof *a) == 0,
                     "Lion stage %d gas %d: NVMe offload differs from the state in memory", stage, gas);
        }
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zt_name = "engine_lion";
    snprintf(nvme_json, sizeof nvme_json,
             ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": "
             "\"%s/lion_nvme\"}}, \"zinc\": {\"allow_buffered_io\": true",
             zt_build_dir());
    ref_train();
    test_matrix();
    test_memory();
    test_nvme();
    test_checkpoint();
    test_checkpoint_forged();
    for (int k = 0; k < 2 * NMOD; k++) {
        free(ref_p[k]);
        free(ref_minc[k]);
    }
    return zt_finish();
}
