/* See gpt2_files.h. Files are little-endian; this code assumes a little-endian host (x86-64, arm64). */
#include "gpt2_files.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static zinc_status fail(zinc_status st, char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && cap) vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return st;
}

static const char *const kind_names[GPT2_NKINDS] = {"wte",      "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",
                                                    "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                                    "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
const char *gpt2_kind_name(int kind) { return kind >= 0 && kind < GPT2_NKINDS ? kind_names[kind] : "?"; }

static int per_layer(int kind) { return kind >= GPT2_LN1W && kind <= GPT2_FCPROJB; }

int64_t gpt2_kind_numel(const gpt2_shape *s, int kind) {
    int64_t C = s->channels;
    switch (kind) {
    case GPT2_WTE: return (int64_t)s->padded_vocab * C;
    case GPT2_WPE: return (int64_t)s->max_context * C;
    case GPT2_QKVW: return 3 * C * C;
    case GPT2_QKVB: return 3 * C;
    case GPT2_ATTPROJW: return C * C;
    case GPT2_FCW:
    case GPT2_FCPROJW: return 4 * C * C;
    case GPT2_FCB: return 4 * C;
    default: return C; /* layer norms, attprojb, fcprojb */
    }
}

int64_t gpt2_kind_muon_rows(const gpt2_shape *s, int kind) {
    int64_t C = s->channels;
    switch (kind) {
    case GPT2_QKVW: return 3 * C;
    case GPT2_ATTPROJW: return C;
    case GPT2_FCW: return 4 * C;
    case GPT2_FCPROJW: return C;
    default: return 0;
    }
}

int64_t gpt2_llmc_offset(const gpt2_shape *s, int kind, int layer) {
    int64_t off = 0;
    for (int k = 0; k < kind; k++) off += gpt2_kind_numel(s, k) * (per_layer(k) ? s->layers : 1);
    return off + (per_layer(kind) ? (int64_t)layer * gpt2_kind_numel(s, kind) : 0);
}

int64_t gpt2_num_params(const gpt2_shape *s) { return gpt2_llmc_offset(s, GPT2_NKINDS, 0); }

int gpt2_shape_check(const gpt2_shape *s, char *err, size_t cap) {
    const char *what = NULL;
    long v = 0;
    if (s->max_context < 1 || s->max_context > 1 << 20)
        what = "max context", v = s->max_context;
    else if (s->vocab < 1 || s->vocab > 65536)
        what = "vocabulary", v = s->vocab;
    else if (s->layers < 1 || s->layers > 1024)
        what = "layers", v = s->layers;
    else if (s->channels < 1 || s->channels > 1 << 16)
        what = "channels", v = s->channels;
    else if (s->heads < 1 || s->channels % s->heads)
        what = "heads", v = s->heads;
    else if (s->padded_vocab < s->vocab || s->padded_vocab > 1 << 20)
        what = "padded vocabulary", v = s->padded_vocab;
    if (!what) return 0;
    snprintf(err, cap,
             "%s = %ld is invalid (need 1 <= max context <= 2^20, 1 <= vocabulary <= 65536 (uint16 tokens), "
             "1 <= layers <= 1024, heads dividing channels, vocabulary <= padded vocabulary)",
             what, v);
    return -1;
}

static void bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = zinc_bf16_to_f32(src[i]);
}

