/* The engine's private state, shared by the runtime/engine files and the zero/ files. */
#ifndef ZINC_RUNTIME_ENGINE_INTERNAL_H
#define ZINC_RUNTIME_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "amp/loss_scaler.h"
#include "runtime/comm/comm.h"
#include "runtime/config/config.h"
#include "runtime/device/device.h"
#include "runtime/core/log.h"
#include "runtime/core/memtrack.h"
#include "runtime/mem/plan.h"
#include "offload/state.h"
#include "zero/partition.h"
#include "zinc.h"

struct zinc_param {
    zinc_engine *e;
    char *name;
    int module;
    int ndim;
    int64_t shape[8];
    int64_t numel;
    int64_t flat_offset;
    unsigned flags;
    int index;
    void *grad;            /* the model's gradient buffer while its module is in backward, else NULL */
};

typedef struct zmodule {
    char *name;
    int first_param, nparams;
    int64_t flat_begin, flat_end;   /* [begin, end) in the flat buffer, ZPART_PARAM_ALIGN-aligned */
    bool in_phase[2];               /* entered and not yet exited, per phase */
    /* stage 3 */
    bool persistent;                /* small enough to stay gathered (stage3_param_persistence_threshold) */
    void *gathered;                 /* compute-dtype copy of [flat_begin, flat_end) while live */
    zcomm_req *gather_req;          /* pending (prefetch) all-gather into `gathered` */
    size_t *g_counts, *g_displs;    /* per-rank pieces of the gather; live as long as the request */
    /* backward, stages 2-3: where the open entry's gradients are written (zero/grads.c) */
    int slot;                       /* zgrad_slot */
    int scratch;                    /* index into zinc_engine.scratch for ZSLOT_SCRATCH */
    int bwd_entries;                /* backward entries in the current micro-step (every stage) */
    bool hold;                      /* learned: gradients collect in `held` until the micro-step ends */
    bool held_dirty;                /* `held` has gradients of this micro-step not yet reduced */
    void *held;                     /* grad dtype, the module's elements; allocated when hold is set */
} zmodule;

/* Where a module's gradients go while it is open in backward (stages 2-3). */
typedef enum zgrad_slot {
    ZSLOT_NONE = 0,
    ZSLOT_FULL,     /* stages 0-1: the full gradient buffer */
    ZSLOT_BUCKET,   /* the current bucket, in place */
    ZSLOT_LANDING,  /* the landing buffer (a module larger than a bucket) */
    ZSLOT_HELD,     /* the module's own buffer, reduced once at the end of the micro-step */
    ZSLOT_SCRATCH   /* a pooled buffer, reduced at exit (entered inside another open module) */
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
    void *grads;            /* model-grad dtype, capacity elements; element x at grads[cap - (hi - x)] */
    void *send;             /* comm dtype copy when it differs from the grad dtype (else == grads) */
    void *recv;             /* this rank's reduced piece, comm dtype */
    int64_t lo, hi;         /* occupied flat range; lo == hi: empty */
    zcomm_req *req;         /* pending reduce-scatter */
    int64_t recv_lo, recv_hi; /* flat range of the pending piece owned by this rank */
    size_t *counts, *displs;  /* per-rank pieces; live as long as the request */
} zbucket;

typedef struct ztrace_entry {
    int module;
    int phase;
} ztrace_entry;

struct zinc_engine {
    zinc_config cfg;
    zlog log;
    zcomm *comm;                /* host buffers: metadata, statistics, metrics */
    zcomm *dcomm;               /* compute-device buffers (== comm on cpu; NCCL on cuda) */
    zmemtrack mem;
    zinc_device_kind device;
    zdevice *dev;               /* every operation on compute-device buffers goes through it */
    uint64_t seed;
    int rank, world;

    /* registration */
    zmodule *modules;
    int nmodules, cap_modules;
    zinc_param **params;
    int nparams, cap_params;
    bool built;
    bool init_ranged; /* zinc_build_ranged: initialisation in pieces, no whole-tensor scratch */
    bool init_in_place; /* zinc_build writes fp32 values straight into the host parameter buffer */

