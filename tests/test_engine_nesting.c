/* Call orders a real model uses, at every stage, rank count, accumulation and bucket layout, against a
 * float64 reference (issue 12):
 *   flat     each module entered once per phase, backward in reverse order (the baseline);
 *   nested   the tied-embedding pattern: module 0's backward stays open while every other module's backward
 *            runs inside it, and module 0's gradient is written before and after them;
 *   reenter  module 0 entered for backward twice in a micro-step (before and after the others);
 *   deep     backward entries nested three deep, exited last-in-first-out;
 *   unordered nested entries exited first-in-first-out;
 *   recompute activation checkpointing: each module's forward re-entered inside its own open backward, and
 *            module 0 re-entered in forward (the tied output projection) and nested forward entries.
 * Every pattern adds the same gradient, so every run must land on the same weights as a float64 Adam over
 * the same gradient function. Also: forward-only passes (a validation loss) do not switch stage-3
 * prefetching off, a changed module order is re-recorded, re-entered modules cost no extra reduce-scatter
 * once learned, and the call orders that are refused are refused at every stage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zinc.h"
#include "zt.h"

enum { NMOD = 4, BATCH = 24, STEPS = 3 };
static const int64_t ROWS0 = 40, WIDTH = 8; /* module 0: [40, 8] + [8] = 328 elements; others [8, 8] + [8] */

enum pattern { P_FLAT, P_NESTED, P_REENTER, P_DEEP, P_UNORDERED, P_RECOMPUTE, P_COUNT };
static const char *pattern_name[P_COUNT] = {"flat", "nested", "reenter", "deep", "unordered", "recompute"};

typedef struct model {
    zinc_engine *e;
    zinc_param *w[NMOD], *b[NMOD];
    int mod[NMOD];
    int empty; /* a module without parameters (an activation, say), entered like the others */
    int rank, world, gas, micro;
} model;

static int g_rank;

static int64_t rows(int m) { return m == 0 ? ROWS0 : WIDTH; }

static float init_value(int param_index, int64_t i) { return 0.5f * sinf(0.37f * (float)i + 0.11f * (float)param_index); }

