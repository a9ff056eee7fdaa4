/* Dispatch and pass-order checking for the optimizer-state stores. */
#include "offload/state.h"

#include <stdlib.h>
#include <string.h>

#include "base/core/error.h"

int64_t zstate_chunk_elems(int64_t sub_group_size, int64_t n) {
    int64_t c = sub_group_size < ZSTATE_CHUNK_ALIGN ? ZSTATE_CHUNK_ALIGN : sub_group_size;
    c = (c + ZSTATE_CHUNK_ALIGN - 1) / ZSTATE_CHUNK_ALIGN * ZSTATE_CHUNK_ALIGN;
    if (c > n) c = n > 0 ? n : 1;
    return c;
}

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

int64_t zstate_nvme_chunk_io_bytes(int64_t n, int64_t chunk, int64_t align, int64_t c) {
    int64_t lo = c * chunk, elems = n - lo < chunk ? n - lo : chunk;
    return round_up(elems * (int64_t)sizeof(float), align);
}

zstate_nvme_geometry zstate_nvme_geometry_make(int64_t n, int64_t chunk, int64_t align, int buffer_count) {
    zstate_nvme_geometry g = {.nchunks = n > 0 ? (n + chunk - 1) / chunk : 0,
                              .stride = round_up(chunk * (int64_t)sizeof(float), align)};
    if (g.nchunks > 0)
        g.file_bytes =
            (uint64_t)((g.nchunks - 1) * g.stride + zstate_nvme_chunk_io_bytes(n, chunk, align, g.nchunks - 1));
    g.buffers = buffer_count < g.nchunks ? buffer_count : (int)g.nchunks;
    if (g.buffers < 1) g.buffers = 1;
    return g;
}

int64_t zstate_v_kept(const zstate_vgaps *g, int64_t x) {
    int64_t k = x;
    for (int i = 0; i < g->n && g->at[2 * i] < x; i++)
        k -= (g->at[2 * i + 1] < x ? g->at[2 * i + 1] : x) - g->at[2 * i];
    return k;
}

bool zstate_v_run(const zstate_vgaps *g, int64_t x, int64_t hi, int64_t *a, int64_t *b) {
    for (int i = 0; i < g->n && x < hi; i++) {
        if (g->at[2 * i + 1] <= x) continue;
        if (g->at[2 * i] > x) {
            *a = x, *b = g->at[2 * i] < hi ? g->at[2 * i] : hi;
            return true;
        }
        x = g->at[2 * i + 1];
    }
    if (x >= hi) return false;
    *a = x, *b = hi;
    return true;
}

void zstate_v_compact(const zstate_vgaps *g, int64_t lo, int64_t n, const float *full, float *v) {
    int64_t a, b, base = zstate_v_kept(g, lo);
    for (int64_t x = lo; zstate_v_run(g, x, lo + n, &a, &b); x = b)
        memmove(v + (zstate_v_kept(g, a) - base), full + (a - lo), (size_t)(b - a) * sizeof(float));
}

uint64_t zstate_nvme_v_layout(int64_t n, int64_t chunk, int64_t align, const zstate_vgaps *g, int64_t *off) {
    int64_t nchunks = n > 0 ? (n + chunk - 1) / chunk : 0, at = 0;
    for (int64_t c = 0; c < nchunks; c++) {
        if (off) off[c] = at;
        int64_t lo = c * chunk, hi = n - lo < chunk ? n : lo + chunk;
        int64_t io = round_up((zstate_v_kept(g, hi) - zstate_v_kept(g, lo)) * (int64_t)sizeof(float), align);
        at += io > align ? io : align;
    }
    if (off) off[nchunks] = at;
    return (uint64_t)at;
}

zinc_status zstate_check_tensors(const zstate_ctx *ctx) {
    if (ctx->tensors != 2 && ctx->tensors != ZSTATE_MAX_TENSORS)
        return ZERR(ZINC_ERR_INTERNAL,
                    "optimizer state: the store's context asks for %d arrays; it must be 2 (master, exp_avg) or 3 "
                    "(master, exp_avg, exp_avg_sq): fill zstate_ctx.tensors with the optimizer's state_tensors "
                    "(runtime/optim)",
                    ctx->tensors);
    return ZINC_OK;
}

