/* Runs that go bad stop (issue 18). In fp32 there is no loss scale to lower, so a non-finite
 * gradient is an error naming the step and the first tensor (not a silently skipped step; bf16 skips the
 * step as DeepSpeed does, zengine_nonfinite_is_error), and after every
 * taken step the updated parameters are checked: an update that produced inf or NaN (eps 0 with a zero
 * second moment, a learning rate or weight decay far out of range, a bf16 value beyond its range) stops
 * the run at that step rather than training on to a NaN model. zinc_options.nonfinite =
 * ZINC_NONFINITE_SKIP restores skipping (as fp16 always does: its dynamic loss scale expects overflows). */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/engine/engine_internal.h"
#include "offload/param_nvme.h"
#include "base/core/error.h"
#include "kernels/cpu_kernels.h"

static void describe(const zinc_engine *e, int64_t flat, char *buf, size_t cap) {
    const zinc_param *p = flat >= 0 ? zengine_param_at(e, flat) : NULL;
    if (p)
        snprintf(buf, cap, "parameter \"%s\" element %lld", p->name, (long long)(flat - p->flat_offset));
    else
        snprintf(buf, cap, "flat element %lld", (long long)flat);
}

/* fp16 always skips; bf16 skips as DeepSpeed 0.19.8 does: with bf16.check_grad_overflow (the default), and
 * at stages 0 and 3 whatever it says (FP16_Optimizer in bf16 mode, stage 3's invalid-norm check). At stages
 * 1-2 with the check off DeepSpeed applies the update unchecked; zinc stops there instead. */
bool zengine_nonfinite_is_error(const zinc_engine *e) {
    if (e->nonfinite == ZINC_NONFINITE_SKIP || e->cfg.fp16.enabled) return false;
    if (e->compute_dtype == ZINC_BF16) return !e->cfg.bf16_check_grad_overflow && (e->stage == 1 || e->stage == 2);
    return true;
}

/* The updated parameters are checked after every taken step in every dtype: fp16 skips a step whose
 * gradients overflowed, but an update that made a parameter non-finite (a static loss scale far out of
 * range, a learning rate that explodes) would otherwise be skipped around forever. */
bool zengine_params_checked(const zinc_engine *e) { return e->nonfinite != ZINC_NONFINITE_SKIP; }

zinc_status zengine_nonfinite_grad_error(const zinc_engine *e, int64_t first_bad, int bad_rank) {
    char where[512];
    describe(e, first_bad, where, sizeof where);
    return ZERR(ZINC_ERR_NONFINITE,
                "step %lld: non-finite gradient in %s training (first: %s, rank %d); the step was not taken. Without "
                "fp16 there is no loss scale to lower: check the loss and the data of this step, lower the learning "
                "rate or set gradient_clipping; resume from the last checkpoint. To skip such steps instead, set "
                "zinc_options.nonfinite = ZINC_NONFINITE_SKIP (zinc train --on-nonfinite skip)%s",
                (long long)e->steps, zinc_dtype_name(e->compute_dtype), where, bad_rank,
                e->compute_dtype == ZINC_BF16 ? ", or set bf16.check_grad_overflow true (DeepSpeed's default)" : "");
}

typedef struct bad_rec {
    int64_t nonfinite;
    int64_t first_bad;
} bad_rec;

zinc_status zengine_check_params(zinc_engine *e, const void *own_params) {
    zinc_status st = ZINC_OK;
    bad_rec *all = NULL;
    int64_t numel = e->part.numel;
    int64_t lo = e->own_lo < numel ? e->own_lo : numel, hi = e->own_hi < numel ? e->own_hi : numel;
    zgrad_stats s = {0};
    if (hi > lo && own_params)
        TRY(e->dev->ops->grad_stats(e->dev, own_params, e->compute_dtype, (size_t)(hi - lo), &s));
    if (!own_params && e->pcheck_valid) { /* NVMe: counted by the optimizer pass before its writes */
        s.nonfinite = (size_t)e->pcheck_nonfinite;
        s.first_nonfinite = e->pcheck_nonfinite ? (size_t)e->pcheck_first : 0;
    }
    for (int64_t a = 0; !own_params && !e->pcheck_valid && a < hi - lo; a += zengine_pstore_chunk(e)) {
        int64_t n = hi - lo - a < zengine_pstore_chunk(e) ? hi - lo - a : zengine_pstore_chunk(e);
        void *buf = zstate_param_scratch(e->pstore);
        zgrad_stats cs = {0};
        TRY(zengine_params_read(e, a, n, buf));
        TRY(e->dev->ops->grad_stats(e->dev, buf, e->compute_dtype, (size_t)n, &cs));
        if (cs.nonfinite && !s.nonfinite) s.first_nonfinite = cs.first_nonfinite + (size_t)a;
        s.nonfinite += cs.nonfinite;
    }
    bad_rec mine = {(int64_t)s.nonfinite, s.nonfinite ? lo + (int64_t)s.first_nonfinite : -1};
    TRY_ALLOC(all, e->world, "the parameter check");
    if (e->world > 1)
        TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
    else
        all[0] = mine;
    for (int r = 0; r < e->world; r++) {
        if (!all[r].nonfinite) continue;
        char where[512];
        describe(e, all[r].first_bad, where, sizeof where);
        FAIL(ZINC_ERR_NONFINITE,
             "step %lld: the update made %lld %s parameter value%s non-finite on rank %d (first: %s): the optimizer "
             "settings cannot train this model (eps 0, a learning rate or weight decay out of range, or values beyond "
             "the %s range); resume from the last checkpoint with other settings",
             (long long)e->steps, (long long)all[r].nonfinite, zinc_dtype_name(e->compute_dtype),
             all[r].nonfinite == 1 ? "" : "s", r, where, zinc_dtype_name(e->compute_dtype));
    }
fail:
    free(all);
    return st;
}
