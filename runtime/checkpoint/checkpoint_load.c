/* zinc_load_checkpoint: every rank reads the manifest, checks it against its model, and reads just the
 * byte ranges of its own flat range from the shard files that cover it (any saved rank count and stage
 * to any other: flat offsets do not depend on either). Then the compute-dtype parameters are rebuilt from
 * the fp32 master weights as zinc_build does (all-gathered in stages 1-2, the persistent modules
 * refreshed in stage 3), and the step counters and loss scaler restored, so training continues exactly
 * where the saved run was. Every rank returns the same status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/core/trace.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "base/config/config_schema.h"
#include "kernels/cpu_kernels.h"

static zinc_status precheck(zinc_engine *e, const char *path) {
    if (!path || !*path) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_load_checkpoint: path is NULL or empty");
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[0] || e->modules[m].in_phase[1])
            return ZERR(ZINC_ERR_STATE,
                        "zinc_load_checkpoint: module \"%s\" is still entered; load between "
                        "optimizer steps",
                        e->modules[m].name);
    if (e->broken[0]) {
        /* After a failed step the accumulated gradients belong to the failed step: drop them. */
        zinc_status z = zgrads_reset(&e->grads);
        if (z != ZINC_OK) return z;
        zengine_micro_steps_reset(e);
    }
    if (e->micro_steps > 0)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_load_checkpoint: gradients of %lld micro-step%s are accumulated; load "
                    "before training or right after zinc_step",
                    (long long)e->micro_steps, e->micro_steps == 1 ? "" : "s");
    return zckpt_host_little_endian();
}

/* The part of the flat buffer this rank reads: its own range, clipped to the parameters. */
static void wanted(const zinc_engine *e, const zckpt_manifest *m, int64_t *lo, int64_t *hi) {
    *lo = e->own_lo < m->flat_numel ? e->own_lo : m->flat_numel;
    *hi = e->own_hi < m->flat_numel ? e->own_hi : m->flat_numel;
}

/* Before the state is touched: every file this rank needs exists with the size the manifest gives. */
static zinc_status check_files(const zinc_engine *e, const zckpt_manifest *m) {
    int64_t lo, hi;
    wanted(e, m, &lo, &hi);
    for (int i = 0; i < m->nfiles; i++) {
        const zckpt_file *f = &m->files[i];
        if (f->flat_hi <= lo || f->flat_lo >= hi || f->flat_hi == f->flat_lo) continue;
        char p[ZCKPT_PATH_MAX + 80];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", m->dir, f->name);
        if (stat(p, &sb) != 0)
            return ZERR(ZINC_ERR_IO, "checkpoint file %s: %s (%s)", p, strerror(errno),
                        errno == ENOENT ? "the file is missing: with checkpoint.use_node_local_storage every node "
                                          "holds only its own ranks' files; copy them here or load an earlier "
                                          "checkpoint"
                                        : "check its permissions");
        if (!S_ISREG(sb.st_mode)) return ZERR(ZINC_ERR_CORRUPT, "checkpoint file %s is not a regular file: refused", p);
        if ((int64_t)sb.st_size != f->bytes)
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint file %s is %lld bytes but the manifest says %lld: the file is %s; "
                        "restore it or load an earlier checkpoint",
                        p, (long long)sb.st_size, (long long)f->bytes,
                        (int64_t)sb.st_size < f->bytes ? "truncated" : "not the one this manifest describes");
    }
    return ZINC_OK;
}

/* The optimizer state means different things to each optimizer family (its descriptor's family:
 * runtime/optim): Adam's moments are LAMB's, but Lion's exp_avg is another momentum and Adagrad's is a sum
 * of squares; loading one into another would divide by sqrt(0) + eps or silently change the state's
 * meaning. Checkpoints from before Lion name Adam or AdamW. */
