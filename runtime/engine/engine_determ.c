/* zinc.deterministic_reduction: the gradient's sum of squares (the clipping norm) in one order whatever the
 * rank count. Each rank holds a shard, and shard boundaries move with the rank count, so per-rank sums added in
 * rank order would associate differently. Here the sum is one left fold over 64-element chunks of the flat
 * gradient in flat order: shard boundaries are multiples of ZPART_SHARD_ALIGN (64) at every rank count, so
 * every chunk lies on one rank and is summed alike (zgrad_stats, elements left to right in double), and the
 * ranks pass the running total along in rank order (rank r adds its chunks to what rank r-1 sends). The
 * zero padding at the end, whose length does depend on the rank count, adds +0. Cost: one 8-byte message per
 * rank and a broadcast per step, and a zgrad_stats per 64 elements (its scalar reference where the host
 * addresses the device's memory: no per-call overhead). */
#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "kernels/cpu_kernels.h"

zinc_status zengine_det_sumsq(zinc_engine *e, const void *g, zinc_dtype t, size_t n, double *out) {
    zinc_status st = ZINC_OK;
    double total = 0;
    /* 8 bytes as four 2-byte elements: copied, never added */
    if (e->rank > 0) TRY(zcomm_sendrecv(e->comm, NULL, 0, -1, &total, 4, e->rank - 1, ZINC_FP16));
    const size_t chunk = ZPART_SHARD_ALIGN, es = zinc_dtype_size(t);
    for (size_t i = 0; i < n; i += chunk) {
        zgrad_stats s;
        size_t len = n - i < chunk ? n - i : chunk;
        if (e->plan.device.host_addressable) /* the same sum (zgrad_stats equals its reference), no device call */
            zgrad_stats_ref((const char *)g + i * es, t, len, &s);
        else
            TRY(e->dev->ops->grad_stats(e->dev, (const char *)g + i * es, t, len, &s));
        total += s.sumsq;
    }
    if (e->rank + 1 < e->world) TRY(zcomm_sendrecv(e->comm, &total, 4, e->rank + 1, NULL, 0, -1, ZINC_FP16));
    if (e->world > 1) TRY(zcomm_bcast(e->comm, &total, sizeof total, e->world - 1));
    *out = total;
fail:
    return st;
}
