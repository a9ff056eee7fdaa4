/* The optimizer step: finish the gradient reduction, one statistics pass over the local gradient (norm
 * and non-finite count), combined across ranks deterministically; on overflow skip (and update the
 * loss scale); otherwise the optimizer's pass (engine_step_pass.c) with a single unscale-and-clip factor
 * that writes the compute-dtype parameters straight into this rank's slice, then make every rank's copy
 * current. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "base/core/signals.h"
#include "base/core/trace.h"
#include "kernels/cpu_kernels.h"
#include "offload/param_nvme.h"
#include "runtime/engine/lr_schedule.h"

typedef struct rank_stats {
    double sumsq;
    int64_t nonfinite;
    int64_t first_bad; /* flat index of the first non-finite element, or -1 */
    int64_t signal;    /* a preempting signal this rank received (zsig_pending; 0 when preempt is off) */
} rank_stats;

/* Gathers every rank's statistics and sums them in rank order, so every rank gets the same bits. */
static zinc_status global_stats(zinc_engine *e, double *sumsq, int64_t *nonfinite, int64_t *first_bad, int *bad_rank) {
    zinc_status st = ZINC_OK;
    rank_stats *all = NULL;
    zinc_dtype dt;
    size_t n;
    int64_t flat_lo;
    const void *g = zgrads_norm_slice(&e->grads, &dt, &n, &flat_lo);
    zgrad_stats s;
    if (e->gstore) /* offload_param nvme: streamed from the file; a failed read fails every rank here */
        TRY(zcomm_agree_status(e->comm, zengine_grads_stats(e, &s)));
    else
        TRY(e->dev->ops->grad_stats(e->dev, g, dt, n, &s)); /* the host waits for the statistic here */
    double det_sumsq = 0;
    if (e->cfg.deterministic_reduction) TRY(zengine_det_sumsq(e, g, dt, n, &det_sumsq));
    /* The preemption flag rides on this all-gather, which every step does anyway: no extra collective. */
    rank_stats mine = {s.sumsq, (int64_t)s.nonfinite, s.nonfinite ? flat_lo + (int64_t)s.first_nonfinite : -1,
                       e->preempt ? zsig_pending() : 0};
    TRY_ALLOC(all, e->world, "step statistics");
    TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
    *sumsq = 0;
    *nonfinite = 0;
    *first_bad = -1;
    *bad_rank = -1;
    for (int r = 0; r < e->world; r++) {
        *sumsq += all[r].sumsq;
        *nonfinite += all[r].nonfinite;
        if (all[r].signal && !e->preempt_signal) e->preempt_signal = (int)all[r].signal; /* rank order */
        if (all[r].first_bad >= 0 && *first_bad < 0) {
            *first_bad = all[r].first_bad;
            *bad_rank = r;
        }
    }
    if (e->cfg.deterministic_reduction) *sumsq = det_sumsq; /* not the ranks' sums, whose split moves */
fail:
    free(all);
    return st;
}

static void describe_bad(const zinc_engine *e, int64_t flat, char *buf, size_t cap) {
    const zinc_param *p = flat >= 0 ? zengine_param_at(e, flat) : NULL;
    if (p)
        snprintf(buf, cap, "parameter \"%s\" element %lld", p->name, (long long)(flat - p->flat_offset));
    else
        snprintf(buf, cap, "flat element %lld", (long long)flat);
}

