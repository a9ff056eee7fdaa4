/* The checkpoint manifest (manifest.json) and the shard files' layout and header: building the manifest
 * from an engine, reading and validating it, and matching its parameter table with a model. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"
#include "runtime/engine/lr_schedule.h"

const char *const zckpt_section_names[ZCKPT_NSEC] = {"master", "exp_avg", "exp_avg_sq", "params"};

/* ---------------------------------------------------------------- shard layout and header */

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

void zckpt_layout(zckpt_file *f, int rank, int64_t lo, int64_t hi, bool with_params, zinc_dtype param_dtype) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "rank%05d.zshard", rank);
    f->rank = rank;
    f->flat_lo = lo;
    f->flat_hi = hi;
    int64_t n = hi - lo, off = ZCKPT_HEADER_BYTES;
    for (int s = 0; s < ZCKPT_NSEC; s++) {
        f->sec_offset[s] = -1;
        f->sec_dtype[s] = s == ZCKPT_SEC_PARAMS ? param_dtype : ZINC_FP32;
        if (s == ZCKPT_SEC_PARAMS && !with_params) continue;
        off = align_up(off, ZCKPT_SECTION_ALIGN);
        f->sec_offset[s] = off;
        off += n * (int64_t)zinc_dtype_size(f->sec_dtype[s]);
    }
    f->bytes = off;
    f->block_bytes = ZCKPT_BLOCK_BYTES;
    f->nblocks = (f->bytes + f->block_bytes - 1) / f->block_bytes;
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Header: magic[8], format version u64, rank u64, flat_lo u64, flat_hi u64, uid[16], then per section
 * offset u64 and dtype u64; little-endian; zero to 4 KiB. */
void zckpt_header_encode(const zckpt_file *f, const char *uid, uint8_t *hdr) {
    memset(hdr, 0, ZCKPT_HEADER_BYTES);
    memcpy(hdr, ZCKPT_MAGIC, 8);
    put64(hdr + 8, ZCKPT_FORMAT_VERSION);
    put64(hdr + 16, (uint64_t)f->rank);
    put64(hdr + 24, (uint64_t)f->flat_lo);
    put64(hdr + 32, (uint64_t)f->flat_hi);
    memcpy(hdr + 40, uid, ZCKPT_UID_LEN);
    for (int s = 0; s < ZCKPT_NSEC; s++) {
        put64(hdr + 56 + 16 * s, (uint64_t)f->sec_offset[s]);
        put64(hdr + 64 + 16 * s, (uint64_t)f->sec_dtype[s]);
    }
}

zinc_status zckpt_header_check(const zckpt_manifest *m, const zckpt_file *f, const char *path, const uint8_t *hdr) {
    if (memcmp(hdr, ZCKPT_MAGIC, 8) != 0)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint file %s is not a zinc shard file (bad magic)", path);
    if (memcmp(hdr + 40, m->uid, ZCKPT_UID_LEN) != 0)
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint file %s belongs to another checkpoint (its id %.16s is not the "
                    "manifest's %s): files of different saves were mixed",
                    path, (const char *)hdr + 40, m->uid);
    if ((int64_t)get64(hdr + 16) != f->rank || (int64_t)get64(hdr + 24) != f->flat_lo ||
        (int64_t)get64(hdr + 32) != f->flat_hi)
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint file %s: its header (rank %lld, range [%lld, %lld)) disagrees with "
                    "the manifest (rank %d, range [%lld, %lld))",
                    path, (long long)get64(hdr + 16), (long long)get64(hdr + 24), (long long)get64(hdr + 32), f->rank,
                    (long long)f->flat_lo, (long long)f->flat_hi);
    for (int s = 0; s < ZCKPT_NSEC; s++)
        if ((int64_t)get64(hdr + 56 + 16 * s) != f->sec_offset[s])
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint file %s: the %s section's offset in the header disagrees with "
                        "the manifest",
                        path, zckpt_section_names[s]);
    return ZINC_OK;
}

