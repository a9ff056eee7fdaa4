/* zinc_export_safetensors: the full fp32 master weights of a checkpoint, consolidated from its shard files
 * in one process (no engine, no MPI), written as a safetensors file (zckpt_st_export, safetensors.h: also the
 * Hugging Face export's writer, cli/checkpoint/export_hf.c): an 8-byte little-endian header
 * length, a JSON header (per tensor: dtype, shape, data_offsets into the data; "__metadata__" strings),
 * padded with spaces to a multiple of 8, then the raw little-endian tensors back to back in the
 * order given (zinc_export_safetensors: the checkpoint's parameter order). Written under a temporary name and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/checkpoint/safetensors.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "kernels/cpu_kernels.h"

static const char *st_dtype(zinc_dtype t) { return zckpt_st_dtype_name(t); }

static char *build_header(const zckpt_manifest *m, zinc_dtype dt, const zckpt_st_out *t, int nt, size_t *len) {
    json_t *h = json_object(), *meta = NULL;
    char buf[64];
    if (!h) return NULL;
    size_t esz = zinc_dtype_size(dt), off = 0;
    snprintf(buf, sizeof buf, "%lld", (long long)m->steps);
    meta = json_pack("{s:s, s:s, s:s, s:s, s:s}", "format", "pt", "producer", "zinc", "zinc_version", zinc_version(),
                     "checkpoint_tag", m->tag, "step", buf);
    if (!meta) goto fail;
    json_object_set_new(h, "__metadata__", meta);
    for (int i = 0; i < nt; i++) {
        json_t *shape = json_array();
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++)
            json_array_append_new(shape, json_integer(t[i].shape[d])), numel *= t[i].shape[d];
        size_t bytes = (size_t)numel * esz;
        json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", st_dtype(dt), "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + bytes));
        if (!e || json_object_set_new(h, t[i].name, e) != 0) goto fail;
        off += bytes;
    }
    char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!s) return NULL;
    size_t n = strlen(s), padded = (n + 7) / 8 * 8;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, s, n);
        memset(out + n, ' ', padded - n);
        out[padded] = 0;
        *len = padded;
    }
    free(s);
    return out;
fail:
    json_decref(h);
    return NULL;
}

/* The export never replaces one of the checkpoint's own files (named in the message); everything else
 * about its target (directory, type, --force) is the safe writer's (base/core/safe_file.h). */
static zinc_status check_own_files(const zckpt_manifest *m, const char *out_path) {
    struct stat sb, tb;
    if (stat(out_path, &sb) != 0) return ZINC_OK;
    char p[ZCKPT_PATH_MAX + 80];
    for (int i = -1; i < m->nfiles; i++) {
        snprintf(p, sizeof p, "%s/%s", m->dir, i < 0 ? ZCKPT_MANIFEST : m->files[i].name);
        if (stat(p, &tb) == 0 && tb.st_dev == sb.st_dev && tb.st_ino == sb.st_ino)
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "export: %s is the checkpoint's own file %s: refused (it would destroy "
                        "the checkpoint)",
                        out_path, p);
    }
    return ZINC_OK;
}

zinc_status zinc_export_safetensors(const char *checkpoint, const char *out_path, zinc_dtype dtype) {
    return zinc_export_safetensors_ex(checkpoint, out_path, dtype, 0);
}

/* The tensors as the checkpoint registered them: one per parameter, its name and shape. */
zinc_status zinc_export_safetensors_ex(const char *checkpoint, const char *out_path, zinc_dtype dtype, unsigned flags) {
    zinc_status st = ZINC_OK;
    zckpt_manifest m;
    zckpt_st_out *t = NULL;
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1];
    memset(&m, 0, sizeof m);
    if (!checkpoint || !out_path || !*out_path)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_export_safetensors: checkpoint and out_path are required");
    TRY(zckpt_resolve(checkpoint, tagdir, sizeof tagdir, tag, sizeof tag));
    TRY(zckpt_manifest_read(tagdir, &m));
    TRY_ALLOC(t, m.nparams, "the export's tensor table");
    for (int i = 0; i < m.nparams; i++) {
        const zckpt_param *p = &m.params[i];
        t[i].name = p->name;
        t[i].ndim = p->ndim;
        memcpy(t[i].shape, p->shape, sizeof t[i].shape);
        t[i].param = i;
    }
    TRY(zckpt_st_export(&m, out_path, dtype, flags, t, m.nparams));
