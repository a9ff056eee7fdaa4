/* Dispatch and pass-order checking for the optimizer-state stores. */
#include "offload/state.h"

#include <stdlib.h>

#include "runtime/core/error.h"

int64_t zstate_chunk_elems(int64_t sub_group_size, int64_t n) {
    int64_t c = sub_group_size < ZSTATE_CHUNK_ALIGN ? ZSTATE_CHUNK_ALIGN : sub_group_size;
    c = (c + ZSTATE_CHUNK_ALIGN - 1) / ZSTATE_CHUNK_ALIGN * ZSTATE_CHUNK_ALIGN;
    if (c > n) c = n > 0 ? n : 1;
    return c;
}

zinc_status zstate_create(const zstate_ctx *ctx, int64_t n, zstate **out) {
    const zcfg_offload *o = &ctx->offload;
    const zdevice *d = ctx->dev;
    switch (o->device) {
    case ZOFFLOAD_NVME: return zstate_create_nvme(ctx, n, out);
    case ZOFFLOAD_CPU:
        /* Pinning matters only for copies to a discrete device (a GPU); on a CPU run it would only spend
         * RLIMIT_MEMLOCK. */
        if (o->pin_memory && d->host_addressable)
            ZLOG_INFO(ctx->log, "offload_optimizer.pin_memory has no effect on a CPU run (no device copies)");
        return zstate_create_memory(ctx, n,
                                    o->pin_memory && !d->host_addressable ? ZINC_MEMKIND_PINNED : ZINC_MEMKIND_HOST,
                                    zstate_chunk_elems(ctx->sub_group_size, n), out);
    default:
        /* On the compute device: one chunk on cpu (as always); on a GPU chunks of ZSTATE_DEVICE_CHUNK so a
         * host-view pass (checkpoints) stages a bounded amount. */
        return zstate_create_memory(ctx, n, d->mem_kind,
                                    d->host_addressable ? (n > 0 ? n : 1) : zstate_chunk_elems(ZSTATE_DEVICE_CHUNK, n),
                                    out);
    }
}

void zstate_destroy(zstate *s) {
    if (s) s->ops->destroy(s);
}

zinc_status zstate_pass_begin(zstate *s, zstate_mode mode) {
    if (s->mode) return ZERR(ZINC_ERR_INTERNAL, "optimizer state: a pass began inside another pass");
    s->host_view = (mode & ZSTATE_HOST_VIEW) != 0;
    mode = (zstate_mode)(mode & ~ZSTATE_HOST_VIEW);
    zinc_status st = s->ops->pass_begin(s, mode);
    if (st == ZINC_OK) {
        s->mode = mode;
        s->next = 0;
    } else {
        s->host_view = false;
    }
    return st;
}

zinc_status zstate_acquire(zstate *s, int64_t chunk, zstate_view *out) {
    if (!s->mode || chunk != s->next || chunk >= s->nchunks)
        return ZERR(ZINC_ERR_INTERNAL, "optimizer state: chunk %lld acquired out of order (expected %lld of %lld)",
                    (long long)chunk, (long long)s->next, (long long)s->nchunks);
    return s->ops->acquire(s, chunk, out);
}

zinc_status zstate_release(zstate *s, int64_t chunk) {
    zinc_status st = s->ops->release(s, chunk);
    if (st == ZINC_OK) s->next = chunk + 1;
    return st;
}

zinc_status zstate_pass_end(zstate *s) {
    zinc_status st = s->ops->pass_end(s);
    s->mode = 0;
    s->host_view = false;
    return st;
}

void zstate_pass_abort(zstate *s) {
    if (!s || !s->mode) return;
    s->ops->pass_abort(s);
    s->mode = 0;
    s->host_view = false;
}
