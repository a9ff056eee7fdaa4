/* The store of this rank's fp32 optimizer state: master weights, exp_avg and (for the optimizers that keep
 * a second moment) exp_avg_sq over the rank's own flat range [own_lo, own_hi), in memory (device, host or
 * pinned host) or on NVMe. Every user (the step, initialisation, zinc_gather_master, checkpoints) visits it
 * the same way: a pass over chunks in increasing order, so an NVMe store can read chunk i+1 and write
 * chunk i-1 while chunk i is in use.
 *
 *   zstate_pass_begin(s, ZSTATE_READ_WRITE);
 *   for (int64_t i = 0; i < s->nchunks; i++) {
 *       zstate_view v;  TRY(zstate_acquire(s, i, &v));   ... use v.master/v.m/v.v[0..v.n) ...
 *       TRY(zstate_release(s, i));
 *   }
 *   TRY(zstate_pass_end(s));
 *
 * A failed pass leaves the stored state as it was before the failing chunk (chunks are written whole,
 * after their update); zstate_pass_abort drops what is in flight.
 *
 * A store sees its owner only through a zstate_ctx, never the engine (what offload/ may include is in
 * scripts/check_layers.py, LAYERS); tests/test_store_nvme.c builds stores with no engine at all. */
#ifndef ZINC_OFFLOAD_STATE_H
#define ZINC_OFFLOAD_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/core/log.h"
#include "base/core/memtrack.h"
#include "base/device/device.h"
#include "zinc.h"

/* What a store needs from its owner (the engine fills it in at zinc_build; tests build one by hand). The
 * store keeps a copy; the pointed-to objects must outlive it. */
/* Elements of the own range that keep no exp_avg_sq (a whole-matrix optimizer's matrices: Muon keeps
 * only a momentum there): n sorted, disjoint ranges [at[2k], at[2k+1]) relative to own_lo. The store's
 * exp_avg_sq then holds only the other elements, compacted: a view's v[0..) are the chunk's kept elements
 * in order (zstate_v_kept counts them). The sizing plan (runtime/mem/plan.c) states which elements. */
typedef struct zstate_vgaps {
    int n;
    const int64_t *at;
} zstate_vgaps;
/* Elements of [0, x) that keep an exp_avg_sq. */
int64_t zstate_v_kept(const zstate_vgaps *g, int64_t x);
/* The first run [*a, *b) of kept elements inside [x, hi); false when there is none. */
bool zstate_v_run(const zstate_vgaps *g, int64_t x, int64_t hi, int64_t *a, int64_t *b);
/* Copies the kept elements of full[0..n) (own-relative elements lo..lo+n) to v[0..), compacted. */
void zstate_v_compact(const zstate_vgaps *g, int64_t lo, int64_t n, const float *full, float *v);

typedef struct zstate_ctx {
    zdevice *dev;   /* the compute device: arrays of a store in its memory, copies, pinning */
    zmemtrack *mem; /* host arrays, swap buffers and NVMe files are counted here */
    const zlog *log;
    zcomm *comm;            /* host buffers; the NVMe store's set-up is collective over it */
    zcfg_offload offload;   /* zero_optimization.offload_optimizer */
    zcfg_aio aio;           /* the NVMe store's IO settings */
    int64_t sub_group_size; /* zero_optimization.sub_group_size: elements per chunk (rounded) */
    int tensors;            /* arrays kept: the optimizer's state_tensors (runtime/optim), 2 or 3 */
    zstate_vgaps vgaps;     /* elements without exp_avg_sq (n == 0: none); the array must outlive the store */
} zstate_ctx;

/* The arrays a store keeps, in this order: fp32 master weights, exp_avg, exp_avg_sq. How many is the
 * optimizer's (its descriptor's state_tensors, runtime/optim/optim.h): Adam, AdamW and LAMB need all three;
 * Lion and Adagrad keep one moment, so their store keeps two and never allocates exp_avg_sq (its views have
 * v == NULL). */
#define ZSTATE_MAX_TENSORS 3
/* ZINC_ERR_INTERNAL unless ctx->tensors is 2 or 3 (a context filled in by hand that forgot it). */
zinc_status zstate_check_tensors(const zstate_ctx *ctx);