fail:
    free(t);
    zckpt_manifest_free(&m);
    return st;
}

/* Elements [x, x + n) of the flat master, from whichever shard files hold them (opened on first use). */
static zinc_status read_master(const zckpt_manifest *m, zckpt_reader *rd, bool *open_, int64_t x, int64_t n,
                               float *dst) {
    zinc_status st = ZINC_OK;
    for (int f = 0; f < m->nfiles; f++) {
        int64_t x0 = x > m->files[f].flat_lo ? x : m->files[f].flat_lo;
        int64_t x1 = x + n < m->files[f].flat_hi ? x + n : m->files[f].flat_hi;
        if (x1 <= x0) continue;
        if (!open_[f]) {
            TRY(zckpt_reader_open(&rd[f], m, f));
            open_[f] = true;
        }
        TRY(zckpt_reader_read(&rd[f], ZCKPT_SEC_MASTER, x0, x1 - x0, dst + (x0 - x)));
    }
fail:
    return st;
}

/* The export's buffers and readers. */
typedef struct export_io {
    const zckpt_manifest *m;
    zckpt_reader *rd;
    bool *open_;
    float *vals, *whole;
    void *conv;
    zinc_dtype dtype;
    zckpt_writer w;
    zfile_out o;
    int64_t off;
} export_io;

/* Writes n floats of src at the output's offset, converted to the export's dtype. */
static zinc_status put(export_io *io, const float *src, int64_t n) {
    const void *p = src;
    size_t esz = zinc_dtype_size(io->dtype);
    if (io->dtype != ZINC_FP32) {
        zcast_from_f32(io->conv, io->dtype, src, (size_t)n);
        p = io->conv;
    }
    zinc_status st = zckpt_pwrite(&io->w, io->o.fd, io->o.tmp, p, (size_t)n * esz, io->off);
    io->off += n * (int64_t)esz;
    return st;
}

/* One tensor: in pieces, or (transposed) read whole, then written in pieces of output rows. */
static zinc_status put_tensor(export_io *io, const zckpt_st_out *t) {
    zinc_status st = ZINC_OK;
    const zckpt_param *p = &io->m->params[t->param];
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    if (!t->transpose) {
        for (int64_t x = 0; x < numel; x += ZCKPT_ST_PIECE) {
            int64_t n = numel - x < ZCKPT_ST_PIECE ? numel - x : ZCKPT_ST_PIECE;
            TRY(read_master(io->m, io->rd, io->open_, p->flat_offset + x, n, io->vals));
            TRY(put(io, io->vals, n));
        }
        return ZINC_OK;
    }
    int64_t R = t->shape[0], K = t->shape[1]; /* out [R, K] = param [K, R] transposed */
    TRY(read_master(io->m, io->rd, io->open_, p->flat_offset, numel, io->whole));
    int64_t rows = ZCKPT_ST_PIECE / K > 0 ? ZCKPT_ST_PIECE / K : 1;
    for (int64_t r0 = 0; r0 < R; r0 += rows) {
        int64_t r1 = r0 + rows < R ? r0 + rows : R;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t k = 0; k < K; k++) io->vals[(r - r0) * K + k] = io->whole[k * R + r];
        TRY(put(io, io->vals, (r1 - r0) * K));
    }
fail:
    return st;
}