/* ---------------------------------------------------------------- building */

static json_t *scaler_json(const zloss_scaler *s) {
    return json_pack("{s:b, s:f, s:f, s:f, s:I, s:i, s:i, s:b, s:I, s:I}", "dynamic", s->dynamic, "cur_scale",
                     s->cur_scale, "min_scale", s->min_scale, "scale_factor", s->scale_factor, "scale_window",
                     (json_int_t)s->scale_window, "delayed_shift", s->delayed_shift, "cur_hysteresis",
                     s->cur_hysteresis, "consecutive_hysteresis", s->consecutive_hysteresis, "cur_iter",
                     (json_int_t)s->cur_iter, "last_overflow_iter", (json_int_t)s->last_overflow_iter);
}

json_t *zckpt_manifest_build(const zinc_engine *e, const char *tag, const char *uid, const zckpt_file *files,
                             int nfiles) {
    json_t *root = json_object(), *config = NULL;
    char *cfg = zcfg_dump_json(&e->cfg);
    if (cfg) config = json_loads(cfg, 0, NULL);
    free(cfg);
    if (!root || !config) goto fail;
    json_t *sched = json_object_get(config, "scheduler");
    json_t *lr = json_pack("{s:I, s:f, s:f, s:O?}", "steps_taken", (json_int_t)e->steps_taken, "next_lr",
                           zlr_at(&e->cfg.scheduler, e->cfg.optimizer.lr, e->steps_taken), "next_beta1",
                           zlr_beta1_at(&e->cfg.scheduler, e->cfg.optimizer.beta1, e->steps_taken), "scheduler", sched);
    json_t *params = json_array(), *fl = json_array();
    for (int i = 0; params && i < e->nparams; i++) {
        const zinc_param *p = e->params[i];
        json_t *shape = json_array();
        for (int d = 0; d < p->ndim; d++) json_array_append_new(shape, json_integer(p->shape[d]));
        json_array_append_new(params,
                              json_pack("{s:s, s:o, s:I, s:I, s:s, s:b}", "name", p->name, "shape", shape, "numel",
                                        (json_int_t)p->numel, "flat_offset", (json_int_t)p->flat_offset, "module",
                                        e->modules[p->module].name, "decay", (p->flags & ZINC_PARAM_DECAY) != 0));
    }
    for (int i = 0; fl && i < nfiles; i++) {
        const zckpt_file *f = &files[i];
        char crc[16];
        snprintf(crc, sizeof crc, "%08" PRIx32, f->crc);
        json_t *blocks = json_array(), *secs = json_object();
        for (int64_t b = 0; b < f->nblocks; b++) {
            snprintf(crc, sizeof crc, "%08" PRIx32, f->block_crc[b]);
            json_array_append_new(blocks, json_string(crc));
        }
        for (int s = 0; s < ZCKPT_NSEC; s++)
            if (f->sec_offset[s] >= 0)
                json_object_set_new(secs, zckpt_section_names[s],
                                    json_pack("{s:I, s:s}", "offset", (json_int_t)f->sec_offset[s], "dtype",
                                              zinc_dtype_name(f->sec_dtype[s])));
        snprintf(crc, sizeof crc, "%08" PRIx32, f->crc);
        json_array_append_new(fl,
                              json_pack("{s:s, s:i, s:I, s:I, s:I, s:s, s:I, s:o, s:o}", "name", f->name, "rank",
                                        f->rank, "flat_lo", (json_int_t)f->flat_lo, "flat_hi", (json_int_t)f->flat_hi,
                                        "bytes", (json_int_t)f->bytes, "crc32c", crc, "block_bytes",
                                        (json_int_t)f->block_bytes, "block_crc32c", blocks, "sections", secs));
    }
    json_t *dtypes = json_pack("{s:s, s:s, s:s, s:s, s:s}", "compute", zinc_dtype_name(e->compute_dtype), "grad",
                               zinc_dtype_name(e->grad_dtype), "comm", zinc_dtype_name(e->comm_dtype), "master", "fp32",
                               "optimizer_state", "fp32");
    json_t *steps =
        json_pack("{s:I, s:I, s:I, s:I}", "steps", (json_int_t)e->steps, "steps_taken", (json_int_t)e->steps_taken,
                  "steps_skipped", (json_int_t)e->steps_skipped, "consecutive_skips", (json_int_t)e->consecutive_skips);
    json_t *flat =
        json_pack("{s:I, s:i, s:I, s:I}", "numel", (json_int_t)e->part.numel, "param_align", ZPART_PARAM_ALIGN, "shard",
                  (json_int_t)e->part.shard, "padded", (json_int_t)e->part.padded);
    json_t *batch = json_pack("{s:I, s:I, s:I}", "train_batch_size", (json_int_t)e->cfg.train_batch_size,
                              "train_micro_batch_size_per_gpu", (json_int_t)e->cfg.train_micro_batch_size_per_gpu,
                              "gradient_accumulation_steps", (json_int_t)e->cfg.gradient_accumulation_steps);
    if (!lr || !params || !fl || !dtypes || !steps || !flat || !batch) {
        json_decref(lr), json_decref(params), json_decref(fl), json_decref(dtypes), json_decref(steps);
        json_decref(flat), json_decref(batch);
        goto fail;
    }
    json_object_set_new(root, "format", json_string(ZCKPT_FORMAT));
    json_object_set_new(root, "format_version", json_integer(ZCKPT_FORMAT_VERSION));
    json_object_set_new(root, "zinc_version", json_string(zinc_version()));
    json_object_set_new(root, "tag", json_string(tag));
    json_object_set_new(root, "uid", json_string(uid));
    json_object_set_new(root, "created_unix", json_integer((json_int_t)time(NULL)));
    json_object_set_new(root, "world_size", json_integer(e->world));
    json_object_set_new(root, "zero_stage", json_integer(e->stage));
    json_object_set_new(root, "fp16", json_boolean(e->cfg.fp16.enabled));
    json_object_set_new(root, "dtypes", dtypes);
    json_object_set_new(root, "batch", batch);
    json_object_set_new(root, "step", steps);
    json_object_set_new(root, "loss_scaler", scaler_json(&e->scaler));
    json_object_set_new(root, "lr_schedule", lr);
    json_object_set_new(root, "flat", flat);
    json_object_set_new(root, "params", params);
    json_object_set_new(root, "files", fl);
    json_object_set_new(root, "config", config);
    if (e->nmeta) {
        json_t *meta = json_object();
        for (int i = 0; meta && i < e->nmeta; i++)
            json_object_set_new(meta, e->meta[i].key, json_integer((json_int_t)e->meta[i].value));
        if (!meta) goto fail_root;
        json_object_set_new(root, "meta", meta);
    }
    return root;
fail_root:
    json_decref(root);
    return NULL;
fail:
    json_decref(root);
    json_decref(config);
    return NULL;
}

