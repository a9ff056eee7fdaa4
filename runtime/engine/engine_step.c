/* The optimizer step: finish the gradient reduction, one statistics pass over the local gradient (norm
 * and non-finite count), combined across ranks deterministically; on overflow skip (and update the
 * loss scale); otherwise one fused Adam pass with a single unscale-and-clip factor that writes the
 * compute-dtype parameters straight into this rank's slice, then make every rank's copy current. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "runtime/core/error.h"
#include "kernels/cpu_kernels.h"
#include "runtime/engine/lr_schedule.h"

typedef struct rank_stats {
    double sumsq;
    int64_t nonfinite;
    int64_t first_bad; /* flat index of the first non-finite element, or -1 */
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
    TRY(e->dev->ops->grad_stats(e->dev, g, dt, n, &s)); /* the host waits for the statistic here */
    rank_stats mine = {s.sumsq, (int64_t)s.nonfinite, s.nonfinite ? flat_lo + (int64_t)s.first_nonfinite : -1};
    TRY_ALLOC(all, e->world, "step statistics");
    TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
    *sumsq = 0;
    *nonfinite = 0;
    *first_bad = -1;
    *bad_rank = -1;
    for (int r = 0; r < e->world; r++) {
        *sumsq += all[r].sumsq;
        *nonfinite += all[r].nonfinite;
        if (all[r].first_bad >= 0 && *first_bad < 0) {
            *first_bad = all[r].first_bad;
            *bad_rank = r;
        }
    }
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

/* One fused Adam pass over the optimizer-state store, chunk by chunk (sub_group_size with offload), each
 * chunk's compute-dtype result written straight into this rank's slice of the parameters. With the state
 * where the device operations reach it (always on cpu), the device runs the update. With the state
 * offloaded from a discrete device (a GPU), the CPU kernel updates it through two pairs of pinned staging
 * buffers, pipelined: while chunk i is updated, chunk i+1's gradient comes down and chunk i-1's
 * parameters go up (copy_async on the device's copy stream), and the NVMe store reads and writes
 * around it. */
#define GRAD_SLOT(b) (b)        /* copy slots: gradient downloads into buffer b */
#define PARAM_SLOT(b) (2 + (b)) /* parameter uploads from buffer b */

static zinc_status adam_pass(zinc_engine *e, const zadam_hparams *h, const void *g, zinc_dtype gdt, void *out) {
    zinc_status st = ZINC_OK;
    zdevice *d = e->dev;
    zstate *s = e->state;
    size_t gsz = zinc_dtype_size(gdt), csz = zinc_dtype_size(e->compute_dtype);
    bool on_dev = zengine_state_on_device(e);
    char *const *hg = e->stage_g, *const *hp = e->stage_p;
    /* The staging the sizing plan laid out and zinc_build made (runtime/mem/plan.h): a chunk of the fp32
     * gradient and one of the compute-dtype parameters per buffer. */
    size_t hg_bytes = e->plan.buf[ZPLAN_OFFLOAD_GRAD_STAGING].each,
           hp_bytes = e->plan.buf[ZPLAN_OFFLOAD_PARAM_STAGING].each;
    if (!on_dev && (hg_bytes < (size_t)s->chunk * gsz || hp_bytes < (size_t)s->chunk * csz))
        return ZERR(ZINC_ERR_INTERNAL,
                    "offload step: the sizing plan's staging (%zu and %zu bytes) is smaller than a chunk of %lld "
                    "elements "
                    "(%s gradients); please report this",
                    hg_bytes, hp_bytes, (long long)s->chunk, zinc_dtype_name(gdt));
    if (!on_dev && !(hg[0] && hg[1] && hp[0] && hp[1]))
        return ZERR(ZINC_ERR_INTERNAL, "offload step: zinc_build made no staging for it; please report this");
    TRY(zstate_pass_begin(s, ZSTATE_READ_WRITE));
    if (!on_dev && s->nchunks > 0) {
        size_t n0 = (size_t)(s->n < s->chunk ? s->n : s->chunk);
        TRY(d->ops->copy_async(d, hg[0], g, n0 * gsz, ZDEV_D2H, GRAD_SLOT(0)));
    }
    for (int64_t i = 0; i < s->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(s, i, &v));
        const char *gc = (const char *)g + (size_t)v.lo * gsz;
        char *pc = (char *)out + (size_t)v.lo * csz;
        /* With an NVMe store, the update goes in sub-blocks with zstate_poll between them, so its reads
         * ahead and writes behind keep moving while the CPU computes. */
        int64_t sub = s->ops->poll ? ZSTATE_POLL_ELEMS : (v.n > 0 ? v.n : 1);
        if (on_dev) {
            for (int64_t o = 0; o < v.n; o += sub) {
                size_t k = (size_t)(v.n - o < sub ? v.n - o : sub);
                float *vo = v.v ? v.v + o : NULL; /* Lion's store keeps no exp_avg_sq */
                TRY(d->ops->adam_step(d, h, k, v.master + o, v.m + o, vo, gc + (size_t)o * gsz, gdt,
                                      pc + (size_t)o * csz, e->compute_dtype,
                                      e->decay_mask_dev + (v.lo + o) / ZADAM_MASK_GROUP));
                TRY(zstate_poll(s));
            }
        } else {
            int b = (int)(i & 1), nb = 1 - b;
            TRY(d->ops->copy_wait(d, GRAD_SLOT(b)));
            if (i + 1 < s->nchunks) { /* hg[nb] was last read by chunk i-1's update, which is done */
                int64_t lo = (i + 1) * s->chunk, n = s->n - lo < s->chunk ? s->n - lo : s->chunk;
                TRY(d->ops->copy_async(d, hg[nb], (const char *)g + (size_t)lo * gsz, (size_t)n * gsz, ZDEV_D2H,
                                       GRAD_SLOT(nb)));
            }
            TRY(d->ops->copy_wait(d, PARAM_SLOT(b))); /* chunk i-2's upload from hp[b] */
            for (int64_t o = 0; o < v.n; o += sub) {
                size_t k = (size_t)(v.n - o < sub ? v.n - o : sub);
                float *vo = v.v ? v.v + o : NULL;
                ZDEV_ON_POOL(d, zadam_step(h, k, v.master + o, v.m + o, vo, hg[b] + (size_t)o * gsz, gdt,
                                           hp[b] + (size_t)o * csz, e->compute_dtype,
                                           e->decay_mask + (v.lo + o) / ZADAM_MASK_GROUP));
                TRY(zstate_poll(s));
            }
            TRY(d->ops->copy_async(d, pc, hp[b], (size_t)v.n * csz, ZDEV_H2D, PARAM_SLOT(b)));
        }
        TRY(zstate_release(s, i));
    }
    TRY(zstate_pass_end(s));
    goto done;
