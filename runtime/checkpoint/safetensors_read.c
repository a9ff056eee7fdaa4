/* See safetensors.h: a safetensors file opened, its header checked whole, its tensors read by ranges. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/safetensors.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"

const char *zckpt_st_dtype_name(zinc_dtype t) { return t == ZINC_FP32 ? "F32" : t == ZINC_FP16 ? "F16" : "BF16"; }

static zinc_status pread_all(const zckpt_st_file *f, void *dst, size_t n, int64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(f->fd, (char *)dst + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return ZERR(ZINC_ERR_IO, "%s: cannot read %zu bytes at offset %lld: %s", f->path, n - got,
                        (long long)(off + (int64_t)got), r < 0 ? strerror(errno) : "the file ended early");
        got += (size_t)r;
    }
    return ZINC_OK;
}

/* One tensor's entry: dtype, shape and offsets checked against the data's `data_len` bytes. */
static zinc_status parse_tensor(const zckpt_st_file *f, const char *name, json_t *v, int64_t data_at, int64_t data_len,
                                zckpt_st_tensor *t) {
    zinc_status st = ZINC_OK;
    const char *dt = json_string_value(json_object_get(v, "dtype"));
    json_t *shape = json_object_get(v, "shape"), *offs = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !dt || !json_is_array(shape) || !json_is_array(offs) || json_array_size(offs) != 2)
        FAIL(ZINC_ERR_CORRUPT,
             "%s: tensor %s: the header entry needs \"dtype\", \"shape\" and \"data_offsets\" [begin, end]", f->path,
             name);
    if (!strcmp(dt, "F32"))
        t->dtype = ZINC_FP32;
    else if (!strcmp(dt, "BF16"))
        t->dtype = ZINC_BF16;
    else if (!strcmp(dt, "F16"))
        t->dtype = ZINC_FP16;
    else
        FAIL(ZINC_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s; zinc reads F32, BF16 and F16", f->path, name, dt);
    if (json_array_size(shape) > ZINC_MAX_DIMS)
        FAIL(ZINC_ERR_CORRUPT, "%s: tensor %s has %zu dimensions, more than %d", f->path, name, json_array_size(shape),
             ZINC_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *x = json_array_get(shape, (size_t)d);
        int64_t n = json_is_integer(x) ? (int64_t)json_integer_value(x) : -1;
        if (n < 0 || n > ((int64_t)1 << 40) || (n && t->numel > ((int64_t)1 << 50) / n))
            FAIL(ZINC_ERR_CORRUPT,
                 "%s: tensor %s: dimension %d is not an integer in 0..2^40 or the tensor is beyond "
                 "2^50 elements",
                 f->path, name, d);
        t->shape[d] = n;
        t->numel *= n;
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    int64_t lo = json_is_integer(b) ? (int64_t)json_integer_value(b) : -1;
    int64_t hi = json_is_integer(e) ? (int64_t)json_integer_value(e) : -1;
    int64_t want = t->numel * (int64_t)zinc_dtype_size(t->dtype);
    if (lo < 0 || hi < lo || hi > data_len)
        FAIL(ZINC_ERR_CORRUPT,
             "%s: tensor %s: data_offsets [%lld, %lld] lie outside the %lld bytes of data (a truncated "
             "file?)",
             f->path, name, (long long)lo, (long long)hi, (long long)data_len);
    if (hi - lo != want)
        FAIL(ZINC_ERR_CORRUPT, "%s: tensor %s: data_offsets span %lld bytes, its shape and dtype %s need %lld", f->path,
             name, (long long)(hi - lo), dt, (long long)want);
    t->offset = data_at + lo;
    if (!(t->name = strdup(name))) FAIL(ZINC_ERR_NOMEM, "out of memory reading %s", f->path);
fail:
    return st;
}

/* The header: 8 bytes of length, then that many bytes of JSON, within the file. */
static zinc_status read_header(zckpt_st_file *f, json_t **out, int64_t *data_at) {
    zinc_status st = ZINC_OK;
    uint8_t len8[8];
    char *text = NULL;
    if (f->size < 8)
        FAIL(ZINC_ERR_CORRUPT,
             "%s: %lld bytes, too short for a safetensors file (an 8-byte header length "
             "first)",
             f->path, (long long)f->size);
    TRY(pread_all(f, len8, 8, 0));
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    if (hl > ZCKPT_ST_HEADER_MAX || hl > (uint64_t)f->size - 8)
        FAIL(ZINC_ERR_CORRUPT,
             "%s: the header length %llu is beyond the file's %lld bytes or the format's 100 MiB: not "
             "a safetensors file, or a truncated one",
             f->path, (unsigned long long)hl, (long long)f->size);
    TRY_ALLOC(text, hl + 1, "the safetensors header");
    TRY(pread_all(f, text, (size_t)hl, 8));
    json_error_t je;
    *out = json_loadb(text, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!*out || !json_is_object(*out))
        FAIL(ZINC_ERR_CORRUPT, "%s: the safetensors header is not a JSON object (%s at byte %d)", f->path,
             *out ? "another value" : je.text, *out ? 0 : je.position);
    *data_at = 8 + (int64_t)hl;
fail:
    free(text);
    return st;
}

zinc_status zckpt_st_open(zckpt_st_file *f, const char *what, const char *path) {
    zinc_status st = ZINC_OK;
    json_t *h = NULL;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: the path is too long", what);
    TRY(zfile_open_input(what, path, &f->fd));
    struct stat sb;
    if (fstat(f->fd, &sb) != 0) FAIL(ZINC_ERR_IO, "%s: cannot stat %s: %s", what, path, strerror(errno));
    f->size = (int64_t)sb.st_size;
    int64_t data_at = 0;
    TRY(read_header(f, &h, &data_at));
    TRY_ALLOC(f->t, json_object_size(h), "the safetensors tensor table");
    const char *name;
    json_t *v;
    json_object_foreach(h, name, v) {
        if (!strcmp(name, "__metadata__")) continue;
        TRY(parse_tensor(f, name, v, data_at, f->size - data_at, &f->t[f->ntensors]));
        f->ntensors++;
    }
fail:
    json_decref(h);
    if (st != ZINC_OK) zckpt_st_close(f);
    return st;
}

const zckpt_st_tensor *zckpt_st_find(const zckpt_st_file *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

zinc_status zckpt_st_read_f32(const zckpt_st_file *f, const zckpt_st_tensor *t, int64_t first, int64_t n, float *out) {
    if (first < 0 || n < 0 || first > t->numel - n)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: tensor %s: elements [%lld, %lld) are beyond its %lld", f->path, t->name,
                    (long long)first, (long long)(first + n), (long long)t->numel);
    size_t esz = zinc_dtype_size(t->dtype);
    zinc_status st = pread_all(f, out, (size_t)n * esz, t->offset + first * (int64_t)esz);
    if (st != ZINC_OK || t->dtype == ZINC_FP32) return st;
    /* widened in place from the end: element i's 2 bytes lie below its 4 */
    const uint8_t *raw = (const uint8_t *)out;
    for (int64_t i = n - 1; i >= 0; i--) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = t->dtype == ZINC_BF16 ? zinc_bf16_to_f32(h) : zinc_fp16_to_f32(h);
    }
    return ZINC_OK;
}

void zckpt_st_close(zckpt_st_file *f) {
    for (int i = 0; i < f->ntensors; i++) free(f->t[i].name);
    free(f->t);
    f->t = NULL;
    f->ntensors = 0;
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}