/* ---------------------------------------------------------------- reading */

typedef struct mctx {
    const char *path;
} mctx;

static zinc_status need(const mctx *c, json_t *obj, const char *key, json_type type, json_t **out) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || (json_typeof(v) != type && !(type == JSON_REAL && json_is_integer(v)) &&
               !(type == JSON_TRUE && json_is_boolean(v))))
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint manifest %s: \"%s\" is missing or has the wrong type; the manifest "
                    "is damaged or not written by zinc",
                    c->path, key);
    *out = v;
    return ZINC_OK;
}

static zinc_status get_i64(const mctx *c, json_t *obj, const char *key, int64_t *out) {
    json_t *v = NULL;
    zinc_status st = need(c, obj, key, JSON_INTEGER, &v);
    if (st == ZINC_OK) *out = (int64_t)json_integer_value(v);
    return st;
}

/* An integer field within [lo, hi], checked before it is narrowed or used in arithmetic. */
static zinc_status get_range(const mctx *c, json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    json_t *v = NULL;
    zinc_status st = need(c, obj, key, JSON_INTEGER, &v);
    if (st != ZINC_OK) return st;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint manifest %s: field \"%s\" = %lld is outside [%lld, %lld]", c->path,
                    key, (long long)x, (long long)lo, (long long)hi);
    *out = (int64_t)x;
    return ZINC_OK;
}

