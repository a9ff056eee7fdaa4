/* Gradient buffers and their reduction across ranks (zero/grads.c). The engine owns a zgrads, fills in
 * its context at zinc_build and calls these functions; zero/ never sees the engine. */
#ifndef ZINC_ZERO_GRADS_H
#define ZINC_ZERO_GRADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/comm/comm.h"
#include "base/core/log.h"
#include "base/device/device.h"
#include "zero/module.h"
#include "zero/partition.h"
#include "zero/sizing.h"
#include "zinc.h"

/* Where a module's gradients go while it is open in backward (stages 2-3). */
typedef enum zgrad_slot {
    ZSLOT_NONE = 0,
    ZSLOT_FULL,    /* stages 0-1: the full gradient buffer */
    ZSLOT_BUCKET,  /* the current bucket, in place */
    ZSLOT_LANDING, /* the landing buffer (a module larger than a bucket) */
    ZSLOT_HELD,    /* the module's own buffer, reduced once at the end of the micro-step */
    ZSLOT_SCRATCH  /* a pooled buffer, reduced at exit (entered inside another open module) */
} zgrad_slot;

typedef struct zscratch {
    void *buf;
    size_t bytes;
    bool busy;
} zscratch;

/* One gradient bucket (stages 2-3): a contiguous flat range [lo, hi) of the gradients of modules that
 * finished backward, filled from the top down (backward visits modules in reverse order), reduce-
 * scattered to the owners when full. With overlap_comm there are two, alternating. */
typedef struct zbucket {
    void *grads;              /* model-grad dtype, capacity elements; element x at grads[cap - (hi - x)] */
    void *send;               /* comm dtype copy when it differs from the grad dtype (else == grads) */
    void *recv;               /* this rank's reduced piece, comm dtype */
    int64_t lo, hi;           /* occupied flat range; lo == hi: empty */
    zcomm_req *req;           /* pending reduce-scatter */
    int64_t recv_lo, recv_hi; /* flat range of the pending piece owned by this rank */
    size_t *counts, *displs;  /* per-rank pieces; live as long as the request */

    /* --trace: the pending reduce-scatter's issue time and payload; this slot's track */
    int64_t trace_t0, trace_bytes;
    int trace_track;
} zbucket;

/* What the gradient code needs from its owner; the pointed-to objects outlive the zgrads. */
typedef struct zgrads_ctx {
    zdevice *dev; /* every gradient buffer lives on it */
    zcomm *dcomm; /* collectives on device buffers */
    const zlog *log;
    const zpartition *part;
    int stage, rank, world;
    zinc_dtype grad_dtype;   /* as the model writes gradients */
    zinc_dtype comm_dtype;   /* on the wire */
    bool prescale_gradients; /* prescale_gradients */
    double predivide_factor; /* gradient_predivide_factor */
    const zmodule *modules;  /* the owner's, registration order, fixed once built; read only here */
    int nmodules;
    /* The buffers' sizes, from the engine's sizing plan (runtime/mem/plan.h: zplan.grads, made by
     * zgrads_plan_make). zero_optimization.reduce_bucket_size reaches the gradients only through them (the
     * elements one reduce-scatter sends: bucket_cap), and so does overlap_comm (DeepSpeed: reduce while
     * backward goes on): two buckets alternate, each reduce-scatter is non-blocking and completes when its
     * bucket is needed again; with one bucket every reduce-scatter completes before backward continues.
     * zgrads_alloc allocates exactly these. */
    const zgrads_plan *sizes;
    /* zinc.deterministic_reduction (zero/grads_determ.c): each micro-step's gradient is summed over the
     * ranks by a fixed tree and the micro-steps' sums pairwise, over gas (a power of two) micro-steps. */
    bool deterministic;
    int64_t gas;
    /* ZeRO++ qgZ (zero/grads_qgz.c): stage 3's reduce-scatters become two all-to-alls of INT4 gradient
     * pieces, inside this node (qgz_intra: its ranks by local index) then across nodes (qgz_inter: the ranks of
     * this local index, one per node). NULL: no qgZ. */
    zcomm *qgz_intra, *qgz_inter;
    /* The fp32 gradient shard kept by the owner instead of in memory (offload_param nvme: a file,
     * runtime/engine/engine_gstore.c; the sizing plan then has no shard, zgrads.shard stays NULL and
     * zgrads_local returns NULL). Each reduced piece, shard elements [lo, lo + n) in dtype t, is added
     * into it by shard_add exactly as the in-memory shard's axpy would; shard_zero zeroes it. Neither is
     * used with `deterministic` or qgZ (their sums are in memory). NULL: the shard is here. */
    zinc_status (*shard_add)(void *owner, int64_t lo, int64_t n, const void *src, zinc_dtype t);
    void (*shard_zero)(void *owner);
    void *shard_owner;
    /* qgZ's groups per tensor (zero/sizing.h zsize_qgz_layout, the sizing plan's): copied at zgrads_alloc;
     * NULL: every element travels raw */
    const zsize_qgz_layout *qgz_layout;
} zgrads_ctx;