static zinc_status skip_step(zinc_engine *e, zinc_step_info *info, int64_t first_bad, int bad_rank) {
    char where[512];
    describe_bad(e, first_bad, where, sizeof where);
    double prev = e->scaler.cur_scale;
    if (e->cfg.fp16.enabled && e->scaler.dynamic) {
        zls_event ev = zls_update(&e->scaler, true, &prev);
        if (ev == ZLS_AT_MINIMUM)
            return ZERR(ZINC_ERR_LOSS_SCALE,
                        "step %lld: fp16 gradient overflow with the loss scale already at its minimum %g "
                        "(fp16.min_loss_scale); first non-finite gradient: %s (rank %d). The gradients overflow "
                        "even unscaled: lower the learning rate, set gradient_clipping, or train in bf16 "
                        "(\"bf16\": {\"enabled\": true})",
                        (long long)e->steps, e->scaler.cur_scale, where, bad_rank);
        if (ev == ZLS_HYSTERESIS)
            ZLOG_INFO(&e->log,
                      "OVERFLOW! step %lld skipped (first non-finite: %s); loss scale stays %g, "
                      "hysteresis now %d",
                      (long long)e->steps, where, e->scaler.cur_scale, e->scaler.cur_hysteresis);
        else
            ZLOG_INFO(&e->log, "OVERFLOW! step %lld skipped (first non-finite: %s); loss scale %g -> %g",
                      (long long)e->steps, where, prev, e->scaler.cur_scale);
    } else {
        ZLOG_WARN(&e->log, "step %lld skipped: non-finite gradient (%s, rank %d)%s", (long long)e->steps, where,
                  bad_rank, e->cfg.fp16.enabled ? " with a static loss scale" : "");
    }
    e->steps_skipped++;
    e->consecutive_skips++;
    int64_t limit = e->cfg.fp16.max_skipped_steps;
    if (limit > 0 && e->consecutive_skips > limit)
        return ZERR(ZINC_ERR_LOSS_SCALE,
                    "step %lld: %lld consecutive steps skipped for non-finite gradients (zinc.max_skipped_steps = "
                    "%lld); last: %s (rank %d)",
                    (long long)e->steps, (long long)e->consecutive_skips, (long long)limit, where, bad_rank);
    info->taken = 0;
    return ZINC_OK;
}

