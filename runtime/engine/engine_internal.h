/* The engine's private state, shared by the runtime/engine files (and read by runtime/checkpoint,
 * runtime/mem). zero/ and offload/ never include it: they work through the contexts of zero/grads.h,
 * zero/gather.h and offload/state.h, which engine_ctx.c fills in. */
#ifndef ZINC_RUNTIME_ENGINE_INTERNAL_H
#define ZINC_RUNTIME_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "amp/loss_scaler.h"
#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/device/device.h"
#include "base/core/log.h"
#include "base/core/memtrack.h"
#include "runtime/mem/plan.h"
#include "runtime/monitor/monitor.h"
#include "runtime/optim/optim.h"
#include "offload/state.h"
#include "zero/gather.h"
#include "zero/grads.h"
#include "zero/module.h"
#include "zero/partition.h"
#include "zero/zeropp.h"
#include "zinc.h"

struct zinc_param {
    zinc_engine *e;
    char *name;
    int module;
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int64_t numel;
    int64_t flat_offset;
    unsigned flags;
    int index;
    void *grad;           /* the model's gradient buffer while its module is in backward, else NULL */
    float *bound_w;       /* zinc_param_bind_f32: the model's own weights array (engine_bind.c), or NULL */
    const float *bound_g; /* ... its gradient array, or NULL */
    float bound_factor;
};

struct zinc_engine {
    zinc_config cfg;
    zlog log;
    zcomm *comm;  /* host buffers: metadata, statistics, metrics */
    zcomm *dcomm; /* compute-device buffers (== comm on cpu; NCCL on cuda) */
    zcomm *hcomm; /* ZeRO++ hpZ: the secondary group, split from dcomm (zero/zeropp.h); NULL without hpZ */
    zcomm *qgz_intra, *qgz_inter; /* ZeRO++ qgZ: this node's ranks, this local index's ranks; NULL without qgZ */
    zcomm_log *comms;             /* comms_logger: attached to comm and dcomm (engine_comms.c); NULL when not enabled */
    zmemtrack mem;
    zinc_device_kind device;
    zdevice *dev; /* every operation on compute-device buffers goes through it */
    uint64_t seed;
    int rank, world;

    /* registration */
    zmodule *modules;
    int nmodules, cap_modules;
    zinc_param **params;
    int nparams, cap_params;
    bool built;
    bool init_ranged;   /* zinc_build_ranged: initialisation in pieces, no whole-tensor scratch */
    bool init_none;     /* zinc_build(e, NULL, ...): no initialiser, no scratch */
    bool init_in_place; /* zinc_build writes fp32 values straight into the host parameter buffer */
    int ndeclared;      /* the model's own memory (zinc_memory_declare), in the plan */
    zplan_declared declared[ZPLAN_MAX_DECLARED];

    /* layout and dtypes: from the sizing plan (runtime/mem/plan.h), made at zinc_build, which every
     * buffer zinc_build allocates takes its size from */
    zplan plan;
    zpartition part;
    int stage;
    zinc_dtype compute_dtype; /* parameters as the model reads them */
    zinc_dtype grad_dtype;    /* gradients as the model writes them */
    zinc_dtype comm_dtype;    /* gradients on the wire */
    int64_t own_lo, own_hi;   /* flat range this rank's optimizer updates (full in stage 0) */

