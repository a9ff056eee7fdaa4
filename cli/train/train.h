/* zinc train: one driver (train_driver.c) runs any model through this small interface. The driver owns
 * what every run does alike: the options every model takes (train_options.c), the output-path checks and
 * the run lock (train_guard.h), creating the engine, the ranks' agreement on the run, resuming, the step
 * loop with --save-every, the final save, the parameter checksum and the --report file. A model
 * (train_mlp.c, train_gpt2.c) brings its own option table and the hooks below; a hook returns 0, or -1
 * after printing why (prefixed "zinc train: "). */
#ifndef ZINC_CLI_TRAIN_H
#define ZINC_CLI_TRAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/common/options.h"
#include "base/config/config.h"
#include "zinc.h"

/* Exit statuses of a run that a SIGTERM, SIGINT or SIGUSR1 stopped at a step boundary (113 is the
 * collective watchdog's): saved (--save) and resumable with --resume DIR, or stopped without a save. */
#define ZCLI_EXIT_PREEMPTED 114
#define ZCLI_EXIT_STOPPED 115

/* The options every model takes (the table in train_options.c). */
typedef struct zcli_train_opts {
    int model; /* the --model choice: 0 mlp, 1 gpt2 */
    const char *config, *report, *save_dir, *resume;
    const char *peak_flops;          /* --peak-flops: a number or "sgemm" (train_flops.h), NULL: none */
    const char *trace, *trace_steps; /* --trace FILE, --trace-steps A:B (checked by zcli_trace_steps) */
    int64_t trace_first, trace_last;
    int64_t steps, seed, threads, save_every, keep_last;
    int device, nonfinite; /* choices: cpu|cuda|auto (-1: the config's), error|skip */
    bool quiet, force;     /* force: an existing --report file may be replaced */
    bool trace_per_rank;   /* --trace-per-rank */
    zcli_list sets;
} zcli_train_opts;

/* A model's host matrix product (gpt2_sgemm's signature), and its bf16 one (raw bf16 operands, float C):
 * what --peak-flops sgemm calibrates, so the peak is the rate of the backend the products run on. */
