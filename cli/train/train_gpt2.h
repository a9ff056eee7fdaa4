/* zinc train --model gpt2, shared by its files: the options (train_gpt2.c: options, shape, data, build)
 * and the run (train_gpt2_run.c: progress, validation, samples, summary, report; gpt2_sample.c). */
#ifndef ZINC_CLI_TRAIN_GPT2_H
#define ZINC_CLI_TRAIN_GPT2_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/checkpoint/gpt2_cli.h"
#include "cli/train/train.h"
#include "examples/gpt2/gpt2.h"

typedef struct gpt2_opts {
    const char *init, *data, *text, *val_data;
    int64_t val_every, val_batches, sample_every, sample_tokens;
    int64_t layers, width, heads, vocab, padded, max_context, context; /* -1: not given */
    bool shuffle;
    int gemm_i;     /* --gemm: index in GPT2_GEMM_CHOICES (0: auto, the default) */
    int products_i; /* --products: index in GPT2_PRODUCTS_CHOICES (0: auto, the default) */
} gpt2_opts;

/* A new model's shape where no option gives it (train_gpt2.c's zcli_gpt2_shape; --help prints them). The
 * vocabulary is GPT-2's tokenizer's, or one token per byte with --text; zinc mem's --gpt2 shapes take GPT-2's
 * vocabulary and context from here too. */
#define ZCLI_GPT2_LAYERS 4
#define ZCLI_GPT2_WIDTH 128
#define ZCLI_GPT2_HEADS 4
#define ZCLI_GPT2_CONTEXT 256
#define ZCLI_GPT2_MAX_CONTEXT 1024 /* GPT-2's published context (zinc mem --gpt2) */
/* GPT-2's vocabulary and wte's padding rule: cli/checkpoint/gpt2_cli.h (the HF reader and export need them too). */

#define GPT2_GEMM_CHOICES "auto|openblas|onednn"
#define GPT2_PRODUCTS_CHOICES "auto|fp32|bf16"

/* --init's file, open until the build has read it piece by piece: llm.c's, or a Hugging Face GPT-2's. */
typedef struct zcli_gpt2_init {
    gpt2_model_file llmc;
    zcli_gpt2_hf hf;
    int is_hf;
} zcli_gpt2_init;
void zcli_gpt2_init_close(zcli_gpt2_init *in);

typedef struct gpt2_run {
    gpt2_shape s;
    int64_t context;
    zcli_gpt2_init init_file; /* --init, open until the build has read it piece by piece */
    gpt2_tokens train, val;
    const char *train_name, *val_name; /* the files they came from, for messages */
    gpt2_model *m;
    json_t *val_losses, *sample_text;
    double last_val, t_last;
    int64_t last_step, val_every;
    uint64_t rng;
    uint16_t prompt;
} gpt2_run;

/* The shape and context as zinc train picks them: --init's header (shape options must agree with it; the file
 * stays open in *init for the build), a resumed checkpoint's, or the options with their defaults. 0, or -1
 * after printing why. */
int zcli_gpt2_shape(const gpt2_opts *g, const char *resume, gpt2_shape *s, int64_t *context, zcli_gpt2_init *init);
/* Selects --gemm and --products, process-wide, before the model exists (its BLAS buffers depend on them):
 * 0, or 2 after printing why. */
int zcli_gpt2_select_products(const gpt2_opts *g);
/* zinc mem estimate --model gpt2 (train_gpt2_memory.c; train.h's memory hook). */
int zcli_gpt2_memory(const void *model_opts, const zcli_train_opts *o, const zinc_config *cfg, int threads,
                     zcli_model_memory *out);

/* The run's hooks (train_gpt2_run.c). */
int zcli_gpt2_start(zcli_train *t);
int zcli_gpt2_after_step(zcli_train *t, int64_t step);
int zcli_gpt2_finish(zcli_train *t);
void zcli_gpt2_summary(zcli_train *t, double elapsed, double norm, uint64_t sum);
int zcli_gpt2_report(zcli_train *t, json_t *j, double elapsed);

/* Generates n tokens after `start` (temperature 1) and prints them on rank 0 (collective; gpt2_sample.c).
 * *text_out (when given) gets the text. 0, or -1 after printing why. */
int zcli_gpt2_sample(zinc_engine *e, gpt2_model *m, int n, uint16_t start, uint64_t *rng, json_t **text_out);

#endif