static zinc_status get_f64(const mctx *c, json_t *obj, const char *key, double *out) {
    json_t *v = NULL;
    zinc_status st = need(c, obj, key, JSON_REAL, &v);
    if (st == ZINC_OK) *out = json_number_value(v);
    return st;
}

static zinc_status get_bool(const mctx *c, json_t *obj, const char *key, bool *out) {
    json_t *v = NULL;
    zinc_status st = need(c, obj, key, JSON_TRUE, &v);
    if (st == ZINC_OK) *out = json_is_true(v);
    return st;
}

static zinc_status get_str(const mctx *c, json_t *obj, const char *key, const char **out) {
    json_t *v = NULL;
    zinc_status st = need(c, obj, key, JSON_STRING, &v);
    if (st == ZINC_OK) *out = json_string_value(v);
    return st;
}

static zinc_status get_dtype(const mctx *c, json_t *obj, const char *key, zinc_dtype *out) {
    const char *s;
    zinc_status st = get_str(c, obj, key, &s);
    if (st != ZINC_OK) return st;
    for (int t = ZINC_FP32; t <= ZINC_BF16; t++)
        if (!strcmp(s, zinc_dtype_name((zinc_dtype)t))) {
            *out = (zinc_dtype)t;
            return ZINC_OK;
        }
    return ZERR(ZINC_ERR_CORRUPT, "checkpoint manifest %s: dtype \"%s\" of \"%s\" is not fp32, fp16 or bf16", c->path,
                s, key);
}

static zinc_status get_crc(const mctx *c, const char *s, uint32_t *out) {
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 16);
    if (!*s || *end || strlen(s) != 8)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint manifest %s: checksum \"%s\" is not 8 hex digits", c->path, s);
    *out = (uint32_t)v;
    return ZINC_OK;
}

static zinc_status read_scaler(const mctx *c, json_t *o, zloss_scaler *s) {
    zinc_status st = ZINC_OK;
    int64_t x;
    TRY(get_bool(c, o, "dynamic", &s->dynamic));
    TRY(get_f64(c, o, "cur_scale", &s->cur_scale));
    TRY(get_f64(c, o, "min_scale", &s->min_scale));
    TRY(get_f64(c, o, "scale_factor", &s->scale_factor));
    TRY(get_range(c, o, "scale_window", 1, ZCKPT_MAX_STEPS, &s->scale_window));
    TRY(get_range(c, o, "delayed_shift", 1, 1000000, &x));
    s->delayed_shift = (int)x;
    TRY(get_range(c, o, "cur_hysteresis", 1, 1000000, &x));
    s->cur_hysteresis = (int)x;
    TRY(get_bool(c, o, "consecutive_hysteresis", &s->consecutive_hysteresis));
    TRY(get_range(c, o, "cur_iter", 0, ZCKPT_MAX_STEPS, &s->cur_iter));
    TRY(get_range(c, o, "last_overflow_iter", -1, ZCKPT_MAX_STEPS, &s->last_overflow_iter));
fail:
    return st;
}

