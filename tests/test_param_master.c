/* A model whose layers own their arrays (issue 41): zinc_build with no init function, the weights set and
 * read tensor by tensor (zinc_param_set_master / zinc_param_get_master) and the gradients added with a
 * factor (zinc_grad_add_scaled_f32, zinc_module_grad_add_scaled_f32), at ZeRO stages 0-3, fp32 and bf16,
 * state in memory, offloaded to the CPU and on NVMe, at 1 and 2 ranks (tensors of odd sizes, so at 2 ranks
 * the shard boundary falls inside them). For each configuration:
 *   - a build with a NULL init_fn holds 0.0 in every master weight and parameter;
 *   - after setting every tensor, each tensor reads back bit for bit (per tensor and through
 *     zinc_gather_master), and the compute copy the model reads is bitwise the one of an engine built with
 *     an init function returning the same values;
 *   - trained 3 steps (SGD with momentum) with the gradients added through the scaled calls (factor -1/3),
 *     it ends bitwise where the init-function engine, given the same fp32 weights by zinc_set_master, ends
 *     with the products precomputed and added through zinc_grad_add_f32: the factor is one rounding of
 *     factor x g, as documented;
 *   - a third engine with bound tensors (zinc_param_bind_f32: each tensor's own weight and gradient arrays,
 *     zinc_bound_set_master, then per step zinc_bound_to_f32, the model's gradients into its arrays,
 *     zinc_bound_grad_add_f32) ends bitwise where the per-tensor loop ends, its weights arrays holding the
 *     compute copies; the bound calls refuse an entered module, an unbuilt engine, a factor that is not
 *     finite and a gradient array without weights;
 *   - the refusals: NULL arguments, another engine's parameter, before zinc_build, a module still entered, a
 *     NaN weight, a factor that is not finite, and (2 ranks) ranks passing different values: refused on
 *     every rank with the rank named, the engine still usable;
 *   - neither zinc_set_master nor zinc_param_set_master holds a transient copy: the peak RSS over each call
 *     on a 32 MiB model grows by less than 1 MiB (it grew by the model before issue 41). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zinc.h"
#include "zt.h"

enum { NMODS = 3, NP = 5, STEPS_T = 3 };
static const int mod_of[NP] = {0, 0, 1, 2, 2};
static const int64_t shapes[NP][2] = {{37, 5}, {5, 1}, {1000, 1}, {33, 63}, {7, 1}};
static const float FACTOR = -1.0f / 3.0f;
static int g_rank;

static float value(int k, int64_t i) { return 0.3f * sinf(0.011f * (float)i + 0.7f * (float)k) + 0.01f * (float)k; }

static zinc_status init_fn(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud;
    (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = value(p->index, i);
    return ZINC_OK;
}

typedef struct cfg {
    int stage, bf16, off; /* off: 0 none, 1 cpu, 2 nvme */
} cfg;

typedef struct model {
    zinc_engine *e;
    zinc_param *p[NP];
    int mod[NMODS];
} model;

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_WARN};

static zinc_status create(const cfg *c, model *m, int with_init) {
    char json[1024], zero[512] = "";
    if (c->off == 1) snprintf(zero, sizeof zero, ", \"offload_optimizer\": {\"device\": \"cpu\"}");
    if (c->off == 2)
        snprintf(zero, sizeof zero,
                 ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": "
                 "\"%s/param_master_nvme\"}}, \"zinc\": {\"allow_buffered_io\": true",
                 zt_build_dir());
    snprintf(json, sizeof json,
             "{\"train_batch_size\": 8, \"bf16\": {\"enabled\": %s}, \"optimizer\": {\"type\": \"SGD\", \"params\": "
             "{\"lr\": 0.05, \"momentum\": 0.9, \"weight_decay\": 0.01}}, \"zero_optimization\": {\"stage\": %d, "
             "\"reduce_bucket_size\": 500, \"stage3_param_persistence_threshold\": 0%s}}",
             c->bf16 ? "true" : "false", c->stage, zero);
    zinc_options o = zinc_default_options();
    o.config_json = json;
    o.device = eu_device(NULL);
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    memset(m, 0, sizeof *m);
    zinc_status st = zinc_create(&o, &m->e);
    if (st != ZINC_OK) return st;
    char name[32];
    for (int k = 0, mm = -1; k < NP; k++) {
        if (mod_of[k] != mm) {
            mm = mod_of[k];
            snprintf(name, sizeof name, "m%d", mm);
            m->mod[mm] = zinc_module_add(m->e, name);
        }
        snprintf(name, sizeof name, "p%d", k);
        int nd = shapes[k][1] == 1 ? 1 : 2;
        m->p[k] = zinc_param_add(m->e, m->mod[mm], name, nd, shapes[k], k == 1 || k == 4 ? 0 : ZINC_PARAM_DECAY);
        if (!m->p[k]) return ZINC_ERR_INTERNAL;
    }
    st = zinc_build(m->e, with_init ? init_fn : NULL, NULL);
    if (st == ZINC_OK) g_rank = zinc_rank(m->e);
    return st;
}