static zinc_status check_optimizer(const zinc_engine *e, const zckpt_manifest *m) {
    json_t *t = json_object_get(json_object_get(json_object_get(m->root, "config"), "optimizer"), "type");
    const char *saved = json_is_string(t) ? json_string_value(t) : "Adam";
    const zopt_desc *was = NULL, *now = e->optim;
    for (int k = 0; k < ZOPT_COUNT; k++)
        if (!strcasecmp(saved, zkey_optimizer_names[k])) was = zopt_get((zcfg_optimizer_type)k);
    if (!was || strcmp(was->family, now->family) != 0)
        return ZERR(ZINC_ERR_CONFIG,
                    "checkpoint %s was saved by the %s optimizer, this run uses %s: their optimizer "
                    "states are not interchangeable; set \"optimizer\": {\"type\": \"%s\"} to "
                    "continue it",
                    m->dir, saved, now->family, saved);
    return ZINC_OK;
}

/* An optimizer with one moment (Lion, Adagrad) keeps no exp_avg_sq, but its checkpoints hold the section
 * (zeros: checkpoint_save.c). It is still read, so its blocks' checksums are checked like every byte of the
 * file, into `scratch`, the slice of master weights that the master section overwrites next (no buffer of
 * its own). Anything but zeros there was not saved by such an optimizer: the manifest and the data
 * disagree. */
static zinc_status skip_exp_avg_sq(zckpt_reader *r, const char *optimizer, int64_t x, int64_t n, float *scratch) {
    zinc_status st = zckpt_reader_read(r, ZCKPT_SEC_EXP_AVG_SQ, x, n, scratch);
    if (st != ZINC_OK) return st;
    for (int64_t k = 0; k < n; k++)
        if (scratch[k] != 0.0f)
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint file %s: element %lld of its exp_avg_sq section is %g, but the checkpoint says "
                        "the %s optimizer saved it, which keeps no second moment (the section is zero): the "
                        "manifest does not describe this data; load another checkpoint",
                        r->path, (long long)(x + k), (double)scratch[k], optimizer);
    return ZINC_OK;
}

/* One WRITE pass over the state store: each chunk is zeroed (padding stays zero) and filled from the
 * files that cover it; readers open lazily and close once the pass is past their range. A store whose
 * matrices keep no exp_avg_sq (Muon, offload/state.h vgaps) takes the section's other elements: the
 * matrices' part is zeros in its own checkpoints and in those written before it kept none (the same
 * format), and is not needed. */
static zinc_status read_state(zinc_engine *e, const zckpt_manifest *m) {
    zinc_status st = ZINC_OK;
    zckpt_reader *rd = NULL;
    bool *open = NULL;
    int first = 0;
    TRY_ALLOC(rd, m->nfiles, "checkpoint readers");
    TRY_ALLOC(open, m->nfiles, "checkpoint readers");
    TRY(zstate_pass_begin(e->state, ZSTATE_WRITE | ZSTATE_HOST_VIEW));
    for (int64_t c = 0; c < e->state->nchunks; c++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, c, &v));
        float *dst[3] = {v.master, v.m, v.v};
        int nsec = v.v ? 3 : 2; /* Lion's store has no exp_avg_sq */
        for (int s = 0; s < nsec; s++) memset(dst[s], 0, (size_t)(s == 2 ? v.vn : v.n) * sizeof(float));
        const zstate_vgaps *g = &e->state->ctx.vgaps;
        int64_t a = e->own_lo + v.lo, b = a + v.n;
        int64_t hi_all = b < m->flat_numel ? b : m->flat_numel;
        while (first < m->nfiles && m->files[first].flat_hi <= a) first++;
        for (int i = first; i < m->nfiles && m->files[i].flat_lo < hi_all; i++) {
            const zckpt_file *f = &m->files[i];
            int64_t x0 = a > f->flat_lo ? a : f->flat_lo, x1 = hi_all < f->flat_hi ? hi_all : f->flat_hi;
            if (x1 <= x0) continue;
            if (!open[i]) {
                TRY(zckpt_reader_open(&rd[i], m, i));
                open[i] = true;
            }
            if (!v.v) TRY(skip_exp_avg_sq(&rd[i], e->optim->name, x0, x1 - x0, dst[0] + (x0 - a)));
            if (v.v && g->n) { /* Muon: the kept elements' exp_avg_sq, through the master slice read next */
                TRY(zckpt_reader_read(&rd[i], 2, x0, x1 - x0, dst[0] + (x0 - a)));
                zstate_v_compact(g, x0 - e->own_lo, x1 - x0, dst[0] + (x0 - a),
                                 v.v + (zstate_v_kept(g, x0 - e->own_lo) - zstate_v_kept(g, v.lo)));
            }
            for (int s = 0; s < nsec; s++)
                if (s < 2 || !g->n) TRY(zckpt_reader_read(&rd[i], s, x0, x1 - x0, dst[s] + (x0 - a)));
        }
        for (int i = 0; i < m->nfiles; i++)
            if (open[i] && m->files[i].flat_hi <= b) {
                zckpt_reader_close(&rd[i]);
                open[i] = false;
            }
        TRY(zstate_release(e->state, c));
    }
    TRY(zstate_pass_end(e->state));