    /* model states */
    void *params_full;           /* compute dtype, padded elements (stages 0-2) */
    void *params_shard;          /* compute dtype, S elements (stage 3; NULL with offload_param nvme) */
    struct zstate_param *pstore; /* offload_param nvme: the shard in a file (offload/param_nvme.h) */
    struct zstate_param *gstore; /* and the fp32 gradient shard (zplan_grads_on_nvme; engine_gstore.c) */
    double *gsums;               /* its statistics blocks' sums kept as the pieces land (engine_gstore.c) */
    uint8_t *gsum_valid;         /* per block: its sum is the block's current one */
    int64_t gsum_blocks;
    /* A swap-in that failed inside a module's gather: kept (the rank goes on through the collectives with
     * zeros) until the step, where every rank agrees on it, so no rank waits for one that stopped. */
    zinc_status pstore_st;
    char pstore_err[1024];
    /* The parameter check of a step with offload_param nvme, counted by the optimizer pass over each piece
     * before it is written (engine_step_pass.c), so the check reads no file: non-finite values and the
     * first one's index from own_lo (-1: none), valid once a pass over every piece finished. */
    int64_t pcheck_nonfinite, pcheck_first;
    bool pcheck_valid;
    zstate_ctx state_ctx;    /* what the store sees of the engine (engine_ctx.c) */
    zstate *state;           /* fp32 master, exp_avg, exp_avg_sq over the own range */
    uint8_t *decay_mask;     /* one byte per ZPART_PARAM_ALIGN elements of the own range (host) */
    uint8_t *decay_mask_dev; /* the same on the compute device (== decay_mask on cpu) */
    size_t bytes_state;
    /* optimizer state offloaded from a discrete device: the step's pinned staging, two chunks of gradients
     * (stage_g) and two of compute-dtype parameters (stage_p), made once by zinc_build (NULL otherwise) */
    char *stage_g[2], *stage_p[2];
    /* Muon (engine_muon.c): the matrices marked ZINC_PARAM_MUON (parameter indices), each one's owner rank
     * (by parameter index; -1: not a matrix), and the own range's assembled update (ZPLAN_MUON_UPDATE). */
    int nmuon;
    int *muon_idx, *muon_owner;
    float *muon_upd;
    const struct zmuon_blas *muon_blas; /* the CBLAS of Newton-Schulz, NULL: the loops (zmuon_blas_load) */
    void *tensor_sums;                  /* a per-tensor optimizer's sums on a discrete device: ZPLAN_TENSOR_SUMS */
    const zopt_desc *optim;             /* the optimizer (runtime/optim), from the config at zinc_create */

    /* gradients and their reduction (zero/grads.c) */
    zgrads grads;
    int open_backward;  /* modules entered for backward and not yet exited */
    float *f32_scratch; /* zinc_grad_add_f32 on a device the host cannot address (engine_f32.c) */

    /* stage 3 gathering (zero/gather.c) */
    zgather gather;

    /* micro-step bookkeeping */
    int last_phase;      /* -1 before any enter */
    int64_t micro_steps; /* backward passes begun since the last step */
    bool in_backward_pass;

    /* optimizer state */
    zloss_scaler scaler;
    int64_t steps, steps_taken, steps_skipped, consecutive_skips;
    bool warned_micro_mismatch;
    /* Non-empty after a step or a checkpoint load failed part-way: the optimizer state may be partly
     * updated, so training and saving refuse (naming this) until a checkpoint loads successfully. */
    char broken[512];
    /* Non-empty after zinc_build failed: why. The engine then takes nothing but zinc_destroy
     * (zengine_require_built, zengine_registration_open): a half-built engine cannot train or load. */
    char build_failed[512];

