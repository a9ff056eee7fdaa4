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

#include "cli/mem_cli.h"
#include "runtime/core/memtrack.h"
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

/* The real peak: each rank's resident bytes before zinc_build (VmHWM reset to VmRSS there where the
 * kernel allows) and VmHWM after the steps, from /proc/self/status. */
enum { PROC_BASE, PROC_PEAK, PROC_OK, PROC_RESET, PROC_N };

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

int mc_cmd_measure(const mopts *o, mmodel *m) {
    int rc = 1;
    json_t *base = NULL;
    char *text = NULL;
    zinc_param **ps = NULL;
    zinc_memory_report *all = NULL;
    uint64_t *procs = NULL;
    zinc_engine *e = NULL;
    const char *origin = o->config ? o->config : "<defaults>";
    if (mc_load_base(o, &base)) return 1;
    text = mc_config_text(base, o->stage, o->offload);
    zinc_options opt = zinc_default_options();
    opt.config_json = text;
    opt.device = o->device_set ? o->device : ZINC_DEVICE_AUTO;
    opt.log_level = o->verbose ? ZINC_LOG_INFO : ZINC_LOG_WARN;
    if (!text || zinc_create(&opt, &e) != ZINC_OK) {
        fprintf(stderr, "zinc mem measure: %s: %s\n", origin, text ? zinc_last_error() : "out of memory");
        goto done;
    }
    int world = zinc_world_size(e), rank = zinc_rank(e);
    ps = calloc((size_t)m->n, sizeof *ps);
    all = calloc((size_t)world, sizeof *all);
    if (!ps || !all) goto done;
    for (int i = 0, mod = -1; i < m->n; i++) {
        if (i == 0 || m->p[i].module != m->p[i - 1].module) mod = zinc_module_add(e, m->modules[m->p[i].module]);
        if (mod < 0 || !(ps[i] = zinc_param_add(e, mod, m->p[i].name, m->p[i].ndim, m->p[i].shape,
                                                m->p[i].ndim > 1 || m->params_only ? ZINC_PARAM_DECAY : 0))) {
            fprintf(stderr, "zinc mem measure: registering %s: %s\n", m->p[i].name, zinc_last_error());
            goto done;
        }
    }
    zinc_memory_report before;
    if (zinc_memory_get(e, &before) != ZINC_OK) goto fail_step;
    uint64_t proc[PROC_N] = {0}, hwm0 = 0;
    proc[PROC_RESET] = zmem_proc_reset_peak();
    proc[PROC_OK] = zmem_proc_rss(&proc[PROC_BASE], &hwm0);
    if ((o->init_whole ? zinc_build(e, init_fn, NULL) : zinc_build_ranged(e, init_range_fn, NULL)) != ZINC_OK) {
        fprintf(stderr, "zinc mem measure: %s\n", zinc_last_error());
        goto done;
    }
    /* Random gradients: N(0, 1) x 1e-3 x the loss scale, added in backward module by module. */
    uint64_t seed = (uint64_t)o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank + 1;
    zinc_dtype gt = zinc_grad_dtype(e);
    zinc_step_info info = {0};
    for (int64_t step = 0; step < o->steps; step++) {
        for (int64_t micro = 0; micro < zinc_grad_accum_steps(e); micro++) {
            for (int mm = 0; mm < m->nmodules; mm++)
                if (zinc_module_enter(e, mm, ZINC_FORWARD) != ZINC_OK ||
                    zinc_module_exit(e, mm, ZINC_FORWARD) != ZINC_OK)
                    goto fail_step;
            for (int mm = m->nmodules - 1; mm >= 0; mm--) {
                if (zinc_module_enter(e, mm, ZINC_BACKWARD) != ZINC_OK) goto fail_step;
                float scale = zinc_loss_scale(e) * 1e-3f;
                for (int i = 0; i < m->n; i++) {
                    if (m->p[i].module != mm) continue;
                    void *g = zinc_param_grad(ps[i]);
                    if (!g) goto fail_step;
                    fill_grad(g, gt, m->p[i].numel, scale, &seed);
                }
                if (zinc_module_exit(e, mm, ZINC_BACKWARD) != ZINC_OK) goto fail_step;
            }
        }
        if (zinc_step(e, &info) != ZINC_OK) goto fail_step;
    }
    uint64_t rss1 = 0;
    if (!zmem_proc_rss(&rss1, &proc[PROC_PEAK])) proc[PROC_OK] = 0;
    if (zengine_allgather_reports(e, all) != ZINC_OK) goto fail_step;
    procs = calloc((size_t)world * PROC_N, sizeof *procs);
    if (!procs || zengine_allgather_u64(e, proc, PROC_N, procs) != ZINC_OK) goto fail_step;

    /* The estimate for the same shapes and config, computed as `zinc mem estimate --device cpu|cuda` would
     * for the engine's device (a discrete device, real or emulated, is estimated as cuda), plus the staging
     * of device collectives through MPI where the engine set that up (ranks sharing a GPU). */
    zinc_memory_report after;
    if (zinc_memory_get(e, &after) != ZINC_OK) goto fail_step;
    bool discrete = !zinc_device_host_addressable(e);
    zest_estimate est;
    if (zengine_estimate(e, &est) != ZINC_OK) {
        fprintf(stderr, "zinc mem measure: estimate: %s\n", zinc_last_error());
        goto done;
    }
    /* Rows: every (kind, category) either side has; measured = max over ranks. */
    int bad = 0, ranks_differ = 0;
    uint64_t meas[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            for (int r = 0; r < world; r++) {
                uint64_t v = all[r].peak[k][c];
                if (r > 0 && v != all[0].peak[k][c]) ranks_differ = 1;
                if (v > meas[k][c]) meas[k][c] = v;
            }
    if (rank != 0) {
        rc = 0;
        goto done;
    }
    /* The process: each rank's real peak growth against the estimate's prediction of it. */
    uint64_t rss_est = zest_rss(&est, zinc_device(e) == ZINC_DEVICE_CPU);
    uint64_t rss_allow = rss_est / 100 * (uint64_t)o->rss_tol_pct + (uint64_t)o->rss_slack_mib * 1048576u;
    int rss_bad = 0, rss_unknown = 0;
    json_t *prow = json_array();
    for (int r = 0; r < world; r++) {
        const uint64_t *pr = procs + (size_t)r * PROC_N;
        uint64_t growth = pr[PROC_PEAK] > pr[PROC_BASE] ? pr[PROC_PEAK] - pr[PROC_BASE] : 0;
        int64_t diff = (int64_t)growth - (int64_t)rss_est;
        bool within = pr[PROC_OK] && (uint64_t)(diff < 0 ? -diff : diff) <= rss_allow;
        if (!pr[PROC_OK])
            rss_unknown++;
        else if (!within)
            rss_bad++;
        json_array_append_new(prow, json_pack("{s:i, s:b, s:I, s:I, s:I, s:I, s:I, s:f, s:b, s:b}", "rank", r, "known",
                                              (int)pr[PROC_OK], "baseline", (json_int_t)pr[PROC_BASE], "vmhwm",
                                              (json_int_t)pr[PROC_PEAK], "growth", (json_int_t)growth, "estimate",
                                              (json_int_t)rss_est, "diff", (json_int_t)diff, "diff_pct",
                                              rss_est ? 100.0 * (double)diff / (double)rss_est : 0.0, "within", within,
                                              "peak_reset", (int)pr[PROC_RESET]));
    }
    const char *note_rss =
        "real peak: VmHWM from /proc/self/status after the steps, less VmRSS before zinc_build (where VmHWM "
        "was reset there through /proc/self/clear_refs); the estimate of it is the host-memory bytes at the "
        "larger of the build (with the initialisation scratch) and the steps (with MPI's temporaries)";
    json_t *rows = json_array();
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
            uint64_t want = est.bytes[k][c], got = meas[k][c];
            if (!want && !got) continue;
            bool ms = zest_is_model_state((zinc_mem_category)c);
            bool ok = got == want;
            /* NVMe files: the estimate assumes 4 KiB O_DIRECT alignment for the last chunk's padding. */
            if (!ok && k == ZINC_MEMKIND_NVME && got <= want && want - got < 4096) ok = true;
            /* Swap buffers are host memory when io_uring cannot pin them. */
            if (!ok && c == ZINC_MEM_STAGING &&
                meas[ZINC_MEMKIND_HOST][c] + meas[ZINC_MEMKIND_PINNED][c] ==
                    est.bytes[ZINC_MEMKIND_HOST][c] + est.bytes[ZINC_MEMKIND_PINNED][c])
                ok = true;
            /* NVMe swap buffers: each of the tensors x buffers is one chunk rounded up to the file system's
             * O_DIRECT alignment, which the estimate takes as 4 KiB (a smaller one allocates less). */
            if (!ok && c == ZINC_MEM_STAGING && est.offload == ZOFFLOAD_NVME) {
                uint64_t hm = meas[ZINC_MEMKIND_HOST][c] + meas[ZINC_MEMKIND_PINNED][c];
                uint64_t he = est.bytes[ZINC_MEMKIND_HOST][c] + est.bytes[ZINC_MEMKIND_PINNED][c];
                if (hm <= he && he - hm < 4096u * (uint64_t)est.state_tensors * (uint64_t)est.nvme_swap_buffers)
                    ok = true;
            }
            if (!ok) bad++;
            json_array_append_new(rows, json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:b}", "kind",
                                                  zinc_mem_kind_name((zinc_mem_kind)k), "category",
                                                  zinc_mem_category_name((zinc_mem_category)c), "model_state", ms,
                                                  "estimate", (json_int_t)want, "measured", (json_int_t)got, "diff",
                                                  (json_int_t)((int64_t)got - (int64_t)want), "match", ok));
        }
    const char *note_grads = "gradients are random (normal, 1e-3 x the loss scale), not a model's: the bytes depend "
                             "only on the shapes and the config";
    const char *note_dev =
        zinc_device(e) == ZINC_DEVICE_CUDA
            ? "measured on the GPU: the engine's own counts; the device's count (cudaMemGetInfo) follows the table"
        : discrete ? "measured on the CPU presented as a discrete device (ZINC_CPU_DISCRETE=1): the GPU rows are what "
                     "the engine would allocate on a GPU, without the CUDA context and runtime scratch"
                   : "measured on the CPU (host memory); `zinc mem estimate --device cuda` predicts a GPU run, and "
                     "`zinc mem measure --device cuda` measures one where a GPU is usable";
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:o, s:b, s:i, s:s, s:s}", "command", "measure",
                              "model", m->desc, "config", origin, "parameters", (json_int_t)mc_model_total(m), "ranks",
                              world, "stage", est.stage, "steps", (json_int_t)o->steps, "rows", rows, "ranks_differ",
                              ranks_differ, "mismatches", bad, "note_gradients", note_grads, "note_device", note_dev);
        json_object_set_new(j, "process",
                            json_pack("{s:I, s:I, s:I, s:s, s:I, s:i, s:I, s:I, s:i, s:i, s:o, s:i, s:i, s:s}",
                                      "estimate", (json_int_t)rss_est, "init_scratch", (json_int_t)est.init_scratch,
                                      "init_scratch_whole", (json_int_t)est.init_scratch_whole, "init",
                                      o->init_whole ? "whole" : "ranged", "comm_temp", (json_int_t)est.comm_temp,
                                      "comm_pending", est.comm_pending, "comm_piece", (json_int_t)est.comm_piece,
                                      "allowed_diff", (json_int_t)rss_allow, "tolerance_pct", (int)o->rss_tol_pct,
                                      "slack_mib", (int)o->rss_slack_mib, "ranks", prow, "outside_tolerance", rss_bad,
                                      "unknown", rss_unknown, "note", note_rss));
        prow = NULL;
        char *s = json_dumps(j, JSON_INDENT(2));
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else if (o->csv) {
        printf("kind,category,model_state,estimate,measured,diff,match\n");
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) {
            printf("%s,%s,%d,%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT ",%d\n",
                   json_string_value(json_object_get(r, "kind")), json_string_value(json_object_get(r, "category")),
                   json_is_true(json_object_get(r, "model_state")), json_integer_value(json_object_get(r, "estimate")),
                   json_integer_value(json_object_get(r, "measured")), json_integer_value(json_object_get(r, "diff")),
                   json_is_true(json_object_get(r, "match")));
        }
        json_array_foreach(prow, i, r) {
            int rk = (int)json_integer_value(json_object_get(r, "rank"));
            printf("process,rank%d_baseline,0,,%" JSON_INTEGER_FORMAT ",,%d\n", rk,
                   json_integer_value(json_object_get(r, "baseline")), json_is_true(json_object_get(r, "known")));
            printf("process,rank%d_vmhwm_less_baseline,0,%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT
                   ",%" JSON_INTEGER_FORMAT ",%d\n",
                   rk, json_integer_value(json_object_get(r, "estimate")),
                   json_integer_value(json_object_get(r, "growth")), json_integer_value(json_object_get(r, "diff")),
                   json_is_true(json_object_get(r, "within")));
        }
        json_decref(rows);
    } else {
        char n1[32];
        printf("model:  %s: %s parameters in %d tensors, %d modules\n", m->desc,
               mc_commas(mc_model_total(m), n1, sizeof n1), m->n, m->nmodules);
        printf("config: %s: ZeRO stage %d, %s, offload_optimizer %s; %d rank%s, %" PRId64 " step%s of %" PRId64
               " micro-step%s (%" PRId64 " taken)\n",
               origin, est.stage, zinc_dtype_name(est.compute_dtype), mc_offload_name(est.offload), world,
               world == 1 ? "" : "s", o->steps, o->steps == 1 ? "" : "s", zinc_grad_accum_steps(e),
               zinc_grad_accum_steps(e) == 1 ? "" : "s", info.steps_taken);
        printf("note:   %s\nnote:   %s\n\n", note_grads, note_dev);
        printf("Per rank, peak bytes (measured: the largest over the %d rank%s):\n", world, world == 1 ? "" : "s");
        printf("%-7s %-32s %14s %14s %14s  %s\n", "kind", "category", "estimate", "measured", "diff", "");
        size_t i;
        json_t *r;
        uint64_t te[ZINC_MEMKIND_COUNT] = {0}, tm[ZINC_MEMKIND_COUNT] = {0};
        json_array_foreach(rows, i, r) {
            char a[32], b[32], d[48], lab[64];
            int k = 0, c = 0;
            for (; k < ZINC_MEMKIND_COUNT; k++)
                if (!strcmp(zinc_mem_kind_name((zinc_mem_kind)k), json_string_value(json_object_get(r, "kind")))) break;
            for (; c < ZINC_MEM_CATEGORY_COUNT; c++)
                if (!strcmp(zinc_mem_category_name((zinc_mem_category)c),
                            json_string_value(json_object_get(r, "category"))))
                    break;
            mc_cat_label(&est, c, lab, sizeof lab);
            mc_human(a, sizeof a, (uint64_t)json_integer_value(json_object_get(r, "estimate")), o->exact);
            mc_human(b, sizeof b, (uint64_t)json_integer_value(json_object_get(r, "measured")), o->exact);
            mc_shuman(d, sizeof d, json_integer_value(json_object_get(r, "diff")), o->exact);
            printf("%-7s %-32s %14s %14s %14s  %s\n", mc_kind_title(k), lab, a, b, d,
                   json_is_true(json_object_get(r, "match"))
                       ? (json_integer_value(json_object_get(r, "diff")) ? "ok (bound)" : "exact")
                       : "DIFFERS");
            te[k] += (uint64_t)json_integer_value(json_object_get(r, "estimate"));
            tm[k] += (uint64_t)json_integer_value(json_object_get(r, "measured"));
        }
        for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
            if (!te[k] && !tm[k]) continue;
            char a[32], b[32], d[48], lab[64];
            snprintf(lab, sizeof lab, "total");
            mc_human(a, sizeof a, est.total[k], o->exact);
            uint64_t pk = 0;
            for (int r2 = 0; r2 < world; r2++)
                if (all[r2].peak_total[k] > pk) pk = all[r2].peak_total[k];
            mc_human(b, sizeof b, pk, o->exact);
            mc_shuman(d, sizeof d, (int64_t)pk - (int64_t)est.total[k], o->exact);
            printf("%-7s %-32s %14s %14s %14s\n", mc_kind_title(k), lab, a, b, d);
        }
        if (after.device_total_bytes) {
            /* cudaMemGetInfo counts the whole GPU (other processes too) and the allocator's pools. */
            char a[32], b[32], d[48];
            uint64_t grew = after.device_used_bytes > before.device_used_bytes
                                ? after.device_used_bytes - before.device_used_bytes
                                : 0;
            mc_human(a, sizeof a, grew, o->exact);
            mc_human(b, sizeof b, after.current_total[ZINC_MEMKIND_DEVICE], o->exact);
            mc_shuman(d, sizeof d, (int64_t)grew - (int64_t)after.current_total[ZINC_MEMKIND_DEVICE], o->exact);
            printf("%-7s %-32s %14s %14s %14s  (rank 0: the device's own count of the growth since before build, "
                   "against the engine's current device bytes)\n",
                   "GPU", "cudaMemGetInfo", b, a, d);
        }
        char ea[32], eb[32], ec[32];
        mc_human(ea, sizeof ea, rss_est, o->exact);
        mc_human(eb, sizeof eb, est.init_scratch, o->exact);
        mc_human(ec, sizeof ec, est.comm_temp, o->exact);
        printf("\nProcess resident memory (rank by rank): estimate %s = host bytes above at their peak, with "
               "%s of %s initialisation scratch at build and %s of MPI temporaries (%d piece%s of %" PRId64
               " elements in flight) in the steps\n",
               ea, eb, o->init_whole ? "whole-tensor" : "ranged", ec, est.comm_pending,
               est.comm_pending == 1 ? "" : "s", est.comm_piece);
        printf("%-5s %14s %14s %14s %14s %14s %8s\n", "rank", "baseline", "VmHWM", "real growth", "estimate", "diff",
               "diff %");
        json_array_foreach(prow, i, r) {
            char a[32], b[32], c[32], d[48];
            mc_human(a, sizeof a, (uint64_t)json_integer_value(json_object_get(r, "baseline")), o->exact);
            mc_human(b, sizeof b, (uint64_t)json_integer_value(json_object_get(r, "vmhwm")), o->exact);
            mc_human(c, sizeof c, (uint64_t)json_integer_value(json_object_get(r, "growth")), o->exact);
            mc_shuman(d, sizeof d, json_integer_value(json_object_get(r, "diff")), o->exact);
            if (!json_is_true(json_object_get(r, "known")))
                printf("%-5d %14s  (/proc/self/status not readable)\n",
                       (int)json_integer_value(json_object_get(r, "rank")), "?");
            else
                printf("%-5d %14s %14s %14s %14s %14s %7.1f%%%s\n", (int)json_integer_value(json_object_get(r, "rank")),
                       a, b, c, ea, d, json_real_value(json_object_get(r, "diff_pct")),
                       json_is_true(json_object_get(r, "peak_reset")) ? ""
                                                                      : "  (VmHWM not reset: includes earlier peaks)");
        }
        printf("note:   %s\n", note_rss);
        printf("\n%s; every rank %s; real peaks %s (tolerance %d%% + %d MiB).\n",
               bad ? "SOME ROWS DIFFER from the estimate" : "every row matches the estimate",
               ranks_differ ? "did NOT measure the same bytes" : "measured the same bytes",
               rss_unknown ? "UNKNOWN on some ranks"
               : rss_bad   ? "OUTSIDE the tolerance on some ranks"
                           : "within tolerance",
               (int)o->rss_tol_pct, (int)o->rss_slack_mib);
        json_decref(rows);
    }
    json_decref(prow);
    rc = o->check && (bad || rss_bad || rss_unknown) ? 1 : 0;
    goto done;
fail_step:
    fprintf(stderr, "zinc mem measure: %s\n", zinc_last_error());
done:
    zinc_destroy(e);
    free(text);
    json_decref(base);
    free(ps);
    free(all);
    free(procs);
    return rc;
}