/* What gradient placement keeps per module (zgrads.mods, registration order): owned by zero/grads.c alone.
 * Stages 2-3 use it; stages 0-1 only count entries. */
typedef struct zgrads_module {
    int slot;        /* zgrad_slot of the open backward entry */
    int scratch;     /* index into zgrads.scratch for ZSLOT_SCRATCH */
    int bwd_entries; /* backward entries in the current micro-step */
    bool hold;       /* learned: gradients collect in `held` until the micro-step ends */
    bool held_dirty; /* `held` has gradients of this micro-step not yet reduced */
    void *held;      /* grad dtype, the module's elements; allocated when hold is set */
} zgrads_module;

/* The deterministic reduction's state (zero/grads_determ.c). The step's gradient is the pairwise tree over the
 * global micro-batch index m = j x world + r: its low log2(world) levels are summed across the ranks within
 * micro-step j (this rank keeps its shard's piece, in `cur`), its upper levels across micro-steps by a binary
 * counter: part[k] holds the sum of 2^k consecutive micro-steps while bit k of `filled` is set. */
typedef struct zgrads_determ {
    float *cur;              /* fp32, shard elements: this micro-step's sum over the ranks */
    float **part;            /* levels buffers, fp32, shard elements each */
    float *sum;              /* stage 0: the step's sum over the own shard (then all-gathered into `full`) */
    float *recv;             /* the partner's piece at one level of the tree over the ranks */
    size_t *counts, *displs; /* per-rank pieces of the range being reduced */
    int levels;              /* log2(gas) */
    unsigned filled;         /* bit k: part[k] holds a partial sum */
    bool dirty;              /* a module entered backward since the last micro-step's sum */
    bool done;               /* the step's sum is complete in the result buffer */
} zgrads_determ;

typedef struct zgrads {
    zgrads_ctx c;
    zgrads_module *mods; /* c.nmodules, made by zgrads_alloc */
    void *full;          /* grad dtype, padded elements (stages 0-1) */
    float *shard;        /* fp32, S elements (stages 1-3) */
    size_t bytes_full, bytes_shard;
    /* stage 2-3 buckets (stage 0-1: communication buffers) */
    zbucket buckets[2];
    int nbuckets, cur_bucket;
    int64_t bucket_cap; /* elements */
    void *landing;      /* stages 2-3: gradients of modules larger than a bucket (grad dtype) */
    size_t bytes_landing;
    size_t bytes_bucket_grads, bytes_bucket_send, bytes_bucket_recv;
    zscratch *scratch; /* buffers of modules entered inside another open module's backward */
    int nscratch;
    int64_t stat_rs_sends; /* reduce-scatters issued since the owner last reset it */

    /* --trace: the track of stage 0's all-reduces */
    int trace_track_allreduce;
    /* --trace: set by the owner at each module's backward exit, the start of that module's backward span (on
     * the calling thread's track; 0: not traced): the latest gradients put into a bucket, so every
     * reduce-scatter issued until the next exit (at that exit, the next module's backward entry, the flush)
     * gets a flow from it */
    int64_t trace_producer_t0;
    zgrads_determ det; /* zinc.deterministic_reduction only */
    /* qgZ: the scratch of zsize_qgz_scratch, per-rank counts, and the bytes this rank sent (both stages) */
    void *qgz;
    size_t bytes_qgz;
    size_t *qgz_ints;
    zsize_qgz_layout qgz_layout; /* the context's, its arrays in qgz_lay (2 n: begins, then groups) */
    int64_t *qgz_lay;
    int64_t stat_qgz_bytes, stat_qgz_reductions;
} zgrads;

