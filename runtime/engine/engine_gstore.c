/* The stage-3 fp32 gradient shard on NVMe (offload_param.device "nvme", zplan_grads_on_nvme): between the
 * reduce-scatter and the optimizer it lives in a file of the parameter store's kind (offload/param_nvme.h,
 * ZSTATE_GRAD_FILE) instead of memory. zero/grads.c hands each reduced piece here as it lands
 * (zgrads_ctx.shard_add): the piece's range is read (blocks not yet written this step read as zeros,
 * without IO), the piece added by the device's own axpy (the in-memory shard's arithmetic, so the same
 * bits, accumulation over micro-steps included) and written back. The piece is handled in sub-pieces that
 * end at multiples of the scratch (whole statistics blocks, ZSTATS_BLOCK), and each block a sub-piece
 * covers whole gets its sum (zgrad_block_sums) as it is written, at every landing, so after the last
 * micro-step it is the final gradient's. The statistics (norm, non-finite count) add those sums in block
 * order, the in-memory statistics' order (zgrad_stats_add), and read from the file only the blocks that no
 * single sub-piece covered (a module's edges), that never landed (zeros, without IO) or whose sum is not
 * finite (their count and first index): the shard is read once per step, by the optimizer pass, beside the
 * master and moments it streams already, instead of twice. The step's zeroing forgets the blocks (no IO). A failed read or write inside backward is kept, like a failed
 * parameter swap-in, and agreed at the step (zengine_params_agree), so no rank waits for one that stopped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    zinc_status st = ZINC_OK;
    if (!zengine_grads_on_nvme(e)) return ZINC_OK;
    zstate_ctx c = e->state_ctx;
    c.offload = e->cfg.zero.offload_param;
    TRY(zstate_param_create_as(&c, ZSTATE_GRAD_FILE, e->part.shard, ZINC_FP32, zengine_gstore_chunk(e), 0, &e->gstore));
    e->gsum_blocks = zplan_grad_stat_blocks(e->part.shard);
    TRY_ALLOC(e->gsums, e->gsum_blocks > 0 ? e->gsum_blocks : 1, "the gradient shard's block sums");
    TRY_ALLOC(e->gsum_valid, e->gsum_blocks > 0 ? e->gsum_blocks : 1, "the gradient shard's block sums");
    zmem_add(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, zplan_grad_stat_bytes(e->part.shard));
fail:
    return st;
}

void zengine_gstore_destroy(zinc_engine *e) {
    if (e->gsums) zmem_sub(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, zplan_grad_stat_bytes(e->part.shard));
    free(e->gsums);
    free(e->gsum_valid);
    e->gsums = NULL, e->gsum_valid = NULL;
    zstate_param_destroy(e->gstore);
    e->gstore = NULL;
}

/* Sub-piece [s, s + k) of the shard was just written from buf: the blocks it covers whole get their sums,
 * the ones it covers in part lose theirs (another sub-piece holds the rest). */
static void keep_block_sums(zinc_engine *e, int64_t s, int64_t k, const float *buf) {
    const int64_t B = ZSTATS_BLOCK, n = e->part.shard;
    int64_t b0 = (s + B - 1) / B, b1 = s + k == n ? e->gsum_blocks : (s + k) / B;
    if (s % B) e->gsum_valid[s / B] = 0;
    if ((s + k) % B && s + k < n) e->gsum_valid[(s + k) / B] = 0;
    if (b1 <= b0) return;
    int64_t hi = b1 * B < n ? b1 * B : n;
    ZDEV_ON_POOL(e->dev, zgrad_block_sums(buf + (b0 * B - s), ZINC_FP32, (size_t)(hi - b0 * B), e->gsums + b0));
    memset(e->gsum_valid + b0, 1, (size_t)(b1 - b0));
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
    for (int64_t a = 0, k; a < n && st == ZINC_OK; a += k) {
        int64_t edge = cap - (lo + a) % cap; /* to the next multiple of cap: a block edge */
        k = n - a < edge ? n - a : edge;
        st = zstate_param_read(e->gstore, lo + a, k, buf);
        if (st == ZINC_OK)
            st = e->dev->ops->axpy_f32(e->dev, buf, (const char *)src + (size_t)a * tsz, t, 1.0f, (size_t)k, 1);
        if (st == ZINC_OK) keep_block_sums(e, lo + a, k, buf);
        if (st == ZINC_OK) st = zstate_param_write(e->gstore, lo + a, k, buf);
    }
    if (st != ZINC_OK) keep_failure(e, st);
    return ZINC_OK;
}

void zengine_grads_zero(void *engine) {
    zinc_engine *e = engine;
    zstate_param_forget(e->gstore);
    if (e->gsum_valid) memset(e->gsum_valid, 0, (size_t)e->gsum_blocks);
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
    const int64_t B = ZSTATS_BLOCK, n = e->part.shard, nb = e->gsum_blocks;
    int64_t cap = zengine_gstore_chunk(e); /* whole ZSTATS_BLOCKs */
    float *buf = zstate_param_scratch(e->gstore);
    TRY(zstate_param_flush(e->gstore)); /* the backward's last write-behind: its error is the step's, here */
    for (int64_t b = 0; b < nb;) {
        if (e->gsum_valid[b] && isfinite(e->gsums[b])) { /* finite: no non-finite element in it */
            out->sumsq += e->gsums[b++];
            continue;
        }
        int64_t c = b + 1; /* a run of blocks to read, at most the scratch */
        while (c < nb && (c - b) * B < cap && !(e->gsum_valid[c] && isfinite(e->gsums[c]))) c++;
        int64_t lo = b * B, k = (c * B < n ? c * B : n) - lo;
        TRY(zstate_param_read(e->gstore, lo, k, buf));
        ZDEV_ON_POOL(e->dev, zgrad_stats_add(buf, ZINC_FP32, (size_t)k, (size_t)lo, out));
        b = c;
    }
fail:
    return st;
}
