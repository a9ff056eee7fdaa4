/* zinc mem measure: real steps of a synthetic model with the given shapes through the engine (random
 * gradients), the peak bytes per category next to the estimate. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem/mem_cli.h"
#include "cli/mem/mem_measure.h"
#include "base/core/memtrack.h"
#include "runtime/engine/engine_mem.h"

/* ---------------------------------------------------------------- measure */

/* Element i of a parameter: a hash of (seed, i), so any range can be computed on its own. */
static float init_value(uint64_t seed, int64_t i) {
    uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 - 0.5) * 0.02f;
}

static zinc_status init_range_fn(void *u, const zinc_param_info *p, uint64_t seed, int64_t first, int64_t n,
                                 float *out) {
    (void)u, (void)p;
    for (int64_t i = 0; i < n; i++) out[i] = init_value(seed, first + i);
    return ZINC_OK;
}

static zinc_status init_fn(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    return init_range_fn(u, p, seed, 0, p->numel, out);
}

/* xorshift64 -> approximately normal (sum of 4 uniforms, centred and scaled). */
static float rnd(uint64_t *s) {
    double acc = 0;
    for (int k = 0; k < 4; k++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        acc += (double)(*s >> 11) / 9007199254740992.0;
    }
    return (float)((acc - 2.0) * 1.7320508);
}

static void fill_grad(void *g, zinc_dtype t, int64_t n, float scale, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) {
        float v = rnd(s) * scale;
        if (t == ZINC_FP32)
            ((float *)g)[i] += v;
        else
            zinc_add_f32(g, t, (size_t)i, v);
    }
}

static int fail_step(void) {
    fprintf(stderr, "zinc mem measure: %s\n", zinc_last_error());
    return -1;
}

static int meas_register(meas_run *r) {
    const mmodel *m = r->m;
    for (int i = 0, mod = -1; i < m->n; i++) {
        if (i == 0 || m->p[i].module != m->p[i - 1].module) mod = zinc_module_add(r->e, m->modules[m->p[i].module]);
        if (mod < 0 || !(r->ps[i] = zinc_param_add(r->e, mod, m->p[i].name, m->p[i].ndim, m->p[i].shape,
                                                   m->p[i].ndim > 1 || m->params_only ? ZINC_PARAM_DECAY : 0))) {
            fprintf(stderr, "zinc mem measure: registering %s: %s\n", m->p[i].name, zinc_last_error());
            return -1;
        }
    }
    return 0;
}

/* One micro-step: every module entered forward, then backward with random gradients (N(0, 1) x 1e-3 x the
 * loss scale) added module by module. */
static int meas_micro(meas_run *r, uint64_t *seed) {
    const mmodel *m = r->m;
    zinc_dtype gt = zinc_grad_dtype(r->e);
    for (int mm = 0; mm < m->nmodules; mm++)
        if (zinc_module_enter(r->e, mm, ZINC_FORWARD) != ZINC_OK || zinc_module_exit(r->e, mm, ZINC_FORWARD) != ZINC_OK)
            return -1;
    for (int mm = m->nmodules - 1; mm >= 0; mm--) {
        if (zinc_module_enter(r->e, mm, ZINC_BACKWARD) != ZINC_OK) return -1;
        float scale = zinc_loss_scale(r->e) * 1e-3f;
        for (int i = 0; i < m->n; i++) {
            if (m->p[i].module != mm) continue;
            void *g = zinc_param_grad(r->ps[i]);
            if (!g) return -1;
            fill_grad(g, gt, m->p[i].numel, scale, seed);
        }
        if (zinc_module_exit(r->e, mm, ZINC_BACKWARD) != ZINC_OK) return -1;
    }
    return 0;
}

