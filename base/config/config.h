/* The typed form of a DeepSpeed ds_config.json, with DeepSpeed's code defaults (DeepSpeed
 * 0.19: deepspeed/base/config.py, constants.py, zero/config.py, zero/offload_config.py) and zinc's deliberate differences (README "Config keys"). Loading validates every key: an
 * unknown key is an error naming the closest valid key; each error names the JSON path, the value and
 * what is allowed; warnings (deprecated spellings, keys zinc accepts but ignores) go to the log sink. */
#ifndef ZINC_RUNTIME_CONFIG_H
#define ZINC_RUNTIME_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/core/log.h"
#include "zinc.h"

#define ZCFG_PATH_MAX 4096
#define ZCFG_GIVEN_MAX 8192
/* The NVMe optimizer pipeline's fewest swap buffers: one chunk read ahead, one updated, one written back. */
#define ZCFG_NVME_MIN_BUFFERS 3
/* Limits zinc sets beyond DeepSpeed's ranges (config_resolve.c): a larger global batch takes hours per step, and
 * a smaller static loss scale makes every fp16 gradient underflow and every update non-finite. */
#define ZCFG_MAX_TRAIN_BATCH ((int64_t)1 << 24)
#define ZCFG_MIN_STATIC_LOSS_SCALE 0x1p-24

/* The optimizers (runtime/optim: one descriptor each; their keys in config_schema.c). */
typedef enum {
    ZOPT_ADAM = 0,
    ZOPT_ADAMW = 1,
    ZOPT_LION = 2,
    ZOPT_LAMB = 3,
    ZOPT_ADAGRAD = 4,
    ZOPT_SGD = 5,
    ZOPT_MUON = 6, /* Muon for the matrices the model marks (ZINC_PARAM_MUON), AdamW for the rest */
    ZOPT_COUNT
} zcfg_optimizer_type;

typedef enum {
    ZSCHED_NONE = 0, /* constant lr */
    ZSCHED_WARMUP_LR,
    ZSCHED_WARMUP_DECAY_LR,
    ZSCHED_WARMUP_COSINE_LR,
    ZSCHED_ONE_CYCLE,
    ZSCHED_LR_RANGE_TEST
} zcfg_scheduler_type;

typedef enum { ZWARMUP_LOG = 0, ZWARMUP_LINEAR = 1 } zcfg_warmup_type;

typedef enum { ZOFFLOAD_NONE = 0, ZOFFLOAD_CPU = 1, ZOFFLOAD_NVME = 2 } zcfg_offload_device;

typedef enum { ZTAG_WARN = 0, ZTAG_IGNORE = 1, ZTAG_FAIL = 2 } zcfg_tag_validation;

typedef struct zcfg_optimizer {
    zcfg_optimizer_type type;    /* "Adam", "AdamW", "Lion", "Lamb", "Adagrad" or "SGD" (case-insensitive) */
    double lr;                   /* 1e-3 */
    double beta1, beta2;         /* 0.9, 0.999 */
    double eps;                  /* 1e-8 */
    double weight_decay;         /* 0 */
    bool bias_correction;        /* true */
    bool adam_w_mode;            /* the EFFECTIVE mode: type=="adamw" || params.adam_w_mode (default true) */
    bool torch_adam;             /* accepted; zinc's kernels compute the same math (logged) */
    double max_coeff, min_coeff; /* Lamb: the trust ratio's clamp, 10 and 0.01 */
    bool eps_inside_sqrt;        /* Lamb: sqrt(v + eps) instead of sqrt(v) + eps; false */
    double momentum, dampening;  /* SGD (torch.optim.SGD): 0, 0 */
    bool nesterov, maximize;     /* SGD: false, false */
    /* Muon (DeepSpeed 0.19.8 engine._muon_param_groups, MuonWithAuxAdam): each half's lr (muon_lr, adam_lr;
     * unset: lr where the file gives it, else 0.02 and 3e-4), the Muon half's momentum (0.95), and the
     * Newton-Schulz method (0 "gram", 1 "standard": the same iteration in exact arithmetic; zinc computes both
     * in fp32 with double accumulation). */
    double muon_lr, adam_lr;
    int ns_method;
} zcfg_optimizer;

