/* zinc — ZeRO in C: a sharded optimizer runtime for training.
 *
 * The one public header. Everything here is C11; handles are opaque; every fallible call returns a
 * zinc_status and leaves a message (with file:line context) for zinc_last_error() on the calling thread.
 * The library never calls exit() and never prints except through the log callback.
 *
 * Typical use (see examples/mlp for a complete model):
 *
 *   zinc_options o = zinc_default_options();
 *   o.config_path = "ds_configs/zero2_fp16.json";
 *   zinc_engine *e;
 *   if (zinc_create(&o, &e) != ZINC_OK) { fprintf(stderr, "%s\n", zinc_last_error()); return 1; }
 *   int fc1 = zinc_module_add(e, "fc1");
 *   zinc_param *w = zinc_param_add(e, fc1, "fc1.weight", 2, (int64_t[]){256, 784}, ZINC_PARAM_DECAY);
 *   zinc_build(e, my_init, my_data);
 *   ... per micro-step: zinc_module_enter / zinc_param_data / zinc_param_grad / zinc_module_exit ...
 *   zinc_step_info info; zinc_step(e, &info);
 *   zinc_destroy(e);
 */
#ifndef ZINC_H
#define ZINC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZINC_VERSION_MAJOR 0
#define ZINC_VERSION_MINOR 1
#define ZINC_VERSION_PATCH 0
#define ZINC_VERSION_STRING "0.1.0"

/* Conventions of this header:
 * - A call that can fail returns zinc_status (ZINC_OK = 0) and leaves the reason for zinc_last_error().
 *   The few calls that return something else say how they fail: zinc_module_add returns -1,
 *   zinc_param_add / zinc_param_find / zinc_param_data / zinc_param_grad return NULL, each with a message
 *   for zinc_last_error() (zinc_param_find: only for a NULL argument; an unknown name is not an error).
 * - Accessors (zinc_rank ... zinc_numel_total, zinc_step_count) never fail on a valid engine. Given a NULL
 *   engine they return a value no engine has: -1 for the integer ones, 0.0f for zinc_loss_scale, NULL for
 *   pointers, and ZINC_DEVICE_AUTO / ZINC_FP32 for the enums (these two are ambiguous: check the engine),
 *   and zinc_last_error() says which call got NULL. zinc_destroy(NULL) and zinc_log(NULL, ...) do nothing.
 * - Growing without breaking callers: zinc_options starts with struct_size, which zinc_default_options()
 *   sets; a library newer than the caller's header reads only the fields the caller knew and takes
 *   defaults for the rest, and an older library refuses a larger struct with ZINC_ERR_UNSUPPORTED. The
 *   structs the library fills (zinc_param_info, zinc_step_info, zinc_memory_report) end in reserved space
 *   that new fields take, so their size stays the same within a major version; the library zeroes it. */

/* The most dimensions a parameter may have. */
#define ZINC_MAX_DIMS 8

/* ---------------------------------------------------------------- status and errors */

typedef enum zinc_status {
    ZINC_OK = 0,
    ZINC_ERR_INVALID_ARG, /* a caller passed a bad argument (NULL, out of range, unknown name) */
    ZINC_ERR_CONFIG,      /* the ds_config is invalid: the message names the key, value and valid range */
    ZINC_ERR_STATE,       /* the API was used in the wrong order (step before build, exit without enter) */
    ZINC_ERR_NOMEM,       /* an allocation failed or a pre-flight memory check refused to start */
    ZINC_ERR_IO,          /* a file operation failed: the message names file, offset and length */
    ZINC_ERR_COMM,        /* a collective (MPI or NCCL) failed */
    ZINC_ERR_DEVICE,      /* the compute device (CUDA) failed or is missing */
    ZINC_ERR_LOSS_SCALE,  /* fp16 overflow with the loss scale already at its minimum */
    ZINC_ERR_UNSUPPORTED, /* a feature that this build or this zinc version does not provide */
    ZINC_ERR_CORRUPT,     /* stored data failed its checksum or does not match what was expected */
    ZINC_ERR_INTERNAL,    /* a bug in zinc: please report it with the message */
    ZINC_ERR_NONFINITE    /* a non-finite gradient (fp32/bf16) or parameter: the run went bad at that step */
} zinc_status;

/* The message of the last failed call on this thread ("" if none). Valid until the next zinc call. */
const char *zinc_last_error(void);
/* For a model built on zinc (examples/): records `code` and a printf-style message for zinc_last_error() on
 * this thread, as the library records its own (with " [file.c:LINE]" after it, except for ZINC_ERR_CONFIG);
 * returns `code`. ZINC_ERROR passes the caller's file and line. */