    /* the caller's items for the rank agreement (zinc_agree_add; engine_agree.c) */
    void *agree_items;
    int agree_n, agree_cap;
    zinc_nonfinite nonfinite; /* zinc_options.nonfinite (engine_finite.c) */
    bool preempt;             /* zinc_options.preempt: signals are recorded and agreed on at each step */
    int preempt_signal;       /* the signal every rank agreed on at a step (zinc_options.preempt), 0: none */
    /* the caller's integers sealed into every checkpoint's manifest (zinc_checkpoint_meta_set) */
    struct {
        char key[ZINC_META_KEY_MAX + 1];
        int64_t value;
    } meta[ZINC_META_MAX];
    int nmeta;
    double model_flops; /* zinc_model_flops: training FLOPs per sample for the whole model (0: the modules' sum) */
    /* DeepSpeed's monitors (engine_monitor.c): the writer on rank 0 when tensorboard or csv_monitor is on
     * (NULL otherwise); a step's lr and loss scale are held until its loss is written, so that the x axis
     * only grows, as in DeepSpeed's files. */
    zmon *monitor;
    struct {
        bool loss_due; /* a zinc_step finished and its loss is not recorded yet (every rank) */
        bool held;
        int64_t samples;
        double lr, loss_scale;
        double grad_norm, step_s; /* the step's gradient norm (NaN when skipped), seconds since the last step */
        int64_t t_prev_ns;        /* the trace clock at the last zinc_step's end (at zinc_build before one) */
        double elapsed_ms[5];     /* wall_clock_breakdown: the step's fwd, bwd, bwd_inner, bwd_allreduce, step */
    } mon;
    /* wall_clock_breakdown (engine_wallclock.c): DeepSpeed's engine timers, on the trace recorder's clock
     * (ns). The micro-step's sums (fwd, bwd, reduce) and the optimizer step's (over its micro-steps). */
    struct {
        int open_forward;       /* forward modules entered outside a backward and not yet exited */
        int64_t fwd_t0, bwd_t0; /* the outermost open forward's and backward's start, 0: none open */
        int64_t fwd, bwd, reduce, step;
        int64_t g_fwd, g_bwd, g_reduce;
        int64_t step_t0, step_reduce0; /* at the current zinc_step's start: the clock (0: off) and reduce */
    } wc;
    /* zinc_options.trace_path: the timeline's settings and the open module spans (engine_trace.c); NULL
     * when not tracing */
    struct zengine_trace *trace;
    /* checkpoint.writer.decoupled: the save in flight (runtime/checkpoint/checkpoint_async.c), NULL when none.
     * The engine cannot see the checkpoint layer, so the checkpoint code leaves its two entry points here:
     * poll (collective, main thread: at each zinc_step; wait=true joins the writer) agrees on completion and
     * publishes; drop (zinc_destroy) joins the writer and publishes nothing. */
    void *ckpt_async;
    zinc_status (*ckpt_async_poll)(struct zinc_engine *e, bool wait);
    void (*ckpt_async_drop)(struct zinc_engine *e);
    /* the decoupled save's full image, kept from one save to the next (its pages stay faulted in: the next
     * snapshot's copies do not pay for them again); counted as host staging; freed by zinc_destroy */
    void *ckpt_image;
    size_t ckpt_image_alloc;
    /* zinc_checkpoint_reserve's thread faulting that image's pages in (joined before the image is used) */
    pthread_t ckpt_image_thread;
    bool ckpt_image_faulting;
};

/* Waits for zinc_checkpoint_reserve's thread, if one still faults the kept image in. */
void zengine_settle_ckpt_image(zinc_engine *e);
/* Frees the image a decoupled save kept for the next one (zinc_destroy; a save that cannot reuse it). */
void zengine_drop_ckpt_image(zinc_engine *e);

/* engine_base.c, the floor every engine file may call (and which calls none). Marks the engine broken with
 * the current error's first line (see zinc_engine.broken). */
void zengine_mark_broken(zinc_engine *e, const char *what);
/* Ends the accumulation in progress as far as the call-order bookkeeping goes: no micro-step begun, no
 * backward pass open, no phase seen (after a step, and when a failed step's gradients are dropped). The
 * gradients themselves are zero/'s (zgrads_zero, zgrads_reset). */
void zengine_micro_steps_reset(zinc_engine *e);
/* ZINC_ERR_STATE naming why, when the engine is broken; ZINC_OK otherwise. */
zinc_status zengine_check_usable(const zinc_engine *e, const char *fn);
/* ZINC_ERR_STATE for `fn` after a failed zinc_build: why it failed, and that only zinc_destroy is left. */
zinc_status zengine_build_failed_error(const zinc_engine *e, const char *fn);
/* ZINC_ERR_STATE for `fn` unless zinc_build has succeeded (before it: "call zinc_build first"; after a failed
 * build: why it failed, and that only zinc_destroy is left). */
zinc_status zengine_require_built(const zinc_engine *e, const char *fn);
/* ZINC_ERR_STATE for `fn` (naming `what`) unless modules and parameters may still be registered: not after
 * zinc_build, successful or not. */