typedef struct zcfg_scheduler {
    zcfg_scheduler_type type;
    /* WarmupLR / WarmupDecayLR */
    double warmup_min_lr;         /* 0 */
    double warmup_max_lr;         /* 1e-3 */
    int64_t warmup_num_steps;     /* 1000 (clamped to >= 2 for WarmupLR as DeepSpeed does) */
    zcfg_warmup_type warmup_type; /* log */
    int64_t total_num_steps;      /* WarmupDecayLR, WarmupCosineLR: required */
    /* WarmupCosineLR (scales the optimizer lr) */
    double warmup_min_ratio; /* 0 */
    double cos_min_ratio;    /* 1e-4 */
    /* OneCycle */
    double cycle_min_lr, cycle_max_lr;                         /* required */
    double decay_lr_rate;                                      /* 0 */
    int64_t cycle_first_step_size;                             /* 2000 */
    int64_t cycle_second_step_size;                            /* -1 = same as first */
    int64_t cycle_first_stair_count, cycle_second_stair_count; /* 0 */
    int64_t decay_step_size;                                   /* 0 */
    bool cycle_momentum;                                       /* true */
    double cycle_min_mom, cycle_max_mom;                       /* 0.8, 0.9 */
    double decay_mom_rate;                                     /* 0 */
    /* LRRangeTest: lr = min_lr * (1 + step_rate * interval), interval = (it + 1) / step_size (floored with
     * staircase) */
    double lr_range_test_min_lr;     /* 1e-3 */
    int64_t lr_range_test_step_size; /* 2000 */
    double lr_range_test_step_rate;  /* 1.0 */
    bool lr_range_test_staircase;    /* false */
} zcfg_scheduler;

typedef struct zcfg_fp16 {
    bool enabled;                /* false */
    bool auto_cast;              /* false (accepted; zinc does not cast the model) */
    double loss_scale;           /* 0 = dynamic, otherwise a static scale */
    int initial_scale_power;     /* 16: zinc always uses 2^16 unless written (DeepSpeed's 2^32 quirk not copied) */
    int64_t loss_scale_window;   /* 1000 */
    int hysteresis;              /* 2 */
    bool consecutive_hysteresis; /* false */
    double min_loss_scale;       /* 1 */
    int64_t max_skipped_steps;   /* zinc extension under "zinc": 0 = unlimited consecutive skips */
} zcfg_fp16;

typedef struct zcfg_offload {
    zcfg_offload_device device;                    /* none */
    char nvme_path[ZCFG_PATH_MAX];                 /* "" */
    int buffer_count;                              /* optimizer 4, param 5 */
    bool pin_memory;                               /* true (DeepSpeed 0.19.8 offload_config.py) */
    bool pipeline_read, pipeline_write, fast_init; /* optimizer only */
    double ratio;                                  /* optimizer only: 1.0 */
    int64_t buffer_size;                           /* param only: 1e8 */
    int64_t max_in_cpu;                            /* param only: 1e9 */
} zcfg_offload;

typedef struct zcfg_zero {
    int stage;                     /* 0 */
    bool contiguous_gradients;     /* true */
    bool overlap_comm;             /* resolved: true for stage 3, false otherwise, unless written */
    bool reduce_scatter;           /* true */
    int64_t reduce_bucket_size;    /* 5e8 elements */
    int64_t allgather_bucket_size; /* 5e8 */
    bool allgather_partitions;     /* true (DeepSpeed parses it and never reads it) */
    zcfg_offload offload_optimizer;
    zcfg_offload offload_param;
    int64_t sub_group_size;                   /* 1e9 */
    int64_t prefetch_bucket_size;             /* stage3_prefetch_bucket_size 5e7 */
    int64_t param_persistence_threshold;      /* stage3_param_persistence_threshold 1e5 */
    int64_t model_persistence_threshold;      /* stage3_model_persistence_threshold INT64_MAX */
    int64_t max_live_parameters;              /* stage3_max_live_parameters 1e9 */
    int64_t max_reuse_distance;               /* stage3_max_reuse_distance 1e9 */
    bool gather_16bit_weights_on_model_save;  /* false */
    bool round_robin_gradients;               /* false */
    bool ignore_unused_parameters;            /* true */
    bool load_from_fp32_weights;              /* true */
    bool compute_grad_norm;                   /* true; false is refused (config_resolve.c) */
    bool save_muon_momentum_buffer_in_memory; /* false: only meaningful with NVMe offload (refused with Muon) */
    /* ZeRO++ (DeepSpeed 0.19.8, stage 3 only; zero/zeropp.h): */
    bool quantized_weights;              /* zero_quantized_weights false: qwZ, INT8 blocks in stage-3 all-gathers */
    bool quantized_nontrainable_weights; /* zero_quantized_nontrainable_weights false: no effect (all params train) */
    bool quantized_gradients;            /* zero_quantized_gradients false: qgZ */
    int hpz_partition_size;              /* zero_hpz_partition_size 1: hpZ's secondary group size (0, 1: none) */
} zcfg_zero;