static zinc_status init_fn(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud;
    (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = init_value(p->index, i);
    return ZINC_OK;
}

/* The gradient of sample s for element i of a parameter whose value is w, from use `use` (0: the module's
 * own use, 1 and 2: the two halves of a tied use). Depends on w so that reading the wrong parameters shows. */
static double grad_fn(int param_index, int64_t i, double w, int64_t s, int use) {
    double a = 0.05 * (double)(1 + (s + use) % 5);
    double c = 0.01 * cos(0.13 * (double)i + 0.7 * (double)param_index + 0.29 * (double)s + (double)use);
    return w * a + c;
}

/* ---------------------------------------------------------------- the float64 reference */

typedef struct ref_param { int64_t n; double *p, *m, *v; } ref_param;

static void ref_train(ref_param *rp, int np, double lr, double b1, double b2, double eps, double wd) {
    for (int k = 0; k < np; k++) {
        rp[k].n = (k % 2 == 0) ? rows(k / 2) * WIDTH : WIDTH;
        rp[k].p = calloc((size_t)rp[k].n, sizeof(double));
        rp[k].m = calloc((size_t)rp[k].n, sizeof(double));
        rp[k].v = calloc((size_t)rp[k].n, sizeof(double));
        for (int64_t i = 0; i < rp[k].n; i++) rp[k].p[i] = (double)init_value(k, i);
    }
    for (int t = 1; t <= STEPS; t++) {
        for (int k = 0; k < np; k++) {
            for (int64_t i = 0; i < rp[k].n; i++) {
                double g = 0, w = rp[k].p[i];
                for (int64_t j = 0; j < BATCH; j++) {
                    int64_t s = (int64_t)(t - 1) * BATCH + j;
                    if (k / 2 == 0) g += grad_fn(k, i, w, s, 1) + grad_fn(k, i, w, s, 2);
                    else g += grad_fn(k, i, w, s, 0);
                }
                g /= BATCH;
                double *m = &rp[k].m[i], *v = &rp[k].v[i];
                *m = b1 * *m + (1 - b1) * g;
                *v = b2 * *v + (1 - b2) * g * g;
                double mh = *m / (1 - pow(b1, t)), vh = *v / (1 - pow(b2, t));
                rp[k].p[i] = w - lr * wd * w - lr * mh / (sqrt(vh) + eps);
            }
        }
    }
}

/* ---------------------------------------------------------------- the model's passes */

static zinc_status enter(model *md, int m, zinc_phase ph) { return zinc_module_enter(md->e, md->mod[m], ph); }
static zinc_status leave(model *md, int m, zinc_phase ph) { return zinc_module_exit(md->e, md->mod[m], ph); }

/* Adds the gradient of one use of module m over this rank's samples of micro-step `micro` of step `step`:
 * the mean over its samples (the engine averages over ranks and micro-steps). Module 0's two parameters
 * take use 1 or 2 (a tied weight used twice); the others use 0. */
static zinc_status add_grad(model *md, int m, int use, int step, int micro) {
    zinc_param *ps[2] = {md->w[m], md->b[m]};
    zinc_status st = ZINC_OK;
    for (int q = 0; q < 2 && st == ZINC_OK; q++) {
        zinc_param_info info;
        if (zinc_param_get_info(ps[q], &info) != ZINC_OK) return ZINC_ERR_INTERNAL;
        /* The model computes in fp32 whatever the engine's dtype: fp32 views in, the unscaled fp32
         * gradient out (zinc_grad_add_f32 applies the loss scale). */
        float *w = malloc((size_t)info.numel * sizeof *w), *g = malloc((size_t)info.numel * sizeof *g);
        if (!w || !g) st = ZINC_ERR_NOMEM;
        if (st == ZINC_OK) st = zinc_param_to_f32(ps[q], w);
        for (int64_t i = 0; st == ZINC_OK && i < info.numel; i++) {
            double acc = 0;
            for (int j = 0; j < md->micro; j++) {
                int64_t s = (int64_t)step * BATCH + (int64_t)micro * md->world * md->micro +
                            (int64_t)md->rank * md->micro + j;
                acc += grad_fn(info.index, i, (double)w[i], s, use);
            }
            g[i] = (float)(acc / md->micro);
        }
        if (st == ZINC_OK) st = zinc_grad_add_f32(ps[q], g);
        free(w);
        free(g);
    }
    return st;
}

/* Reads the module's parameters the way a forward pass does (fails where they are not readable). */
static zinc_status touch(model *md, int m) {
    if (!zinc_param_data(md->w[m]) || !zinc_param_data(md->b[m])) return ZINC_ERR_STATE;
    return ZINC_OK;
}

#define T(x)                                                                                                 \
    do {                                                                                                     \
        zinc_status s_ = (x);                                                                                \
        if (s_ != ZINC_OK) return s_;                                                                        \
    } while (0)

static zinc_status forward(model *md, enum pattern p) {
    T(zinc_module_enter(md->e, md->empty, ZINC_FORWARD));
    T(zinc_module_exit(md->e, md->empty, ZINC_FORWARD));
    for (int m = 0; m < NMOD; m++) {
        T(enter(md, m, ZINC_FORWARD));
        T(touch(md, m));
        if (p == P_RECOMPUTE && m + 1 < NMOD) { /* a nested forward entry: m's forward encloses m+1's */
            T(enter(md, m + 1, ZINC_FORWARD));
            T(touch(md, m + 1));
            T(leave(md, m + 1, ZINC_FORWARD));
        }
        T(leave(md, m, ZINC_FORWARD));
    }
    if (p == P_RECOMPUTE || p == P_NESTED || p == P_REENTER) { /* the tied output projection reads module 0 */
        T(enter(md, 0, ZINC_FORWARD));
        T(touch(md, 0));
        T(leave(md, 0, ZINC_FORWARD));
    }
    return ZINC_OK;
}

static zinc_status plain_backward(model *md, int m, int step, int micro) {
    T(enter(md, m, ZINC_BACKWARD));
    T(add_grad(md, m, 0, step, micro));
    return leave(md, m, ZINC_BACKWARD);
}

static zinc_status backward(model *md, enum pattern p, int step, int micro) {
    T(zinc_module_enter(md->e, md->empty, ZINC_BACKWARD));
    T(zinc_module_exit(md->e, md->empty, ZINC_BACKWARD));
    switch (p) {
    case P_FLAT:
        for (int m = NMOD - 1; m >= 1; m--) T(plain_backward(md, m, step, micro));
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 1, step, micro));
        T(add_grad(md, 0, 2, step, micro));
        return leave(md, 0, ZINC_BACKWARD);
    case P_NESTED:
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 1, step, micro));
        for (int m = NMOD - 1; m >= 1; m--) T(plain_backward(md, m, step, micro));
        T(add_grad(md, 0, 2, step, micro));
        return leave(md, 0, ZINC_BACKWARD);
    case P_REENTER:
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 1, step, micro));
        T(leave(md, 0, ZINC_BACKWARD));
        for (int m = NMOD - 1; m >= 1; m--) T(plain_backward(md, m, step, micro));
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 2, step, micro));
        return leave(md, 0, ZINC_BACKWARD);
    case P_DEEP: /* 3 encloses 2 encloses 1; then 0 */
        T(enter(md, 3, ZINC_BACKWARD));
        T(enter(md, 2, ZINC_BACKWARD));
        T(add_grad(md, 3, 0, step, micro));
        T(enter(md, 1, ZINC_BACKWARD));
        T(add_grad(md, 1, 0, step, micro));
        T(add_grad(md, 2, 0, step, micro));
        T(leave(md, 1, ZINC_BACKWARD));
        T(leave(md, 2, ZINC_BACKWARD));
        T(leave(md, 3, ZINC_BACKWARD));
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 1, step, micro));
        T(add_grad(md, 0, 2, step, micro));
        return leave(md, 0, ZINC_BACKWARD);
    case P_UNORDERED: /* 0 opens, 3 and 2 open inside it, 0 closes before them; then 1 */
        T(enter(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 0, 1, step, micro));
        T(enter(md, 3, ZINC_BACKWARD));
        T(enter(md, 2, ZINC_BACKWARD));
        T(add_grad(md, 0, 2, step, micro));
        T(add_grad(md, 2, 0, step, micro));
        T(leave(md, 0, ZINC_BACKWARD));
        T(add_grad(md, 3, 0, step, micro));
        T(leave(md, 3, ZINC_BACKWARD));
        T(leave(md, 2, ZINC_BACKWARD));
        return plain_backward(md, 1, step, micro);
    case P_RECOMPUTE:
        for (int m = NMOD - 1; m >= 0; m--) {
            T(enter(md, m, ZINC_BACKWARD));
            T(enter(md, m, ZINC_FORWARD)); /* recompute the module's activations */
            T(touch(md, m));
            T(leave(md, m, ZINC_FORWARD));
            if (m == 0) {
                T(add_grad(md, 0, 1, step, micro));
                T(add_grad(md, 0, 2, step, micro));
            } else {
                T(add_grad(md, m, 0, step, micro));
            }
            T(leave(md, m, ZINC_BACKWARD));
        }
        return ZINC_OK;
    default: return ZINC_ERR_INTERNAL;
    }
}