zinc_status gpt2_model_open(const char *path, gpt2_model_file *mf, char *err, size_t cap) {
    zinc_status st = ZINC_OK;
    int32_t h[256];
    memset(mf, 0, sizeof *mf);
    FILE *f = NULL;
    if (zinc_file_open_input("the model file", path, &f) != ZINC_OK)
        return fail(ZINC_ERR_IO, err, cap, "%s", zinc_last_error());
    size_t got = fread(h, sizeof(int32_t), 256, f);
    if (got != 256) {
        st = fail(ZINC_ERR_CORRUPT, err, cap, "%s: truncated: the header needs 1024 bytes, the file has %zu", path,
                  got * sizeof(int32_t));
        goto done;
    }
    if (h[0] != GPT2_MODEL_MAGIC) {
        st = fail(ZINC_ERR_CORRUPT, err, cap, "%s: header[0] (magic) is %d, expected %d (an llm.c GPT-2 model file)",
                  path, h[0], GPT2_MODEL_MAGIC);
        goto done;
    }
    if (h[1] != 3 && h[1] != 5) {
        st = fail(ZINC_ERR_UNSUPPORTED, err, cap,
                  "%s: header[1] (version) is %d, expected 3 (fp32 parameters) or 5 (bf16 parameters)", path, h[1]);
        goto done;
    }
    gpt2_shape s = {h[2], h[3], h[4], h[5], h[6], h[7]};
    char why[256];
    if (gpt2_shape_check(&s, why, sizeof why)) {
        st = fail(ZINC_ERR_CORRUPT, err, cap, "%s: header[2..7]: %s", path, why);
        goto done;
    }
    int64_t n = gpt2_num_params(&s);
    size_t esz = h[1] == 3 ? 4 : 2;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != 1024 + (uint64_t)n * esz) {
        st = fail(ZINC_ERR_CORRUPT, err, cap,
                  "%s: the file has %lld bytes, expected %llu (1024 header + %lld %s parameters of max context %d, "
                  "vocabulary %d, %d layers, %d heads, %d channels, padded vocabulary %d): truncated or not this shape",
                  path, (long long)sb.st_size, 1024 + (unsigned long long)n * esz, (long long)n,
                  esz == 4 ? "fp32" : "bf16", s.max_context, s.vocab, s.layers, s.heads, s.channels, s.padded_vocab);
        goto done;
    }
    mf->f = f;
    mf->shape = s;
    mf->version = h[1];
    snprintf(mf->path, sizeof mf->path, "%s", path);
    return ZINC_OK;
done:
    fclose(f);
    return st;
}

zinc_status gpt2_model_read_range(gpt2_model_file *mf, int64_t first, int64_t n, float *out, char *err, size_t cap) {
    size_t esz = mf->version == 3 ? 4 : 2;
    int64_t total = gpt2_num_params(&mf->shape);
    if (first < 0 || n < 0 || first + n > total)
        return fail(ZINC_ERR_INVALID_ARG, err, cap, "%s: parameters [%lld, %lld) asked for; the file has %lld",
                    mf->path, (long long)first, (long long)(first + n), (long long)total);
    if (fseeko(mf->f, 1024 + (off_t)first * (off_t)esz, SEEK_SET) != 0)
        return fail(ZINC_ERR_IO, err, cap, "%s: seeking to parameter %lld failed: %s", mf->path, (long long)first,
                    strerror(errno));
    if (esz == 4) {
        if (fread(out, 4, (size_t)n, mf->f) != (size_t)n)
            return fail(ZINC_ERR_IO, err, cap, "%s: reading parameters [%lld, %lld) failed", mf->path, (long long)first,
                        (long long)(first + n));
        return ZINC_OK;
    }
    /* bf16: widened in place from the back of out (2-byte values in its upper half first) */
    uint16_t *tmp = (uint16_t *)out + n;
    if (fread(tmp, 2, (size_t)n, mf->f) != (size_t)n)
        return fail(ZINC_ERR_IO, err, cap, "%s: reading parameters [%lld, %lld) failed", mf->path, (long long)first,
                    (long long)(first + n));
    bf16_to_f32(tmp, out, n);
    return ZINC_OK;
}

void gpt2_model_close(gpt2_model_file *mf) {
    if (mf && mf->f) fclose(mf->f);
    if (mf) mf->f = NULL;
}

zinc_status gpt2_model_read(const char *path, gpt2_shape *shape, float **params, int *version_out, char *err,
                            size_t cap) {
    *params = NULL;
    gpt2_model_file mf;
    zinc_status st = gpt2_model_open(path, &mf, err, cap);
    if (st != ZINC_OK) return st;
    int64_t n = gpt2_num_params(&mf.shape);
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) st = fail(ZINC_ERR_NOMEM, err, cap, "%s: no memory for %lld parameters", path, (long long)n);
    if (st == ZINC_OK) st = gpt2_model_read_range(&mf, 0, n, p, err, cap);
    if (st == ZINC_OK) {
        *shape = mf.shape;
        if (version_out) *version_out = mf.version;
        *params = p;
        p = NULL;
    }
    free(p);
    gpt2_model_close(&mf);
    return st;
}