/* zinc.checkpoint_busy: what a save does while the previous decoupled save is still being written. */
enum { ZCFG_CKPT_BUSY_WAIT = 0, ZCFG_CKPT_BUSY_SKIP = 1 };

typedef struct zcfg_aio {
    int64_t block_size;       /* 1048576 */
    int queue_depth;          /* 8 */
    int intra_op_parallelism; /* 1 (deprecated spelling: thread_count) */
    bool single_submit;       /* false */
    bool overlap_events;      /* true */
    bool use_gds;             /* false: true is an error (zinc has no GDS path) */
    bool allow_buffered_io;   /* zinc extension: fall back to buffered IO where O_DIRECT is refused */
} zcfg_aio;

/* DeepSpeed's "comms_logger" (deepspeed/comm/config.py; base/comm/comm_log.h records and prints). */
typedef struct zcfg_comms_logger {
    bool enabled;      /* false */
    bool verbose;      /* false: one line per completed collective */
    bool prof_all;     /* true: every collective; false: those in prof_ops */
    bool debug;        /* false: the calling function joins the op name */
    unsigned prof_ops; /* [] : bit i = zkey_comm_op_names[i] */
} zcfg_comms_logger;

typedef struct zcfg_checkpoint {
    zcfg_tag_validation tag_validation; /* WARN */
    bool load_universal;                /* false */
    bool use_node_local_storage;        /* false */
    bool parallel_write_pipeline_stage; /* false */
    /* DeepSpeed 0.19.8's checkpoint.writer (deepspeed/runtime/model_checkpointing/constants.py): with
     * decoupled, a save snapshots each rank's shard and a writer thread writes it (checkpoint_async.c). */
    int writer_type;               /* FAST (0): zinc has one writer, whatever the type */
    bool writer_decoupled;         /* false */
    int64_t writer_io_buffer_size; /* 64 MiB */
    bool writer_io_buffer_double;  /* true */
    bool writer_show_statistics;   /* false */
    int writer_data_parallel;      /* none (0): DeepSpeed's None */
    int writer_busy;               /* zinc.checkpoint_busy: ZCFG_CKPT_BUSY_WAIT (0) or _SKIP */
} zcfg_checkpoint;

/* DeepSpeed's "tensorboard" and "csv_monitor" blocks (deepspeed/monitor/config.py): the files go into
 * output_path/job_name on rank 0 (runtime/monitor/monitor.h). */
typedef struct zcfg_monitor {
    bool enabled;                    /* false */
    char output_path[ZCFG_PATH_MAX]; /* "": the working directory */
    char job_name[ZCFG_PATH_MAX];    /* "DeepSpeedJobName" */
} zcfg_monitor;

typedef struct zinc_config {
    /* batch triad, resolved against world_size by DeepSpeed's rules */
    int world_size;
    int64_t train_batch_size;
    int64_t train_micro_batch_size_per_gpu;
    int64_t gradient_accumulation_steps;

    zcfg_optimizer optimizer;
    zcfg_scheduler scheduler;
    double gradient_clipping; /* 1.0 (DeepSpeed 0.19.8 constants.py GRADIENT_CLIPPING_DEFAULT); 0 = off */

    zcfg_fp16 fp16;
    bool bf16_enabled; /* "bf16" or legacy "bfloat16" */
    bool bf16_immediate_grad_update;
    /* true (DeepSpeed 0.19.8 precision_config.py): a bf16 step with a non-finite gradient is skipped, as fp16's.
     * Stages 0 and 3 skip regardless (as DeepSpeed's FP16_Optimizer in bf16 mode and stage 3's invalid-norm
     * check); false at stages 1-2 makes it an error (DeepSpeed would apply the update unchecked). */
    bool bf16_check_grad_overflow;

    zcfg_zero zero;
    zcfg_aio aio;

    int64_t steps_per_print; /* 0 = no progress report (DeepSpeed's code default None) */
    bool wall_clock_breakdown;
    bool memory_breakdown;
    bool dump_state;
    zcfg_checkpoint checkpoint;
    zcfg_comms_logger comms_logger;
    zcfg_monitor tensorboard, csv_monitor;

    /* Data types. compute_dtype follows fp16/bf16; comm_dtype follows communication_data_type (default:
     * the compute dtype); grad_accum_dtype follows data_types.grad_accum_dtype (default: the compute
     * dtype, as DeepSpeed's engine.get_data_types; at stage 0 no other is allowed; the stage 2-3 reduced
     * shard accumulates in fp32 whatever it says). */
    zinc_dtype compute_dtype;
    zinc_dtype comm_dtype;
    bool comm_dtype_set;
    zinc_dtype grad_accum_dtype;
    bool grad_accum_dtype_set;
    zinc_dtype param_dtype; /* data_types.param_dtype: must be the compute dtype when written (as DeepSpeed) */
    bool param_dtype_set;
    bool prescale_gradients;          /* false */
    double gradient_predivide_factor; /* 1.0 */

    /* zinc's own block ("zinc": {...}); DeepSpeed ignores nothing here because it has no such block. */
    zinc_device_kind device; /* "device": "auto" | "cpu" | "cuda" */
    /* "deterministic_reduction": false. true: the fp32 gradient sum of a step is one fixed binary tree over
     * the global micro-batches (zero/grads_determ.c), the same bits for every power-of-two split of
     * world x gradient_accumulation_steps; rules in config_determinism.c. */
    bool deterministic_reduction;

    char source[ZCFG_PATH_MAX]; /* the file name (or "<json text>") for messages */
    /* The canonical paths written in the file, as "|path|path|...|", so the dump can mark defaults and
     * resolution can tell "written false" from "not written" (overlap_comm). */
    char given[ZCFG_GIVEN_MAX];
    /* Keys written as "auto" and filled at load time, one "path\thow it was chosen\n" line each, for the
     * "_filled" list of the dump. */
    char filled[ZCFG_GIVEN_MAX];
} zinc_config;

