/* Safetensors files, read and written. Reading safetensors files (the format zinc_export_safetensors writes, checkpoint_export.c): an 8-byte
 * little-endian header length N, N bytes of a JSON object (per tensor: "dtype", "shape", "data_offsets"
 * [begin, end) into the data that follows; an optional "__metadata__" of strings), then the data. A file is
 * opened through the safe reader (zfile_open_input: no FIFO, no device, no directory) and its header checked
 * whole before a tensor is read: N within the file and at most ZCKPT_ST_HEADER_MAX, a JSON object, every
 * tensor's dtype F32, BF16 or F16, its shape at most ZINC_MAX_DIMS non-negative dimensions, its offsets inside
 * the data and exactly numel x the dtype's size long. Tensors are then read by element ranges (pread: a
 * reader of a few ranges touches only those bytes), widened to fp32. */
#ifndef ZINC_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define ZINC_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "zinc.h"

#define ZCKPT_ST_HEADER_MAX ((uint64_t)100 << 20) /* the safetensors format's own limit on the header */

typedef struct zckpt_st_tensor {
    char *name;
    zinc_dtype dtype; /* ZINC_FP32, ZINC_BF16 or ZINC_FP16 */
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int64_t numel;
    int64_t offset; /* of its first byte in the file */
} zckpt_st_tensor;

typedef struct zckpt_st_file {
    int fd;
    char path[4096];
    int64_t size;
    int ntensors;
    zckpt_st_tensor *t; /* in the header's order */
} zckpt_st_file;

/* Opens and checks `path` (`what` names it in messages: "--init"). On failure nothing is left open. */
zinc_status zckpt_st_open(zckpt_st_file *f, const char *what, const char *path);
/* The tensor of that name, or NULL. */
const zckpt_st_tensor *zckpt_st_find(const zckpt_st_file *f, const char *name);
/* Elements [first, first + n) of t (row-major) as fp32 into out. */
zinc_status zckpt_st_read_f32(const zckpt_st_file *f, const zckpt_st_tensor *t, int64_t first, int64_t n, float *out);
void zckpt_st_close(zckpt_st_file *f);
/* A model in one safetensors file, or sharded as Hugging Face's save_pretrained shards it: an index
 * (model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}) and its shards beside
 * it. The index is checked whole: every shard a plain file name ending in .safetensors in the index's
 * directory (no path, no "..") and itself checked as zckpt_st_open checks a file; every tensor the map names
 * is in its shard, and every tensor of a shard is in the map under that shard (a tensor in two shards, or one
 * the index does not list, is refused). At most ZCKPT_ST_SHARDS_MAX shards, an index of at most
 * ZCKPT_ST_INDEX_MAX bytes. */
#define ZCKPT_ST_SHARDS_MAX 4096
#define ZCKPT_ST_INDEX_MAX ((int64_t)16 << 20)
typedef struct zckpt_st_set {
    int nfiles;
    zckpt_st_file *files;
} zckpt_st_set;
/* Whether path names an index (ends in ".safetensors.index.json"). */
bool zckpt_st_is_index(const char *path);
/* Opens path: an index (zckpt_st_is_index) with its shards, or one .safetensors file. Nothing left open on
 * failure. */
zinc_status zckpt_st_set_open(zckpt_st_set *s, const char *what, const char *path);
/* The tensor of that name and the file that holds it (*in), or NULL. */
const zckpt_st_tensor *zckpt_st_set_find(const zckpt_st_set *s, const char *name, const zckpt_st_file **in);
void zckpt_st_set_close(zckpt_st_set *s);
/* "F32", "BF16", "F16": the format's name of a dtype. */
const char *zckpt_st_dtype_name(zinc_dtype t);

/* Writing (checkpoint_export.c): one tensor of an export, made from parameter `param` of the checkpoint's
 * manifest: its first numel(shape) fp32 master elements in row order (a prefix of its rows: a vocabulary
 * without its padding), or, with transpose, the 2-D parameter [shape[1], shape[0]] transposed to shape. */
typedef struct zckpt_st_out {
    const char *name;
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int param;
    bool transpose;
} zckpt_st_out;
struct zckpt_manifest;
/* Writes the nt tensors, in that order, to out_path in dtype (F32, or rounded to nearest even for BF16/F16)
 * through the safe writer (ZINC_EXPORT_REPLACE in flags: an existing regular file may be replaced; never one
 * of the checkpoint's own files). Streamed: pieces of ZCKPT_ST_PIECE elements, gathered from the shard
 * files that hold them; a transposed tensor is read whole first, so the memory is at most the largest
 * transposed tensor plus two pieces (never the whole model). */
#define ZCKPT_ST_PIECE ((int64_t)1 << 20)
zinc_status zckpt_st_export(const struct zckpt_manifest *m, const char *out_path, zinc_dtype dtype, unsigned flags,
                            const zckpt_st_out *t, int nt);

#endif