static zinc_status read_file_entry(const mctx *c, const zckpt_manifest *m, json_t *o, zckpt_file *f) {
    zinc_status st = ZINC_OK;
    const char *name = NULL, *crc = NULL;
    json_t *blocks = NULL, *secs = NULL;
    int64_t x;
    TRY(get_str(c, o, "name", &name));
    if (strlen(name) >= sizeof f->name || strchr(name, '/') || name[0] == '.')
        FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: file name \"%s\" is not a shard file name", c->path, name);
    snprintf(f->name, sizeof f->name, "%s", name);
    TRY(get_range(c, o, "rank", 0, ZCKPT_MAX_WORLD - 1, &x));
    f->rank = (int)x;
    TRY(get_range(c, o, "flat_lo", 0, m->flat_numel, &f->flat_lo));
    TRY(get_range(c, o, "flat_hi", 0, m->flat_numel, &f->flat_hi));
    TRY(get_range(c, o, "bytes", ZCKPT_HEADER_BYTES, ZCKPT_MAX_ELEMS * 16, &f->bytes));
    TRY(get_str(c, o, "crc32c", &crc));
    TRY(get_crc(c, crc, &f->crc));
    TRY(get_range(c, o, "block_bytes", 4096, (int64_t)1 << 30, &f->block_bytes));
    TRY(need(c, o, "block_crc32c", JSON_ARRAY, &blocks));
    TRY(need(c, o, "sections", JSON_OBJECT, &secs));
    if (f->flat_lo < 0 || f->flat_hi < f->flat_lo || f->flat_hi > m->flat_numel || f->block_bytes < 4096 ||
        f->bytes < ZCKPT_HEADER_BYTES)
        FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: file %s has an impossible range, size or block size", c->path,
             name);
    f->nblocks = (f->bytes + f->block_bytes - 1) / f->block_bytes;
    if ((int64_t)json_array_size(blocks) != f->nblocks)
        FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: file %s has %zu block checksums, its size needs %lld", c->path,
             name, json_array_size(blocks), (long long)f->nblocks);
    TRY_ALLOC(f->block_crc, f->nblocks, "checkpoint block checksums");
    for (int64_t b = 0; b < f->nblocks; b++) {
        json_t *v = json_array_get(blocks, (size_t)b);
        if (!json_is_string(v))
            FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: block checksum %lld of %s is not a string", c->path,
                 (long long)b, name);
        TRY(get_crc(c, json_string_value(v), &f->block_crc[b]));
    }
    int64_t n = f->flat_hi - f->flat_lo;
    for (int s = 0; s < ZCKPT_NSEC; s++) {
        json_t *sec = json_object_get(secs, zckpt_section_names[s]);
        f->sec_offset[s] = -1;
        f->sec_dtype[s] = ZINC_FP32;
        if (!sec) {
            if (s != ZCKPT_SEC_PARAMS)
                FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: file %s has no %s section", c->path, name,
                     zckpt_section_names[s]);
            continue;
        }
        TRY(get_range(c, sec, "offset", ZCKPT_HEADER_BYTES, f->bytes, &f->sec_offset[s]));
        TRY(get_dtype(c, sec, "dtype", &f->sec_dtype[s]));
        if (s != ZCKPT_SEC_PARAMS && f->sec_dtype[s] != ZINC_FP32)
            FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: section %s of %s is not fp32", c->path,
                 zckpt_section_names[s], name);
        if (f->sec_offset[s] < ZCKPT_HEADER_BYTES ||
            f->sec_offset[s] + n * (int64_t)zinc_dtype_size(f->sec_dtype[s]) > f->bytes)
            FAIL(ZINC_ERR_CORRUPT, "checkpoint manifest %s: section %s of %s lies outside the file", c->path,
                 zckpt_section_names[s], name);
    }
fail:
    return st;
}

zinc_status zckpt_manifest_read(const char *tagdir, zckpt_manifest *m) {
    zinc_status st = ZINC_OK;
    char path[ZCKPT_PATH_MAX + 32], *text = NULL;
    size_t len;
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/" ZCKPT_MANIFEST, tagdir);
    TRY(zckpt_read_small(path, &text, &len));
    TRY(zckpt_manifest_parse(path, text, len, m));
fail:
    snprintf(m->dir, sizeof m->dir, "%s", tagdir);
    free(text);
    return st;
}

