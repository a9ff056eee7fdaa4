/* The GPT-2 parts of the zinc program: zinc train --model gpt2 (train_gpt2.c) and zinc checkpoint
 * export --format llmc (cmd_export_llmc.c). The shape of a model trained by zinc is saved beside its
 * checkpoints as <save dir>/zinc_gpt2.json, which export and --resume read. */
#ifndef ZINC_CLI_GPT2_CLI_H
#define ZINC_CLI_GPT2_CLI_H

#include "examples/gpt2/gpt2_files.h"
#include "runtime/checkpoint/safetensors.h"

#include <stdint.h>

/* zinc checkpoint export --format llmc: PATH (DIR or DIR/TAG) as an llm.c model file `out` of `version` 3
 * (fp32) or 5 (bf16), through the safe writer (an existing `out` only with force). The shape sealed in the
 * checkpoint; vocab and heads (-1: not given) must agree with it, or complete it for a checkpoint saved
 * before shapes were sealed. The exit status. */
int zcli_export_llmc(const char *path, const char *out, int version, int64_t vocab, int64_t heads, int force);

/* The model's vocabulary and heads for an export of PATH (cmd_export_llmc.c): the shape sealed in the checkpoint
 * (vocab and heads, -1 when not given, must agree), or, saved before shapes were sealed, zinc_gpt2.json or the
 * flags; *sealed is 0 for a sealed shape (then *s is whole). The exit status on failure (printed), else 0. */
int zcli_gpt2_export_shape(const char *path, int64_t vocab, int64_t heads, gpt2_shape *s, int *sealed);

#define ZCLI_GPT2_SHAPE_FILE "zinc_gpt2.json"
/* Writes dir/zinc_gpt2.json; 0 on success. */
int zcli_gpt2_shape_save(const char *dir, const gpt2_shape *s, char *err, size_t cap);
/* Reads PATH/zinc_gpt2.json or, when PATH is DIR/TAG, DIR/zinc_gpt2.json. 0 on success, 1 when neither
 * exists, -1 on a bad file (err says why). */
int zcli_gpt2_shape_load(const char *path, gpt2_shape *s, char *err, size_t cap);

/* The model shape sealed in the checkpoint's manifest (zinc_checkpoint_meta_set; gpt2.* keys), so a resume
 * or export cannot take another shape silently. */
extern const char *const zcli_gpt2_shape_flags[6]; /* --max-context --vocab --layers --heads --width --padded-vocab */
/* After zinc_create: every checkpoint this engine saves carries s. 0, or -1 (zinc_last_error says why). */
int zcli_gpt2_shape_seal(zinc_engine *e, const gpt2_shape *s);
/* The shape sealed in `checkpoint`: 0 with *s, 1 when it has none (saved before shapes were sealed), -1 with
 * err on an unreadable checkpoint or a bad sealed shape. */
int zcli_gpt2_shape_sealed(const char *checkpoint, gpt2_shape *s, char *err, size_t cap);
/* given[i] (-1: not given) in zcli_gpt2_shape_flags order against s: 0, or -1 with err naming the flag and both
 * values. */
int zcli_gpt2_shape_flags_agree(const char *checkpoint, const gpt2_shape *s, const int64_t given[6], char *err,
                                size_t cap);

/* Hugging Face GPT-2 (transformers' GPT2LMHeadModel), both ways (gpt2_hf.c, export_hf.c; docs/checkpoints.md). */
#define ZCLI_HF_WEIGHTS "model.safetensors"
#define ZCLI_HF_CONFIG "config.json"
#define ZCLI_HF_INDEX "model.safetensors.index.json" /* save_pretrained's, when it shards the weights */
/* Whether --init PATH names one: a directory (save_pretrained's), a file ending in .safetensors or an index
 * (zckpt_st_is_index). */
int zcli_gpt2_hf_path(const char *path);
/* The HF name of kind's tensor of `layer` (0 for global kinds) after `prefix` ("transformer." or ""). */
void zcli_gpt2_hf_name(const char *prefix, int kind, int layer, char *buf, size_t cap);
/* Whether HF stores kind as a Conv1D weight (in, out): zinc's (out, in) transposed. */
int zcli_gpt2_hf_conv1d(int kind);
/* HF's shape of kind's tensor for shape s (wte without padding rows): its ndim. */
int zcli_gpt2_hf_shape(const gpt2_shape *s, int kind, int64_t shape[2]);

/* An HF GPT-2 opened for --init: the header checked, every tensor found and of the shape the file gives. */
typedef struct zcli_gpt2_hf {
    zckpt_st_set set; /* one file, or the shards of an index */
    char path[4200];
    const char *prefix;        /* "transformer." or "" */
    gpt2_shape s;              /* V, C, max context, layers from the tensors; heads from config.json or --heads */
    const zckpt_st_tensor **t; /* by registration slot: wte, wpe, 12 per block, lnfw, lnfb */
    const zckpt_st_file **tf;  /* the file holding each slot's tensor */
} zcli_gpt2_hf;
/* Opens PATH; given (zcli_gpt2_shape_flags order, -1: not given) must agree with the file, --padded-vocab
 * (given[5]) is free (then V rounded up to a multiple of 64). 0, or -1 with err (naming the file, the
 * tensor, its shape and the expected one, or the flag). */
int zcli_gpt2_hf_open(const char *path, const int64_t given[6], zcli_gpt2_hf *h, char *err, size_t cap);
/* gpt2_config's init_read over an open zcli_gpt2_hf (ctx): the Conv1D weights transposed, wte padded. */
zinc_status zcli_gpt2_hf_read(void *ctx, int kind, int layer, int64_t first, int64_t n, float *out);
void zcli_gpt2_hf_close(zcli_gpt2_hf *h);
/* zinc checkpoint export --format hf: PATH's model as an HF directory `out` (model.safetensors in dtype,
 * config.json), through the safe writer (existing files only with force); vocab and heads as for llmc. The exit
 * status. */
int zcli_export_hf(const char *path, const char *out, zinc_dtype dtype, int64_t vocab, int64_t heads, int force);

/* GPT-2's vocabulary facts, stated once for every room (train's defaults, zinc mem's shapes, the HF files). */
#define ZCLI_GPT2_VOCAB 50257               /* GPT-2's BPE vocabulary */
#define ZCLI_GPT2_EOT (ZCLI_GPT2_VOCAB - 1) /* its <|endoftext|>, HF's bos and eos token */
#define ZCLI_GPT2_BYTE_VOCAB 256            /* --text */
#define ZCLI_GPT2_VOCAB_ROUND 64            /* wte's rows: the vocabulary rounded up to a multiple of this */
/* wte's rows for a vocabulary of v tokens when --padded-vocab is not given (gpt2_shape_file.c). */
int zcli_gpt2_padded_vocab(int v);

#endif
