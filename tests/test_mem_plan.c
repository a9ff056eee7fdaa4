/* The sizing plan (runtime/mem/plan.h) against what zinc_build allocates (run under mpirun, 1-2 ranks;
 * with ZINC_CPU_DISCRETE=1 the cpu device is presented as a discrete one).
 *
 * For stages 0-3 x offload none/cpu/nvme x fp32/bf16/fp16 with AdamW, and stages 0-3 x offload
 * none/cpu/nvme with Lion (one dtype per stage; Lion keeps no exp_avg_sq: none is planned or allocated),
 * and LAMB in fp16 with offload none/cpu (on a discrete device its step allocates per-tensor norms),
 * a model with odd sizes, a module without parameters and a module larger than a bucket is built, and on
 * every rank:
 *   - after zinc_build, every (memory kind, category) the tracker holds equals the plan's buffers that
 *     exist then (zplan_sum ZPLAN_AT_BUILD), to the byte. The NVMe files' size depends on the file
 *     system's O_DIRECT alignment, found when they are opened: the plan is made again with the store's
 *     own alignment, and then they are exact too. The NVMe swap buffers count as pinned when io_uring
 *     registers them and as host memory when the kernel refuses: the one the store chose must hold them;
 *   - after two optimizer steps, every peak equals the plan's at the steps (ZPLAN_IN_STEP);
 *   - the plan zinc_build made (the engine's own) equals a plan made from the model's shapes, the config
 *     and the device alone, and the estimator's figures are that plan summed (it has no rule of its own);
 *   - the engine's layout (parameter offsets, module ranges, own range) is the plan's.
 * Also: a malformed model gets a clear error from zplan_make. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "offload/state_nvme.h"
#include "base/config/config.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/engine/engine_mem.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"
#include "zt.h"

typedef struct tparam {
    const char *module, *name; /* name NULL: a module without parameters */
    int64_t n;
} tparam;

static const tparam MODEL[] = {
    {"embed", "embed.weight", 37 * 16},
    {"block0", "block0.w", 16 * 48},
    {"block0", "block0.b", 48},
    {"act", NULL, 0},
    {"block1", "block1.w", 48 * 49},
    {"block1", "block1.b", 49},
    {"tiny", "tiny.b", 5},
    {"head", "head.w", 49 * 37},
    {"head", "head.b", 37},
};
#define NM ((int)(sizeof MODEL / sizeof MODEL[0]))

static zinc_status init_fn(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u;
    uint64_t s = seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = (float)(zt_rand_uniform(&s) - 0.5) * 0.1f;
    return ZINC_OK;
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_ERROR};

static char nvme_dir[1024];

static void config_json(int stage, const char *offload, zinc_dtype dt, const char *opt, char *buf, size_t cap) {
    char off[1400] = "";
    bool nvme = !strcmp(offload, "nvme");
    if (strcmp(offload, "none"))
        snprintf(off, sizeof off, ", \"offload_optimizer\": {\"device\": \"%s\", \"pin_memory\": true%s%s%s}", offload,
                 nvme ? ", \"nvme_path\": \"" : "", nvme ? nvme_dir : "", nvme ? "\"" : "");
    snprintf(buf, cap,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 2,"
             " \"optimizer\": {\"type\": \"%s\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}},"
             " \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 8}, \"bf16\": {\"enabled\": %s},"
             " \"zero_optimization\": {\"stage\": %d, \"sub_group_size\": 1000, \"reduce_bucket_size\": 1000,"
             " \"stage3_param_persistence_threshold\": 100%s}%s}",
             opt, dt == ZINC_FP16 ? "true" : "false", dt == ZINC_BF16 ? "true" : "false", stage, off,
             nvme ? ", \"zinc\": {\"allow_buffered_io\": true}" : "");
}

/* Registers the model and builds; then `steps` steps of random gradients, forward in order and
 * backward in reverse (the order the plan's gather simulation assumes). */
static zinc_status add_model(zinc_engine *e, zinc_param **ps) {
    int mod = -1;
    for (int i = 0; i < NM; i++) {
        if (i == 0 || strcmp(MODEL[i].module, MODEL[i - 1].module)) mod = zinc_module_add(e, MODEL[i].module);
        if (mod < 0) return ZINC_ERR_INVALID_ARG;
        ps[i] = NULL;
        if (MODEL[i].name) {
            int64_t shape[1] = {MODEL[i].n};
            if (!(ps[i] = zinc_param_add(e, mod, MODEL[i].name, 1, shape, ZINC_PARAM_DECAY)))
                return ZINC_ERR_INVALID_ARG;
        }
    }
    return ZINC_OK;
}