/* Builds the engine and runs the steps; every rank's counts and /proc figures gathered. */
static int meas_run_steps(meas_run *r) {
    uint64_t hwm0 = 0, rss1 = 0;
    if (meas_register(r)) return -1;
    if (zinc_memory_get(r->e, &r->before) != ZINC_OK) return fail_step();
    r->proc[PROC_RESET] = zmem_proc_reset_peak();
    r->proc[PROC_OK] = zmem_proc_rss(&r->proc[PROC_BASE], &hwm0);
    zinc_status st = r->o->init_whole ? zinc_build(r->e, init_fn, NULL) : zinc_build_ranged(r->e, init_range_fn, NULL);
    if (st != ZINC_OK) return fail_step();
    uint64_t seed = (uint64_t)r->o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)r->rank + 1;
    for (int64_t step = 0; step < r->o->steps; step++) {
        for (int64_t micro = 0; micro < zinc_grad_accum_steps(r->e); micro++)
            if (meas_micro(r, &seed)) return fail_step();
        if (zinc_step(r->e, &r->info) != ZINC_OK) return fail_step();
    }
    if (!zmem_proc_rss(&rss1, &r->proc[PROC_PEAK])) r->proc[PROC_OK] = 0;
    if (zengine_allgather_reports(r->e, r->all) != ZINC_OK) return fail_step();
    r->procs = calloc((size_t)r->world * PROC_N, sizeof *r->procs);
    if (!r->procs || zengine_allgather_u64(r->e, r->proc, PROC_N, r->procs) != ZINC_OK) return fail_step();
    if (zinc_memory_get(r->e, &r->after) != ZINC_OK) return fail_step();
    /* The estimate for the same shapes and config, computed as `zinc mem estimate --device cpu|cuda` would
     * for the engine's device (a discrete device, real or emulated, is estimated as cuda), plus the staging
     * of device collectives through MPI where the engine set that up (ranks sharing a GPU). */
    if (zengine_estimate(r->e, &r->est) != ZINC_OK) {
        fprintf(stderr, "zinc mem measure: estimate: %s\n", zinc_last_error());
        return -1;
    }
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            for (int q = 0; q < r->world; q++) {
                uint64_t v = r->all[q].peak[k][c];
                if (q > 0 && v != r->all[0].peak[k][c]) r->ranks_differ = 1;
                if (v > r->meas[k][c]) r->meas[k][c] = v;
            }
    return 0;
}

/* Each rank's real peak growth against the estimate's prediction of it. */
static void meas_process(meas_run *r) {
    const mopts *o = r->o;
    r->rss_est = zest_rss(&r->est, zinc_device(r->e) == ZINC_DEVICE_CPU);
    r->rss_allow = r->rss_est / 100 * (uint64_t)o->rss_tol_pct + (uint64_t)o->rss_slack_mib * 1048576u;
    r->prow = json_array();
    for (int q = 0; q < r->world; q++) {
        const uint64_t *pr = r->procs + (size_t)q * PROC_N;
        uint64_t growth = pr[PROC_PEAK] > pr[PROC_BASE] ? pr[PROC_PEAK] - pr[PROC_BASE] : 0;
        int64_t diff = (int64_t)growth - (int64_t)r->rss_est;
        bool within = pr[PROC_OK] && (uint64_t)(diff < 0 ? -diff : diff) <= r->rss_allow;
        if (!pr[PROC_OK])
            r->rss_unknown++;
        else if (!within)
            r->rss_bad++;
        json_array_append_new(r->prow,
                              json_pack("{s:i, s:b, s:I, s:I, s:I, s:I, s:I, s:f, s:b, s:b}", "rank", q, "known",
                                        (int)pr[PROC_OK], "baseline", (json_int_t)pr[PROC_BASE], "vmhwm",
                                        (json_int_t)pr[PROC_PEAK], "growth", (json_int_t)growth, "estimate",
                                        (json_int_t)r->rss_est, "diff", (json_int_t)diff, "diff_pct",
                                        r->rss_est ? 100.0 * (double)diff / (double)r->rss_est : 0.0, "within", within,
                                        "peak_reset", (int)pr[PROC_RESET]));
    }
}