/* Writes header + payload through the safe writer (a fresh temporary file, fsynced and renamed). */
static zinc_status write_file(const char *path, const int32_t *h, const void *data, size_t bytes, unsigned flags,
                              const char *const *inputs, char *err, size_t cap) {
    const void *parts[2] = {h, data};
    size_t lens[2] = {256 * sizeof(int32_t), bytes};
    zinc_status st = zinc_file_write("output", path, 2, parts, lens, flags, inputs);
    if (st != ZINC_OK) return fail(st, err, cap, "%s", zinc_last_error());
    return ZINC_OK;
}

zinc_status gpt2_model_write(const char *path, const gpt2_shape *s, const float *params, int version, unsigned flags,
                             const char *const *inputs, char *err, size_t cap) {
    char why[256];
    if (gpt2_shape_check(s, why, sizeof why)) return fail(ZINC_ERR_INVALID_ARG, err, cap, "%s: %s", path, why);
    if (version != 3 && version != 5)
        return fail(ZINC_ERR_INVALID_ARG, err, cap, "%s: version %d: expected 3 (fp32) or 5 (bf16)", path, version);
    int32_t h[256] = {GPT2_MODEL_MAGIC, version,  s->max_context, s->vocab,
                      s->layers,        s->heads, s->channels,    s->padded_vocab};
    int64_t n = gpt2_num_params(s);
    if (version == 3) return write_file(path, h, params, (size_t)n * 4, flags, inputs, err, cap);
    uint16_t *b = malloc((size_t)n * 2);
    if (!b) return fail(ZINC_ERR_NOMEM, err, cap, "%s: no memory for %lld bf16 parameters", path, (long long)n);
    for (int64_t i = 0; i < n; i++) b[i] = zinc_f32_to_bf16(params[i]);
    zinc_status st = write_file(path, h, b, (size_t)n * 2, flags, inputs, err, cap);
    free(b);
    return st;
}

zinc_status gpt2_tokens_read(const char *path, gpt2_tokens *out, char *err, size_t cap) {
    out->tok = NULL;
    out->n = 0;
    zinc_status st = ZINC_OK;
    int32_t h[256];
    FILE *f = NULL;
    if (zinc_file_open_input("the token file", path, &f) != ZINC_OK)
        return fail(ZINC_ERR_IO, err, cap, "%s", zinc_last_error());
    size_t got = fread(h, sizeof(int32_t), 256, f);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) sb.st_size = -1;
    if (got != 256) {
        st = fail(ZINC_ERR_CORRUPT, err, cap, "%s: truncated: the header needs 1024 bytes, the file has %zu", path,
                  got * sizeof(int32_t));
    } else if (h[0] != GPT2_TOKENS_MAGIC) {
        st = fail(ZINC_ERR_CORRUPT, err, cap, "%s: header[0] (magic) is %d, expected %d (an llm.c token file)", path,
                  h[0], GPT2_TOKENS_MAGIC);
    } else if (h[1] != 1) {
        st = fail(ZINC_ERR_UNSUPPORTED, err, cap, "%s: header[1] (version) is %d, expected 1 (uint16 tokens)", path,
                  h[1]);
    } else if (h[2] < 0) {
        st = fail(ZINC_ERR_CORRUPT, err, cap,
                  "%s: header[2] (token count) is %d, negative: the header is damaged or this is not an llm.c token "
                  "file (the file has %lld bytes, so a good header would say %lld)",
                  path, h[2], (long long)sb.st_size, sb.st_size >= 1024 ? (long long)(sb.st_size - 1024) / 2 : 0LL);
    } else if ((uint64_t)sb.st_size != 1024 + 2 * (uint64_t)h[2]) {
        st = fail(ZINC_ERR_CORRUPT, err, cap,
                  "%s: header[2] (token count) is %d, so the file should have %llu bytes; it has %lld (truncated?)",
                  path, h[2], 1024 + 2 * (unsigned long long)h[2], (long long)sb.st_size);
    } else if (!(out->tok = malloc((size_t)h[2] * 2 + 2))) {
        st = fail(ZINC_ERR_NOMEM, err, cap, "%s: no memory for %d tokens", path, h[2]);
    } else if (fread(out->tok, 2, (size_t)h[2], f) != (size_t)h[2]) {
        st = fail(ZINC_ERR_IO, err, cap, "%s: reading %d tokens failed", path, h[2]);
    } else {
        out->n = h[2];
    }
    fclose(f);
    if (st != ZINC_OK) gpt2_tokens_free(out);
    return st;
}

