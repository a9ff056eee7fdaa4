/* Models that keep one flat array (issue 24, item 7), through the public API only:
 *
 * - zinc_set_master after zinc_build: zinc_gather_master gives back exactly what was set (fp32, also in a
 *   bf16 engine), the parameters the model reads (zinc_module_to_f32, forward) are those values rounded to
 *   the compute dtype, and training continues exactly as an engine that zinc_build initialised with the
 *   same values (bitwise, 3 steps; in bf16 with values bf16 holds exactly, since zinc_build starts the
 *   master from the rounded parameters): stages 0-3 x fp32/bf16 x optimizer state in memory / offloaded to
 *   the CPU, on this run's rank count. The engine that was set reads and writes whole modules unpadded (zinc_module_to_f32,
 *   zinc_module_grad_add_f32); the one that was built reads and writes tensor by tensor
 *   (zinc_param_to_f32, zinc_grad_add_f32), so the module views are checked against the per-tensor calls
 *   at the same time.
 * - Against a 1-rank run: `--write-ref` (engine_set_master_np1, a fixture) stores the 1-rank stage-0
 *   result; every other run (stages 1-3 there, every stage at 2 ranks in engine_set_master_np2, stage 3
 *   included) compares its master weights with it (fp32: 1e-6 relative; bf16: 1e-2).
 * - Errors: before zinc_build, a wrong count, NULL, a module still entered, accumulated micro-steps, and
 *   (2 ranks) ranks passing different weights: refused with a message, on every rank, the engine still
 *   usable afterwards. Module views: an unknown module, a module not entered. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zinc.h"
#include "zt.h"

/* Three modules, five tensors of awkward sizes (padding inside each module), some decayed. */
static const struct {
    int module;
    const char *name;
    int64_t rows, cols;
    unsigned flags;
} tensors[] = {{0, "a.w", 37, 11, ZINC_PARAM_DECAY},
               {0, "a.b", 11, 1, ZINC_PARAM_NO_DECAY},
               {1, "b.w", 23, 5, ZINC_PARAM_DECAY},
               {1, "b.b", 5, 1, ZINC_PARAM_NO_DECAY},
               {2, "c.w", 3, 3, ZINC_PARAM_DECAY}};
#define NT ((int)(sizeof tensors / sizeof tensors[0]))
#define NMOD 3
#define STEPS 3

static int64_t numel_of(int t) { return tensors[t].rows * tensors[t].cols; }
static int64_t total_numel(void) {
    int64_t n = 0;
    for (int t = 0; t < NT; t++) n += numel_of(t);
    return n;
}

/* The "model file": the weights in zinc_gather_master's layout. */
static float file_value(int64_t i) { return 0.5f * sinf(0.37f * (float)i) + 0.01f * (float)(i % 7); }
static float target_value(int64_t i) { return 0.25f * cosf(0.11f * (float)i); }

static const float *g_init; /* what init_fn fills from (registration order, unpadded) */

static zinc_status init_fn(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud, (void)seed;
    int64_t off = 0;
    for (int t = 0; t < p->index; t++) off += numel_of(t);
    for (int64_t i = 0; i < p->numel; i++) out[i] = g_init ? g_init[off + i] : (float)((off + i) % 5) - 2.0f;
    return ZINC_OK;
}

static char cfg_json[512];
static const char *config(int stage, zinc_dtype dt, bool offload) {
    snprintf(cfg_json, sizeof cfg_json,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
             " \"bf16\": {\"enabled\": %s}, \"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": 64,"
             " \"stage3_param_persistence_threshold\": 20%s}}",
             dt == ZINC_BF16 ? "true" : "false", stage,
             offload ? ", \"offload_optimizer\": {\"device\": \"cpu\"}" : "");
    return cfg_json;
}