/* Where a store keeps the state and how it chunks it: the one rule, used by zstate_create and by the sizing
 * plan (runtime/mem/plan.c), so the estimate and the store cannot disagree. */
typedef struct zstate_layout {
    zinc_mem_kind kind; /* the compute device's kind, host, pinned host or NVMe */
    int64_t chunk;      /* elements per chunk (a pass visits ceil(n / chunk) chunks) */
} zstate_layout;
zstate_layout zstate_layout_make(const zcfg_offload *o, int64_t sub_group_size, int64_t n, zinc_mem_kind compute_kind,
                                 bool host_addressable);

typedef enum {
    ZSTATE_READ = 1,       /* chunks are read, not changed */
    ZSTATE_WRITE = 2,      /* chunks are overwritten entirely (initialisation, checkpoint load) */
    ZSTATE_READ_WRITE = 3, /* chunks are read and updated (the optimizer step) */
    ZSTATE_HOST_VIEW = 4   /* or'ed in: the views must be host memory (checkpoints, zinc_gather_master); a
                               device-resident store stages each chunk through host memory */
} zstate_mode;

typedef struct zstate_view {
    int64_t lo;            /* first element of the chunk, relative to own_lo; a multiple of 1024 */
    int64_t n;             /* elements in the chunk */
    float *master, *m, *v; /* n floats each, valid until zstate_release; v is NULL in a 2-tensor store (and
                              where no element keeps one); with ctx.vgaps, v holds vn floats, compacted */
    int64_t vn;            /* floats of v: n, less the chunk's elements in ctx.vgaps */
} zstate_view;

typedef struct zstate zstate;

typedef struct zstate_ops {
    const char *name;
    zinc_status (*pass_begin)(zstate *s, zstate_mode mode);
    zinc_status (*acquire)(zstate *s, int64_t chunk, zstate_view *out);
    zinc_status (*release)(zstate *s, int64_t chunk);
    zinc_status (*pass_end)(zstate *s);
    void (*pass_abort)(zstate *s);
    void (*destroy)(zstate *s);
    /* Optional (NULL: nothing to do): moves queued IO along without blocking. Users call it now and then
     * while they work on an acquired chunk, so reads ahead and writes behind keep the disk busy. */
    zinc_status (*poll)(zstate *s);
    /* Optional (NULL: none): the arrays themselves, for a store whose arrays the host addresses in place. */
    void (*host_arrays)(const zstate *s, float **master, float **m, float **v);
} zstate_ops;

/* Called by zstate_acquire before it hands out a chunk in a pass that writes (the optimizer step,
 * zinc_set_master, a checkpoint load): checkpoint.writer.decoupled's snapshot copies the chunk's elements
 * [lo, lo + n) first, or waits for their copy (runtime/checkpoint/checkpoint_async.c). */
typedef zinc_status (*zstate_write_guard)(void *arg, int64_t lo, int64_t n);

struct zstate {
    const zstate_ops *ops;
    zstate_ctx ctx;
    int64_t n;     /* elements stored (the own range) */
    int64_t chunk; /* elements per chunk (the last may be shorter) */
    int64_t nchunks;
    bool device_resident;     /* views are compute-device memory that the host cannot address (cuda, no
                               offload): only the device operations may touch them, or a ZSTATE_HOST_VIEW pass */
    zstate_mode mode;         /* of the current pass without ZSTATE_HOST_VIEW; 0 outside a pass */
    bool host_view;           /* the current pass asked for ZSTATE_HOST_VIEW */
    int64_t next;             /* the chunk the pass expects next (order is checked) */
    zstate_write_guard guard; /* NULL: none */
    void *guard_arg;
    bool prestarted; /* zstate_pass_prestart's reads are in flight for the next pass */
};

/* Creates the store the config asks for: zero_optimization.offload_optimizer.device none (the compute
 * device's memory), cpu (host memory, pinned with pin_memory) or nvme (files under nvme_path). */
zinc_status zstate_create(const zstate_ctx *ctx, int64_t n, zstate **out);
/* kind == the compute device's kind: the arrays are allocated by ctx->dev (device_resident when the host
 * cannot address them); any other kind: host memory counted under that kind in ctx->mem. */