/* Takes the context (nothing is allocated). */
void zgrads_init(zgrads *g, const zgrads_ctx *ctx);
/* Allocates the buffers the context calls for (sizes from zero/sizing.c, which the estimator shares). */
zinc_status zgrads_alloc(zgrads *g);
/* Frees everything (also after a failed or no zgrads_alloc: a zeroed zgrads frees nothing). */
void zgrads_free(zgrads *g);
/* *grads: where the gradient of the module's first element goes (its parameters follow at their flat
 * offsets), valid until the module's backward exit. */
zinc_status zgrads_module_backward_enter(zgrads *g, int module, void **grads);
/* none_open: no other module is still open in backward (backward is over when it is module 0). */
zinc_status zgrads_module_backward_exit(zgrads *g, int module, bool none_open);
/* Ends the current micro-step: finishes every reduction of it (stages 2-3: buckets and held modules). */
zinc_status zgrads_flush(zgrads *g);
/* At the accumulation boundary: stage 0 all-reduces, stage 1 reduce-scatters, stages 2-3 flush. Leaves
 * the reduced local gradient in zgrads_local (fp32 shard or full grads in stage 0). */
zinc_status zgrads_reduce_boundary(zgrads *g);
/* The local gradient the optimizer reads for the own range, and its dtype. */
const void *zgrads_local(const zgrads *g, zinc_dtype *dtype);
/* The slice of the local gradient over this rank's shard (for the norm: every element counted once). */
const void *zgrads_norm_slice(const zgrads *g, zinc_dtype *dtype, size_t *n, int64_t *flat_lo);
zinc_status zgrads_zero(zgrads *g);
/* Drops every gradient: waits out pending reductions, empties the buckets, zeroes the buffers (after a
 * failed step, before a checkpoint load). */
zinc_status zgrads_reset(zgrads *g);
/* The factor the step applies after communication to turn summed gradients into their mean. */
double zgrads_post_scale(const zgrads *g);

/* zero/grads_determ.c: zinc.deterministic_reduction, called by grads.c only. alloc/free its buffers; sums the
 * flat range [a, b) of every rank's fp32 `work` (overwritten) over the ranks by the fixed tree and adds this
 * rank's piece into det.cur; ends a micro-step (stages 0-1: reduces the full buffer first, then zeroes it);
 * completes the step's sum at the boundary (stage 0: all-gathers it into the full buffer); forgets it. */
zinc_status zgrads_det_alloc(zgrads *g);
void zgrads_det_free(zgrads *g);
zinc_status zgrads_det_reduce_range(zgrads *g, float *work, int64_t a, int64_t b);
/* zero/grads_qgz.c: qgZ's buffers (at zgrads_alloc), and the reduction of flat range [a, b) whose values (dtype
 * t, pre-scaled) start at src, added into this rank's fp32 shard; blocking. */
zinc_status zgrads_qgz_alloc(zgrads *g);
void zgrads_qgz_free(zgrads *g);
zinc_status zgrads_qgz_reduce_range(zgrads *g, const void *src, zinc_dtype t, int64_t a, int64_t b);
zinc_status zgrads_det_end_micro_step(zgrads *g);
zinc_status zgrads_det_finish(zgrads *g);
zinc_status zgrads_det_reset(zgrads *g);

#endif