zinc_status zckpt_manifest_parse(const char *path, const char *text, size_t len, zckpt_manifest *m) {
    zinc_status st = ZINC_OK;
    json_error_t jerr;
    json_t *v = NULL, *arr = NULL;
    const char *s = NULL;
    int64_t x;
    memset(m, 0, sizeof *m);
    mctx c = {path};
    /* Manifests open with their checksum. One without it is read only as format version 1 (saved by zinc
     * before the seal existed): a sealed manifest needs two damaged places (seal and version) to pass as
     * one, so a single flipped bit is still always caught. */
    static const char seal_key[] = "{\"manifest_crc32c\"";
    bool sealed = len >= sizeof seal_key - 1 && memcmp(text, seal_key, sizeof seal_key - 1) == 0;
    zinc_status seal = zckpt_manifest_check_seal(path, text, len);
    if (sealed && seal != ZINC_OK) TRY(seal);
    char seal_msg[1024];
    snprintf(seal_msg, sizeof seal_msg, "%s", seal != ZINC_OK ? zinc_last_error() : "");
    { /* the message without the error trail's location suffix */
        char *at = strstr(seal_msg, " [");
        if (at) *at = '\0';
    }
    m->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!sealed && (!m->root || !json_is_object(m->root) ||
                    json_integer_value(json_object_get(m->root, "format_version")) != ZCKPT_FORMAT_VERSION_UNSEALED ||
                    !json_is_integer(json_object_get(m->root, "format_version"))))
        FAIL(ZINC_ERR_CORRUPT, "%s", seal_msg); /* the seal is missing or damaged */
    if (!m->root || !json_is_object(m->root))
        FAIL(ZINC_ERR_CORRUPT,
             "checkpoint manifest %s is not valid JSON (line %d: %s): the file is damaged; load an "
             "earlier checkpoint",
             path, jerr.line, jerr.text);
    TRY(get_str(&c, m->root, "format", &s));
    if (strcmp(s, ZCKPT_FORMAT) != 0) FAIL(ZINC_ERR_CORRUPT, "%s: format \"%s\" is not \"" ZCKPT_FORMAT "\"", path, s);
    TRY(get_i64(&c, m->root, "format_version", &x));
    m->format_version = (int)x;
    if (x != (sealed ? ZCKPT_FORMAT_VERSION : ZCKPT_FORMAT_VERSION_UNSEALED))
        FAIL(ZINC_ERR_UNSUPPORTED, "%s: checkpoint format version %lld; this zinc (%s) reads version %d", path,
             (long long)x, zinc_version(), ZCKPT_FORMAT_VERSION);
    TRY(get_str(&c, m->root, "zinc_version", &s));
    snprintf(m->zinc_version, sizeof m->zinc_version, "%s", s);
    TRY(get_str(&c, m->root, "tag", &s));
    if (strlen(s) > ZCKPT_TAG_MAX) FAIL(ZINC_ERR_CORRUPT, "%s: field \"tag\" is longer than %d", path, ZCKPT_TAG_MAX);
    snprintf(m->tag, sizeof m->tag, "%s", s);
    TRY(get_str(&c, m->root, "uid", &s));
    if (strlen(s) != ZCKPT_UID_LEN) FAIL(ZINC_ERR_CORRUPT, "%s: \"uid\" is not %d characters", path, ZCKPT_UID_LEN);
    memcpy(m->uid, s, ZCKPT_UID_LEN + 1);
    TRY(get_range(&c, m->root, "world_size", 1, ZCKPT_MAX_WORLD, &x));
    m->world_size = (int)x;
    TRY(get_range(&c, m->root, "zero_stage", 0, 3, &x));
    m->stage = (int)x;
    TRY(get_bool(&c, m->root, "fp16", &m->fp16_enabled));
    TRY(need(&c, m->root, "dtypes", JSON_OBJECT, &v));
    TRY(get_dtype(&c, v, "compute", &m->compute_dtype));
    TRY(need(&c, m->root, "batch", JSON_OBJECT, &v));
    TRY(get_range(&c, v, "train_batch_size", 1, ZCKPT_MAX_BATCH, &m->train_batch_size));
    TRY(get_range(&c, v, "train_micro_batch_size_per_gpu", 1, ZCKPT_MAX_BATCH, &m->micro_batch));
    TRY(get_range(&c, v, "gradient_accumulation_steps", 1, ZCKPT_MAX_BATCH, &m->grad_accum));
    TRY(need(&c, m->root, "step", JSON_OBJECT, &v));
    TRY(get_range(&c, v, "steps", 0, ZCKPT_MAX_STEPS, &m->steps));
    TRY(get_range(&c, v, "steps_taken", 0, ZCKPT_MAX_STEPS, &m->steps_taken));
    TRY(get_range(&c, v, "steps_skipped", 0, ZCKPT_MAX_STEPS, &m->steps_skipped));
    TRY(get_range(&c, v, "consecutive_skips", 0, ZCKPT_MAX_STEPS, &m->consecutive_skips));
    TRY(need(&c, m->root, "loss_scaler", JSON_OBJECT, &v));
    TRY(read_scaler(&c, v, &m->scaler));
    TRY(need(&c, m->root, "flat", JSON_OBJECT, &v));
    TRY(get_range(&c, v, "numel", 0, ZCKPT_MAX_ELEMS, &m->flat_numel));
    TRY(get_range(&c, v, "shard", 1, ZCKPT_MAX_ELEMS, &m->flat_shard));

    TRY(need(&c, m->root, "params", JSON_ARRAY, &arr));
    if (json_array_size(arr) > ZCKPT_MAX_PARAMS)
        FAIL(ZINC_ERR_CORRUPT, "%s: field \"params\" has more than %d entries", path, ZCKPT_MAX_PARAMS);
    m->nparams = (int)json_array_size(arr);
    TRY_ALLOC(m->params, m->nparams, "the checkpoint's parameter table");
    for (int i = 0; i < m->nparams; i++) {
        json_t *o = json_array_get(arr, (size_t)i), *shape;
        zckpt_param *p = &m->params[i];
        TRY(get_str(&c, o, "name", &s));
        p->name = strdup(s);
        if (!p->name) FAIL(ZINC_ERR_NOMEM, "out of memory reading %s", path);
        TRY(need(&c, o, "shape", JSON_ARRAY, &shape));
        p->ndim = (int)json_array_size(shape);
        if (p->ndim < 1 || p->ndim > ZINC_MAX_DIMS)
            FAIL(ZINC_ERR_CORRUPT, "%s: parameter \"%s\" has %d dimensions (want 1 to %d)", path, s, p->ndim,
                 ZINC_MAX_DIMS);
        int64_t numel = 1;
        for (int d = 0; d < p->ndim; d++) {
            json_t *dim = json_array_get(shape, (size_t)d);
            if (!json_is_integer(dim) || json_integer_value(dim) < 1 || json_integer_value(dim) > ZCKPT_MAX_ELEMS ||
                (int64_t)json_integer_value(dim) > ZCKPT_MAX_ELEMS / numel)
                FAIL(ZINC_ERR_CORRUPT,
                     "%s: field \"params[%d].shape\" of \"%s\" is impossible (a dimension below 1 "
                     "or more than 2^50 elements)",
                     path, i, s);
            p->shape[d] = (int64_t)json_integer_value(dim);
            numel *= p->shape[d];
        }
        TRY(get_range(&c, o, "numel", 1, ZCKPT_MAX_ELEMS, &p->numel));
        TRY(get_range(&c, o, "flat_offset", 0, ZCKPT_MAX_ELEMS, &p->flat_offset));
        TRY(get_bool(&c, o, "decay", &p->decay));
        if (p->numel != numel || p->flat_offset < 0 || p->flat_offset + p->numel > m->flat_numel)
            FAIL(ZINC_ERR_CORRUPT,
                 "checkpoint manifest %s: field \"params[%d].numel\" or \"flat_offset\" of \"%s\" is "
                 "inconsistent with its shape or field \"flat.numel\"",
                 path, i, s);
    }
    TRY(need(&c, m->root, "files", JSON_ARRAY, &arr));
    if (json_array_size(arr) > ZCKPT_MAX_WORLD)
        FAIL(ZINC_ERR_CORRUPT, "%s: field \"files\" has more than %d entries", path, ZCKPT_MAX_WORLD);
    m->nfiles = (int)json_array_size(arr);
    if (m->nfiles < 1) FAIL(ZINC_ERR_CORRUPT, "%s: the checkpoint lists no shard files", path);
    TRY_ALLOC(m->files, m->nfiles, "the checkpoint's file table");
    for (int i = 0; i < m->nfiles; i++) {
        TRY(read_file_entry(&c, m, json_array_get(arr, (size_t)i), &m->files[i]));
        if (i > 0 && m->files[i].flat_lo != m->files[i - 1].flat_hi)
            FAIL(ZINC_ERR_CORRUPT, "%s: files %s and %s do not cover adjacent ranges", path, m->files[i - 1].name,
                 m->files[i].name);
    }
    if (m->files[0].flat_lo != 0 || m->files[m->nfiles - 1].flat_hi != m->flat_numel)
        FAIL(ZINC_ERR_CORRUPT,
             "checkpoint manifest %s: the shard files (field \"files\") do not cover the flat "
             "buffer [0, %lld) (field \"flat.numel\")",
             path, (long long)m->flat_numel);
    TRY(zckpt_manifest_validate(path, m));