zinc_status gpt2_tokens_write(const char *path, const uint16_t *tok, int64_t n, unsigned flags, char *err, size_t cap) {
    if (n < 0 || n > INT32_MAX)
        return fail(ZINC_ERR_INVALID_ARG, err, cap, "%s: %lld tokens: a token file holds 0..%d", path, (long long)n,
                    INT32_MAX);
    int32_t h[256] = {GPT2_TOKENS_MAGIC, 1, (int32_t)n};
    return write_file(path, h, tok, (size_t)n * 2, flags, NULL, err, cap);
}

zinc_status gpt2_tokens_from_text(const char *path, gpt2_tokens *out, char *err, size_t cap) {
    out->tok = NULL;
    out->n = 0;
    FILE *f = NULL;
    if (zinc_file_open_input("the text file", path, &f) != ZINC_OK)
        return fail(ZINC_ERR_IO, err, cap, "%s", zinc_last_error());
    struct stat sb;
    zinc_status st = ZINC_OK;
    unsigned char *buf = NULL;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size > INT32_MAX) {
        st = fail(ZINC_ERR_INVALID_ARG, err, cap, "%s: not a regular file of at most 2 GiB", path);
    } else if (!(buf = malloc((size_t)sb.st_size + 1)) || !(out->tok = malloc((size_t)sb.st_size * 2 + 2))) {
        st = fail(ZINC_ERR_NOMEM, err, cap, "%s: no memory for %lld bytes", path, (long long)sb.st_size);
    } else if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = fail(ZINC_ERR_IO, err, cap, "%s: reading %lld bytes failed", path, (long long)sb.st_size);
    } else {
        for (off_t i = 0; i < sb.st_size; i++) out->tok[i] = buf[i];
        out->n = sb.st_size;
    }
    free(buf);
    fclose(f);
    if (st != ZINC_OK) gpt2_tokens_free(out);
    return st;
}

zinc_status gpt2_tokens_check(const gpt2_tokens *t, int vocab, const char *what, char *err, size_t cap) {
    for (int64_t i = 0; i < t->n; i++)
        if (t->tok[i] >= vocab)
            return fail(ZINC_ERR_INVALID_ARG, err, cap,
                        "%s: token %lld is %u, but the model's vocabulary is %d (token ids must be 0..%d)", what,
                        (long long)i, t->tok[i], vocab, vocab - 1);
    return ZINC_OK;
}

void gpt2_tokens_free(gpt2_tokens *t) {
    free(t->tok);
    t->tok = NULL;
    t->n = 0;
}

int64_t gpt2_batches_per_pass(const gpt2_tokens *t, int T, int64_t global) {
    if (t->n < 1) return 0;
    return (t->n - 1) / ((int64_t)T * global);
}

void gpt2_window(const gpt2_tokens *t, int T, int64_t global, int64_t k, uint16_t *dst) {
    int64_t nb = gpt2_batches_per_pass(t, T, global);
    int64_t batch = (k / global) % nb, within = k % global;
    memcpy(dst, t->tok + (batch * global + within) * T, (size_t)(T + 1) * sizeof *dst);
}

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

void gpt2_window_shuffled(const gpt2_tokens *t, int T, int64_t global, int64_t k, uint64_t seed, uint16_t *dst) {
    uint64_t nb = (uint64_t)gpt2_batches_per_pass(t, T, global), idx = (uint64_t)(k / global);
    uint64_t pass = idx / nb, h = mix64(seed ^ mix64(pass + 1));
    uint64_t a = nb > 1 ? 1 + h % (nb - 1) : 1, b = mix64(h) % nb;
    while (gcd(a, nb) != 1) a = a + 1 < nb ? a + 1 : 1;
    uint64_t batch = (unsigned __int128)a * (idx % nb) % nb;
    batch = (batch + b) % nb;
    memcpy(dst, t->tok + ((int64_t)batch * global + k % global) * T, (size_t)(T + 1) * sizeof *dst);
}