fail:
    zstate_pass_abort(e->state);
    for (int i = 0; open && i < m->nfiles; i++)
        if (open[i]) zckpt_reader_close(&rd[i]);
    free(rd);
    free(open);
    return st;
}

/* Differences between the saved run and this one that are allowed but worth a line in the log. */
static void report_differences(zinc_engine *e, const zckpt_manifest *m) {
    if (m->world_size != e->world || m->stage != e->stage)
        ZLOG_INFO(&e->log, "checkpoint %s: saved by %d rank%s at ZeRO stage %d, loading into %d rank%s at stage %d",
                  m->dir, m->world_size, m->world_size == 1 ? "" : "s", m->stage, e->world, e->world == 1 ? "" : "s",
                  e->stage);
    if (m->train_batch_size != e->cfg.train_batch_size)
        ZLOG_WARN(&e->log,
                  "checkpoint %s was trained with train_batch_size %lld, this run uses %lld: models that "
                  "derive their data position from the step count will not continue where the saved run was",
                  m->dir, (long long)m->train_batch_size, (long long)e->cfg.train_batch_size);
    if (m->compute_dtype != e->compute_dtype)
        ZLOG_INFO(&e->log,
                  "checkpoint %s computed in %s, this run in %s: parameters are rebuilt from the fp32 master "
                  "weights",
                  m->dir, zinc_dtype_name(m->compute_dtype), zinc_dtype_name(e->compute_dtype));
    char *cur = zcfg_dump_json(&e->cfg);
    json_t *now = cur ? json_loads(cur, 0, NULL) : NULL;
    json_t *then = json_object_get(m->root, "config");
    const char *keys[] = {"optimizer", "scheduler", "gradient_clipping"};
    for (size_t k = 0; now && then && k < sizeof keys / sizeof *keys; k++) {
        json_t *a = json_object_get(then, keys[k]), *b = json_object_get(now, keys[k]);
        if (a && b && !json_equal(a, b))
            ZLOG_WARN(&e->log,
                      "checkpoint %s: \"%s\" differs from the saved run's; this run's config applies from "
                      "step %lld on",
                      m->dir, keys[k], (long long)m->steps);
    }
    json_decref(now);
    free(cur);
}

static void restore_scaler(zinc_engine *e, const zckpt_manifest *m) {
    if (e->cfg.fp16.enabled && m->fp16_enabled) {
        if (m->scaler.dynamic != e->scaler.dynamic)
            ZLOG_WARN(&e->log,
                      "checkpoint %s used a %s loss scale, this config a %s one; the checkpoint's (%g) is "
                      "restored",
                      m->dir, m->scaler.dynamic ? "dynamic" : "static", e->scaler.dynamic ? "dynamic" : "static",
                      m->scaler.cur_scale);
        e->scaler = m->scaler;
    } else if (m->fp16_enabled) {
        ZLOG_INFO(&e->log, "checkpoint %s: its fp16 loss scale (%g) is not used, this run is %s", m->dir,
                  m->scaler.cur_scale, zinc_dtype_name(e->compute_dtype));
    } else if (e->cfg.fp16.enabled) {
        ZLOG_INFO(&e->log, "checkpoint %s was not fp16: the loss scale starts at %g", m->dir, e->scaler.cur_scale);
    }
}