    /* layout and dtypes: from the sizing plan (runtime/mem/plan.h), made at zinc_build, which every
     * buffer zinc_build allocates takes its size from */
    zplan plan;
    zpartition part;
    int stage;
    zinc_dtype compute_dtype;   /* parameters as the model reads them */
    zinc_dtype grad_dtype;      /* gradients as the model writes them */
    zinc_dtype comm_dtype;      /* gradients on the wire */
    int64_t own_lo, own_hi;     /* flat range this rank's optimizer updates (full in stage 0) */

    /* model states */
    void *params_full;          /* compute dtype, padded elements (stages 0-2) */
    void *params_shard;         /* compute dtype, S elements (stage 3) */
    void *grads_full;           /* grad dtype, padded elements (stages 0-1) */
    float *grads_shard;         /* fp32, S elements (stages 1-3) */
    zstate *state;              /* fp32 master, exp_avg, exp_avg_sq over the own range */
    uint8_t *decay_mask;        /* one byte per ZPART_PARAM_ALIGN elements of the own range (host) */
    uint8_t *decay_mask_dev;    /* the same on the compute device (== decay_mask on cpu) */
    size_t bytes_params_full, bytes_params_shard, bytes_grads_full, bytes_grads_shard, bytes_state,
        bytes_mask;

    /* stage 2-3 buckets */
    zbucket buckets[2];
    int nbuckets, cur_bucket;
    int64_t bucket_cap;         /* elements */
    void *landing;              /* stages 2-3: gradients of modules larger than a bucket (grad dtype) */
    size_t bytes_landing;
    size_t bytes_bucket_grads, bytes_bucket_send, bytes_bucket_recv;
    zscratch *scratch;          /* buffers of modules entered inside another open module's backward */
    int nscratch;
    int open_backward;          /* modules entered for backward and not yet exited */
    float *f32_scratch;         /* zinc_grad_add_f32 on a device the host cannot address (engine_f32.c) */
    int64_t stat_rs_sends;      /* reduce-scatters issued since the last step (for tests and step info) */

    /* stage 3 gathering */
    int64_t live_numel;         /* gathered elements of non-persistent modules */
    ztrace_entry *trace;
    int trace_len, trace_cap, trace_pos;
    bool trace_started, trace_recording, trace_valid;
    bool trace_lost;            /* an entry the trace does not have: re-record at the next step */
    int64_t stat_prefetch, stat_gather_blocking, stat_trace_resync; /* since the last step */

    /* micro-step bookkeeping */
    int last_phase;             /* -1 before any enter */
    int64_t micro_steps;        /* backward passes begun since the last step */
    bool in_backward_pass;

    /* optimizer state */
    zloss_scaler scaler;
    int64_t steps, steps_taken, steps_skipped, consecutive_skips;
    bool warned_micro_mismatch;
    /* Non-empty after a step or a checkpoint load failed part-way: the optimizer state may be partly
     * updated, so training and saving refuse (naming this) until a checkpoint loads successfully. */
    char broken[512];

    /* the caller's items for the rank agreement (zinc_agree_add; engine_agree.c) */
    void *agree_items;
    int agree_n, agree_cap;
    zinc_nonfinite nonfinite;   /* zinc_options.nonfinite (engine_finite.c) */
};

/* zero/grads.c: gradient buffers and their reduction. */
zinc_status zgrads_alloc(zinc_engine *e);
void zgrads_free(zinc_engine *e);
zinc_status zgrads_module_backward_enter(zinc_engine *e, int module);
zinc_status zgrads_module_backward_exit(zinc_engine *e, int module);
/* Ends the current micro-step: finishes every reduction of it (stages 2-3: buckets and held modules). */
zinc_status zgrads_flush(zinc_engine *e);
/* At the accumulation boundary: stage 0 all-reduces, stage 1 reduce-scatters, stages 2-3 flush. Leaves
 * the reduced local gradient in zgrads_local (fp32 shard or full grads in stage 0). */