typedef void (*zcli_gemm_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
typedef void (*zcli_gemm_bf16_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                                  int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* What the driver knows during a run; models read it (and set `every`, the progress cadence). */
typedef struct zcli_train {
    const zcli_train_opts *o;
    void *model_opts; /* the model's options struct, filled by its table */
    void *model;      /* the model's state (its prepare allocates it) */
    zinc_engine *e;
    int64_t start;     /* the first step this run takes (the resumed checkpoint's step, else 0) */
    int64_t every;     /* the model's progress cadence in steps (0: none) */
    double t0;         /* when the loop began (seconds, zclock_now_s) */
    double train_s;    /* seconds spent in training steps (micro-steps, zinc_step, step_end) */
    double first_loss; /* the loss of the run's first step (NAN before it) */
    double loss;       /* the latest step's loss */
    zinc_step_info info;
    int64_t taken;                       /* steps of this run that were taken (not skipped) */
    double flops_per_sample, peak_flops; /* the model's declaration and the job's peak FLOP/s (train_flops.h) */
    /* the model's products for --peak-flops sgemm (its build sets them; NULL: OpenBLAS's cblas_sgemm, what
     * the MLP runs), their name for messages and the report, and whether MFU above 100% was warned about */
    zcli_gemm_fn gemm;
    zcli_gemm_bf16_fn gemm_bf16; /* set instead when the products run in bf16 */
    const char *gemm_name;
    bool mfu_warned;
    /* per step of this run, for the report: the loss, the lr it used, the loss scale after it */
    json_t *losses, *lrs, *loss_scales, *step_seconds;
    /* the run's input files, which no output may replace: [0] the config (the driver's), then the model's
     * (its prepare fills them; NULL-terminated) */
    const char *inputs[8];
} zcli_train;

/* What `zinc mem estimate --model NAME` needs of a model without building it (cli/mem_whole.c): its
 * parameters in registration order (each one's element count and module), the memory it allocates outside
 * the engine (from the tables its create allocates from, so the estimate cannot drift from the run), and a
 * line that names it. */
typedef struct zcli_model_memory {
    int nparams;
    int64_t *numel; /* malloc'd: the caller frees numel and module */
    int *module;
    int64_t *muon_rows; /* malloc'd or NULL (the caller frees it): a Muon matrix's rows, 0 (zplan_model) */
    uint64_t activations, scratch, host, data; /* host: token ids, BLAS buffers; data: the tokens it holds */
    bool ranged_init;                          /* the build reads its weights piece by piece (gpt2 --init) */
    char describe[320];
} zcli_model_memory;

typedef struct zcli_train_model {
    const char *name;          /* the --model value */
    const zcli_table *options; /* the model's own options */
    size_t opts_size;
    const char *usage, *about; /* its --help around the tables */
    void (*defaults)(void *model_opts);
    /* Before zinc_create: check the model's options against each other, read its files. Returns the exit
     * status: 0 to go on, 2 for a usage error, 1 for a bad file. */
    int (*prepare)(zcli_train *t);
    /* After zinc_create and the run's agreement: add the model's own agreement items, register and build
     * the model (zinc_build compares the ranks). */
    int (*build)(zcli_train *t);
    /* After the resume, before the first step: checks that need the engine's batch size, files beside the
     * checkpoints, the progress cadence (t->every). */
    int (*start)(zcli_train *t);
    /* One optimizer step is zinc_grad_accum_steps micro-steps, zinc_step (the driver's), then step_end: micro-step
     * j (0..) of global step `step` runs forward and backward on this rank's samples; step_end reads the
     * step's loss (collective: every rank's samples). Both return 0, or -1 with zinc_last_error set (the
     * driver prints "step N failed"). */
    int (*micro_step)(zcli_train *t, int64_t step, int64_t j);
    int (*step_end)(zcli_train *t, double *loss);
    /* After each step (every rank; collective hooks allowed): progress lines, validation, samples. */
    int (*after_step)(zcli_train *t, int64_t step);
    /* After the last step, before the final save (every rank). NULL: nothing. */
    int (*finish)(zcli_train *t);
    /* The parameter count (the driver streams the parameters for the checksum and the norm:
     * zcli_param_checksum, train_memory.h). */
    int64_t (*numel)(zcli_train *t);
    /* Rank 0: the summary lines on stderr, and the model's keys in the --report object. */
    void (*summary)(zcli_train *t, double elapsed, double norm, uint64_t checksum);
    int (*report)(zcli_train *t, json_t *j, double elapsed);
    void (*destroy)(zcli_train *t);
    /* zinc mem estimate --model: the layout and declared memory for these options, this config and `threads`
     * compute threads (zcli_model_memory). 0, or -1 after printing why. */
    int (*memory)(const void *model_opts, const zcli_train_opts *o, const zinc_config *cfg, int threads,
                  zcli_model_memory *out);
} zcli_train_model;

extern const zcli_train_model zcli_model_mlp, zcli_model_gpt2;

/* The table of the options every model takes (train_options.c) and their defaults. */
extern const zcli_table zcli_train_table;
void zcli_train_defaults(zcli_train_opts *o);

/* The model --model names (argv scanned from `first`): gpt2 or the MLP, the default. */
const zcli_train_model *zcli_train_model_named(int first, int argc, char **argv);
/* The options every model takes, read out of a whole zinc train command line (argv[first..argc), the model's
 * own options skipped) with their defaults: what zinc launch needs of the command it runs. 0, or 2 after
 * printing the usage error. */
int zcli_train_read(int first, int argc, char **argv, zcli_train_opts *o);
/* zinc train: picks the model from --model, parses, runs the driver. */
int zcli_cmd_train(int argc, char **argv);
/* --trace-steps A:B into its steps: 0, or -1 when it is not 1 <= A <= B. */
int zcli_trace_steps(const char *text, int64_t *first, int64_t *last);
/* The driver (train_driver.c): one run of model m with the parsed options. The exit status. */
int zcli_train_run(const zcli_train_model *m, zcli_train_opts *o, void *model_opts);

/* Helpers the models share. */
/* FNV-1a over the float bits: a 64-bit fingerprint to compare runs. */
uint64_t zcli_checksum(const float *x, size_t n);
/* Prints "zinc train: <what>: <zinc_last_error()>" and returns -1. */
int zcli_train_fail(const char *what);
/* Adds an item the ranks must agree on; -1 after printing. */
int zcli_agree(zinc_engine *e, const char *what, const void *v, size_t n);

#endif