zstate_layout zstate_layout_make(const zcfg_offload *o, int64_t sub_group_size, int64_t n, zinc_mem_kind compute_kind,
                                 bool host_addressable) {
    zstate_layout l = {.kind = compute_kind, .chunk = zstate_chunk_elems(sub_group_size, n)};
    if (o->device == ZOFFLOAD_NVME) {
        l.kind = ZINC_MEMKIND_NVME;
    } else if (o->device == ZOFFLOAD_CPU) {
        /* Pinning matters only for copies to a discrete device (a GPU); on a CPU run it would only spend
         * RLIMIT_MEMLOCK. */
        l.kind = o->pin_memory && !host_addressable ? ZINC_MEMKIND_PINNED : ZINC_MEMKIND_HOST;
    } else {
        /* On the compute device: one chunk on cpu (as always); on a GPU chunks of ZSTATE_DEVICE_CHUNK so a
         * host-view pass (checkpoints) stages a bounded amount. */
        l.chunk = host_addressable ? (n > 0 ? n : 1) : zstate_chunk_elems(ZSTATE_DEVICE_CHUNK, n);
    }
    return l;
}

zinc_status zstate_create(const zstate_ctx *ctx, int64_t n, zstate **out) {
    const zcfg_offload *o = &ctx->offload;
    const zdevice *d = ctx->dev;
    if (o->device == ZOFFLOAD_NVME) return zstate_create_nvme(ctx, n, out);
    zstate_layout l = zstate_layout_make(o, ctx->sub_group_size, n, d->mem_kind, d->host_addressable);
    return zstate_create_memory(ctx, n, l.kind, l.chunk, out);
}

/* Drops a prestart's reads (completed into buffers nobody reads). */
static void prestart_drop(zstate *s) {
    if (!s->prestarted) return;
    s->prestarted = false;
    s->ops->pass_abort(s);
}

void zstate_destroy(zstate *s) {
    if (!s) return;
    prestart_drop(s);
    s->ops->destroy(s);
}

zinc_status zstate_pass_prestart(zstate *s) {
    if (!s || s->mode || s->prestarted || !s->ops->poll) return ZINC_OK;
    zinc_status st = s->ops->pass_begin(s, ZSTATE_READ);
    if (st == ZINC_OK)
        s->prestarted = true;
    else
        s->ops->pass_abort(s);
    return st;
}

zinc_status zstate_pass_begin(zstate *s, zstate_mode mode) {
    if (s->mode) return ZERR(ZINC_ERR_INTERNAL, "optimizer state: a pass began inside another pass");
    s->host_view = (mode & ZSTATE_HOST_VIEW) != 0;
    mode = (zstate_mode)(mode & ~ZSTATE_HOST_VIEW);
    bool take = s->prestarted && (mode & ZSTATE_READ); /* the reads it begins with are in flight already */
    if (!take) prestart_drop(s);                       /* a pass that only writes reads nothing */
    s->prestarted = false;
    zinc_status st = take ? ZINC_OK : s->ops->pass_begin(s, mode);
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
    if ((s->mode & ZSTATE_WRITE) && s->guard) {
        int64_t lo = chunk * s->chunk, n = s->n - lo < s->chunk ? s->n - lo : s->chunk;
        zinc_status st = s->guard(s->guard_arg, lo, n);
        if (st != ZINC_OK) return st;
    }
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

bool zstate_host_arrays(const zstate *s, float **master, float **m, float **v) {
    *master = *m = *v = NULL;
    if (!s->ops->host_arrays || s->device_resident) return false;
    s->ops->host_arrays(s, master, m, v);
    return *master != NULL;
}

void zstate_pass_abort(zstate *s) {
    if (!s || !s->mode) return;
    s->ops->pass_abort(s);
    s->mode = 0;
    s->host_view = false;
}