static int64_t numel(int k) { return shapes[k][0] * shapes[k][1]; }

/* The compute copies of every tensor, read in forward (fp32 widened), concatenated. */
static zinc_status read_params(model *m, float *out) {
    zinc_status st = ZINC_OK;
    for (int mm = 0; mm < NMODS && st == ZINC_OK; mm++) {
        st = zinc_module_enter(m->e, m->mod[mm], ZINC_FORWARD);
        for (int k = 0; k < NP && st == ZINC_OK; k++)
            if (mod_of[k] == mm) {
                int64_t off = 0;
                for (int j = 0; j < k; j++) off += numel(j);
                st = zinc_param_to_f32(m->p[k], out + off);
            }
        if (st == ZINC_OK) st = zinc_module_exit(m->e, m->mod[mm], ZINC_FORWARD);
    }
    return st;
}

/* One step: forward over every module, backward in reverse adding g = sin(.) + 0.1 w of this rank's
 * micro-batch: module 1 through zinc_module_grad_add_scaled_f32, the others per tensor; `scaled` 0 adds the
 * precomputed products g * FACTOR with the unscaled calls instead. */
static zinc_status train_step(model *m, int t, int scaled) {
    zinc_status st = ZINC_OK;
    float *w = malloc(2100 * 63 * sizeof *w), *g = malloc(2100 * 63 * sizeof *g);
    for (int mm = 0; mm < NMODS && st == ZINC_OK; mm++) {
        st = zinc_module_enter(m->e, m->mod[mm], ZINC_FORWARD);
        if (st == ZINC_OK) st = zinc_module_exit(m->e, m->mod[mm], ZINC_FORWARD);
    }
    for (int mm = NMODS - 1; mm >= 0 && st == ZINC_OK; mm--) {
        st = zinc_module_enter(m->e, m->mod[mm], ZINC_BACKWARD);
        float *mg = g; /* module 1: the whole module's gradient, unpadded */
        for (int k = 0; k < NP && st == ZINC_OK; k++) {
            if (mod_of[k] != mm) continue;
            st = zinc_param_to_f32(m->p[k], w);
            float *gk = mm == 1 ? mg : g;
            for (int64_t i = 0; i < numel(k); i++) {
                float v = sinf(0.37f * (float)i + (float)(t + k + g_rank)) + 0.1f * w[i];
                gk[i] = scaled ? v : v * FACTOR;
            }
            if (mm == 1) {
                mg += numel(k);
            } else if (st == ZINC_OK) {
                st = scaled ? zinc_grad_add_scaled_f32(m->p[k], g, FACTOR) : zinc_grad_add_f32(m->p[k], g);
            }
        }
        if (mm == 1 && st == ZINC_OK)
            st = scaled ? zinc_module_grad_add_scaled_f32(m->e, m->mod[mm], g, FACTOR)
                        : zinc_module_grad_add_f32(m->e, m->mod[mm], g);
        if (st == ZINC_OK) st = zinc_module_exit(m->e, m->mod[mm], ZINC_BACKWARD);
    }
    free(w);
    free(g);
    zinc_step_info info;
    if (st == ZINC_OK) st = zinc_step(m->e, &info);
    return st;
}

/* The bound-tensor engine: each tensor's weights and gradients in arrays of its own (a darknet layer's), the
 * same gradient as train_step's scaled path, through the three bound calls. */
typedef struct bound_arrays {
    float *w[NP], *g[NP];
} bound_arrays;