static zinc_status checkpoint_load(zinc_engine *e, const char *path) {
    zinc_status st = ZINC_OK, local;
    char tagdir[ZCKPT_PATH_MAX] = "", agreed[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1] = "";
    zckpt_manifest m;
    bool touched = false;
    memset(&m, 0, sizeof m);
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_load_checkpoint: engine is NULL");
    if ((st = zckpt_async_wait(e)) != ZINC_OK) return st; /* a decoupled save in flight: published first */
    if ((st = zengine_require_built(e, "zinc_load_checkpoint (zinc_build registers the model the checkpoint is "
                                       "checked against)")) != ZINC_OK)
        return st;
    local = precheck(e, path);
    if (local == ZINC_OK) local = zckpt_resolve(path, tagdir, sizeof tagdir, tag, sizeof tag);
    TRY(zcomm_agree_status(e->comm, local));
    TRY(zckpt_agree_string(e, tagdir, agreed, sizeof agreed, "path"));
    local = zckpt_manifest_read(agreed, &m);
    if (local == ZINC_OK) local = zckpt_manifest_match(&m, e);
    if (local == ZINC_OK) local = check_optimizer(e, &m);
    if (local == ZINC_OK) local = check_files(e, &m);
    TRY(zcomm_agree_status(e->comm, local));
    report_differences(e, &m);
    if (m.format_version == ZCKPT_FORMAT_VERSION_UNSEALED)
        ZLOG_WARN(&e->log,
                  "checkpoint %s was saved by zinc %s before manifests carried a checksum: its fields were "
                  "validated, but a damaged manifest could go unnoticed; save again to add one",
                  agreed, m.zinc_version);

    /* From here a failure leaves the engine's state partly loaded. */
    touched = true;
    local = read_state(e, &m);
    if (local == ZINC_OK) local = zengine_params_from_master(e);
    st = zcomm_agree_status(e->comm, local);
    if (st != ZINC_OK) {
        zinc__error_trace(__FILE__, __LINE__);
        ZLOG_ERROR(&e->log,
                   "loading checkpoint %s failed part-way: this engine's optimizer state is incomplete; "
                   "load a good checkpoint or create a new engine",
                   m.dir);
        goto fail;
    }
    if ((e->stage == 1 || e->stage == 2) && e->world > 1) TRY(zengine_allgather_params(e));
    if (e->stage == 3) {
        /* A fresh engine has recorded no module trace yet: start recording anew rather than end an empty
         * recording (which would leave prefetching off for the whole run). */
        zgather_forget_empty_trace(&e->gather);
        TRY(zgather_after_step(&e->gather));
    }
    e->steps = m.steps;
    e->steps_taken = m.steps_taken;
    e->steps_skipped = m.steps_skipped;
    e->consecutive_skips = m.consecutive_skips;
    restore_scaler(e, &m);
    e->broken[0] = 0; /* a complete, verified state replaces whatever a failed step or load left */
    ZLOG_INFO(&e->log, "loaded checkpoint %s: step %lld (%lld taken, %lld skipped), loss scale %g", m.dir,
              (long long)m.steps, (long long)m.steps_taken, (long long)m.steps_skipped, e->scaler.cur_scale);
fail:
    if (st != ZINC_OK && touched) zengine_mark_broken(e, "loading a checkpoint");
    zckpt_manifest_free(&m);
    return st;
}

int64_t zinc_step_count(const zinc_engine *e) {
    if (!e) {
        ZERR(ZINC_ERR_INVALID_ARG, "zinc_step_count: NULL engine");
        return -1;
    }
    return e->steps;
}

zinc_status zinc_load_checkpoint(zinc_engine *e, const char *path) {
    /* --trace: kept whatever the step window (a checkpoint is rare and long) */
    int64_t t0 = ztrace_begin_always();
    zinc_status st = checkpoint_load(e, path);
    if (st == ZINC_OK) zengine_trace_sync_step(e); /* the step count the window follows */
    if (t0) ztrace_span(t0, ZTRACE_CHECKPOINT, "load", 0, "ok", st == ZINC_OK, NULL, 0);
    return st;
}