zinc_status zgrads_reduce_boundary(zinc_engine *e);
/* The local gradient the optimizer reads for the own range, and its dtype. */
const void *zgrads_local(const zinc_engine *e, zinc_dtype *dtype);
/* The slice of the local gradient over this rank's shard (for the norm: every element counted once). */
const void *zgrads_norm_slice(const zinc_engine *e, zinc_dtype *dtype, size_t *n, int64_t *flat_lo);
zinc_status zgrads_zero(zinc_engine *e);
/* Drops every gradient: waits out pending reductions, empties the buckets, zeroes the buffers (after a
 * failed step, before a checkpoint load). */
zinc_status zgrads_reset(zinc_engine *e);
/* The factor the step applies after communication to turn summed gradients into their mean. */
double zgrads_post_scale(const zinc_engine *e);

/* zero/gather.c: stage-3 parameter gathering. */
zinc_status zgather_module_enter(zinc_engine *e, int module, int phase);
zinc_status zgather_module_exit(zinc_engine *e, int module, int phase);
/* After the optimizer step: drop stale gathered copies and refresh persistent modules. */
zinc_status zgather_after_step(zinc_engine *e);
void zgather_free(zinc_engine *e);

/* Marks the engine broken with the current error's first line (see zinc_engine.broken). */
void zengine_mark_broken(zinc_engine *e, const char *what);
/* ZINC_ERR_STATE naming why, when the engine is broken; ZINC_OK otherwise. */
zinc_status zengine_check_usable(const zinc_engine *e, const char *fn);

/* runtime/engine/engine_step.c */
zinc_status zengine_step(zinc_engine *e, zinc_step_info *info);

/* runtime/engine/engine_collect.c: the parameters from the optimizer state. */
/* Stages 1-2: every rank's updated slice to every rank (no-op otherwise). */
zinc_status zengine_allgather_params(zinc_engine *e);
/* Rewrites this rank's compute-dtype parameters from the fp32 master weights. */
zinc_status zengine_params_from_master(zinc_engine *e);

/* runtime/engine/engine_f32.c */
void zengine_f32_free(zinc_engine *e);

/* Helpers. */
zinc_status zengine_alloc(zinc_engine *e, zinc_mem_category cat, size_t bytes, const char *what, void **out);
void zengine_free(zinc_engine *e, zinc_mem_category cat, void *p, size_t bytes);
zinc_mem_kind zengine_compute_kind(const zinc_engine *e);
/* Whether the optimizer-state views can be handed to the device operations (always on cpu; on cuda
 * when the state is not offloaded): else the step stages gradients and parameters through the host. */
bool zengine_state_on_device(const zinc_engine *e);

/* The LAMB step over the state store (runtime/engine/engine_lamb.c): g and out as adam_pass's (own range). */
struct zlamb_hparams;
zinc_status zengine_lamb_pass(zinc_engine *e, const struct zlamb_hparams *h, const void *g, zinc_dtype gdt, void *out);
/* The parameter holding flat element x (binary search), or NULL for padding. */
zinc_param *zengine_param_at(const zinc_engine *e, int64_t x);

/* engine_agree.c: collective, at zinc_build: every rank's config, model, device, seed and the caller's
 * items compared by one all-gather; a difference is the same error on every rank. */
zinc_status zengine_agree(zinc_engine *e);
void zengine_agree_free(zinc_engine *e);

/* engine_finite.c: fp32/bf16 runs that go bad stop. Whether a non-finite gradient is an error here; the
 * error naming the step and the first tensor; collective: every rank's updated parameters finite. */
bool zengine_nonfinite_is_error(const zinc_engine *e);
zinc_status zengine_nonfinite_grad_error(const zinc_engine *e, int64_t first_bad, int bad_rank);
zinc_status zengine_check_params(zinc_engine *e, const void *own_params);

#endif