/* ---------------------------------------------------------------- runs */

typedef struct run {
    int stage, gas, bucket, overlap;
    zinc_dtype dtype;
    enum pattern pattern;
    int val_passes; /* forward-only passes before each step */
    enum pattern switch_to; /* after step 1 the model changes to this pattern (P_COUNT: no change) */
} run;

static void config_json(const run *r, char *buf, size_t cap) {
    const char *dt = r->dtype == ZINC_BF16 ? "\"bf16\": {\"enabled\": true},"
                     : r->dtype == ZINC_FP16 ? "\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8},"
                                             : "";
    snprintf(buf, cap,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d, %s"
             "\"gradient_clipping\": 0," /* the float64 reference does not clip */
             "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"betas\": [0.9, 0.999], "
             "\"eps\": 1e-8, \"weight_decay\": 0.01}},"
             "\"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": %d, \"overlap_comm\": %s, "
             "\"stage3_param_persistence_threshold\": 0, \"stage3_prefetch_bucket_size\": 400, "
             "\"stage3_max_reuse_distance\": 0}}",
             BATCH, r->gas, dt, r->stage, r->bucket, r->overlap ? "true" : "false");
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_ERROR};

static zinc_status model_create(const run *r, model *md) {
    char cfg[2048];
    config_json(r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    memset(md, 0, sizeof *md);
    T(zinc_create(&o, &md->e));
    char name[64];
    for (int m = 0; m < NMOD; m++) {
        snprintf(name, sizeof name, "m%d", m);
        md->mod[m] = zinc_module_add(md->e, name);
        snprintf(name, sizeof name, "m%d.w", m);
        md->w[m] = zinc_param_add(md->e, md->mod[m], name, 2, (int64_t[]){rows(m), WIDTH}, ZINC_PARAM_DECAY);
        snprintf(name, sizeof name, "m%d.b", m);
        md->b[m] = zinc_param_add(md->e, md->mod[m], name, 1, (int64_t[]){WIDTH}, ZINC_PARAM_DECAY);
        if (md->mod[m] < 0 || !md->w[m] || !md->b[m]) return ZINC_ERR_INTERNAL;
    }
    md->empty = zinc_module_add(md->e, "activation");
    if (md->empty < 0) return ZINC_ERR_INTERNAL;
    T(zinc_build(md->e, init_fn, NULL));
    md->rank = g_rank = zinc_rank(md->e);
    md->world = zinc_world_size(md->e);
    md->gas = r->gas;
    md->micro = BATCH / (md->world * r->gas);
    return ZINC_OK;
}

/* Trains STEPS steps; the master weights go to out (zinc_numel_total floats), the step infos to infos. */
static zinc_status train(const run *r, float *out, zinc_step_info *infos) {
    model md;
    zinc_status st = model_create(r, &md);
    for (int t = 0; st == ZINC_OK && t < STEPS; t++) {
        enum pattern p = (t >= 1 && r->switch_to != P_COUNT) ? r->switch_to : r->pattern;
        for (int v = 0; v < r->val_passes && st == ZINC_OK; v++) st = forward(&md, p);
        for (int micro = 0; micro < r->gas && st == ZINC_OK; micro++) {
            st = forward(&md, p);
            if (st == ZINC_OK) st = backward(&md, p, t, micro);
        }
        if (st == ZINC_OK) st = zinc_step(md.e, &infos[t]);
    }
    if (st == ZINC_OK) st = zinc_gather_master(md.e, out, (size_t)zinc_numel_total(md.e));
    zinc_destroy(md.e);
    return st;
}

static int64_t total_numel(void) { return NMOD * (WIDTH + 1) * WIDTH + (ROWS0 - WIDTH) * WIDTH; }

/* The largest |x - ref| over every element, in registration order. */
static double max_diff(const float *x, ref_param *rp) {
    double d = 0;
    int64_t off = 0;
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < rp[k].n; i++) {
            double e = fabs((double)x[off++] - rp[k].p[i]);
            if (!(e <= d)) d = e; /* NaN propagates */
        }
    return d;
}