/* Every tensor's source checked against the manifest; the largest transposed one, in elements. */
static zinc_status check_plan(const zckpt_manifest *m, const zckpt_st_out *t, int nt, int64_t *largest) {
    *largest = 0;
    for (int i = 0; i < nt; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        const zckpt_param *p = t[i].param >= 0 && t[i].param < m->nparams ? &m->params[t[i].param] : NULL;
        bool ok = p && t[i].ndim >= 1 && numel <= p->numel;
        if (ok && t[i].transpose)
            ok = t[i].ndim == 2 && p->ndim == 2 && p->shape[0] == t[i].shape[1] && p->shape[1] == t[i].shape[0] &&
                 t[i].shape[1] <= ZCKPT_ST_PIECE;
        if (!ok)
            return ZERR(ZINC_ERR_INVALID_ARG, "export: tensor %s does not fit the checkpoint parameter it is made from",
                        t[i].name);
        if (t[i].transpose && numel > *largest) *largest = numel;
    }
    return ZINC_OK;
}

zinc_status zckpt_st_export(const zckpt_manifest *m, const char *out_path, zinc_dtype dtype, unsigned flags,
                            const zckpt_st_out *t, int nt) {
    zinc_status st = ZINC_OK;
    char *hdr = NULL;
    export_io io = {.m = m, .dtype = dtype, .o = {.fd = -1}};
    if (dtype != ZINC_FP32 && dtype != ZINC_FP16 && dtype != ZINC_BF16)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_export_safetensors: dtype %d is not fp32, fp16 or bf16", (int)dtype);
    TRY(zckpt_host_little_endian());
    int64_t largest = 0;
    TRY(check_plan(m, t, nt, &largest));
    zckpt_writer_init(&io.w);
    io.w.kill_after = -1; /* the test hook is for checkpoint saves */
    size_t hlen = 0;
    hdr = build_header(m, dtype, t, nt, &hlen);
    if (!hdr) FAIL(ZINC_ERR_NOMEM, "out of memory building the safetensors header for %s", out_path);
    TRY(check_own_files(m, out_path));
    /* Nothing is written inside the tag directory, nor over the checkpoint directory's `latest` or
     * zinc_gpt2.json (an export beside them in the checkpoint directory is fine). */
    char ckdir[ZCKPT_PATH_MAX], latest[ZCKPT_PATH_MAX + 16], sidecar[ZCKPT_PATH_MAX + 32];
    snprintf(ckdir, sizeof ckdir, "%s", m->dir);
    char *cut = strrchr(ckdir, '/');
    if (cut && cut != ckdir) *cut = 0;
    snprintf(latest, sizeof latest, "%s/" ZCKPT_LATEST, ckdir);
    snprintf(sidecar, sizeof sidecar, "%s/" ZCKPT_SIDECAR_GPT2, ckdir);
    const char *inputs[] = {m->dir, latest, sidecar, NULL};
    TRY(zfile_out_open(&io.o, "export: --out", out_path, flags & ZINC_EXPORT_REPLACE ? ZFILE_REPLACE : 0, inputs));
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    TRY(zckpt_pwrite(&io.w, io.o.fd, io.o.tmp, len8, 8, 0));
    TRY(zckpt_pwrite(&io.w, io.o.fd, io.o.tmp, hdr, hlen, 8));
    io.off = 8 + (int64_t)hlen;
    TRY_ALLOC(io.rd, m->nfiles, "checkpoint readers");
    TRY_ALLOC(io.open_, m->nfiles, "checkpoint readers");
    TRY_ALLOC(io.vals, ZCKPT_ST_PIECE, "the export buffer");
    if (largest) TRY_ALLOC(io.whole, largest, "the export's transposed tensor");
    if (!(io.conv = malloc((size_t)ZCKPT_ST_PIECE * zinc_dtype_size(dtype))))
        FAIL(ZINC_ERR_NOMEM, "out of memory for the export buffer");
    for (int i = 0; i < nt; i++) TRY(put_tensor(&io, &t[i]));
    TRY(zfile_out_commit(&io.o));
fail:
    if (io.o.fd >= 0) zfile_out_abort(&io.o);
    for (int f = 0; io.open_ && f < m->nfiles; f++)
        if (io.open_[f]) zckpt_reader_close(&io.rd[f]);
    free(io.rd);
    free(io.open_);
    free(io.vals);
    free(io.whole);
    free(io.conv);
    free(hdr);
    return st;
}