zinc_status zengine_registration_open(const zinc_engine *e, const char *fn, const char *what);

/* The observers (engine_observe.c): one descriptor each, in its own file, listed once in engine_observe.c's
 * table, which zinc_create (create, at its end), zinc_step (step_begin before the step's work, step_end
 * after it) and zinc_destroy (destroy, also after a zinc_create that failed part-way) walk in the table's
 * order. step_end's ok: the step, and the observers before this one, succeeded; an error fails zinc_step.
 * A NULL hook: nothing then. */
typedef struct zengine_observer {
    const char *name;
    zinc_status (*create)(zinc_engine *e, const zinc_options *o);
    void (*step_begin)(zinc_engine *e);
    zinc_status (*step_end)(zinc_engine *e, const zinc_step_info *info, bool ok);
    void (*destroy)(zinc_engine *e);
} zengine_observer;
extern const zengine_observer zengine_observer_wallclock, zengine_observer_monitor, zengine_observer_trace,
    zengine_observer_comms;
zinc_status zengine_observers_create(zinc_engine *e, const zinc_options *o);
void zengine_observers_step_begin(zinc_engine *e);
zinc_status zengine_observers_step_end(zinc_engine *e, const zinc_step_info *info, zinc_status st);
void zengine_observers_destroy(zinc_engine *e);

/* engine_comms.c: comms_logger from the config, started with the communicators (zinc_create, after dcomm
 * exists: the groups split from them later log to it too), so it is no create hook; its observer prints
 * its table every steps_per_print under verbose, and at zinc_destroy, before the communicators go, its
 * table and its end. */
zinc_status zengine_comms_start(zinc_engine *e);

/* engine_parallel.c: whether this thread is running a zinc_parallel_for body (collective calls refuse). */
bool zengine_in_parallel_body(void);

/* runtime/engine/engine_flops.c: the model's FLOPs declarations as members of the trace's otherData,
 * ",\"flops_per_sample\":F,\"module_flops\":{\"name\":[forward,backward],...}" (per sample; "" when none were
 * declared), malloc'd into *out (free it). */
zinc_status zengine_flops_trace_json(const zinc_engine *e, char **out);
/* engine_check.c: what zinc_create refuses of a loaded config beyond its rules, and zinc config check with it:
 * device cuda without ZINC_EXPERIMENTAL_CUDA=1 (option_device, when not AUTO, is the one asked for), and with
 * `monitors` the tensorboard/csv_monitor directories (zmon_check). Not collective. */
bool zengine_cuda_allowed(void);
zinc_status zengine_check_run(const zinc_config *cfg, zinc_device_kind option_device, bool monitors);

/* runtime/engine/engine_wallclock.c: wall_clock_breakdown. Called at every module enter/exit (cheap when
 * off), around each gradient reduction (zengine_wc_now before, zengine_wc_reduced after), at the end of a
 * micro-step (zengine_wc_micro_end: logs DeepSpeed's micro-step line); its observer times zinc_step (logs the
 * step's line and fills mon.elapsed_ms). */
int64_t zengine_wc_now(const zinc_engine *e);
void zengine_wc_module_enter(zinc_engine *e, int phase);
void zengine_wc_module_exit(zinc_engine *e, int phase);
void zengine_wc_reduced(zinc_engine *e, int64_t t0);
void zengine_wc_micro_end(zinc_engine *e);

/* runtime/engine/engine_step.c */
zinc_status zengine_step(zinc_engine *e, zinc_step_info *info);

/* runtime/engine/engine_collect.c: the parameters from the optimizer state. */
/* Stages 1-2: every rank's updated slice to every rank (no-op otherwise). */
zinc_status zengine_allgather_params(zinc_engine *e);
/* zinc.deterministic_reduction (engine_determ.c): the gradient's sum of squares over every rank's n elements
 * at g, the same bits at every rank count; collective. */