fail:
    zstate_pass_abort(s);
done:
    if (!on_dev) /* no copy may still use the staging buffers, and the parameters must be in place */
        for (int slot = 0; slot < ZDEV_COPY_SLOTS; slot++) {
            zinc_status w = d->ops->copy_wait(d, slot);
            if (st == ZINC_OK) st = w;
        }
    return st;
}

zinc_status zengine_step(zinc_engine *e, zinc_step_info *info) {
    zinc_status st = ZINC_OK;
    memset(info, 0, sizeof *info);
    TRY(zgrads_reduce_boundary(&e->grads));
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
    TRY(global_stats(e, &sumsq, &nonfinite, &first_bad, &bad_rank));
    double scale = e->scaler.cur_scale;
    double inv = zgrads_post_scale(&e->grads) / (scale * (double)gas); /* summed, scaled -> mean, unscaled */
    double norm = nonfinite ? (double)NAN : sqrt(sumsq) * inv;
    double lr = zlr_at(&e->cfg.scheduler, e->cfg.optimizer.lr, e->steps_taken);
    e->steps++;

    if (nonfinite && zengine_nonfinite_is_error(e)) {
        TRY(zengine_nonfinite_grad_error(e, first_bad, bad_rank));
    } else if (nonfinite) {
        TRY(skip_step(e, info, first_bad, bad_rank));
    } else {
        double clip = 1.0;
        if (e->cfg.gradient_clipping > 0) {
            double c = (norm + 1e-6) / e->cfg.gradient_clipping; /* DeepSpeed's combined unscale-and-clip */
            if (c > 1.0) clip = c;
        }
        const zcfg_optimizer *o = &e->cfg.optimizer;
        double beta1 = zlr_beta1_at(&e->cfg.scheduler, o->beta1, e->steps_taken);
        double t = (double)(e->steps_taken + 1);
        zadam_hparams h = {
            .lr = (float)lr,
            .beta1 = (float)beta1,
            .beta2 = (float)o->beta2,
            .eps = (float)o->eps,
            .weight_decay = (float)o->weight_decay,
            .bias_correction1 = o->bias_correction ? 1.0 - pow(beta1, t) : 1.0, /* double: zadam_hparams */
            .bias_correction2 = o->bias_correction ? 1.0 - pow(o->beta2, t) : 1.0,
            .grad_factor = (float)(inv / clip),
            .adamw = o->adam_w_mode,
            .lion = o->type == ZOPT_LION, /* the same pass and device operation run Lion (zlion_step_ref) */
        };
        zinc_dtype gdt;
        const void *g = zgrads_local(&e->grads, &gdt);
        size_t csz = zinc_dtype_size(e->compute_dtype);
        void *out = e->stage == 3 ? e->params_shard : (char *)e->params_full + (size_t)e->own_lo * csz;
        if (o->type == ZOPT_LAMB) {
            zlamb_hparams lh = {.lr = h.lr,
                                .beta1 = h.beta1,
                                .beta2 = h.beta2,
                                .eps = h.eps,
                                .weight_decay = h.weight_decay,
                                .grad_factor = h.grad_factor,
                                .bias_correction1 = h.bias_correction1,
                                .bias_correction2 = h.bias_correction2,
                                .max_coeff = (float)o->max_coeff,
                                .min_coeff = (float)o->min_coeff,
                                .eps_inside_sqrt = o->eps_inside_sqrt};
            TRY(zengine_lamb_pass(e, &lh, g, gdt, out));
        } else {
            TRY(adam_pass(e, &h, g, gdt, out));
        }
        if (zengine_nonfinite_is_error(e)) TRY(zengine_check_params(e, out));
        if (e->stage == 1 || e->stage == 2) TRY(zengine_allgather_params(e));
        double prev;
        if (zls_update(&e->scaler, false, &prev) == ZLS_GREW)
            ZLOG_INFO(&e->log, "step %lld: no overflow for %lld steps, loss scale %g -> %g", (long long)e->steps,
                      (long long)e->scaler.scale_window, prev, e->scaler.cur_scale);
        e->steps_taken++;
        e->consecutive_skips = 0;
        info->taken = 1;
    }
    if (e->stage == 3) TRY(zgather_after_step(&e->gather));
    TRY(zgrads_zero(&e->grads));
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