fail:
    if (st != ZINC_OK) zckpt_manifest_free(m);
    return st;
}

void zckpt_manifest_free(zckpt_manifest *m) {
    if (!m) return;
    for (int i = 0; m->params && i < m->nparams; i++) free(m->params[i].name);
    free(m->params);
    for (int i = 0; m->files && i < m->nfiles; i++) free(m->files[i].block_crc);
    free(m->files);
    json_decref(m->root);
    char dir[ZCKPT_PATH_MAX];
    memcpy(dir, m->dir, sizeof dir);
    memset(m, 0, sizeof *m);
    memcpy(m->dir, dir, sizeof dir); /* kept for messages */
}

/* ---------------------------------------------------------------- matching a model */

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

zinc_status zckpt_manifest_match(const zckpt_manifest *m, const zinc_engine *e) {
    int n = m->nparams < e->nparams ? m->nparams : e->nparams;
    char a[128], b[128];
    for (int i = 0; i < n; i++) {
        const zckpt_param *q = &m->params[i];
        const zinc_param *p = e->params[i];
        bool same_shape = q->ndim == p->ndim && memcmp(q->shape, p->shape, (size_t)p->ndim * sizeof(int64_t)) == 0;
        if (strcmp(q->name, p->name) != 0 || !same_shape) {
            shape_str(q->shape, q->ndim, a, sizeof a);
            shape_str(p->shape, p->ndim, b, sizeof b);
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint %s is of a different model: parameter %d is \"%s\" %s in the "
                        "checkpoint but \"%s\" %s in this model (parameters must be registered with "
                        "the same names, shapes and order)",
                        m->dir, i, q->name, a, p->name, b);
        }
        if (q->flat_offset != p->flat_offset)
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint %s: parameter %d \"%s\" is at flat offset %lld in the checkpoint "
                        "but %lld here (a different zinc layout)",
                        m->dir, i, p->name, (long long)q->flat_offset, (long long)p->flat_offset);
    }
    if (m->nparams != e->nparams) {
        bool more = m->nparams > e->nparams;
        const char *name = more ? m->params[n].name : e->params[n]->name;
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint %s is of a different model: it has %d parameters, this model %d; "
                    "the first difference is parameter %d \"%s\", %s",
                    m->dir, m->nparams, e->nparams, n, name,
                    more ? "which this model does not have" : "which the checkpoint does not have");
    }
    if (m->flat_numel != e->part.numel)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint %s: flat buffer of %lld elements, this model has %lld", m->dir,
                    (long long)m->flat_numel, (long long)e->part.numel);
    return ZINC_OK;
}