zinc_status zengine_det_sumsq(zinc_engine *e, const void *g, zinc_dtype t, size_t n, double *out);
/* Rewrites this rank's compute-dtype parameters from the fp32 master weights. */
zinc_status zengine_params_from_master(zinc_engine *e);
/* FNV-1a over n bytes: the check that every rank passes the same weights (zinc_set_master,
 * zinc_param_set_master). */
uint64_t zengine_fnv1a(const void *p, size_t n);

/* runtime/engine/engine_f32.c */
void zengine_f32_free(zinc_engine *e);

/* engine_gstore.c: the stage-3 fp32 gradient shard on NVMe (zplan_grads_on_nvme). lo is relative to own_lo;
 * add and zero are zero/grads.c's hooks (zgrads_ctx.shard_add, shard_zero); chunk is the store's scratch,
 * the most any reader moves at once (a multiple of ZSTATS_BLOCK); stats streams the shard's statistics. */
bool zengine_grads_on_nvme(const zinc_engine *e);
zinc_status zengine_gstore_create(zinc_engine *e);
int64_t zengine_gstore_chunk(const zinc_engine *e);
void zengine_gstore_destroy(zinc_engine *e);
zinc_status zengine_grads_add(void *engine, int64_t lo, int64_t n, const void *src, zinc_dtype t);
void zengine_grads_zero(void *engine);
zinc_status zengine_grads_read(zinc_engine *e, int64_t lo, int64_t n, float *dst);
struct zgrad_stats;
zinc_status zengine_grads_stats(zinc_engine *e, struct zgrad_stats *out);

/* engine_pstore.c: the stage-3 parameter shard in memory or on NVMe (offload_param "nvme"). lo is relative
 * to own_lo; buffers are compute-device memory (host memory with NVMe, which only the cpu device takes). */
bool zengine_params_on_nvme(const zinc_engine *e);
zinc_status zengine_pstore_check(const zinc_engine *e);
zinc_status zengine_pstore_create(zinc_engine *e);
/* Elements the store's scratch holds: what every chunked user of the shard moves at once. */
int64_t zengine_pstore_chunk(const zinc_engine *e);
zinc_status zengine_params_read(zinc_engine *e, int64_t lo, int64_t n, void *dst);
zinc_status zengine_params_write(zinc_engine *e, int64_t lo, int64_t n, const void *src);
zinc_status zengine_params_gather_read(void *engine, int64_t lo, int64_t n, void *dst);
/* engine_gstore.c: the gradient store's read of [lo, lo + n) issued ahead (nothing when out of range); its
 * error (a written-behind write it completed) is the step's */
zinc_status zengine_grads_prefetch(zinc_engine *e, int64_t lo, int64_t n);
/* zgather_ctx.can_prefetch_own and prefetch_own: the store's swap-in ahead of use (a failure is kept as
 * zengine_params_gather_read keeps one) */
bool zengine_params_can_prefetch(void *engine, int64_t lo, int64_t n);
zinc_status zengine_params_prefetch(void *engine, int64_t lo, int64_t n);
/* Collective (every rank, at the step): a kept swap-in failure of any rank, as every rank's error. */
zinc_status zengine_params_agree(zinc_engine *e);
/* engine_pstore.c: offload_param nvme without a module trace: the next modules' swap-ins guessed ahead */
void zengine_params_guess_ahead(zinc_engine *e, int module, int phase);
/* fp32 values widened/narrowed to the compute dtype into elements [lo, lo + n) of the shard. */
zinc_status zengine_params_upload_f32(zinc_engine *e, int64_t lo, const float *vals, int64_t n);

/* engine_buffers.c: the plan's buffers the engine holds (parameters, decay mask, offload staging, a per-tensor
 * optimizer's sums), allocated at zinc_build and freed at zinc_destroy by one loop over the plan. */
zinc_status zengine_buffers_alloc(zinc_engine *e);
void zengine_buffers_free(zinc_engine *e);

/* engine_ctx.c: fills the contexts zero/ and offload/ work through (at zinc_build, before allocating). */
void zengine_contexts(zinc_engine *e);