zinc_status zengine_step(zinc_engine *e, zinc_step_info *info) {
    zinc_status st = ZINC_OK;
    memset(info, 0, sizeof *info);
    int64_t t0 = ztrace_begin(), w0 = zengine_wc_now(e);
    TRY(zgrads_reduce_boundary(&e->grads));
    TRY(zengine_params_agree(e)); /* offload_param nvme: a rank's failed swap-in fails every rank's step */
    zengine_wc_reduced(e, w0);
    if (t0) ztrace_span(t0, ZTRACE_ENGINE, "gradient reduction", 0, NULL, 0, NULL, 0);
    int64_t gas = e->cfg.gradient_accumulation_steps;
    if (e->micro_steps != gas && !e->warned_micro_mismatch) {
        ZLOG_WARN(&e->log,
                  "zinc_step after %lld backward passes, but gradient_accumulation_steps is %lld: "
                  "gradients are averaged over %lld",
                  (long long)e->micro_steps, (long long)gas, (long long)gas);
        e->warned_micro_mismatch = true;
    }

    double sumsq = 0;
    int64_t nonfinite = 0, first_bad = -1;
    int bad_rank = -1;
    zengine_state_ahead(e); /* a no-op unless something between the backward and here ran a pass */
    t0 = ztrace_begin();
    TRY(global_stats(e, &sumsq, &nonfinite, &first_bad, &bad_rank)); /* where the ranks meet each step */
    if (t0) ztrace_span(t0, ZTRACE_ENGINE, "gradient statistics", 0, NULL, 0, NULL, 0);
    double scale = e->scaler.cur_scale;
    double inv = zgrads_post_scale(&e->grads) / (scale * (double)gas); /* summed, scaled -> mean, unscaled */
    double norm = nonfinite ? (double)NAN : sqrt(sumsq) * inv;
    double lr = zlr_at(&e->cfg.scheduler, e->cfg.optimizer.lr, e->steps_taken);
    e->steps++;

    if (nonfinite && zengine_nonfinite_is_error(e)) {
        TRY(zengine_nonfinite_grad_error(e, first_bad, bad_rank));
    } else if (nonfinite) {
        t0 = ztrace_begin();
        TRY(skip_step(e, info, first_bad, bad_rank));
        if (t0) ztrace_span(t0, ZTRACE_ENGINE, "skip", 0, NULL, 0, NULL, 0);
    } else {
        zinc_dtype gdt;
        const void *g = zgrads_local(&e->grads, &gdt);
        TRY(zengine_muon_prepare(e, g, gdt, inv, &norm)); /* Muon: the whole-matrix updates (engine_muon.c) */
        double clip = zengine_clip_factor(e, norm);
        const zcfg_optimizer *o = &e->cfg.optimizer;
        zopt_step os = {.lr = lr,
                        .beta1 = zlr_beta1_at(&e->cfg.scheduler, o->beta1, e->steps_taken),
                        .beta2 = zlr_beta2(&e->cfg.scheduler, o->beta2),
                        .grad_factor = inv / clip,
                        .t = e->steps_taken + 1,
                        .adam_lr = zlr_at(&e->cfg.scheduler, o->adam_lr, e->steps_taken)};
        zopt_hp hp;
        e->optim->hparams(o, &os, &hp);
        zengine_muon_hparams(e, &hp, inv, clip);
        size_t csz = zinc_dtype_size(e->compute_dtype);
        /* NULL with offload_param nvme: the pass writes each chunk to the parameter store */
        void *out = e->stage == 3 ? e->params_shard : (char *)e->params_full + (size_t)e->own_lo * csz;
        zinc_status ps = zengine_optimizer_pass(e, e->optim, &hp, g, gdt, out);
        if (e->pstore && ps == ZINC_OK) ps = zstate_param_flush(e->pstore); /* the last write-behind */
        if (e->pstore) ps = zcomm_agree_status(e->comm, ps); /* a failed write-back ends every rank's step */
        TRY(ps);
        if (zengine_params_checked(e)) {
            t0 = ztrace_begin();
            TRY(zengine_check_params(e, out));
            if (t0) ztrace_span(t0, ZTRACE_ENGINE, "parameter check", 0, NULL, 0, NULL, 0);
        }
        if (e->stage == 1 || e->stage == 2) TRY(zengine_allgather_params(e));
        double prev;
        /* the loss scaler's update is a few comparisons: no span of its own (a skipped step's is "skip") */
        if (zls_update(&e->scaler, false, &prev) == ZLS_GREW)
            ZLOG_INFO(&e->log, "step %lld: no overflow for %lld steps, loss scale %g -> %g", (long long)e->steps,
                      (long long)e->scaler.scale_window, prev, e->scaler.cur_scale);
        e->steps_taken++;
        e->consecutive_skips = 0;
        info->taken = 1;
    }
    t0 = ztrace_begin();
    if (e->stage == 3) TRY(zgather_after_step(&e->gather));
    TRY(zgrads_zero(&e->grads));
    zengine_state_ahead(e); /* the next step's optimizer pass begins reading now */
    if (t0) ztrace_span(t0, ZTRACE_ENGINE, "after step", 0, NULL, 0, NULL, 0);
    zengine_micro_steps_reset(e);

    info->step = e->steps;
    info->steps_taken = e->steps_taken;
    info->steps_skipped = e->steps_skipped;
    info->loss_scale = (float)e->scaler.cur_scale;
    info->grad_norm = norm;
    info->lr = lr;
    info->reduce_scatters = e->grads.stat_rs_sends;
    info->prefetch_gathers = e->gather.stat_prefetch;
    info->blocking_gathers = e->gather.stat_gather_blocking;
    info->preempt_signal = e->preempt_signal;
    e->grads.stat_rs_sends = 0;
    e->gather.stat_prefetch = e->gather.stat_gather_blocking = e->gather.stat_trace_resync = 0;
    return ZINC_OK;
fail : {
    char what[64];
    snprintf(what, sizeof what, "optimizer step %lld", (long long)e->steps);
    zengine_mark_broken(e, what);
    return st;
}
}
