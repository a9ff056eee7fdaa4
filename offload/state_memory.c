/* The in-memory optimizer-state store: two or three arrays (zstate_ctx.tensors: master, exp_avg and, but
 * for Lion, exp_avg_sq) in the compute device's memory (no offload) or in host memory
 * (offload_optimizer.device "cpu"; exp_avg_sq holds only the elements outside ctx.vgaps), visited in sub_group_size chunks. Arrays in GPU memory
 * (device_resident) are handed out as they are, except in a ZSTATE_HOST_VIEW pass, where each chunk is
 * staged through host memory: copied down on acquire (unless the pass only writes) and up on release
 * (unless it only reads). */
#include <stdlib.h>

#include "base/core/error.h"
#include "offload/state.h"

typedef struct zstate_memory {
    zstate base;
    zinc_mem_kind kind;
    bool on_device;       /* allocated by the context's device */
    size_t bytes, vbytes; /* of master and m; of v (its kept elements: ctx.vgaps) */
    int nt;               /* arrays kept: master, m and, when 3, v (NULL otherwise) */
    float *master, *m, *v;
    bool pinned[ZSTATE_MAX_TENSORS]; /* master, m, v page-locked through the device (pin_memory with a GPU) */
    float *stage;                    /* host-view staging: nt x chunk floats, during a host-view pass */
    size_t stage_bytes;
    int64_t cur_lo, cur_n;
} zstate_memory;

static const zinc_mem_category cats[ZSTATE_MAX_TENSORS] = {ZINC_MEM_MASTER, ZINC_MEM_EXP_AVG, ZINC_MEM_EXP_AVG_SQ};

static zdevice *dev_of(zstate *s) { return s->ctx.dev; }

static void free_stage(zstate_memory *z) {
    if (!z->stage) return;
    zdevice *d = dev_of(&z->base);
    d->ops->free_host(d, ZINC_MEM_STAGING, z->stage, z->stage_bytes);
    z->stage = NULL;
}

static zinc_status mem_pass_begin(zstate *s, zstate_mode mode) {
    zstate_memory *z = (zstate_memory *)s;
    (void)mode;
    if (!s->host_view || !s->device_resident) return ZINC_OK;
    zdevice *d = dev_of(s);
    z->stage_bytes = (size_t)z->nt * (size_t)s->chunk * sizeof(float);
    return d->ops->alloc_host(d, ZINC_MEM_STAGING, z->stage_bytes, "optimizer-state staging", (void **)&z->stage);
}

static zinc_status mem_acquire(zstate *s, int64_t chunk, zstate_view *out) {
    zinc_status st = ZINC_OK;
    zstate_memory *z = (zstate_memory *)s;
    int64_t lo = chunk * s->chunk, n = s->n - lo < s->chunk ? s->n - lo : s->chunk;
    const zstate_vgaps *g = &s->ctx.vgaps;
    int64_t vlo = zstate_v_kept(g, lo), vn = zstate_v_kept(g, lo + n) - vlo;
    *out = (zstate_view){.lo = lo,
                         .n = n,
                         .master = z->master + lo,
                         .m = z->m + lo,
                         .v = z->v ? z->v + vlo : NULL,
                         .vn = vn};
    if (!z->stage) return ZINC_OK;
    zdevice *d = dev_of(s);
    float *dev[ZSTATE_MAX_TENSORS] = {out->master, out->m, out->v};
    float *host[ZSTATE_MAX_TENSORS] = {z->stage, z->stage + s->chunk, z->nt > 2 ? z->stage + 2 * s->chunk : NULL};
    for (int k = 0; k < z->nt && (s->mode & ZSTATE_READ); k++)
        if (dev[k]) TRY(d->ops->copy(d, host[k], dev[k], (size_t)(k == 2 ? vn : n) * sizeof(float), ZDEV_D2H));
    out->master = host[0];
    out->m = host[1];
    out->v = z->v ? host[2] : NULL;
    z->cur_lo = lo;
    z->cur_n = n;
fail:
    return st;
}