/* Helpers. */
zinc_status zengine_alloc(zinc_engine *e, zinc_mem_category cat, size_t bytes, const char *what, void **out);
void zengine_free(zinc_engine *e, zinc_mem_category cat, void *p, size_t bytes);
zinc_mem_kind zengine_compute_kind(const zinc_engine *e);
/* Whether the optimizer-state views can be handed to the device operations (always on cpu; on cuda
 * when the state is not offloaded): else the step stages gradients and parameters through the host. */
bool zengine_state_on_device(const zinc_engine *e);

/* The optimizer's update over the state store on any device, offloaded or not (engine_step_pass.c): g is
 * the local gradient and out the compute-dtype parameters of the own range, compute-device memory. */
/* Muon's whole-matrix step (engine_muon.c): owners and the update buffer at zinc_build; before the step
 * pass, the matrices' update assembled, orthogonalised and scattered back into muon_upd. */
zinc_status zengine_muon_build(zinc_engine *e);
void zengine_muon_free(zinc_engine *e);
/* Before the clip: the updates from the gradient g (mean: g * inv); at ZeRO stages 1-3 *norm becomes
 * DeepSpeed's, over the updates in place of the Muon gradients (engine_muon.c cites DeepSpeed's lines).
 * After the step's hparams: at stages 1-3, Muon's momentum without the clip and its update / clip. */
zinc_status zengine_muon_prepare(zinc_engine *e, const void *g, zinc_dtype gdt, double inv, double *norm);
void zengine_muon_hparams(const zinc_engine *e, zopt_hp *hp, double inv, double clip);
/* DeepSpeed's combined unscale-and-clip factor for the mean gradient's norm: max(1, (norm + 1e-6) / clip)
 * with gradient_clipping > 0, else 1 (engine_base.c: the step and Muon's prepare take it). */
double zengine_clip_factor(const zinc_engine *e, double norm);
/* engine_step_pass.c: offload_optimizer nvme's next pass's reads issued ahead and kept moving (a no-op
 * without IO or inside a pass) */
void zengine_state_ahead(zinc_engine *e);
zinc_status zengine_optimizer_pass(zinc_engine *e, const zopt_desc *o, const zopt_hp *hp, const void *g, zinc_dtype gdt,
                                   void *out);
/* The parameter holding flat element x (binary search), or NULL for padding. */
zinc_param *zengine_param_at(const zinc_engine *e, int64_t x);

/* engine_agree.c: collective, at zinc_build: every rank's config, model, device, seed and the caller's
 * items compared by one all-gather; a difference is the same error on every rank. */
zinc_status zengine_agree(zinc_engine *e);
void zengine_agree_free(zinc_engine *e);

/* engine_finite.c: fp32/bf16 runs that go bad stop. Whether a non-finite gradient is an error here; the
 * error naming the step and the first tensor; collective: every rank's updated parameters finite. */
bool zengine_nonfinite_is_error(const zinc_engine *e);
bool zengine_params_checked(const zinc_engine *e);
zinc_status zengine_nonfinite_grad_error(const zinc_engine *e, int64_t first_bad, int bad_rank);
zinc_status zengine_check_params(zinc_engine *e, const void *own_params);

/* engine_trace.c: the timeline (zinc_options.trace_path). create: collective, at zinc_create (checks the
 * path on rank 0, aligns the ranks' clocks, starts the recorder). The module hooks are called only while
 * recording (ztrace_active). step_end: after every zinc_step (collective when the window's last step ends:
 * the file is written then). sync_step: after the step count changed (a checkpoint load). destroy: writes
 * what a run shorter than the window recorded (collective), frees. */
typedef struct zengine_trace zengine_trace;
zinc_status zengine_trace_create(zinc_engine *e, const zinc_options *o);
void zengine_trace_module_enter(zinc_engine *e, int module, int phase);
int64_t zengine_trace_module_exit(zinc_engine *e, int module, int phase); /* the span's start (0: none) */
zinc_status zengine_trace_step_end(zinc_engine *e, bool ok);
void zengine_trace_sync_step(zinc_engine *e);
void zengine_trace_destroy(zinc_engine *e);

#endif