static zinc_status train_step_bound(model *m, bound_arrays *ba, int t) {
    zinc_status st = zinc_bound_to_f32(m->e);
    for (int k = 0; k < NP && st == ZINC_OK; k++)
        for (int64_t i = 0; i < numel(k); i++)
            ba->g[k][i] = sinf(0.37f * (float)i + (float)(t + k + g_rank)) + 0.1f * ba->w[k][i];
    if (st == ZINC_OK) st = zinc_bound_grad_add_f32(m->e);
    zinc_step_info info;
    if (st == ZINC_OK) st = zinc_step(m->e, &info);
    return st;
}

static void test_bound(const cfg *c, const char *what, const float *v, const float *want, int64_t n) {
    model C;
    bound_arrays ba;
    ZT_OK(create(c, &C, 0));
    if (!C.e) return;
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++) {
        ba.w[k] = malloc((size_t)numel(k) * 4);
        ba.g[k] = malloc((size_t)numel(k) * 4);
        memcpy(ba.w[k], v + off, (size_t)numel(k) * 4);
        ZT_OK(zinc_param_bind_f32(C.p[k], ba.w[k], ba.g[k], FACTOR));
    }
    ZT_OK(zinc_bound_set_master(C.e));
    for (int t = 0; t < STEPS_T; t++) ZT_OK(train_step_bound(&C, &ba, t));
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    ZT_OK(zinc_gather_master(C.e, x, (size_t)n));
    ZT_CHECK(!memcmp(x, want, (size_t)n * 4), "%s: bound tensors end elsewhere than the per-tensor loop", what);
    ZT_OK(zinc_bound_to_f32(C.e));
    ZT_OK(read_params(&C, y));
    int same = 1;
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++) same &= !memcmp(ba.w[k], y + off, (size_t)numel(k) * 4);
    ZT_CHECK(same, "%s: zinc_bound_to_f32 left other values in the weights arrays than the compute copies", what);
    ZT_OK(zinc_module_enter(C.e, C.mod[1], ZINC_FORWARD));
    ZT_ERR(zinc_bound_to_f32(C.e), ZINC_ERR_STATE, "still entered");
    ZT_ERR(zinc_bound_grad_add_f32(C.e), ZINC_ERR_STATE, "still entered");
    ZT_OK(zinc_module_exit(C.e, C.mod[1], ZINC_FORWARD));
    ZT_ERR(zinc_param_bind_f32(C.p[0], ba.w[0], ba.g[0], NAN), ZINC_ERR_INVALID_ARG, "not finite");
    ZT_ERR(zinc_param_bind_f32(C.p[0], NULL, ba.g[0], 1), ZINC_ERR_INVALID_ARG, "without a weights array");
    ZT_ERR(zinc_param_bind_f32(NULL, ba.w[0], ba.g[0], 1), ZINC_ERR_INVALID_ARG, "NULL");
    ZT_ERR(zinc_bound_to_f32(NULL), ZINC_ERR_INVALID_ARG, "NULL");
    /* unbound: the calls do nothing and the engine keeps its weights */
    for (int k = 0; k < NP; k++) ZT_OK(zinc_param_bind_f32(C.p[k], NULL, NULL, 1));
    ZT_OK(zinc_bound_grad_add_f32(C.e));
    ZT_OK(zinc_gather_master(C.e, y, (size_t)n));
    ZT_CHECK(!memcmp(x, y, (size_t)n * 4), "%s: unbound calls changed the weights", what);
    zinc_destroy(C.e);
    for (int k = 0; k < NP; k++) free(ba.w[k]), free(ba.g[k]);
    free(x), free(y);
}

