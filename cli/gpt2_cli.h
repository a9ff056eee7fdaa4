/* The GPT-2 parts of the zinc program: zinc train --model gpt2 (train_gpt2.c) and zinc checkpoint
 * export --format llmc (cmd_export_llmc.c). The shape of a model trained by zinc is saved beside its
 * checkpoints as <save dir>/zinc_gpt2.json, which export and --resume read. */
#ifndef ZINC_CLI_GPT2_CLI_H
#define ZINC_CLI_GPT2_CLI_H

#include "examples/gpt2/gpt2_files.h"

#include <stdint.h>

/* zinc checkpoint export --format llmc: PATH (DIR or DIR/TAG) as an llm.c model file `out` of `version` 3
 * (fp32) or 5 (bf16); vocab and heads (-1: from zinc_gpt2.json) complete the shape. The exit status. */
int zcli_export_llmc(const char *path, const char *out, int version, int64_t vocab, int64_t heads);

#define ZCLI_GPT2_SHAPE_FILE "zinc_gpt2.json"
/* Writes dir/zinc_gpt2.json; 0 on success. */
int zcli_gpt2_shape_save(const char *dir, const gpt2_shape *s, char *err, size_t cap);
/* Reads PATH/zinc_gpt2.json or, when PATH is DIR/TAG, DIR/zinc_gpt2.json. 0 on success, 1 when neither
 * exists, -1 on a bad file (err says why). */
int zcli_gpt2_shape_load(const char *path, gpt2_shape *s, char *err, size_t cap);

#endif