zinc_status zinc_error_at(zinc_status code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define ZINC_ERROR(code, ...) zinc_error_at((code), __FILE__, __LINE__, __VA_ARGS__)
/* A short constant name for a status code, e.g. "ZINC_ERR_CONFIG". */
const char *zinc_status_name(zinc_status s);
/* The library version, "MAJOR.MINOR.PATCH". */
const char *zinc_version(void);

/* ---------------------------------------------------------------- logging */

typedef enum zinc_log_level {
    ZINC_LOG_DEBUG = 0,
    ZINC_LOG_INFO = 1,
    ZINC_LOG_WARN = 2,
    ZINC_LOG_ERROR = 3,
    ZINC_LOG_OFF = 4
} zinc_log_level;

/* Called for every log line at or above the configured level. `rank` is the caller's data-parallel rank
 * (0 before it is known). `msg` has no trailing newline. */
typedef void (*zinc_log_fn)(void *userdata, zinc_log_level level, int rank, const char *msg);

/* The default sink: prints "[zinc LEVEL rR] msg" to stderr on rank 0 (every rank for warnings and
 * errors when ZINC_LOG_ALL_RANKS=1 is set in the environment). */
void zinc_log_stderr(void *userdata, zinc_log_level level, int rank, const char *msg);

/* ---------------------------------------------------------------- types */

typedef enum zinc_dtype { ZINC_FP32 = 0, ZINC_FP16 = 1, ZINC_BF16 = 2 } zinc_dtype;
/* Bytes per element of a dtype; its name ("fp32", "fp16", "bf16"). */
size_t zinc_dtype_size(zinc_dtype t);
const char *zinc_dtype_name(zinc_dtype t);

/* Conversions that models use to read parameters and write gradients in the compute dtype. Round to
 * nearest even; NaN stays NaN; fp16 overflow gives inf. */
float zinc_fp16_to_f32(uint16_t h);
uint16_t zinc_f32_to_fp16(float f);
float zinc_bf16_to_f32(uint16_t h);
uint16_t zinc_f32_to_bf16(float f);
/* Read element i of a buffer in dtype t as float; add v to element i of a buffer in dtype t. */
float zinc_load_f32(const void *buf, zinc_dtype t, size_t i);
void zinc_add_f32(void *buf, zinc_dtype t, size_t i, float v);

typedef enum zinc_device_kind {
    ZINC_DEVICE_AUTO = 0, /* cuda when ZINC_EXPERIMENTAL_CUDA=1, a GPU is present and zinc was built with
                             CUDA; else cpu */
    ZINC_DEVICE_CPU = 1,
    ZINC_DEVICE_CUDA = 2 /* refused unless ZINC_EXPERIMENTAL_CUDA=1: the backend has never run on a GPU */
} zinc_device_kind;

/* ---------------------------------------------------------------- options and engine lifecycle */

/* What zinc_step does with a non-finite gradient in fp32 training (fp16 always skips the step and lowers
 * its loss scale; bf16 skips it as DeepSpeed does: with bf16.check_grad_overflow, its default, and at stages
 * 0 and 3 always). DEFAULT: ZINC_ERR_NONFINITE naming the step and the first tensor, and the
 * parameters are checked after every taken step (an update that made one non-finite is the same error).
 * SKIP: the step is skipped with a warning (zinc.max_skipped_steps bounds a run of them) and parameters
 * are not checked. */
typedef enum { ZINC_NONFINITE_DEFAULT = 0, ZINC_NONFINITE_SKIP = 1 } zinc_nonfinite;

typedef struct zinc_options {
    /* sizeof(zinc_options) as the caller was compiled: set by zinc_default_options(). Start from it and set
     * fields by name; zinc_create refuses 0 (a struct that did not come from zinc_default_options). */
    size_t struct_size;
    const char *config_path; /* a ds_config.json file, or NULL */
    const char *config_json; /* or the JSON text itself (used when config_path is NULL) */
    zinc_device_kind device; /* default ZINC_DEVICE_AUTO */
    zinc_log_fn log_fn;      /* default zinc_log_stderr */
    void *log_userdata;
    zinc_log_level log_level; /* default ZINC_LOG_INFO */
    uint64_t seed;            /* base seed for per-parameter initialisation; default 1234 */
    /* Threads of this engine's CPU kernels (Adam, gradient statistics, casts), the calling thread
     * included; 0 = cores / ranks on this node, at most 1024. Per engine: each engine owns its threads
     * (two engines in a process may use different counts), made at zinc_create and joined at
     * zinc_destroy. Between kernel calls they sleep (blocked, no spinning), so they take no CPU time
     * from the model's own threads between steps. */
    int cpu_threads;
    /* Added after the first release, at the end so that code which fills the struct by field name, or starts
     * from zinc_default_options() (which sets both to "none"), keeps compiling and behaving as before. */
    /* NULL-terminated list of "PATH=VALUE" overrides of the ds_config, as `zinc train --set`: a dotted key
     * path and a JSON value (a bare word that is not JSON is a string). Each fills an "auto" or replaces the
     * written value (logged at INFO with the old value) before validation. NULL = none. The strings are
     * read during zinc_create only. */
    const char *const *config_overrides;
    /* The run's optimizer steps, when the caller knows them: fills an "auto" scheduler.params.total_num_steps
     * (as the Hugging Face Trainer fills it from its num_training_steps). 0 = unknown. */
    int64_t total_steps;
    /* What a non-finite fp32/bf16 gradient, or a step that makes parameters non-finite, does: default
     * ZINC_NONFINITE_DEFAULT stops with ZINC_ERR_NONFINITE naming the step and tensor. */
    zinc_nonfinite nonfinite;
    /* 1: a SIGTERM, SIGINT or SIGUSR1 (how Slurm and cloud schedulers preempt; Slurm's --signal) is only
     * recorded, and the next zinc_step makes every rank agree on it, so the program can save a checkpoint
     * and exit at a step boundary (zinc_preempt_requested). A second signal ends the process at once (an
     * unfinished save leaves the previous checkpoint loadable). Signals whose handler the program set
     * itself are left alone (a warning names them). Process-wide. Default 0: a signal removes this run's
     * NVMe swap files and ends the process by the same signal. */
    int preempt;
    /* A timeline of the run (docs/profiling.md): rank 0 writes one Chrome Trace Event JSON file for all ranks
     * (a process per rank, a track per engine thread; it opens in Perfetto and chrome://tracing) with the
     * spans of steps trace_first_step..trace_last_step (counted from 1; default 1..5): modules' forward and
     * backward, collectives with their bytes, waits, the optimizer's chunks, NVMe requests, copies,
     * checkpoints. Written once, through a temporary file renamed over the path, when the window's last step
     * ends or at zinc_destroy; an existing file is replaced only with trace_replace = 1. A path refused at
     * zinc_create is an error; a file that cannot be written then (a full disk) is a warning in the log and
     * costs only the trace: the step still succeeds. NULL = no trace. */
    const char *trace_path;
    int64_t trace_first_step, trace_last_step;
    int trace_replace;
    /* 1: every rank also writes its own spans to trace_path + ".rank<R>.json" with PyTorch profiler's
     * top-level "distributedInfo" {"backend", "rank", "world_size"} and "ProfilerStep#<k>" step markers, the
     * per-rank files tools such as HolisticTraceAnalysis read (one per rank). Same replace rule. Default 0. */
    int trace_per_rank;
} zinc_options;

zinc_options zinc_default_options(void);

typedef struct zinc_engine zinc_engine;
typedef struct zinc_param zinc_param;

/* Creates an engine: reads and validates the config, joins the ranks (MPI when started by mpirun/srun;
 * a single process needs no launcher), picks the device. */
zinc_status zinc_create(const zinc_options *opts, zinc_engine **out);
/* Frees everything the engine owns. NULL does nothing. */
void zinc_destroy(zinc_engine *e);
/* Finalizes MPI if zinc initialized it. Optional: zinc also does this at process exit. */
void zinc_finalize(void);

/* ---------------------------------------------------------------- model registration (before build) */

/* Parameter flags. */
#define ZINC_PARAM_DECAY 1u /* weight decay applies to this parameter */
#define ZINC_PARAM_NO_DECAY 0u
/* A 2-D matrix (shape {rows, cols}) that optimizer "Muon" orthogonalises (DeepSpeed's use_muon: hidden
 * weights, not embeddings, heads, biases or norms); every other parameter takes Muon's AdamW half. Other
 * optimizers ignore it. */
#define ZINC_PARAM_MUON 2u

/* Adds a module (a unit of gathering and gradient completion) and returns its id (>= 0), or -1 on error.
 * Modules must be added in forward order (stage 3 prefetches in the order it records, but buckets fill
 * best when backward visits modules in reverse order of addition). A module may have no parameters (it is
 * accepted and costs nothing; entering it does nothing). */
int zinc_module_add(zinc_engine *e, const char *name);
/* Before zinc_build: the model enters this module more than once in one backward pass (a weight used in two
 * places, such as a tied LM head whose backward runs apart from the embedding's). At ZeRO stages 2-3 such a
 * module keeps its gradients in a buffer of its own (its elements, gradient dtype), reduced once per
 * micro-step; declared, that buffer is in the sizing plan, the estimate and the pre-flight and is used from
 * the first entry. Undeclared, zinc finds the pattern at the second entry and allocates the buffer then,
 * outside the pre-flight's figure. */
zinc_status zinc_module_reentered(zinc_engine *e, int module);
/* Adds a parameter to module `module`, which must be the most recently added one (so a module's
 * parameters are contiguous, in forward order); returns NULL on error. Shapes have 1 to ZINC_MAX_DIMS dimensions,
 * each >= 1; names are unique. Registration order fixes the layout and the checkpoint order.
 *
 * Layout: after zinc_build the parameters of a module lie in one flat buffer in registration order, each
 * starting on an 8-element boundary (so at least 16-byte aligned in bf16/fp16, 32 in fp32), with padding
 * between them: a module's parameters are NOT one contiguous array. Gradients have the same layout. A
 * model that keeps all its parameters in one block copies in and out per module with zinc_module_to_f32 /
 * zinc_module_grad_add_f32 (unpadded), per tensor with zinc_param_to_f32 / zinc_grad_add_f32 (or
 * zinc_param_data and zinc_param_grad), and sets them after zinc_build with zinc_set_master (per tensor:
 * zinc_param_set_master). */
zinc_param *zinc_param_add(zinc_engine *e, int module, const char *name, int ndim, const int64_t *shape,
                           unsigned flags);
zinc_param *zinc_param_find(zinc_engine *e, const char *name);

/* Information about a parameter, valid for the engine's lifetime. */
typedef struct zinc_param_info {
    const char *name;
    int module;
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int64_t numel;
    int64_t flat_offset; /* offset in the flat parameter buffer (elements), known after build */
    unsigned flags;
    int index;            /* registration order */
    uint64_t reserved[4]; /* zero; later fields take this space */
} zinc_param_info;
zinc_status zinc_param_get_info(const zinc_param *p, zinc_param_info *out);

/* Fills `out` (numel floats, row-major) with the parameter's initial values. `seed` is derived from the
 * engine seed and the parameter name, so it is identical on every rank and for any rank count. */
typedef zinc_status (*zinc_init_fn)(void *userdata, const zinc_param_info *param, uint64_t seed, float *out);

/* Partitions the flat buffers, allocates parameters, gradients and optimizer state, and initialises
 * parameters through init_fn (every rank computes the same values, so nothing is broadcast).
 * init_fn may be NULL, for a model whose weights come from elsewhere (a file, its own layers): then every
 * parameter, its fp32 master weight and the optimizer's state start at 0.0 (no init scratch is allocated),
 * and the model sets the weights after zinc_build with zinc_set_master (the whole model) or
 * zinc_param_set_master (tensor by tensor), before its first step. Weights it never sets stay 0.
 * A build that fails once it has begun (the ranks disagree, the pre-flight refuses the config on this
 * machine, an allocation or the initialisation fails) leaves the engine good for zinc_destroy only: every
 * other call, registration included, returns ZINC_ERR_STATE naming the build's failure. Create a new engine
 * (with another config) and register the model again. A refusal before it begins (no parameters) leaves
 * the engine as it was. */
zinc_status zinc_build(zinc_engine *e, zinc_init_fn init_fn, void *userdata);
/* Before zinc_build: an item every rank must agree on (up to 256, names up to 48 characters), e.g.
 * zinc_agree_add(e, "steps", &steps, sizeof steps). zinc_build compares, by one collective, every rank's
 * resolved config (key by key), registered parameters, device, seed and these items; a difference is
 * ZINC_ERR_CONFIG on every rank naming the first differing item and the ranks that differ from rank 0.
 * Short values (8- or 4-byte integers, text) are shown in the message. */
zinc_status zinc_agree_add(zinc_engine *e, const char *name, const void *data, size_t n);

/* Fills out[0..n) with elements [first, first + n) (row-major) of the parameter's initial values: the same
 * values a whole-tensor init_fn would write there, whichever pieces it is asked for. */
typedef zinc_status (*zinc_init_range_fn)(void *userdata, const zinc_param_info *param, uint64_t seed, int64_t first,
                                          int64_t n, float *out);

/* The largest piece zinc_build_ranged asks for, in elements (4 MiB of fp32). */
#define ZINC_INIT_PIECE ((int64_t)1 << 20)

/* zinc_build with a ranged initialiser: zinc asks for pieces of at most ZINC_INIT_PIECE elements and only
 * for the elements this rank holds (all of each tensor at stages 0-2, its own shard at stage 3), so the
 * build needs at most 4 MiB of scratch. zinc_build with a whole-tensor init_fn needs none at stages 0-2
 * with fp32 parameters in host memory (init_fn writes into the parameter buffer) and otherwise an fp32
 * copy of the largest tensor this rank holds part of, freed before zinc_build returns; the memory
 * estimate (docs/mem.md) counts either. */
zinc_status zinc_build_ranged(zinc_engine *e, zinc_init_range_fn init_fn, void *userdata);

/* ---------------------------------------------------------------- training */

typedef enum zinc_phase { ZINC_FORWARD = 0, ZINC_BACKWARD = 1 } zinc_phase;

/* The rules of enter and exit (the same at every ZeRO stage; what one stage accepts, all accept, with the
 * same result up to floating-point summation order, and what one refuses, all refuse):
 * - A micro-step is a forward pass followed by a backward pass. A forward entry begins the next micro-step
 *   when it follows a backward exit and no module is open for backward. A forward entered while some
 *   module is open for backward is a recomputation inside backward (activation checkpointing), not a new
 *   micro-step: enter(m, BACKWARD), enter(m, FORWARD), ..., exit(m, FORWARD), ..., exit(m, BACKWARD).
 * - Nesting: other modules may be entered (in either phase) while a module is open, and exited in any
 *   order. A module cannot be entered again in the same phase while it is open (ZINC_ERR_STATE).
 * - Re-entry: a module may be entered several times per pass; this is how a parameter is used in two
 *   places (a tied embedding and output projection): enter its module again where it is used, in forward
 *   to read it and in backward to add its gradient. Gradients of all entries of a micro-step add up.
 * - Cost of nesting and re-entry (stages 2-3; stages 0-1 keep a full gradient buffer and pay nothing): a
 *   module entered for backward twice in a micro-step, or one that was open for backward while another
 *   module had to start a new bucket, keeps its gradients in a buffer of its own (its size in the gradient
 *   dtype, memory category "buckets") from then on and is reduce-scattered once per micro-step, at its end;
 *   the first micro-step in which this is discovered reduces the first entry's gradients separately. A
 *   module entered for backward inside such an open module before that is learned takes a pooled scratch
 *   buffer of its size and is reduce-scattered when it exits. zinc_step_info counts the reduce-scatters.
 * - Forward-only passes (a validation loss) are fine at any time: they change no gradient, and stage 3's
 *   recorded prefetch order ignores them.
 * - zinc_step needs at least one backward pass since the previous step and no open module. */

/* Marks the start of a module's forward or backward. In stage 3 this gathers the module's parameters
 * (and prefetches the next ones in recorded order). In backward it also hands out gradient buffers for
 * the module's parameters (zeroed at the first entry of a micro-step where they are not accumulated in
 * place). */
zinc_status zinc_module_enter(zinc_engine *e, int module, zinc_phase phase);
/* Marks the end of a module's forward or backward. After its last backward entry of a micro-step the
 * module's gradients are complete: they are bucketed and reduced (stages 2-3). Stage 3 releases the
 * gathered parameters unless another open entry or the recorded order needs them soon. */
zinc_status zinc_module_exit(zinc_engine *e, int module, zinc_phase phase);

/* The parameter's values in the compute dtype (zinc_compute_dtype), numel elements, row-major. On cuda
 * this is device memory. Valid only between enter and exit of its module (either phase), at every
 * stage; NULL otherwise (and zinc_last_error says why). Do not keep the pointer past the exit: stage 3
 * frees the memory. */
const void *zinc_param_data(const zinc_param *p);
/* The parameter's gradient buffer (zinc_grad_dtype elements), valid between enter and exit of its module
 * in backward; NULL outside. The model ADDS its gradient, multiplied by zinc_loss_scale, into it. Do not
 * write through the pointer after the exit: the gradients may already be on the wire. */
void *zinc_param_grad(const zinc_param *p);

/* fp32 views, for models that compute in fp32 while the engine runs bf16 or fp16 (one vectorised pass per
 * tensor instead of a call per element). Both need the parameter's module to be entered (backward for
 * the gradient), and `out` / `g` are numel floats in the engine's compute-device memory (host memory on
 * cpu). zinc_param_to_f32 widens the parameter into out. zinc_grad_add_f32 adds g times zinc_loss_scale
 * into the gradient (rounded once to the gradient dtype): g is the gradient of the UNscaled loss, and
 * scaling each gradient as it is written is exactly what scaling the loss before backward does, so the
 * model needs no loss scaling of its own. Memory: nothing on cpu; on a GPU a 4 MiB device scratch,
 * allocated at the first call. */
zinc_status zinc_param_to_f32(const zinc_param *p, float *out);
zinc_status zinc_grad_add_f32(zinc_param *p, const float *g);
/* zinc_grad_add_f32 with a factor: adds g times factor times zinc_loss_scale, for a model whose gradient
 * arrays hold a multiple of the gradient (darknet keeps the negated sum over the batch: factor -1/batch).
 * factor x loss scale is computed in double and rounded to float once (exact for a power-of-two scale), then
 * each element is added as zinc_grad_add_f32 adds it (one product, one rounding to the gradient dtype), so
 * factor 1 gives zinc_grad_add_f32's bits. A factor that is not finite is ZINC_ERR_INVALID_ARG. */
zinc_status zinc_grad_add_scaled_f32(zinc_param *p, const float *g, float factor);
/* The same for a whole module, unpadded: the module's parameters in registration order, each numel floats
 * back to back (zinc_module_numel in all): the layout zinc_gather_master uses, one module. For a model that
 * keeps its parameters in one flat array: one call per module and phase instead of one per tensor. The
 * module must be entered (backward for the gradient); errors as the per-tensor calls. */
int64_t zinc_module_numel(const zinc_engine *e, int module); /* -1 for a bad engine or module */
zinc_status zinc_module_to_f32(zinc_engine *e, int module, float *out);
zinc_status zinc_module_grad_add_f32(zinc_engine *e, int module, const float *g);
zinc_status zinc_module_grad_add_scaled_f32(zinc_engine *e, int module, const float *g, float factor);

zinc_dtype zinc_compute_dtype(const zinc_engine *e);
zinc_dtype zinc_grad_dtype(const zinc_engine *e);
/* Multiply the loss by this before backward (1 for fp32/bf16; the dynamic or static scale for fp16), or
 * equivalently multiply each gradient by it as it is written (zinc_grad_add_f32 does). The engine
 * divides gradients by it, by the accumulation steps and by the world size at the step, so the model
 * writes the gradient of its micro-batch's mean loss. */
float zinc_loss_scale(const zinc_engine *e);

typedef struct zinc_step_info {
    int taken;    /* 1 if the optimizer step was applied, 0 if skipped (fp16 overflow) */
    int64_t step; /* optimizer steps attempted so far (taken + skipped) */
    int64_t steps_taken;
    int64_t steps_skipped;
    float loss_scale; /* the scale for the next step */
    double grad_norm; /* global L2 norm of the (unscaled) gradient before clipping; inf/nan on overflow */
    double lr;        /* learning rate used by this step (or that would have been used, if skipped) */
    /* What the engine did for this step's micro-steps (for tuning and tests): */
    int64_t reduce_scatters;  /* stages 1-3: gradient reduce-scatter calls (buckets and chunks) */
    int64_t prefetch_gathers; /* stage 3: module all-gathers started ahead of use from the recorded trace */
    int64_t blocking_gathers; /* stage 3: module all-gathers the model waited for at zinc_module_enter */
    int64_t preempt_signal;   /* zinc_options.preempt: the signal the ranks agreed on at this step (0: none) */
    uint64_t reserved[7];     /* zero; later fields take this space */
} zinc_step_info;

/* Finishes the gradient reduction, checks for overflow on every rank, and (unless skipped) clips,
 * updates the optimizer state and parameters, and advances the LR schedule. Call once per
 * zinc_grad_accum_steps micro-steps. Returns ZINC_ERR_LOSS_SCALE when an overflow happens with the loss
 * scale already at its minimum (the message names the step and the first non-finite parameter). info may
 * be NULL (nothing reported). */
zinc_status zinc_step(zinc_engine *e, zinc_step_info *info);
/* The loss of the step zinc_step just finished (the mean over its micro-batches), for DeepSpeed's monitors:
 * with "tensorboard" or "csv_monitor" enabled in the config, rank 0 writes it as Train/Samples/train_loss at
 * the samples seen before that step, next to the lr and loss scale zinc_step reports (docs/monitors.md).
 * Call it once after each zinc_step, on every rank or on rank 0 alone (rank 0's value is written; not
 * collective). Without a monitor it only checks the order. ZINC_ERR_STATE when no zinc_step finished since
 * the last call. */
zinc_status zinc_record_loss(zinc_engine *e, double loss);
/* The validation loss after the steps so far, for the monitors (Train/Samples/eval_loss at the samples
 * seen, as DeepSpeed's pipeline engine writes it); any rank may call it, rank 0's is written. */
zinc_status zinc_record_eval_loss(zinc_engine *e, double loss);
/* With zinc_options.preempt: the SIGTERM/SIGINT/SIGUSR1 that reached any rank, as the ranks agreed on it at
 * the latest zinc_step (the same value on every rank; no communication: the flag rides on the step's own
 * statistics all-gather). 0: none. Once set it stays set: save (zinc_save_checkpoint) and exit. */
int zinc_preempt_requested(const zinc_engine *e);

/* Runs a model's own loop on the engine's CPU threads (the cpu_threads of zinc_options, the threads of the
 * engine's kernels), so that the model needs no second thread pool of its own competing for the cores:
 * the threads sleep between jobs instead of spinning. fn(ctx, lo, hi) is called on disjoint ranges
 * [lo, hi) covering [0, n) exactly once each, concurrently, and the call returns when all are done; the
 * calling thread takes part (a thread that finds a range not yet taken runs it, so one thread may run
 * several when another is slow to wake). The ranges depend only on n and the thread count t: min(n, t)
 * ranges of n / t elements, the first n % t of them one more (OpenMP's static schedule), never on timing,
 * so a loop whose ranges write disjoint outputs gives the same bits every run. n == 0 calls nothing and
 * returns ZINC_OK; n < 0, a NULL engine or a NULL fn is ZINC_ERR_INVALID_ARG. A call from inside fn (a
 * nested loop) runs fn(ctx, 0, n) on the calling thread; a call while another thread's loop holds the
 * threads runs its ranges one after another on its own thread. Valid from zinc_create on, on any device
 * (on cuda these are the host threads of the offloaded optimizer step). fn must not call zinc_step or
 * enter or exit modules. */
zinc_status zinc_parallel_for(zinc_engine *e, int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);
/* 1 when the config has DeepSpeed's "activation_checkpointing" block: the model should keep fewer
 * activations and recompute them in backward (a forward inside an open backward is allowed: include/zinc.h
 * "Re-entry"), as DeepSpeed's checkpointing API has the model do. What it recomputes is the model's
 * choice; the block's keys are accepted, and those with no meaning in zinc are named in a warning. */
int zinc_activation_checkpointing(const zinc_engine *e);
/* The threads zinc_parallel_for runs on (the calling thread included), from zinc_create on: for a model
 * sizing per-thread buffers (a BLAS library's) in what it declares (zinc_memory_declare). */
int zinc_cpu_threads(const zinc_engine *e);

/* The model's own spans on the timeline (zinc_options.trace_path), on the calling thread's track:
 * zinc_trace_begin returns the start (0 while the trace is not recording, which zinc_trace_end ignores: off,
 * the pair costs two calls and a branch), zinc_trace_end records the span from it to now. `category` is one
 * of the trace's: "data" (loading a batch: the step's span then begins with it), "forward", "backward",
 * "recompute" (a forward recomputed inside the module's backward, by its module's name), "engine" (anything
 * else); ZINC_ERR_INVALID_ARG for another. `name` is copied (once per distinct name). */
int64_t zinc_trace_begin(const zinc_engine *e);
zinc_status zinc_trace_end(zinc_engine *e, int64_t start, const char *category, const char *name);

/* ---------------------------------------------------------------- topology and config */

int zinc_rank(const zinc_engine *e);
int zinc_world_size(const zinc_engine *e);
int zinc_zero_stage(const zinc_engine *e);
int64_t zinc_micro_batch_size(const zinc_engine *e); /* train_micro_batch_size_per_gpu */
int64_t zinc_grad_accum_steps(const zinc_engine *e); /* gradient_accumulation_steps */
int64_t zinc_train_batch_size(const zinc_engine *e);
int64_t zinc_steps_per_print(const zinc_engine *e); /* 0 when the config asks for no progress report */
zinc_device_kind zinc_device(const zinc_engine *e);
/* 1 when zinc_param_data and zinc_param_grad point to memory the host may read and write directly (device
 * cpu); 0 when they are device memory, reached through zinc_copy_to_host / zinc_copy_from_host or the
 * device's own kernels (cuda). Call it after zinc_create. */
int zinc_device_host_addressable(const zinc_engine *e);
/* Logs through the engine's log callback (rank tag included). printf-style. */
void zinc_log(const zinc_engine *e, zinc_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Collective (every rank calls it): sums n doubles across ranks in place, in rank order (deterministic).
 * For models to average their metrics (loss, accuracy). */
zinc_status zinc_allreduce_sum(zinc_engine *e, double *values, int n);
/* Total elements of all registered parameters (without alignment padding). */
int64_t zinc_numel_total(const zinc_engine *e);
/* Collective: the full fp32 master weights of every parameter, in registration order, each parameter's
 * numel elements back to back (n must be zinc_numel_total), on every rank. For reports and tests. */
zinc_status zinc_gather_master(zinc_engine *e, float *out, size_t n);
/* Collective, the inverse: sets the fp32 master weights from `in` (the layout of zinc_gather_master,
 * n = zinc_numel_total, the same on every rank: refused naming the rank that differs) and the parameters
 * the model reads (rounded to the compute dtype) on every rank and stage, as if zinc_build had initialised
 * them with these values, except that the master weights keep the fp32 values given (zinc_build starts
 * them from the parameters rounded to the compute dtype), so a zinc_gather_master / zinc_set_master round
 * trip is exact; the optimizer's moments and the step count are kept. For loading a model file
 * after zinc_build. Between steps only (no module entered, no micro-step accumulated); a NaN or infinite
 * weight is refused naming its index. A failure after the
 * checks leaves the engine unusable (as a failed checkpoint load does). The optimizer updates themselves
 * (Adam/AdamW, Lion, LAMB: every operation, float or double) are written down in docs/optimizers.md. */
zinc_status zinc_set_master(zinc_engine *e, const float *in, size_t n);
/* Per tensor, for models whose layers own their arrays (no flat copy of the model). Both collective: every
 * rank calls them for the same parameter, in the same order, after zinc_build and between steps (get at any
 * time between steps). zinc_param_get_master fills out (numel floats, row-major) with p's fp32 master
 * weights on every rank: zinc_gather_master's values for that tensor. zinc_param_set_master sets them from
 * `in` (numel finite floats, the same on every rank: refused naming the rank that differs) and the compute
 * copy the model reads (rounded to the compute dtype), at every stage, as zinc_set_master does for the whole
 * model: the round trip is exact, the optimizer's moments and the step count are kept. Each call is one pass
 * over this rank's optimizer state (with NVMe offload its files are read, and for set written, once): for
 * many tensors at once zinc_set_master is one pass for all. A failure after the checks leaves the engine
 * unusable. */
zinc_status zinc_param_get_master(zinc_engine *e, const zinc_param *p, float *out);
zinc_status zinc_param_set_master(zinc_engine *e, zinc_param *p, const float *in);
/* Bound tensors, for models whose layers own their fp32 weight and gradient arrays and run forward and
 * backward in one call of their own (darknet): bind each tensor's arrays once, then per micro-step
 *     zinc_bound_to_f32(e);        the current weights into every bound weights array
 *     ... the model's forward and backward, filling its gradient arrays ...
 *     zinc_bound_grad_add_f32(e);  every bound gradient array, times its factor, into the gradients
 * and zinc_step at the accumulation boundary. The arrays are the model's, numel floats each in the engine's
 * compute-device memory (host memory on cpu); zinc keeps the pointers, never frees them, and reads or writes
 * them only inside these calls. zinc_param_bind_f32 may be called before or after zinc_build, again to
 * re-point, with weights and grad NULL to unbind; grad NULL binds the weights alone (a frozen tensor);
 * grad_factor must be finite (darknet's negated batch sums: -1 / batch).
 * Each call is the documented per-tensor sequence, so its bits are those of the hand-written loop:
 * zinc_bound_to_f32 enters every module holding a bound tensor for forward in registration order, copies
 * with zinc_param_to_f32 and exits (at stage 3 this gathers each module in turn, and it begins the next
 * micro-step as a forward entry does); zinc_bound_grad_add_f32 enters the same modules for backward in
 * reverse order, adds with zinc_grad_add_scaled_f32 and exits (the gradients are reduced as the exits
 * reduce them); zinc_bound_set_master sets every bound tensor's master from its weights array
 * (zinc_param_set_master, collective: after zinc_build, the same values on every rank), so a build with a
 * NULL init_fn starts from the layers' own weights. All three refuse a module that is still entered
 * (ZINC_ERR_STATE) and need the engine built; on an error they exit what they entered. */
zinc_status zinc_param_bind_f32(zinc_param *p, float *weights, const float *grad, float grad_factor);
zinc_status zinc_bound_to_f32(zinc_engine *e);
zinc_status zinc_bound_grad_add_f32(zinc_engine *e);
zinc_status zinc_bound_set_master(zinc_engine *e);
/* Called by zinc_master_foreach with `count` fp32 master weights of parameter `param_index`
 * (registration order) starting at its element `offset`. */
typedef zinc_status (*zinc_master_fn)(void *userdata, int param_index, int64_t offset, const float *values,
                                      int64_t count);
/* Collective: visits every parameter's fp32 master weights on every rank, in registration order, in pieces
 * of at most ZINC_INIT_PIECE elements, holding no more than one piece (4 MiB) beyond the engine's own
 * buffers, where zinc_gather_master needs two copies of the model: for end-of-run reports, checksums and
 * exports. fn must succeed or fail alike on every rank (the pieces are gathered by collectives). */
zinc_status zinc_master_foreach(zinc_engine *e, zinc_master_fn fn, void *userdata);

/* ---------------------------------------------------------------- memory accounting */

typedef enum zinc_mem_category {
    ZINC_MEM_PARAMS = 0,  /* compute-dtype parameters (full, or the shard in stage 3) */
    ZINC_MEM_GRADS,       /* gradient buffers (full in stages 0-1, the fp32 shard in stages 2-3) */
    ZINC_MEM_MASTER,      /* fp32 master weights */
    ZINC_MEM_EXP_AVG,     /* Adam first moment */
    ZINC_MEM_EXP_AVG_SQ,  /* Adam second moment */
    ZINC_MEM_BUCKETS,     /* gradient reduction buckets */
    ZINC_MEM_GATHER,      /* stage-3 gather and prefetch buffers */
    ZINC_MEM_STAGING,     /* host staging for collectives and offload */
    ZINC_MEM_OTHER,       /* small bookkeeping (decay masks, tables) */
    ZINC_MEM_ACTIVATIONS, /* the model's own: what forward keeps for backward (zinc_memory_declare) */
    ZINC_MEM_SCRATCH,     /* the model's own: working buffers, data, anything else it holds for the run */
    ZINC_MEM_CATEGORY_COUNT
} zinc_mem_category;

typedef enum zinc_mem_kind {
    ZINC_MEMKIND_DEVICE = 0, /* GPU memory */
    ZINC_MEMKIND_HOST,       /* ordinary host memory */
    ZINC_MEMKIND_PINNED,     /* page-locked host memory */
    ZINC_MEMKIND_NVME,       /* bytes in files under nvme_path */
    ZINC_MEMKIND_COUNT
} zinc_mem_kind;

const char *zinc_mem_category_name(zinc_mem_category c);
const char *zinc_mem_kind_name(zinc_mem_kind k);

typedef struct zinc_memory_report {
    uint64_t current[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t peak[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t current_total[ZINC_MEMKIND_COUNT];
    uint64_t peak_total[ZINC_MEMKIND_COUNT];
    uint64_t device_used_bytes; /* the device's own count (cudaMemGetInfo total - free); 0 on cpu */
    uint64_t device_total_bytes;
    uint64_t reserved[8]; /* zero; later fields take this space */
} zinc_memory_report;

zinc_status zinc_memory_get(const zinc_engine *e, zinc_memory_report *out);

/* ---------------------------------------------------------------- communication figures */

/* DeepSpeed's "comms_logger" block (docs/comms.md): with "enabled": true the engine counts its collectives
 * on this rank, per op and message size, from zinc_create on; zinc_destroy logs the table (INFO), and
 * "verbose" also logs each op as it completes and the table every steps_per_print steps. One row: */
typedef struct zinc_comms_record {
    /* "all_reduce", "reduce_scatter", "all_gather", "all_gather_object" (the ranks' small records: step
     * statistics, agreement), "broadcast", "barrier" or "send_recv" (zinc.deterministic_reduction's
     * point-to-point messages); with "debug": true followed by
     * " | [Caller Func: f]", the zinc function that issued it */
    char op[96];
    uint64_t msg_bytes;     /* the message size as nccl-tests counts it: all_reduce and broadcast the buffer,
                               reduce_scatter and all_gather the whole array (every rank's piece) */
    uint64_t count;         /* calls of this op with this size */
    double total_latency_s; /* summed, each from issue to completion (a non-blocking one: to its wait) */
    double min_latency_s, max_latency_s;
    double algbw_gbps;    /* GB/s (1e9 bytes/s): msg_bytes x count / total_latency_s */
    double busbw_gbps;    /* algbw x 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather), 1 (broadcast) */
    uint64_t reserved[4]; /* zero; later fields take this space */
} zinc_comms_record;

/* Copies up to `max` rows (sorted by op, then size) into `out` and sets *n to the number of rows there are
 * (0 when comms_logger is not enabled); out may be NULL when max is 0. */
zinc_status zinc_comms_summary(const zinc_engine *e, zinc_comms_record *out, int max, int *n);
/* Logs the table now (DeepSpeed's deepspeed.comm.log_summary()); nothing when comms_logger is not enabled. */
zinc_status zinc_comms_log_summary(const zinc_engine *e);

/* Before zinc_build: memory the model itself will hold during the steps (its activations for one
 * micro-batch, working buffers, data), `bytes` of category ZINC_MEM_ACTIVATIONS or ZINC_MEM_SCRATCH in
 * memory kind `kind` (host, pinned or device), `label` saying what it is (copied; up to 47 characters).
 * Repeatable (up to 64 declarations, summed per category and kind). The sizing plan, the estimate, the
 * pre-flight check in zinc_build (which refuses a run whose whole process would not fit, naming these
 * bytes) and, once built, zinc_memory_get's current and peak figures include them. Allocate them after
 * zinc_build: the pre-flight measures what the machine has left at that point, and the build's own
 * scratch is freed before it returns. ZINC_ERR_STATE after zinc_build; ZINC_ERR_INVALID_ARG for another
 * category or kind, or declarations summing past 2^60 bytes. */
zinc_status zinc_memory_declare(zinc_engine *e, zinc_mem_category category, zinc_mem_kind kind, uint64_t bytes,
                                const char *label);

/* ---------------------------------------------------------------- the compute device */

/* The engine's compute stream (a cudaStream_t as void *) on device cuda, where a model enqueues its own
 * forward and backward work; NULL on cpu. */
void *zinc_stream(const zinc_engine *e);
/* Copies `bytes` between host memory and the engine's compute-device memory (zinc_param_data,
 * zinc_param_grad): a memcpy on cpu; on cuda ordered after the work on the compute stream and complete
 * on return. For models that compute on the host while the engine runs on a GPU. */
zinc_status zinc_copy_to_host(zinc_engine *e, void *host_dst, const void *src, size_t bytes);
zinc_status zinc_copy_from_host(zinc_engine *e, void *dst, const void *host_src, size_t bytes);

/* ---------------------------------------------------------------- checkpoints (docs/checkpoints.md) */

/* Collective (every rank calls it, after zinc_build, between optimizer steps): saves the optimizer state
 * (fp32 master weights, exp_avg, exp_avg_sq; in stage 3 also the parameter shard), the step counters,
 * the loss scaler and the LR-schedule position to <dir>/<tag>/: manifest.json plus one shard file per
 * rank (one file in stage 0). `tag` NULL means "step<N>" (N = optimizer steps so far); tags are 1-128
 * characters of [A-Za-z0-9._+-]. Files are written under temporary names, fsynced and renamed; the tag
 * directory replaces an older one of the same tag atomically, and <dir>/latest is updated last, so an
 * interrupted save leaves the previous checkpoint loadable. Ranks must agree on the tag
 * (checkpoint.tag_validation: Warn uses rank 0's, Ignore too without a warning, Fail errors);
 * checkpoint.use_node_local_storage makes the first rank of every node write the manifest there.
 * Every rank returns the same status. */
zinc_status zinc_save_checkpoint(zinc_engine *e, const char *dir, const char *tag);
/* Collective. With checkpoint.writer.decoupled, zinc_save_checkpoint takes a snapshot of each rank's shard
 * and returns while a writer thread per rank writes it; the next zinc_step on which every rank's writer is
 * done publishes it (`latest`), and a writer's failure fails that step. A save, a load or zinc_checkpoint_keep_last
 * waits for the save in flight first. This call waits for it and publishes it now (before a preemption exit
 * and at the end of a run): its status. ZINC_OK at once when none is in flight. */
zinc_status zinc_checkpoint_wait(zinc_engine *e);
/* Optional, not collective, after zinc_build: with checkpoint.writer.decoupled, maps this rank's snapshot
 * image now and faults its pages in on a background thread, so that the first save's copies do not pay for
 * them (at GPT-2 124M about 0.6-3 s of page faults, which the training thread waited for where the writer had
 * not copied the state before the next optimizer step). The image is the one every decoupled save uses, kept
 * by the engine; its memory (host staging) counts from now. Does nothing without checkpoint.writer.decoupled,
 * when the snapshot would be streamed (memory short) or taken at the save (GPU or NVMe state). */
zinc_status zinc_checkpoint_reserve(zinc_engine *e);

/* Collective (after zinc_build, before training or between steps): loads a checkpoint. `path` is a tag
 * directory (DIR/TAG) or a checkpoint directory (DIR: the tag <DIR>/latest names). Any rank count and
 * ZeRO stage can load a checkpoint saved with any other: each rank reads only the byte ranges of its own
 * shard. The model must register the same parameters (names, shapes, order) as the saved one; the error
 * names the first difference. Checksums are verified; a missing, truncated or corrupted file is an error
 * naming it. Parameters are rebuilt from the fp32 master weights; steps, loss scaler and LR-schedule
 * position are restored, so continuing with the same rank count, stage and config is bitwise identical
 * to the uninterrupted run. A failure after the state was touched leaves the engine unusable (it is
 * logged): destroy it. Every rank returns the same status. */
zinc_status zinc_load_checkpoint(zinc_engine *e, const char *path);
/* Collective, after zinc_save_checkpoint: keeps the newest `keep` (>= 1) checkpoints of dir whose tags zinc
 * named (step<N>, by N, spelled as a save spells it: step05 is another name) and removes the older ones,
 * never the one dir/latest names; tags of other names, and tags newer than the one latest names (a longer
 * run's), are left alone and take no slot. Like the Hugging Face Trainer's save_total_limit. Each goes aside (.step<N>.removing) before its
 * removal, so a kill part-way leaves latest loadable; the next save removes what was left aside. */
zinc_status zinc_checkpoint_keep_last(zinc_engine *e, const char *dir, int keep);

/* Optimizer steps attempted so far (taken + skipped), restored by zinc_load_checkpoint: the step a
 * resumed training loop continues from. */
int64_t zinc_step_count(const zinc_engine *e);

/* Not collective, needs no engine: writes the full fp32 master weights of checkpoint `checkpoint`
 * (DIR or DIR/TAG) to `out_path` as a safetensors file, one tensor per parameter (its registered name
 * and shape) in `dtype` (ZINC_FP32, or rounded to nearest even for ZINC_BF16 / ZINC_FP16). Reads the
 * shard files directly, verifying their checksums. */
zinc_status zinc_export_safetensors(const char *checkpoint, const char *out_path, zinc_dtype dtype);
/* The same with flags: ZINC_EXPORT_REPLACE replaces an existing regular file at out_path (without it an
 * existing out_path is an error). Anything but a regular file (a link, device, FIFO, directory) and the
 * checkpoint's own files are never replaced; out_path's directory must belong to this user or root and
 * not be writable by every user unless sticky. zinc_export_safetensors is flags 0. */
#define ZINC_EXPORT_REPLACE 1u
zinc_status zinc_export_safetensors_ex(const char *checkpoint, const char *out_path, zinc_dtype dtype, unsigned flags);

/* A model's own files through the library's guarded IO (examples/: GPT-2's weights and tokens).
 * zinc_file_open_input opens `path` for reading ("rb") and refuses what is not a regular file (a directory, a
 * FIFO); `what` names it in the error ("the token file"). zinc_file_write writes the n buffers data[i] of
 * len[i] bytes, in order, to a fresh temporary file beside `path`, fsynced and renamed over it: an existing
 * regular file is replaced only with ZINC_EXPORT_REPLACE, and never a link, a special file or one of `inputs`
 * (NULL-terminated, may be NULL: the files the output is made from), as zinc_export_safetensors_ex. */
zinc_status zinc_file_open_input(const char *what, const char *path, FILE **f);
zinc_status zinc_file_write(const char *what, const char *path, int n, const void *const *data, const size_t *len,
                            unsigned flags, const char *const *inputs);

/* Integers stored with every checkpoint this engine saves, in its sealed manifest ("meta"): what a model's
 * parameter shapes do not show (GPT-2's head count and vocabulary), so a resume or an export can refuse
 * settings that disagree with the saved model. key: 1 to ZINC_META_KEY_MAX characters of [A-Za-z0-9._-];
 * at most ZINC_META_MAX keys; setting a key again replaces its value. Not collective. */
#define ZINC_META_MAX 32
#define ZINC_META_KEY_MAX 48
zinc_status zinc_checkpoint_meta_set(zinc_engine *e, const char *key, int64_t value);
/* Not collective, needs no engine: the value of `key` in checkpoint `checkpoint` (DIR or DIR/TAG; the
 * manifest's seal and fields are verified first). *found is 1 with *value set, or 0 when the checkpoint
 * holds no such key (one saved before meta existed holds none). */
zinc_status zinc_checkpoint_meta_get(const char *checkpoint, const char *key, int64_t *value, int *found);

/* ---------------------------------------------------------------- FLOPs (achieved FLOP/s and MFU) */

/* The model's floating-point operations, as the model counts them (a multiply-add is 2 FLOPs), so that the
 * zinc program, a trace (zinc train --trace) and a caller can turn time into FLOP/s and MFU. zinc does
 * not count anything itself: these are the model's declarations, kept and reported. A "sample" is one unit
 * of train_batch_size (for a language model, one sequence). Not collective; any time after the module
 * exists (before or after zinc_build); setting again replaces.
 *
 * Per module: the FLOPs of its forward entries and of its backward entries per sample (a backward that
 * computes input and weight gradients is usually twice its forward). Both finite and >= 0. */
zinc_status zinc_module_flops(zinc_engine *e, int module, double forward_per_sample, double backward_per_sample);
/* The module's declaration (0 and 0 when none was made). */
zinc_status zinc_module_flops_get(const zinc_engine *e, int module, double *forward_per_sample,
                                  double *backward_per_sample);
/* The whole model's training FLOPs per sample (forward and backward), for a model that counts them as a
 * whole or does work outside its modules; 0 clears it. Finite and >= 0. */
zinc_status zinc_model_flops(zinc_engine *e, double flops_per_sample);
/* The training FLOPs per sample: zinc_model_flops's value when set, else the sum of the modules' forward
 * and backward declarations; 0 when nothing was declared; -1.0 for a NULL engine. Activation
 * checkpointing's recomputed forward is not in it (model FLOPs, as MFU counts them). */
double zinc_flops_per_sample(const zinc_engine *e);

#ifdef __cplusplus
}
#endif
#endif /* ZINC_H */