/* What the caller knows beyond the file: `--set PATH=VALUE` overrides and the run length. */
typedef struct zcfg_load_opts {
    /* NULL-terminated list of "PATH=VALUE" (dotted JSON path, JSON value; a bare word that is not JSON is
     * taken as a string). Each fills an "auto" or overrides what the file wrote (logged at INFO with the old
     * value), in order, before the config is validated. NULL: none. */
    const char *const *sets;
    /* The run's optimizer steps (zinc train --steps): fills an "auto" scheduler.params.total_num_steps.
     * 0 = not known (an "auto" there is then an error naming the flags that fill it). */
    int64_t run_steps;
    /* Where run_steps comes from, for the warning that fills total_num_steps with it; NULL: "the run's
     * --steps". */
    const char *run_steps_from;
} zcfg_load_opts;

/* DeepSpeed's defaults (zinc's where documented), world_size 1, no batch sizes resolved. */
void zcfg_defaults(zinc_config *c);

/* Parses, validates and resolves a ds_config. The text is JSON with hjson-style comments allowed ("//",
 * "#" and block comments, as DeepSpeed reads it); duplicate keys are an error. world_size resolves the batch
 * triad. `out` is written only on success. Errors return
 * ZINC_ERR_CONFIG with every problem found (one per line) in zinc_last_error(); warnings go to `log`.
 * `origin` names the text in messages (a file path, or "<json text>"). */
zinc_status zcfg_load_file(const char *path, int world_size, const zlog *log, zinc_config *out);
zinc_status zcfg_load_text(const char *json, const char *origin, int world_size, const zlog *log, zinc_config *out);

/* As zcfg_load_file/zcfg_load_text, with overrides and the run length (opts may be NULL). */
zinc_status zcfg_load_file_ex(const char *path, int world_size, const zcfg_load_opts *opts, const zlog *log,
                              zinc_config *out);
zinc_status zcfg_load_text_ex(const char *json, const char *origin, int world_size, const zcfg_load_opts *opts,
                              const zlog *log, zinc_config *out);

/* Whether the file wrote the key at canonical path `path` ("zero_optimization.overlap_comm"). */
bool zcfg_given(const zinc_config *c, const char *path);

/* Rules that follow from the resolved config, stated once for the loader, the engine and the sizing plan. */
/* The dtype the model writes gradients in: stages 0-1 accumulate micro-steps in the full buffer in
 * grad_accum_dtype; stages 2-3 hand out compute-dtype bucket slots (the reduced shard accumulates in fp32). */
zinc_dtype zcfg_grad_dtype(const zinc_config *c);
/* Sets zero_optimization.stage and the defaults that depend on it, where the file did not write them:
 * overlap_comm is on at stage 3 and off below (DeepSpeed's default). The loader resolves through it, and
 * the pre-flight's "a higher stage costs less" advice prices other stages through it. */
void zcfg_set_stage(zinc_config *c, int stage);

/* The fully resolved config as indented JSON: every key with its effective value, and a "_defaults" list
 * naming the keys that came from defaults and "_filled" the "auto" keys filled at load time (with how each
 * was chosen). Returns a malloc'd string, or NULL on allocation failure. */
char *zcfg_dump_json(const zinc_config *c);

#endif