static void test_matrix(ref_param *rp) {
    int64_t n = total_numel();
    float *x = malloc((size_t)n * sizeof *x);
    zinc_step_info infos[STEPS];
    const int buckets[2] = {100, 1000}; /* 100: module 0 exceeds a bucket (landing buffer) */
    double worst[3] = {0, 0, 0};
    int runs = 0;
    for (int di = 0; di < 3; di++) {
        zinc_dtype dt = di == 0 ? ZINC_FP32 : di == 1 ? ZINC_BF16 : ZINC_FP16;
        /* fp32: the only differences are summation order (1e-5); half precision: the parameters the
         * gradient function reads are rounded (bf16 8 bits of mantissa). */
        double tol = dt == ZINC_FP32 ? 2e-5 : 2e-2;
        for (int stage = 0; stage <= 3; stage++)
            for (int p = 0; p < P_COUNT; p++)
                for (int gas = 1; gas <= 2; gas++)
                    for (int bi = 0; bi < 2; bi++)
                        for (int ov = 0; ov <= 1; ov++) {
                            if (dt != ZINC_FP32 && (bi == 1 || ov == 1)) continue; /* dtypes: one layout */
                            run r = {.stage = stage, .gas = gas, .bucket = buckets[bi], .overlap = ov, .dtype = dt,
                                     .pattern = (enum pattern)p, .switch_to = P_COUNT};
                            zinc_status st = train(&r, x, infos);
                            double d = st == ZINC_OK ? max_diff(x, rp) : INFINITY;
                            runs++;
                            if (d > worst[di]) worst[di] = d;
                            ZT_CHECK(st == ZINC_OK && d <= tol,
                                         "%s stage %d %s gas %d bucket %d overlap %d: status %s (%s), max |diff| "
                                         "vs float64 %.3g (tolerance %.1g)",
                                         zinc_dtype_name(dt), stage, pattern_name[p], gas, buckets[bi], ov,
                                         zinc_status_name(st), st == ZINC_OK ? "" : zinc_last_error(), d, tol);
                        }
    }
    if (g_rank == 0)
        printf("%d runs; worst max |diff| vs float64: fp32 %.3g, bf16 %.3g, fp16 %.3g\n", runs, worst[0],
               worst[1], worst[2]);
    free(x);
}