/* Whether a row's measured bytes match the estimate, with the bounds the estimate states. */
static bool row_matches(const meas_run *r, int k, int c) {
    const zest_estimate *est = &r->est;
    uint64_t want = est->bytes[k][c], got = r->meas[k][c];
    if (got == want) return true;
    /* NVMe files: the estimate assumes 4 KiB O_DIRECT alignment for the last chunk's padding. */
    if (k == ZINC_MEMKIND_NVME && got <= want && want - got < 4096) return true;
    if (c != ZINC_MEM_STAGING) return false;
    /* Swap buffers are host memory when io_uring cannot pin them. */
    uint64_t hm = r->meas[ZINC_MEMKIND_HOST][c] + r->meas[ZINC_MEMKIND_PINNED][c];
    uint64_t he = est->bytes[ZINC_MEMKIND_HOST][c] + est->bytes[ZINC_MEMKIND_PINNED][c];
    if (hm == he) return true;
    /* NVMe swap buffers: each of the tensors x buffers is one chunk rounded up to the file system's O_DIRECT
     * alignment, which the estimate takes as 4 KiB (a smaller one allocates less). */
    return est->offload == ZOFFLOAD_NVME && hm <= he &&
           he - hm < 4096u * (uint64_t)est->state_tensors * (uint64_t)est->nvme_swap_buffers;
}

/* Rows: every (kind, category) either side has. */
static void meas_rows(meas_run *r) {
    r->rows = json_array();
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
            uint64_t want = r->est.bytes[k][c], got = r->meas[k][c];
            if (!want && !got) continue;
            bool ok = row_matches(r, k, c);
            if (!ok) r->bad++;
            json_array_append_new(r->rows, json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:b}", "kind",
                                                     zinc_mem_kind_name((zinc_mem_kind)k), "category",
                                                     zinc_mem_category_name((zinc_mem_category)c), "model_state",
                                                     zest_is_model_state((zinc_mem_category)c), "estimate",
                                                     (json_int_t)want, "measured", (json_int_t)got, "diff",
                                                     (json_int_t)((int64_t)got - (int64_t)want), "match", ok));
        }
}

int mc_cmd_measure(const mopts *o, mmodel *m) {
    int rc = 1;
    json_t *base = NULL;
    char *text = NULL;
    meas_run r = {.o = o, .m = m, .origin = o->config ? o->config : "<defaults>"};
    if (mc_load_base(o, &base)) return 1;
    text = mc_config_text(base, (int)o->stage, o->offload);
    zinc_options opt = zinc_default_options();
    opt.config_json = text;
    /* a measurement is no training run: it adds nothing to the config's TensorBoard or CSV files */
    static const char *const no_monitors[] = {"tensorboard.enabled=false", "csv_monitor.enabled=false", NULL};
    opt.config_overrides = no_monitors;
    opt.device = o->device_set ? o->device : ZINC_DEVICE_AUTO;
    opt.log_level = o->verbose ? ZINC_LOG_INFO : ZINC_LOG_WARN;
    if (!text || zinc_create(&opt, &r.e) != ZINC_OK) {
        fprintf(stderr, "zinc mem measure: %s: %s\n", r.origin, text ? zinc_last_error() : "out of memory");
        goto done;
    }
    r.world = zinc_world_size(r.e), r.rank = zinc_rank(r.e);
    r.ps = calloc((size_t)m->n, sizeof *r.ps);
    r.all = calloc((size_t)r.world, sizeof *r.all);
    if (!r.ps || !r.all || meas_run_steps(&r)) goto done;
    rc = 0;
    if (r.rank != 0) goto done;
    meas_process(&r);
    meas_rows(&r);
    mc_measure_print(&r);
    rc = o->check && (r.bad || r.rss_bad || r.rss_unknown) ? 1 : 0;
done:
    json_decref(r.rows);
    json_decref(r.prow);
    zinc_destroy(r.e);
    free(text);
    json_decref(base);
    free(r.ps);
    free(r.all);
    free(r.procs);
    return rc;
}