zinc_status zstate_create_memory(const zstate_ctx *ctx, int64_t n, zinc_mem_kind kind, int64_t chunk, zstate **out);
/* Collective over ctx->comm: every rank calls it, and every rank fails when one does. */
zinc_status zstate_create_nvme(const zstate_ctx *ctx, int64_t n, zstate **out);
void zstate_destroy(zstate *s);

zinc_status zstate_pass_begin(zstate *s, zstate_mode mode);
/* Outside a pass, for a store with IO (ops->poll: NVMe): issues the reads a pass begins with (its first
 * chunks, as many as it has buffers) now, so they move while the caller computes (zstate_poll keeps them
 * moving); the next zstate_pass_begin that reads takes them over, one that only writes drops them, as
 * does zstate_destroy. No-op inside a pass, when already prestarted or for a store without IO. Nothing in
 * the store changes: the reads are those the pass would issue, checked at its acquire as always. An
 * error drops the prestart (the pass then begins afresh, and reports the error itself if it persists). */
zinc_status zstate_pass_prestart(zstate *s);
zinc_status zstate_acquire(zstate *s, int64_t chunk, zstate_view *out);
zinc_status zstate_release(zstate *s, int64_t chunk);
zinc_status zstate_pass_end(zstate *s);
void zstate_pass_abort(zstate *s);
/* The arrays of a store kept in host memory that the host addresses in place (offload_optimizer cpu, or no
 * offload on the cpu device): another thread may read them while no pass writes the elements it reads (the
 * write guard above). False (and NULLs) for a store in GPU memory or on NVMe. v is NULL in a 2-tensor store. */
bool zstate_host_arrays(const zstate *s, float **master, float **m, float **v);
static inline zinc_status zstate_poll(zstate *s) { return s->ops->poll ? s->ops->poll(s) : ZINC_OK; }
/* Elements of a chunk a user works on between zstate_poll calls (a multiple of every kernel's group). */
#define ZSTATE_POLL_ELEMS ((int64_t)1 << 22)

/* Elements per chunk for a requested sub_group_size: rounded up to a multiple of ZSTATE_CHUNK_ALIGN
 * (4 KiB of floats, so chunks start on O_DIRECT and SIMD boundaries), at most n. */
#define ZSTATE_CHUNK_ALIGN 1024
int64_t zstate_chunk_elems(int64_t sub_group_size, int64_t n);
/* Elements per chunk of a state store in GPU memory (64 MiB per array). */
#define ZSTATE_DEVICE_CHUNK ((int64_t)1 << 24)

/* The NVMe store's files, stated once for the store (state_nvme.c lays its files out by it) and the sizing
 * plan (runtime/mem/plan.c sums it): one file per state array holding n elements in chunks of `chunk`,
 * chunk c at byte c * stride, each chunk's IO rounded up to `align` bytes (O_DIRECT's unit). */
typedef struct zstate_nvme_geometry {
    int64_t nchunks;
    int64_t stride;      /* bytes from one chunk to the next (chunk elements rounded up to align) */
    uint64_t file_bytes; /* per file: the last chunk takes only its rounded-up IO */
    int buffers;         /* swap buffers used: buffer_count, at most one per chunk, at least 1 */
} zstate_nvme_geometry;
zstate_nvme_geometry zstate_nvme_geometry_make(int64_t n, int64_t chunk, int64_t align, int buffer_count);
/* Bytes read and written for chunk c: its elements as fp32, rounded up to align. */
int64_t zstate_nvme_chunk_io_bytes(int64_t n, int64_t chunk, int64_t align, int64_t c);
/* The exp_avg_sq file with gaps (ctx.vgaps): chunk c's kept elements at off[c] (nchunks + 1 entries, or
 * NULL), each chunk's IO rounded up to align and at least align bytes; returns the file's bytes (off[nchunks]).
 * Without gaps it is the other files' layout but for the stride (the same bytes). */
uint64_t zstate_nvme_v_layout(int64_t n, int64_t chunk, int64_t align, const zstate_vgaps *g, int64_t *off);

#endif