static void test_config(const cfg *c) {
    char what[96];
    snprintf(what, sizeof what, "stage %d %s offload %s", c->stage, c->bf16 ? "bf16" : "fp32",
             c->off == 2 ? "nvme"
             : c->off    ? "cpu"
                         : "none");
    int64_t n = 0;
    for (int k = 0; k < NP; k++) n += numel(k);
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *x = malloc((size_t)n * 4),
          *v = malloc((size_t)n * 4);
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++)
        for (int64_t i = 0; i < numel(k); i++) v[off + i] = value(k, i);
    model A, B;
    zinc_status st = create(c, &A, 1);
    ZT_CHECK(st == ZINC_OK, "%s: engine with an init function: %s", what, zinc_last_error());
    st = create(c, &B, 0);
    ZT_CHECK(st == ZINC_OK, "%s: engine built with init_fn NULL: %s", what, zinc_last_error());
    if (!A.e || !B.e) return;
    /* NULL init: zeros everywhere */
    ZT_OK(zinc_gather_master(B.e, x, (size_t)n));
    int nz = 0;
    for (int64_t i = 0; i < n; i++) nz += x[i] != 0.0f;
    ZT_OK(read_params(&B, b));
    for (int64_t i = 0; i < n; i++) nz += b[i] != 0.0f;
    ZT_CHECK(nz == 0, "%s: a build without init_fn leaves %d nonzero master weights or parameters", what, nz);
    /* set each tensor, read back */
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++) ZT_OK(zinc_param_set_master(B.e, B.p[k], v + off));
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++) {
        memset(x, 0xff, (size_t)numel(k) * 4);
        ZT_OK(zinc_param_get_master(B.e, B.p[k], x));
        ZT_CHECK(!memcmp(x, v + off, (size_t)numel(k) * 4), "%s: tensor %d read back differs from what was set", what,
                 k);
    }
    ZT_OK(zinc_gather_master(B.e, x, (size_t)n));
    ZT_CHECK(!memcmp(x, v, (size_t)n * 4), "%s: zinc_gather_master after per-tensor sets differs", what);
    ZT_OK(read_params(&A, a));
    ZT_OK(read_params(&B, b));
    ZT_CHECK(!memcmp(a, b, (size_t)n * 4),
             "%s: the compute copies after per-tensor sets differ from an engine built with those values", what);
    /* A's master weights started from the compute copies (bf16-rounded), B's keep the fp32 values set:
     * A takes them too, through the whole-model zinc_set_master; then train, scaled adds against
     * precomputed products */
    ZT_OK(zinc_set_master(A.e, v, (size_t)n));
    for (int t = 0; t < STEPS_T; t++) {
        ZT_OK(train_step(&A, t, 0));
        ZT_OK(train_step(&B, t, 1));
    }
    ZT_OK(zinc_gather_master(A.e, a, (size_t)n));
    ZT_OK(zinc_gather_master(B.e, b, (size_t)n));
    ZT_CHECK(!memcmp(a, b, (size_t)n * 4),
             "%s: trained with the scaled gradient adds, differs from the precomputed products", what);
    double moved = 0;
    for (int64_t i = 0; i < n; i++) moved += fabs((double)b[i] - v[i]);
    ZT_CHECK(moved > 1e-3 * (double)n * 0.01, "%s: training moved the weights (sum |change| %g)", what, moved);
    test_bound(c, what, v, b, n);
    for (int k = 0, off = 0; k < NP; off += (int)numel(k), k++) {
        ZT_OK(zinc_param_get_master(B.e, B.p[k], x));
        ZT_CHECK(!memcmp(x, b + off, (size_t)numel(k) * 4), "%s: tensor %d after training: get differs from gather",
                 what, k);
    }
    /* refusals */
    ZT_ERR(zinc_param_set_master(B.e, B.p[0], NULL), ZINC_ERR_INVALID_ARG, "NULL argument");
    ZT_ERR(zinc_param_get_master(B.e, NULL, x), ZINC_ERR_INVALID_ARG, "NULL argument");
    ZT_ERR(zinc_param_set_master(B.e, A.p[0], v), ZINC_ERR_INVALID_ARG, "belongs to another engine");
    float *nan = malloc((size_t)numel(3) * 4);
    memcpy(nan, v, (size_t)numel(3) * 4);
    nan[numel(3) - 2] = NAN;
    ZT_ERR(zinc_param_set_master(B.e, B.p[3], nan), ZINC_ERR_INVALID_ARG, "must be finite");
    free(nan);
    ZT_OK(zinc_module_enter(B.e, B.mod[0], ZINC_FORWARD));
    ZT_ERR(zinc_param_set_master(B.e, B.p[0], v), ZINC_ERR_STATE, "still entered");
    ZT_OK(zinc_module_exit(B.e, B.mod[0], ZINC_FORWARD));
    if (zinc_world_size(B.e) > 1) {
        float *mine = malloc((size_t)numel(2) * 4);
        memcpy(mine, v + numel(0) + numel(1), (size_t)numel(2) * 4);
        if (g_rank == 1) mine[17] += 1.0f;
        ZT_ERR(zinc_param_set_master(B.e, B.p[2], mine), ZINC_ERR_INVALID_ARG, "rank 1 passed other values");
        free(mine);
    }
    /* the checks refuse before anything changes: the engine still works and holds its weights */
    ZT_OK(zinc_gather_master(B.e, x, (size_t)n));
    ZT_CHECK(!memcmp(x, b, (size_t)n * 4), "%s: a refused set changed the weights", what);
    ZT_OK(zinc_param_set_master(B.e, B.p[4], v + n - numel(4)));
    ZT_OK(train_step(&B, STEPS_T, 1));
    ZT_OK(zinc_module_enter(B.e, B.mod[2], ZINC_BACKWARD)); /* last: it begins a micro-step */
    ZT_ERR(zinc_grad_add_scaled_f32(B.p[3], v, NAN), ZINC_ERR_INVALID_ARG, "not finite");
    ZT_ERR(zinc_module_grad_add_scaled_f32(B.e, B.mod[2], v, INFINITY), ZINC_ERR_INVALID_ARG, "not finite");
    ZT_OK(zinc_module_exit(B.e, B.mod[2], ZINC_BACKWARD));
    zinc_destroy(A.e);
    zinc_destroy(B.e);
    free(a), free(b), free(x), free(v);
}