/* A re-entered or enclosing module is learned in the first micro-step; after that it is reduced once per
 * micro-step, like the flat model's module 0 (possibly in a bucket of its own: at most one more call). */
static void test_reduce_count(void) {
    int64_t n = total_numel();
    float *x = malloc((size_t)n * sizeof *x);
    zinc_step_info flat[STEPS], other[STEPS];
    for (int stage = 2; stage <= 3; stage++)
        for (int p = P_NESTED; p <= P_REENTER; p++) {
            run r = {.stage = stage, .gas = 2, .bucket = 1000, .pattern = P_FLAT, .switch_to = P_COUNT};
            ZT_OK(train(&r, x, flat));
            r.pattern = (enum pattern)p;
            ZT_OK(train(&r, x, other));
            for (int t = 1; t < STEPS; t++)
                ZT_CHECK(other[t].reduce_scatters <= flat[t].reduce_scatters + r.gas,
                             "stage %d %s step %d: %lld reduce-scatters, the flat model %lld (+%d allowed)", stage,
                             pattern_name[p], t + 1, (long long)other[t].reduce_scatters,
                             (long long)flat[t].reduce_scatters, r.gas);
            ZT_CHECK(other[STEPS - 1].reduce_scatters > 0, "stage %d: no reduce-scatter counted", stage);
        }
    free(x);
}

/* Stage 3: forward-only passes before training and between steps leave prefetching on, with the same
 * prefetches as a run without them and the same result; a changed order is recorded again. */
static void test_forward_only(void) {
    int64_t n = total_numel();
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    zinc_step_info ia[STEPS], ib[STEPS];
    for (int p = 0; p < P_COUNT; p++) {
        run r = {.stage = 3, .gas = 2, .bucket = 1000, .pattern = (enum pattern)p, .switch_to = P_COUNT};
        ZT_OK(train(&r, a, ia));
        r.val_passes = 2;
        ZT_OK(train(&r, b, ib));
        ZT_CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s: forward-only passes changed the result",
                     pattern_name[p]);
        for (int t = 1; t < STEPS; t++) {
            ZT_CHECK(ia[t].prefetch_gathers > 0, "%s step %d: no prefetch without forward-only passes",
                         pattern_name[p], t + 1);
            ZT_CHECK(ib[t].prefetch_gathers >= ia[t].prefetch_gathers,
                         "%s step %d: %lld prefetches after forward-only passes, %lld without", pattern_name[p],
                         t + 1, (long long)ib[t].prefetch_gathers, (long long)ia[t].prefetch_gathers);
        }
    }
    /* The model's order changes after step 1: step 2 records it again, step 3 prefetches. */
    run r = {.stage = 3, .gas = 2, .bucket = 1000, .pattern = P_FLAT, .switch_to = P_DEEP};
    ZT_OK(train(&r, a, ia));
    ZT_CHECK(ia[STEPS - 1].prefetch_gathers > 0, "after a change of order: %lld prefetches in the last step",
                 (long long)ia[STEPS - 1].prefetch_gathers);
    free(a);
    free(b);
}