static zinc_engine *make(int stage, zinc_dtype dt, bool offload) {
    zinc_options o = zinc_default_options();
    o.config_json = config(stage, dt, offload);
    o.device = ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_ERROR;
    zinc_engine *e = NULL;
    if (zinc_create(&o, &e) != ZINC_OK) {
        zt_fail_at(__FILE__, __LINE__, "zinc_create: %s", zinc_last_error());
        return NULL;
    }
    int mod = -1;
    for (int t = 0; t < NT; t++) {
        if (tensors[t].module != mod)
            mod = zinc_module_add(e, tensors[t].module == 0 ? "a" : tensors[t].module == 1 ? "b" : "c");
        int64_t shape[2] = {tensors[t].rows, tensors[t].cols};
        if (!zinc_param_add(e, mod, tensors[t].name, tensors[t].cols > 1 ? 2 : 1, shape, tensors[t].flags)) {
            zt_fail_at(__FILE__, __LINE__, "zinc_param_add: %s", zinc_last_error());
            zinc_destroy(e);
            return NULL;
        }
    }
    return e;
}

/* One training step of the loss 0.5 * ||w - target||^2 (gradient w - target, the same on every rank).
 * per_module: whole modules through the unpadded views; else tensor by tensor. */
static zinc_status train_step(zinc_engine *e, bool per_module) {
    zinc_status st = ZINC_OK;
    float buf[1024], grad[1024];
    for (int m = 0; m < NMOD; m++) {
        if ((st = zinc_module_enter(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
        if ((st = zinc_module_exit(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
    }
    for (int m = NMOD - 1; m >= 0; m--) {
        if ((st = zinc_module_enter(e, m, ZINC_BACKWARD)) != ZINC_OK) return st;
        int64_t base = 0;
        for (int t = 0; t < NT && tensors[t].module < m; t++) base += numel_of(t);
        if (per_module) {
            int64_t n = zinc_module_numel(e, m);
            if ((st = zinc_module_to_f32(e, m, buf)) != ZINC_OK) return st;
            for (int64_t i = 0; i < n; i++) grad[i] = buf[i] - target_value(base + i);
            if ((st = zinc_module_grad_add_f32(e, m, grad)) != ZINC_OK) return st;
        } else {
            int64_t off = base;
            for (int t = 0; t < NT; t++) {
                if (tensors[t].module != m) continue;
                zinc_param *p = zinc_param_find(e, tensors[t].name);
                if ((st = zinc_param_to_f32(p, buf)) != ZINC_OK) return st;
                for (int64_t i = 0; i < numel_of(t); i++) grad[i] = buf[i] - target_value(off + i);
                if ((st = zinc_grad_add_f32(p, grad)) != ZINC_OK) return st;
                off += numel_of(t);
            }
        }
        if ((st = zinc_module_exit(e, m, ZINC_BACKWARD)) != ZINC_OK) return st;
    }
    zinc_step_info info;
    return zinc_step(e, &info);
}

static float round_to(zinc_dtype dt, float x) { return dt == ZINC_BF16 ? zinc_bf16_to_f32(zinc_f32_to_bf16(x)) : x; }

static char ref_path[1100];

/* Set, check, train; compare with an engine built from the same values. Returns the trained weights. */
static float *run(int stage, zinc_dtype dt, bool offload, int world, const float *file) {
    char what[128];
    snprintf(what, sizeof what, "stage %d, %s, offload %s, %d rank%s", stage, zinc_dtype_name(dt),
             offload ? "cpu" : "none", world, world == 1 ? "" : "s");
    int64_t n = total_numel();
    float *got = calloc((size_t)n, sizeof *got), *want = calloc((size_t)n, sizeof *want);
    float view[1024];
    zinc_engine *a = make(stage, dt, offload), *b = make(stage, dt, offload);
    if (!a || !b) goto done;
    g_init = NULL;
    ZT_OK(zinc_build(a, init_fn, NULL));
    ZT_OK(zinc_set_master(a, file, (size_t)n));
    ZT_OK(zinc_gather_master(a, got, (size_t)n));
    ZT_CHECK(!memcmp(got, file, (size_t)n * sizeof *got), "%s: zinc_gather_master after zinc_set_master differs", what);
    int64_t base = 0;
    for (int m = 0; m < NMOD; m++) { /* the copies the model reads: the set values in the compute dtype */
        ZT_OK(zinc_module_enter(a, m, ZINC_FORWARD));
        int64_t mn = zinc_module_numel(a, m);
        ZT_OK(zinc_module_to_f32(a, m, view));
        int bad = 0;
        for (int64_t i = 0; i < mn; i++) bad += view[i] != round_to(dt, file[base + i]);
        ZT_CHECK(bad == 0, "%s: module %d reads %d values that are not the set weights in %s", what, m, bad,
                 zinc_dtype_name(dt));
        ZT_OK(zinc_module_exit(a, m, ZINC_FORWARD));
        base += mn;
    }
    /* zinc_build starts the master weights from the parameters rounded to the compute dtype, zinc_set_master
     * keeps the fp32 values it is given: for the comparison, weights the compute dtype holds exactly. */
    float *rounded = malloc((size_t)n * sizeof *rounded);
    for (int64_t i = 0; i < n; i++) rounded[i] = round_to(dt, file[i]);
    ZT_OK(zinc_set_master(a, rounded, (size_t)n));
    g_init = rounded;
    ZT_OK(zinc_build(b, init_fn, NULL));
    g_init = NULL;
    free(rounded);
    for (int s = 0; s < STEPS; s++) {
        ZT_OK(train_step(a, true));
        ZT_OK(train_step(b, false));
    }
    ZT_OK(zinc_gather_master(a, got, (size_t)n));
    ZT_OK(zinc_gather_master(b, want, (size_t)n));
    ZT_CHECK(!memcmp(got, want, (size_t)n * sizeof *got),
             "%s: after %d steps the engine set with zinc_set_master (module views) differs from the one built "
             "with the same weights (per-tensor calls)",
             what, STEPS);
done:
    zinc_destroy(a);
    zinc_destroy(b);
    free(want);
    return got;
}

static void compare_ref(const float *got, int64_t n, zinc_dtype dt, const char *what) {
    char path[1200];
    snprintf(path, sizeof path, "%s_%s.bin", ref_path, zinc_dtype_name(dt));
    FILE *f = fopen(path, "rb");
    ZT_CHECK(f != NULL, "%s: no 1-rank reference %s (run engine_set_master_np1 first)", what, path);
    if (!f) return;
    float *ref = calloc((size_t)n, sizeof *ref);
    size_t k = fread(ref, sizeof *ref, (size_t)n, f);
    fclose(f);
    ZT_CHECK(k == (size_t)n, "%s: reference %s is short", what, path);
    double tol = dt == ZINC_BF16 ? 1e-2 : 1e-6;
    int bad = 0;
    for (int64_t i = 0; i < n && k == (size_t)n; i++)
        if (fabs((double)got[i] - ref[i]) > tol * (fabs(ref[i]) + 1e-3) && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "%s: element %lld: %g, the 1-rank run has %g", what, (long long)i, got[i],
                       ref[i]);
    if (!bad) zt_passed++;
    free(ref);
}

static void test_errors(int world, int rank) {
    int64_t n = total_numel();
    float *file = calloc((size_t)n, sizeof *file);
    zinc_engine *e = make(3, ZINC_FP32, false);
    if (!e) return;
    ZT_ERR(zinc_set_master(e, file, (size_t)n), ZINC_ERR_STATE, "call zinc_build first");
    ZT_OK(zinc_build(e, init_fn, NULL));
    ZT_ERR(zinc_set_master(e, file, (size_t)n - 1), ZINC_ERR_INVALID_ARG, "but the model has");
    ZT_ERR(zinc_set_master(e, NULL, (size_t)n), ZINC_ERR_INVALID_ARG, "NULL argument");
    ZT_OK(zinc_module_enter(e, 1, ZINC_FORWARD));
    ZT_ERR(zinc_set_master(e, file, (size_t)n), ZINC_ERR_STATE, "module \"b\" is still entered");
    ZT_OK(zinc_module_exit(e, 1, ZINC_FORWARD));
    ZT_OK(zinc_module_enter(e, 2, ZINC_BACKWARD));
    ZT_OK(zinc_module_exit(e, 2, ZINC_BACKWARD));
    ZT_ERR(zinc_set_master(e, file, (size_t)n), ZINC_ERR_STATE, "micro-step");
    zinc_step_info info;
    ZT_OK(zinc_step(e, &info));
    if (world > 1) {
        file[5] = rank == 1 ? 1.0f : 0.0f;
        ZT_ERR(zinc_set_master(e, file, (size_t)n), ZINC_ERR_INVALID_ARG, "rank 1 passed other weights");
        file[5] = 0.0f;
    }
    ZT_OK(zinc_set_master(e, file, (size_t)n)); /* still usable */
    float *back = calloc((size_t)n, sizeof *back);
    ZT_OK(zinc_gather_master(e, back, (size_t)n));
    ZT_CHECK(!memcmp(back, file, (size_t)n * sizeof *back), "set after refusals: weights differ");
    float buf[1024];
    ZT_CHECK(zinc_module_numel(e, NMOD) == -1, "zinc_module_numel of a module that does not exist");
    ZT_ERR(zinc_module_to_f32(e, NMOD, buf), ZINC_ERR_INVALID_ARG, "module 3 does not exist");
    ZT_ERR(zinc_module_to_f32(e, 0, buf), ZINC_ERR_STATE, "between zinc_module_enter and zinc_module_exit");
    ZT_OK(zinc_module_enter(e, 0, ZINC_FORWARD));
    ZT_ERR(zinc_module_grad_add_f32(e, 0, buf), ZINC_ERR_STATE, NULL);
    ZT_OK(zinc_module_exit(e, 0, ZINC_FORWARD));
    free(back);
    free(file);
    zinc_destroy(e);
}

int main(int argc, char **argv) {
    zt_name = "engine_set_master";
    bool write_ref = argc > 1 && !strcmp(argv[1], "--write-ref");
    snprintf(ref_path, sizeof ref_path, "%s/set_master_ref", zt_build_dir());
    int64_t n = total_numel();
    float *file = malloc((size_t)n * sizeof *file);
    for (int64_t i = 0; i < n; i++) file[i] = file_value(i);
    /* The rank count: a throwaway engine tells it (the library starts MPI when launched). */
    zinc_engine *probe = make(0, ZINC_FP32, false);
    int world = 1, rank = 0;
    if (probe) {
        world = zinc_world_size(probe);
        rank = zinc_rank(probe);
        zinc_destroy(probe);
    }
    const zinc_dtype dts[] = {ZINC_FP32, ZINC_BF16};
    for (int d = 0; d < 2; d++)
        for (int stage = 0; stage <= 3; stage++)
            for (int off = 0; off < (stage > 0 ? 2 : 1); off++) {
                float *got = run(stage, dts[d], off, world, file);
                char what[96];
                snprintf(what, sizeof what, "stage %d, %s, offload %d, %d ranks", stage, zinc_dtype_name(dts[d]), off,
                         world);
                if (write_ref && stage == 0 && world == 1) { /* the reference the others compare with */
                    char path[1200];
                    snprintf(path, sizeof path, "%s_%s.bin", ref_path, zinc_dtype_name(dts[d]));
                    FILE *f = fopen(path, "wb");
                    ZT_CHECK(f && fwrite(got, sizeof *got, (size_t)n, f) == (size_t)n, "cannot write %s", path);
                    if (f) fclose(f);
                } else {
                    compare_ref(got, n, dts[d], what);
                }
                free(got);
            }
    test_errors(world, rank);
    free(file);
    return zt_finish();
}
