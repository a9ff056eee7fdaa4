/* The GPT-2 parts of the zinc program: zinc train --model gpt2 (train_gpt2.c) and zinc checkpoint
 * export --format llmc (cmd_export_llmc.c). The shape of a model trained by zinc is saved beside its
 * checkpoints as <save dir>/zinc_gpt2.json, which export and --resume read. */
#ifndef ZINC_CLI_GPT2_CLI_H
#define ZINC_CLI_GPT2_CLI_H

#include "examples/gpt2/gpt2_files.h"

#include <stdint.h>

/* zinc checkpoint export --format llmc: PATH (DIR or DIR/TAG) as an llm.c model file `out` of `version` 3
 * (fp32) or 5 (bf16), through the safe writer (an existing `out` only with force). The shape sealed in the
 * checkpoint; vocab and heads (-1: not given) must agree with it, or complete it for a checkpoint saved
 * before shapes were sealed. The exit status. */
int zcli_export_llmc(const char *path, const char *out, int version, int64_t vocab, int64_t heads, int force);

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

#endif