static zinc_status run_steps(zinc_engine *e, zinc_param **ps, int steps, uint64_t seed) {
    zinc_status st;
    uint64_t s = seed;
    int nmod = e->nmodules;
    for (int step = 0; step < steps; step++) {
        for (int64_t micro = 0; micro < zinc_grad_accum_steps(e); micro++) {
            for (int m = 0; m < nmod; m++) {
                if ((st = zinc_module_enter(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
                if ((st = zinc_module_exit(e, m, ZINC_FORWARD)) != ZINC_OK) return st;
            }
            for (int m = nmod - 1; m >= 0; m--) {
                if ((st = zinc_module_enter(e, m, ZINC_BACKWARD)) != ZINC_OK) return st;
                for (int i = 0; i < NM; i++) {
                    if (!ps[i] || ps[i]->module != m) continue;
                    void *g = zinc_param_grad(ps[i]);
                    if (!g) return ZINC_ERR_STATE;
                    for (int64_t j = 0; j < MODEL[i].n; j++)
                        zinc_add_f32(g, zinc_grad_dtype(e), (size_t)j,
                                     (float)zt_rand_normal(&s) * zinc_loss_scale(e) * 1e-3f);
                }
                if ((st = zinc_module_exit(e, m, ZINC_BACKWARD)) != ZINC_OK) return st;
            }
        }
        if ((st = zinc_step(e, NULL)) != ZINC_OK) return st;
    }
    return ZINC_OK;
}

/* Compares a tracker table with the plan's; the NVMe swap buffers may be where the store put them
 * (pinned or host). Returns the differences found. */
static int compare(const char *what, const char *when, const uint64_t got[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT],
                   uint64_t want[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT], const zplan *p) {
    uint64_t swap = p->buf[ZPLAN_NVME_SWAP].bytes;
    if (swap && got[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] + swap == want[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] &&
        got[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] == want[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] + swap) {
        want[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] -= swap; /* unregistered: ordinary host memory */
        want[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] += swap;
    }
    int bad = 0;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
            if (got[k][c] == want[k][c]) continue;
            bad++;
            ZT_CHECK(false, "%s, %s: %s %s: tracker %llu, plan %llu", what, when, zinc_mem_kind_name((zinc_mem_kind)k),
                     zinc_mem_category_name((zinc_mem_category)c), (unsigned long long)got[k][c],
                     (unsigned long long)want[k][c]);
        }
    return bad;
}

static int cases_run, nvme_skipped;

static void check_case(int stage, const char *offload, zinc_dtype dt, const char *opt, int world, int rank) {
    bool lion = !strcmp(opt, "Lion");
    char json[4096], what[160];
    config_json(stage, offload, dt, opt, json, sizeof json);
    snprintf(what, sizeof what, "%s stage %d offload %s %s, rank %d of %d", opt, stage, offload, zinc_dtype_name(dt),
             rank, world);
    zinc_options o = zinc_default_options();
    o.config_json = json;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    zinc_engine *e = NULL;
    zinc_param *ps[NM];
    zplan mine = {0}, real = {0};
    zinc_status st = zinc_create(&o, &e);
    if (stage == 0 && strcmp(offload, "none")) { /* refused by the config: nothing to plan */
        ZT_CHECK(st == ZINC_ERR_CONFIG, "%s: expected the config to be refused", what);
        zinc_destroy(e);
        return;
    }
    ZT_CHECK(st == ZINC_OK, "%s: create: %s", what, zinc_last_error());
    if (st != ZINC_OK) return;
    ZT_OK(add_model(e, ps));
    st = zinc_build(e, init_fn, NULL);
    if (st == ZINC_ERR_UNSUPPORTED && !strcmp(offload, "nvme")) {
        if (rank == 0 && !nvme_skipped) printf("SKIP nvme cases: %s\n", zinc_last_error());
        nvme_skipped = 1;
        zinc_destroy(e);
        return;
    }
    ZT_CHECK(st == ZINC_OK, "%s: build: %s", what, zinc_last_error());
    if (st != ZINC_OK) goto done;
    cases_run++;

    /* The plan from the shapes, the config and the device alone (the estimator's way), with the NVMe
     * files' real alignment. */
    int64_t numel[NM];
    int module[NM], np = 0;
    for (int i = 0, mod = -1; i < NM; i++) {
        if (i == 0 || strcmp(MODEL[i].module, MODEL[i - 1].module)) mod++;
        if (!MODEL[i].name) continue;
        numel[np] = MODEL[i].n;
        module[np++] = mod;
    }
    uint32_t align = 0;
    zstate_nvme_stats ns;
    if (!strcmp(offload, "nvme")) {
        ZT_OK(zstate_nvme_stats_get(e->state, &ns));
        align = ns.align;
    }
    zinc_config cfg;
    zlog log = {.fn = zt_logcap_fn, .userdata = &quiet_log_cap, .level = ZINC_LOG_ERROR};
    ZT_OK(zcfg_load_text(json, "<test>", world, &log, &cfg));
    bool discrete = getenv("ZINC_CPU_DISCRETE") && !strcmp(getenv("ZINC_CPU_DISCRETE"), "1");
    zplan_device dev = zplan_device_for(discrete ? ZINC_DEVICE_CUDA : ZINC_DEVICE_CPU);
    dev.nvme_align = align;
    ZT_OK(zplan_make(&(zplan_model){.nparams = np, .numel = numel, .module = module, .nmodules = 0}, &cfg, world, rank,
                     &dev, &mine));
    ZT_OK(zengine_plan(e, &e->cfg, align, &real));

    uint64_t a[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}},
             b[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(&mine, ZPLAN_IN_STEP, a);
    zplan_sum(&real, ZPLAN_IN_STEP, b);
    ZT_CHECK(!memcmp(a, b, sizeof a), "%s: the engine's plan differs from the plan of its shapes and config", what);

    /* The layout zinc_build used is the plan's. */
    for (int i = 0; i < e->nparams; i++)
        ZT_CHECK(e->params[i]->flat_offset == e->plan.flat_offset[i], "%s: parameter %d at %lld, plan %lld", what, i,
                 (long long)e->params[i]->flat_offset, (long long)e->plan.flat_offset[i]);
    for (int m = 0; m < e->nmodules; m++)
        ZT_CHECK(e->modules[m].flat_begin == mine.module_begin[m] && e->modules[m].flat_end == mine.module_end[m],
                 "%s: module %d at [%lld, %lld), plan [%lld, %lld)", what, m, (long long)e->modules[m].flat_begin,
                 (long long)e->modules[m].flat_end, (long long)mine.module_begin[m], (long long)mine.module_end[m]);
    ZT_CHECK(e->own_lo == mine.own_lo && e->own_hi == mine.own_hi && e->part.padded == mine.part.padded,
             "%s: own range or padding differs from the plan", what);

    /* After zinc_build: what the tracker holds now. */
    zinc_memory_report rep;
    ZT_OK(zinc_memory_get(e, &rep));
    uint64_t want[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(&real, ZPLAN_AT_BUILD, want);
    compare(what, "after zinc_build", (const uint64_t(*)[ZINC_MEM_CATEGORY_COUNT])rep.current, want, &real);
    /* Lion: two state arrays (files with NVMe), nothing of exp_avg_sq anywhere; Adam: three of a size. */
    ZT_CHECK(real.state_tensors == (lion ? 2 : 3), "%s: the plan keeps %d state tensors", what, real.state_tensors);
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        const uint64_t *c = rep.current[k];
        ZT_CHECK(c[ZINC_MEM_EXP_AVG_SQ] == (lion ? 0 : c[ZINC_MEM_MASTER]) && c[ZINC_MEM_EXP_AVG] == c[ZINC_MEM_MASTER],
                 "%s: %s holds master %llu, exp_avg %llu, exp_avg_sq %llu bytes", what,
                 zinc_mem_kind_name((zinc_mem_kind)k), (unsigned long long)c[ZINC_MEM_MASTER],
                 (unsigned long long)c[ZINC_MEM_EXP_AVG], (unsigned long long)c[ZINC_MEM_EXP_AVG_SQ]);
    }

    /* The peaks over the run: the plan summed at the steps, and zinc_build's moment, when the initialisation
     * scratch (a whole tensor here: zinc_build with an init_fn) is host staging beside the build's buffers
     * (but the persistent modules' copies, which the gather after it allocates). */
    uint64_t peak[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}}, at_build[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(&real, ZPLAN_IN_STEP, peak);
    zplan_sum(&real, ZPLAN_AT_BUILD, at_build);
    at_build[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] += (uint64_t)real.init_scratch_whole * sizeof(float);
    at_build[real.buf[ZPLAN_PARAMS_PERSISTENT].kind][ZINC_MEM_PARAMS] -= real.buf[ZPLAN_PARAMS_PERSISTENT].bytes;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            if (at_build[k][c] > peak[k][c]) peak[k][c] = at_build[k][c];
    /* The estimator sums the same plan (the engine's alignment assumption aside). */
    zest_estimate est;
    ZT_OK(zengine_estimate(e, &est));
    uint64_t sum[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(&e->plan, ZPLAN_IN_STEP, sum);
    sum[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] = peak[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING];
    ZT_CHECK(!memcmp(sum, est.bytes, sizeof sum), "%s: the estimate is not the plan summed at its peaks", what);

    /* After the steps: the peaks. */
    ZT_OK(run_steps(e, ps, 2, 7 + (uint64_t)rank));
    ZT_OK(zinc_memory_get(e, &rep));
    compare(what, "peak over two steps", (const uint64_t(*)[ZINC_MEM_CATEGORY_COUNT])rep.peak, peak, &real);
done:
    zplan_free(&mine);
    zplan_free(&real);
    zinc_destroy(e);
}

/* Malformed models are refused with what is wrong. */
static void check_errors(void) {
    zinc_config cfg;
    zlog log = {.fn = zt_logcap_fn, .userdata = &quiet_log_cap, .level = ZINC_LOG_ERROR};
    ZT_OK(zcfg_load_text("{\"train_micro_batch_size_per_gpu\": 1}", "<test>", 1, &log, &cfg));
    zplan_device dev = zplan_device_for(ZINC_DEVICE_CPU);
    zplan p;
    int64_t n[3] = {10, 0, 5};
    int mod[3] = {0, 1, 0};
    ZT_ERR(zplan_make(&(zplan_model){.nparams = 0, .numel = n, .module = mod, .nmodules = 0}, &cfg, 1, 0, &dev, &p),
           ZINC_ERR_INVALID_ARG, "at least one parameter");
    ZT_ERR(zplan_make(&(zplan_model){.nparams = 2, .numel = n, .module = mod, .nmodules = 0}, &cfg, 1, 0, &dev, &p),
           ZINC_ERR_INVALID_ARG, "parameter 1 has 0 elements");
    n[1] = 4;
    ZT_ERR(zplan_make(&(zplan_model){.nparams = 3, .numel = n, .module = mod, .nmodules = 0}, &cfg, 1, 0, &dev, &p),
           ZINC_ERR_INVALID_ARG, "modules must be in order (module 0 after 1)");
    ZT_ERR(zplan_make(&(zplan_model){.nparams = 2, .numel = n, .module = mod, .nmodules = 1}, &cfg, 1, 0, &dev, &p),
           ZINC_ERR_INVALID_ARG, "module 1 of 1");
    ZT_ERR(zplan_make(&(zplan_model){.nparams = 2, .numel = n, .module = mod, .nmodules = 0}, &cfg, 2, 2, &dev, &p),
           ZINC_ERR_INVALID_ARG, "rank 2 of world 2 is out of range");
    /* A gap is a module without parameters: an empty range where it stands. */
    mod[1] = 2;
    ZT_OK(zplan_make(&(zplan_model){.nparams = 2, .numel = n, .module = mod, .nmodules = 4}, &cfg, 1, 0, &dev, &p));
    ZT_CHECK(p.nmodules == 4 && p.module_begin[1] == 16 && p.module_end[1] == 16 && p.module_end[2] == 24 &&
                 p.module_begin[3] == 24 && p.module_end[3] == 24 && p.flat_offset[1] == 16,
             "empty modules: %d modules, [1] = [%lld, %lld)", p.nmodules, (long long)p.module_begin[1],
             (long long)p.module_end[1]);
    zplan_free(&p);
}

int main(void) {
    zt_name = "mem_plan";
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_micro_batch_size_per_gpu\": 1}";
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    if (!e) return zt_finish();
    int world = zinc_world_size(e), rank = zinc_rank(e);
    zinc_destroy(e);
    snprintf(nvme_dir, sizeof nvme_dir, "%s/mem_plan_nvme_np%d_r%d", zt_build_dir(), world, rank);
    mkdir(nvme_dir, 0755);

    static const char *offloads[] = {"none", "cpu", "nvme"};
    static const zinc_dtype dtypes[] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    for (int stage = 0; stage <= 3; stage++)
        for (int oi = 0; oi < 3; oi++)
            for (int di = 0; di < 3; di++) check_case(stage, offloads[oi], dtypes[di], "AdamW", world, rank);
    for (int stage = 0; stage <= 3; stage++)
        for (int oi = 0; oi < 3; oi++) check_case(stage, offloads[oi], dtypes[stage % 3], "Lion", world, rank);
    /* LAMB: on a discrete device its step allocates the per-tensor norms (ZPLAN_TENSOR_SUMS) */
    for (int stage = 0; stage <= 3; stage++)
        for (int oi = 0; oi < 2; oi++) check_case(stage, offloads[oi], ZINC_FP16, "Lamb", world, rank);
    ZT_CHECK(cases_run >= (nvme_skipped ? 35 : 47), "only %d cases ran", cases_run);
    check_errors();
    if (rank == 0)
        printf("%d cases built and compared with the plan after zinc_build and at the steps' peak\n", cases_run);
    return zt_finish();
}