static zinc_status mem_release(zstate *s, int64_t chunk) {
    zinc_status st = ZINC_OK;
    zstate_memory *z = (zstate_memory *)s;
    (void)chunk;
    if (!z->stage || !(s->mode & ZSTATE_WRITE)) return ZINC_OK;
    zdevice *d = dev_of(s);
    const zstate_vgaps *g = &s->ctx.vgaps;
    int64_t vlo = zstate_v_kept(g, z->cur_lo), vn = zstate_v_kept(g, z->cur_lo + z->cur_n) - vlo;
    float *dev[ZSTATE_MAX_TENSORS] = {z->master + z->cur_lo, z->m + z->cur_lo, z->v ? z->v + vlo : NULL};
    for (int k = 0; k < z->nt; k++)
        if (dev[k])
            TRY(d->ops->copy(d, dev[k], z->stage + (size_t)k * (size_t)s->chunk,
                             (size_t)(k == 2 ? vn : z->cur_n) * sizeof(float), ZDEV_H2D));
fail:
    return st;
}

static zinc_status mem_pass_end(zstate *s) {
    free_stage((zstate_memory *)s);
    return ZINC_OK;
}

static void mem_pass_abort(zstate *s) { free_stage((zstate_memory *)s); }

static void mem_destroy(zstate *s) {
    zstate_memory *z = (zstate_memory *)s;
    free_stage(z);
    float *arr[ZSTATE_MAX_TENSORS] = {z->master, z->m, z->v};
    for (int k = 0; k < z->nt; k++) {
        size_t bytes = k == 2 ? z->vbytes : z->bytes;
        if (!arr[k]) continue;
        if (z->on_device) {
            s->ctx.dev->ops->free(s->ctx.dev, cats[k], arr[k], bytes);
            continue;
        }
        if (z->pinned[k]) s->ctx.dev->ops->unpin(s->ctx.dev, arr[k]);
        zmem_host_free(s->ctx.mem, z->kind, cats[k], arr[k], bytes);
    }
    free(z);
}

static void mem_host_arrays(const zstate *s, float **master, float **m, float **v) {
    const zstate_memory *z = (const zstate_memory *)s;
    if (z->on_device && !s->ctx.dev->host_addressable) return;
    *master = z->master;
    *m = z->m;
    *v = z->v;
}

static const zstate_ops memory_ops = {"memory",       mem_pass_begin, mem_acquire, mem_release,    mem_pass_end,
                                      mem_pass_abort, mem_destroy,    NULL,        mem_host_arrays};

zinc_status zstate_create_memory(const zstate_ctx *ctx, int64_t n, zinc_mem_kind kind, int64_t chunk, zstate **out) {
    zinc_status st = ZINC_OK;
    zstate_memory *z = NULL;
    zdevice *d = ctx->dev;
    TRY(zstate_check_tensors(ctx));
    TRY_ALLOC(z, 1, "the optimizer state store");
    z->base = (zstate){.ops = &memory_ops, .ctx = *ctx, .n = n, .chunk = chunk > 0 ? chunk : 1};
    z->base.nchunks = n > 0 ? (n + z->base.chunk - 1) / z->base.chunk : 0;
    z->kind = kind;
    z->on_device = kind == d->mem_kind;
    z->base.device_resident = z->on_device && !d->host_addressable;
    z->bytes = (size_t)n * sizeof(float);
    z->vbytes = (size_t)zstate_v_kept(&ctx->vgaps, n) * sizeof(float);
    z->nt = ctx->tensors;
    float **arr[ZSTATE_MAX_TENSORS] = {&z->master, &z->m, &z->v};
    const char *what[ZSTATE_MAX_TENSORS] = {"fp32 master weights", z->nt > 2 ? "Adam exp_avg" : "Lion exp_avg",
                                            "Adam exp_avg_sq"};
    for (int k = 0; k < z->nt; k++) {
        size_t bytes = k == 2 ? z->vbytes : z->bytes;
        if (!bytes && k == 2) continue; /* every element in ctx.vgaps: no exp_avg_sq at all (views' v NULL) */
        if (z->on_device)
            TRY(d->ops->alloc(d, cats[k], bytes, what[k], (void **)arr[k]));
        else
            TRY(zmem_host_alloc(ctx->mem, kind, cats[k], bytes, what[k], (void **)arr[k]));
        if (kind == ZINC_MEMKIND_PINNED) { /* page-locked, so the device copies it asynchronously */
            TRY(d->ops->pin(d, *arr[k], bytes));
            z->pinned[k] = true;
        }
    }
    *out = &z->base;
    return ZINC_OK;
fail:
    if (z) mem_destroy(&z->base);
    return st;
}