static void test_unbuilt(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 8}";
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    int m = zinc_module_add(e, "m");
    zinc_param *p = zinc_param_add(e, m, "w", 1, (int64_t[]){4}, 0);
    float x[4] = {0};
    ZT_ERR(zinc_param_get_master(e, p, x), ZINC_ERR_STATE, "call zinc_build first");
    ZT_ERR(zinc_param_set_master(e, p, x), ZINC_ERR_STATE, "call zinc_build first");
    ZT_OK(zinc_param_bind_f32(p, x, x, 1)); /* binding is registration: allowed before the build */
    ZT_ERR(zinc_bound_to_f32(e), ZINC_ERR_STATE, "call zinc_build first");
    ZT_ERR(zinc_bound_set_master(e), ZINC_ERR_STATE, "call zinc_build first");
    zinc_destroy(e);
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

/* zinc_set_master and zinc_param_set_master need no memory of their own (issue 41: zinc_set_master copied
 * the own range first, a transient of the whole model at stage 0): the peak RSS over each call of a 32 MiB
 * model at stage 0 grows by less than 1 MiB. Skipped where VmHWM cannot be reset (/proc/self/clear_refs). */
static void test_no_transient(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) {
        printf("# set_master transient: /proc/self/clear_refs not writable, not measured\n");
        return;
    }
    fclose(f);
    const int64_t n = (int64_t)8 << 20;
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 0}}";
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    int m = zinc_module_add(e, "m");
    zinc_param *p = zinc_param_add(e, m, "w", 1, (int64_t[]){n}, 0);
    ZT_OK(zinc_build(e, NULL, NULL));
    float *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++) w[i] = 0.25f;
    for (int which = 0; which < 2; which++) {
        f = fopen("/proc/self/clear_refs", "w");
        if (f) fputs("5", f), fclose(f);
        long before = status_kb("VmRSS");
        ZT_OK(which ? zinc_param_set_master(e, p, w) : zinc_set_master(e, w, (size_t)n));
        long grew = status_kb("VmHWM") - before;
        printf("# %s of 32 MiB: peak RSS growth %ld KiB\n", which ? "zinc_param_set_master" : "zinc_set_master", grew);
        ZT_CHECK(grew < 1024, "%s of a 32 MiB model: the peak RSS grew by %ld KiB (want < 1 MiB: no transient copy)",
                 which ? "zinc_param_set_master" : "zinc_set_master", grew);
    }
    free(w);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "engine_param_master";
    static const cfg cfgs[] = {
        {0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 2}, {2, 0, 1}, {2, 1, 0}, {3, 0, 0}, {3, 1, 1}, {3, 0, 2},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) test_config(&cfgs[i]);
    test_unbuilt();
    test_no_transient();
    return zt_finish();
}