/* What is refused is refused at every stage, with a message that says what to do. */
static void test_refusals(void) {
    for (int stage = 0; stage <= 3; stage++) {
        run r = {.stage = stage, .gas = 1, .bucket = 1000, .pattern = P_FLAT, .switch_to = P_COUNT};
        model md;
        ZT_OK(model_create(&r, &md));
        ZT_CHECK(zinc_param_data(md.w[1]) == NULL && strstr(zinc_last_error(), "every ZeRO stage"),
                     "stage %d: parameters readable outside their module: %s", stage, zinc_last_error());
        ZT_CHECK(zinc_param_grad(md.w[1]) == NULL, "stage %d: a gradient outside backward", stage);
        zinc_step_info info;
        ZT_CHECK(zinc_step(md.e, &info) == ZINC_ERR_STATE && strstr(zinc_last_error(), "no backward"),
                     "stage %d: a step with no backward was accepted (%s)", stage, zinc_last_error());
        ZT_OK(forward(&md, P_FLAT));
        ZT_CHECK(zinc_step(md.e, &info) == ZINC_ERR_STATE, "stage %d: a forward-only step was accepted", stage);
        ZT_OK(enter(&md, 1, ZINC_BACKWARD));
        ZT_CHECK(enter(&md, 1, ZINC_BACKWARD) == ZINC_ERR_STATE && strstr(zinc_last_error(), "already"),
                     "stage %d: a module entered twice while open", stage);
        ZT_ERR(zinc_step(md.e, &info), ZINC_ERR_STATE, NULL); /* still entered */
        ZT_OK(add_grad(&md, 1, 0, 0, 0));
        ZT_OK(leave(&md, 1, ZINC_BACKWARD));
        ZT_CHECK(zinc_param_grad(md.w[1]) == NULL, "stage %d: a gradient handed out after exit", stage);
        ZT_ERR(leave(&md, 1, ZINC_BACKWARD), ZINC_ERR_STATE, NULL);
        ZT_OK(zinc_step(md.e, &info));
        zinc_destroy(md.e);
    }
}

/* zinc_param_to_f32 / zinc_grad_add_f32 give the same bits as the per-element calls, in every dtype. */
static void test_f32_views(void) {
    for (int di = 0; di < 3; di++)
        for (int stage = 0; stage <= 3; stage += 3) {
            zinc_dtype dt = di == 0 ? ZINC_FP32 : di == 1 ? ZINC_BF16 : ZINC_FP16;
            run r = {.stage = stage, .gas = 1, .bucket = 1000, .dtype = dt, .pattern = P_FLAT, .switch_to = P_COUNT};
            model md;
            ZT_OK(model_create(&r, &md));
            zinc_param *p = md.w[0];
            int64_t n = ROWS0 * WIDTH;
            float *f = malloc((size_t)n * sizeof *f), *g = malloc((size_t)n * sizeof *g);
            ZT_ERR(zinc_param_to_f32(p, f), ZINC_ERR_STATE, "between zinc_module_enter");
            ZT_OK(zinc_module_enter(md.e, md.mod[0], ZINC_BACKWARD));
            ZT_OK(zinc_param_to_f32(p, f));
            const void *w = zinc_param_data(p);
            int same = 1;
            for (int64_t i = 0; i < n; i++) same &= f[i] == zinc_load_f32(w, dt, (size_t)i);
            ZT_CHECK(same, "%s: zinc_param_to_f32 differs from zinc_load_f32", zinc_dtype_name(dt));
            void *gr = zinc_param_grad(p);
            zinc_dtype gdt = zinc_grad_dtype(md.e);
            size_t gbytes = (size_t)n * zinc_dtype_size(gdt);
            unsigned char *want = malloc(gbytes);
            for (int64_t i = 0; i < n; i++) g[i] = 1e-3f * (float)((i * 7919) % 1000 - 500);
            ZT_OK(zinc_grad_add_f32(p, g)); /* onto zeros */
            ZT_OK(zinc_grad_add_f32(p, g)); /* and onto itself: rounding once per add */
            memset(want, 0, gbytes);
            float sc = zinc_loss_scale(md.e);
            for (int k = 0; k < 2; k++)
                for (int64_t i = 0; i < n; i++) zinc_add_f32(want, gdt, (size_t)i, g[i] * sc);
            ZT_CHECK(memcmp(want, gr, gbytes) == 0, "%s stage %d: zinc_grad_add_f32 differs from zinc_add_f32",
                     zinc_dtype_name(dt), stage);
            ZT_OK(zinc_module_exit(md.e, md.mod[0], ZINC_BACKWARD));
            ZT_ERR(zinc_grad_add_f32(p, g), ZINC_ERR_STATE, "backward");
            free(f);
            free(g);
            free(want);
            zinc_destroy(md.e);
        }
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zt_name = "engine_nesting";
    ref_param rp[2 * NMOD];
    ref_train(rp, 2 * NMOD, 0.01, 0.9, 0.999, 1e-8, 0.01);
    test_refusals();
    test_f32_views();
    test_matrix(rp);
    test_reduce_count();
    test_forward_only();
    for (int k = 0; k < 2 * NMOD; k++) {
        free(rp[k].p);
        free(rp[k].m);
        free(rp[k].v);
    }
    return zt_finish();
}
