/* zinc_export_safetensors: the full fp32 master weights of a checkpoint, consolidated from its shard files
 * in one process (no engine, no MPI), written as a safetensors file: an 8-byte little-endian header
 * length, a JSON header (per tensor: dtype, shape, data_offsets into the data; "__metadata__" strings),
 * padded with spaces to a multiple of 8, then the raw little-endian tensors back to back in the
 * checkpoint's parameter order. Written under a temporary name and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "kernels/cpu_kernels.h"

#define EXPORT_PIECE ((int64_t)1 << 20) /* elements converted and written at a time */

static const char *st_dtype(zinc_dtype t) { return t == ZINC_FP32 ? "F32" : t == ZINC_FP16 ? "F16" : "BF16"; }

static char *build_header(const zckpt_manifest *m, zinc_dtype dt, size_t *len) {
    json_t *h = json_object(), *meta = NULL;
    char buf[64];
    if (!h) return NULL;
    size_t esz = zinc_dtype_size(dt), off = 0;
    snprintf(buf, sizeof buf, "%lld", (long long)m->steps);
    meta = json_pack("{s:s, s:s, s:s, s:s, s:s}", "format", "pt", "producer", "zinc", "zinc_version", zinc_version(),
                     "checkpoint_tag", m->tag, "step", buf);
    if (!meta) goto fail;
    json_object_set_new(h, "__metadata__", meta);
    for (int i = 0; i < m->nparams; i++) {
        const zckpt_param *p = &m->params[i];
        json_t *shape = json_array();
        for (int d = 0; d < p->ndim; d++) json_array_append_new(shape, json_integer(p->shape[d]));
        size_t bytes = (size_t)p->numel * esz;
        json_t *t = json_pack("{s:s, s:o, s:[I,I]}", "dtype", st_dtype(dt), "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + bytes));
        if (!t || json_object_set_new(h, p->name, t) != 0) goto fail;
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

zinc_status zinc_export_safetensors_ex(const char *checkpoint, const char *out_path, zinc_dtype dtype, unsigned flags) {
    zinc_status st = ZINC_OK;
    zckpt_manifest m;
    zckpt_reader *rd = NULL;
    bool *open_ = NULL;
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1];
    const char *tmp = NULL;
    char *hdr = NULL;
    float *vals = NULL;
    void *conv = NULL;
    int fd = -1;
    zfile_out o = {.fd = -1};
    zckpt_writer w;
    memset(&m, 0, sizeof m);
    if (!checkpoint || !out_path || !*out_path)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_export_safetensors: checkpoint and out_path are required");
    if (dtype != ZINC_FP32 && dtype != ZINC_FP16 && dtype != ZINC_BF16)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_export_safetensors: dtype %d is not fp32, fp16 or bf16", (int)dtype);
    TRY(zckpt_host_little_endian());
    TRY(zckpt_resolve(checkpoint, tagdir, sizeof tagdir, tag, sizeof tag));
    TRY(zckpt_manifest_read(tagdir, &m));
    zckpt_writer_init(&w);
    w.kill_after = -1; /* the test hook is for checkpoint saves */

    size_t hlen = 0, esz = zinc_dtype_size(dtype);
    hdr = build_header(&m, dtype, &hlen);
    if (!hdr) FAIL(ZINC_ERR_NOMEM, "out of memory building the safetensors header for %s", out_path);
    TRY(check_own_files(&m, out_path));
    /* Nothing is written inside the tag directory, nor over the checkpoint directory's `latest` or
     * zinc_gpt2.json (an export beside them in the checkpoint directory is fine). */
    char ckdir[ZCKPT_PATH_MAX], latest[ZCKPT_PATH_MAX + 16], sidecar[ZCKPT_PATH_MAX + 32];
    snprintf(ckdir, sizeof ckdir, "%s", m.dir);
    char *cut = strrchr(ckdir, '/');
    if (cut && cut != ckdir) *cut = 0;
    snprintf(latest, sizeof latest, "%s/" ZCKPT_LATEST, ckdir);
    snprintf(sidecar, sizeof sidecar, "%s/" ZCKPT_SIDECAR_GPT2, ckdir);
    const char *inputs[] = {m.dir, latest, sidecar, NULL};
    TRY(zfile_out_open(&o, "export: --out", out_path, flags & ZINC_EXPORT_REPLACE ? ZFILE_REPLACE : 0, inputs));
    fd = o.fd;
    tmp = o.tmp;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    TRY(zckpt_pwrite(&w, fd, tmp, len8, 8, 0));
    TRY(zckpt_pwrite(&w, fd, tmp, hdr, hlen, 8));
    int64_t off = 8 + (int64_t)hlen;

    TRY_ALLOC(rd, m.nfiles, "checkpoint readers");
    TRY_ALLOC(open_, m.nfiles, "checkpoint readers");
    TRY_ALLOC(vals, EXPORT_PIECE, "the export buffer");
    conv = malloc((size_t)EXPORT_PIECE * esz);
    if (!conv) FAIL(ZINC_ERR_NOMEM, "out of memory for the export buffer");
    int first = 0;
    for (int i = 0; i < m.nparams; i++) {
        const zckpt_param *p = &m.params[i];
        for (int64_t x = p->flat_offset; x < p->flat_offset + p->numel; x += EXPORT_PIECE) {
            int64_t n = p->flat_offset + p->numel - x < EXPORT_PIECE ? p->flat_offset + p->numel - x : EXPORT_PIECE;
            while (first < m.nfiles && m.files[first].flat_hi <= x) {
                if (open_[first]) zckpt_reader_close(&rd[first]);
                open_[first] = false;
                first++;
            }
            for (int f = first; f < m.nfiles && m.files[f].flat_lo < x + n; f++) {
                int64_t x0 = x > m.files[f].flat_lo ? x : m.files[f].flat_lo;
                int64_t x1 = x + n < m.files[f].flat_hi ? x + n : m.files[f].flat_hi;
                if (x1 <= x0) continue;
                if (!open_[f]) {
                    TRY(zckpt_reader_open(&rd[f], &m, f));
                    open_[f] = true;
                }
                TRY(zckpt_reader_read(&rd[f], ZCKPT_SEC_MASTER, x0, x1 - x0, vals + (x0 - x)));
            }
            const void *src = vals;
            if (dtype != ZINC_FP32) {
                zcast_from_f32(conv, dtype, vals, (size_t)n);
                src = conv;
            }
            TRY(zckpt_pwrite(&w, fd, tmp, src, (size_t)n * esz, off));
            off += n * (int64_t)esz;
        }
    }
    TRY(zfile_out_commit(&o));
fail:
    if (o.fd >= 0) zfile_out_abort(&o);
    for (int f = 0; open_ && f < m.nfiles; f++)
        if (open_[f]) zckpt_reader_close(&rd[f]);
    free(rd);
    free(open_);
    free(vals);
    free(conv);
    free(hdr);
    zckpt_manifest_free(&m);
    return st;
}
