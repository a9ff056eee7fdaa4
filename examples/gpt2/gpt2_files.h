/* The files GPT-2 users already have, in llm.c's formats (written here from the format facts):
 *  - model checkpoints: 256 little-endian int32 header (magic 20240326; version 3 = fp32 parameters,
 *    5 = bf16; header[2..7] = max context, vocabulary, layers, heads, channels, padded vocabulary), then
 *    the parameters in GPT2_NKINDS groups, each "for all layers" stacked (gpt2_kind_name order);
 *  - token files: 256 int32 header (magic 20240520, version 1, header[2] = token count), then uint16 tokens;
 *  - plain text, one token per byte (vocabulary 256).
 * Every reader checks the header, the file size and the values, and fails with a message (into err) that
 * names the file, the field and the expected value. */
#ifndef ZINC_EXAMPLES_GPT2_FILES_H
#define ZINC_EXAMPLES_GPT2_FILES_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "zinc.h"

#define GPT2_MODEL_MAGIC 20240326
#define GPT2_TOKENS_MAGIC 20240520
#define GPT2_NKINDS 16

typedef struct gpt2_shape {
    int max_context; /* positions in wpe */
    int vocab;       /* real vocabulary V: the loss and sampling see only tokens 0..V-1 */
    int layers;
    int heads;
    int channels;
    int padded_vocab; /* rows of wte (>= vocab) */
} gpt2_shape;

/* Parameter kinds in llm.c's order: wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw,
 * fcb, fcprojw, fcprojb, lnfw, lnfb. Kinds 2..13 exist once per layer. */
enum {
    GPT2_WTE,
    GPT2_WPE,
    GPT2_LN1W,
    GPT2_LN1B,
    GPT2_QKVW,
    GPT2_QKVB,
    GPT2_ATTPROJW,
    GPT2_ATTPROJB,
    GPT2_LN2W,
    GPT2_LN2B,
    GPT2_FCW,
    GPT2_FCB,
    GPT2_FCPROJW,
    GPT2_FCPROJB,
    GPT2_LNFW,
    GPT2_LNFB
};
const char *gpt2_kind_name(int kind);
/* Elements of one tensor of a kind (one layer's for per-layer kinds). */
int64_t gpt2_kind_numel(const gpt2_shape *s, int kind);
/* The rows of a kind's tensor that Muon steps as a matrix (ZINC_PARAM_MUON: the hidden 2-D weights, every
 * 2-D weight but the embeddings, wte being also the tied head), 0 for the others; its columns: numel / rows. */
int64_t gpt2_kind_muon_rows(const gpt2_shape *s, int kind);
/* Offset (elements) of kind's tensor of layer l (0 for global kinds) in llm.c's flat order; total count. */
int64_t gpt2_llmc_offset(const gpt2_shape *s, int kind, int layer);
int64_t gpt2_num_params(const gpt2_shape *s);
/* 0 when the shape is valid; else fills err ("<field> = <value>: <rule>"). */
int gpt2_shape_check(const gpt2_shape *s, char *err, size_t cap);

/* Reads a checkpoint: its shape and all parameters (fp32, malloc'd, llm.c order). version_out may be NULL. */
zinc_status gpt2_model_read(const char *path, gpt2_shape *shape, float **params, int *version_out, char *err,
                            size_t cap);
/* A checkpoint opened for reading its parameters piece by piece (--init without a copy of the model in
 * memory): gpt2_model_open checks the header and the size as gpt2_model_read does; read_range reads
 * elements [first, first + n) of llm.c's order as fp32 (widening bf16). */
typedef struct gpt2_model_file {
    FILE *f;
    gpt2_shape shape;
    int version;
    char path[4096];
} gpt2_model_file;
zinc_status gpt2_model_open(const char *path, gpt2_model_file *mf, char *err, size_t cap);
zinc_status gpt2_model_read_range(gpt2_model_file *mf, int64_t first, int64_t n, float *out, char *err, size_t cap);
void gpt2_model_close(gpt2_model_file *mf);
/* Writes one (version 3: fp32, 5: bf16 rounded to nearest even) through the library's safe writer
 * (zinc_file_write): an existing file only with flags ZINC_EXPORT_REPLACE, never one of `inputs`. */
zinc_status gpt2_model_write(const char *path, const gpt2_shape *shape, const float *params, int version,
                             unsigned flags, const char *const *inputs, char *err, size_t cap);

typedef struct gpt2_tokens {
    uint16_t *tok;
    int64_t n;
} gpt2_tokens;
zinc_status gpt2_tokens_read(const char *path, gpt2_tokens *out, char *err, size_t cap);
zinc_status gpt2_tokens_write(const char *path, const uint16_t *tok, int64_t n, unsigned flags, char *err, size_t cap);
/* A text file, one token per byte. */
zinc_status gpt2_tokens_from_text(const char *path, gpt2_tokens *out, char *err, size_t cap);
/* The first token >= vocab makes an error naming the file (what), its position and the vocabulary. */
zinc_status gpt2_tokens_check(const gpt2_tokens *t, int vocab, const char *what, char *err, size_t cap);
void gpt2_tokens_free(gpt2_tokens *t);

/* llm.c's sequential loader: window k of the run is tokens [p, p + T] where batches of `global` windows
 * (global*T + 1 tokens) follow each other and wrap to the start when the next would not fit. Returns the
 * batches per pass (0: the file is too short for one). */
int64_t gpt2_batches_per_pass(const gpt2_tokens *t, int T, int64_t global);
/* Copies window k (T + 1 tokens) to dst. */
void gpt2_window(const gpt2_tokens *t, int T, int64_t global, int64_t k, uint16_t *dst);
/* --shuffle: the batch of each pass is picked by a permutation of the pass's batches that depends on
 * `seed` and the pass number (an affine map i -> (a i + b) mod batches with a coprime to batches); the
 * windows inside a batch keep their order. Every rank computes the same permutation. */
void gpt2_window_shuffled(const gpt2_tokens *t, int T, int64_t global, int64_t k, uint64_t seed, uint16_t *dst);

#endif
