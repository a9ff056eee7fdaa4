/* The stage-3 fp32 gradient shard on NVMe (offload_param.device "nvme", zplan_grads_on_nvme): between the
 * reduce-scatter and the optimizer it lives in a file of the parameter store's kind (offload/param_nvme.h,
 * ZSTATE_GRAD_FILE) instead of memory. zero/grads.c hands each reduced piece here as it lands
 * (zgrads_ctx.shard_add): the piece's range is read (blocks not yet written this step read as zeros,
 * without IO), the piece added by the device's own axpy (the in-memory shard's arithmetic, so the same
 * bits, accumulation over micro-steps included) and written back. The step reads the shard twice, piece
 * by piece: once for its statistics (norm, non-finite count: block sums added in the in-memory order,
 * zgrad_stats_add) and once in the optimizer pass, beside the master and moments it streams already. The
 * step's zeroing forgets the blocks (no IO). A failed read or write inside backward is kept, like a failed
 * parameter swap-in, and agreed at the step (zengine_params_agree), so no rank waits for one that stopped. */
#include <stdio.h>
#include <string.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "kernels/cpu_kernels.h"
#include "offload/param_nvme.h"

bool zengine_grads_on_nvme(const zinc_engine *e) { return zplan_grads_on_nvme(&e->cfg, e->stage); }

int64_t zengine_gstore_chunk(const zinc_engine *e) {
    return zplan_grad_scratch_elems(e->state->chunk, e->cfg.zero.offload_param.buffer_size);
}

zinc_status zengine_gstore_create(zinc_engine *e) {
    if (!zengine_grads_on_nvme(e)) return ZINC_OK;
    zstate_ctx c = e->state_ctx;
    c.offload = e->cfg.zero.offload_param;
    return zstate_param_create_as(&c, ZSTATE_GRAD_FILE, e->part.shard, ZINC_FP32, zengine_gstore_chunk(e), 0,
                                  &e->gstore);
}

/* The first failure is the one reported (zengine_params_agree). */
static void keep_failure(zinc_engine *e, zinc_status st) {
    if (e->pstore_st != ZINC_OK) return;
    e->pstore_st = st;
    snprintf(e->pstore_err, sizeof e->pstore_err, "%s", zinc_last_error());
}

zinc_status zengine_grads_add(void *engine, int64_t lo, int64_t n, const void *src, zinc_dtype t) {
    zinc_engine *e = engine;
    zinc_status st = ZINC_OK;
    if (e->pstore_st != ZINC_OK) return ZINC_OK; /* the step fails anyway: no more IO */
    int64_t cap = zengine_gstore_chunk(e);
    float *buf = zstate_param_scratch(e->gstore);
    size_t tsz = zinc_dtype_size(t);
    for (int64_t a = 0; a < n && st == ZINC_OK; a += cap) {
        int64_t k = n - a < cap ? n - a : cap;
        st = zstate_param_read(e->gstore, lo + a, k, buf);
        if (st == ZINC_OK)
            st = e->dev->ops->axpy_f32(e->dev, buf, (const char *)src + (size_t)a * tsz, t, 1.0f, (size_t)k, 1);
        if (st == ZINC_OK) st = zstate_param_write(e->gstore, lo + a, k, buf);
    }
    if (st != ZINC_OK) keep_failure(e, st);
    return ZINC_OK;
}

void zengine_grads_zero(void *engine) {
    zinc_engine *e = engine;
    zstate_param_forget(e->gstore);
}

zinc_status zengine_grads_read(zinc_engine *e, int64_t lo, int64_t n, float *dst) {
    return zstate_param_read(e->gstore, lo, n, dst);
}

/* Its error is the step's: a written-behind write completed here (the backward's last piece, at the
 * statistics pass's first call) fails with its own cause, which the read after it could only report as
 * blocks lost. */
zinc_status zengine_grads_prefetch(zinc_engine *e, int64_t lo, int64_t n) {
    if (n > 0 && lo >= 0 && lo + n <= e->part.shard) return zstate_param_prefetch(e->gstore, lo, n);
    return ZINC_OK;
}

zinc_status zengine_grads_stats(zinc_engine *e, zgrad_stats *out) {
    zinc_status st = ZINC_OK;
    memset(out, 0, sizeof *out);
    int64_t cap = zengine_gstore_chunk(e), n = e->part.shard; /* cap: whole ZSTATS_BLOCKs */
    float *buf = zstate_param_scratch(e->gstore);
    for (int64_t a = 0; a < n; a += cap) {
        int64_t k = n - a < cap ? n - a : cap;
        if (a == 0) TRY(zengine_grads_prefetch(e, 0, k));
        TRY(zengine_grads_prefetch(e, a + k, n - a - k < cap ? n - a - k : cap)); /* in flight while this is used */
        TRY(zstate_param_read(e->gstore, a, k, buf));
        ZDEV_ON_POOL(e->dev, zgrad_stats_add(buf, ZINC_FP32, (size_t)k, (size_t)a, out));
    }
fail:
    return st;
}
