/* The checkpoint manifest's own checksum (the seal) and the consistency of its fields.
 *
 * Seal: manifest.json starts with the line `{"manifest_crc32c": "XXXXXXXX",` and XXXXXXXX is the CRC-32C of
 * every byte after that line's comma, so one flipped bit anywhere (a digit of the step count, a letter of a
 * tensor name, the checksum itself) is refused before any field is used. The file stays plain JSON.
 *
 * Consistency: a manifest that passes its seal was still written by someone; every field is checked against
 * its range and the others (the layout zinc itself would compute from the parameter table, the world size
 * and the stage), with overflow-checked arithmetic, so an edited-and-resealed or hostile manifest cannot
 * make a reader index outside a file or train from an impossible state. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/error.h"
#include "base/core/crc32c.h"
#include "zero/partition.h"

#define SEAL_HEAD "{\"manifest_crc32c\": \""
#define SEAL_HEAD_LEN 21
#define SEAL_LEN (SEAL_HEAD_LEN + 8 + 2) /* head, 8 hex digits, `",` */

char *zckpt_manifest_seal(const json_t *root) {
    char *body = json_dumps(root, JSON_INDENT(1));
    if (!body) return NULL;
    size_t n = strlen(body);
    if (n < 2 || body[0] != '{') {
        free(body);
        return NULL;
    }
    /* body is "{\n ...}": the sealed text is the seal line, then body without its '{'. */
    char *out = malloc(SEAL_LEN + n);
    if (out) {
        uint32_t crc = zcrc32c(0, body + 1, n - 1);
        snprintf(out, SEAL_LEN + 1, SEAL_HEAD "%08" PRIx32 "\",", crc);
        memcpy(out + SEAL_LEN, body + 1, n); /* with the NUL */
    }
    free(body);
    return out;
}

zinc_status zckpt_manifest_check_seal(const char *path, const char *text, size_t len) {
    if (len < SEAL_LEN + 2 || memcmp(text, SEAL_HEAD, SEAL_HEAD_LEN) != 0 || text[SEAL_LEN - 2] != '"' ||
        text[SEAL_LEN - 1] != ',')
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint manifest %s: field \"manifest_crc32c\" (the manifest's checksum, "
                    "which must open the file) is missing or damaged: the file is damaged or not "
                    "written by this zinc; load an earlier checkpoint",
                    path);
    uint32_t want = 0;
    for (int i = 0; i < 8; i++) {
        char c = text[SEAL_HEAD_LEN + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint manifest %s: field \"manifest_crc32c\" is not 8 lower-case hex "
                        "digits: the file is damaged; load an earlier checkpoint",
                        path);
        want = want << 4 | (uint32_t)d;
    }
    uint32_t got = zcrc32c(0, text + SEAL_LEN, len - SEAL_LEN);
    if (got != want)
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint manifest %s fails its checksum (field \"manifest_crc32c\" says "
                    "%08" PRIx32 ", the contents give %08" PRIx32 "): the file was damaged or edited; "
                    "load an earlier checkpoint",
                    path, want, got);
    return ZINC_OK;
}

/* ---------------------------------------------------------------- consistency */

#define BAD(...) return ZERR(ZINC_ERR_CORRUPT, __VA_ARGS__)

static bool mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return false;
    if (a != 0 && b > ZCKPT_MAX_ELEMS / a) return false;
    *out = a * b;
    return true;
}

static zinc_status check_scaler(const char *path, const zckpt_manifest *m) {
    const zloss_scaler *s = &m->scaler;
    /* 2^64: a dynamic scale starts at most at 2^62 (fp16.initial_scale_power) and a static one is at most 65504
     * (config_resolve.c); far beyond them every fp16 gradient overflows and every step would be skipped. */
    if (!isfinite(s->cur_scale) || s->cur_scale <= 0 || s->cur_scale > 0x1p64)
        BAD("checkpoint manifest %s: field \"loss_scaler.cur_scale\" = %g is outside (0, 2^64]", path, s->cur_scale);
    if (!isfinite(s->min_scale) || s->min_scale < 0 || s->min_scale > s->cur_scale)
        BAD("checkpoint manifest %s: field \"loss_scaler.min_scale\" = %g is outside [0, cur_scale %g] (0: no "
            "floor)",
            path, s->min_scale, s->cur_scale);
    if (!isfinite(s->scale_factor) || s->scale_factor < 1 || s->scale_factor > 0x1p20)
        BAD("checkpoint manifest %s: field \"loss_scaler.scale_factor\" = %g is outside [1, 2^20]", path,
            s->scale_factor);
    if (s->scale_window < 1 || s->scale_window > ZCKPT_MAX_STEPS)
        BAD("checkpoint manifest %s: field \"loss_scaler.scale_window\" = %lld must be at least 1", path,
            (long long)s->scale_window);
    if (s->delayed_shift < 1 || s->delayed_shift > 1000000)
        BAD("checkpoint manifest %s: field \"loss_scaler.delayed_shift\" = %d is outside [1, 1000000]", path,
            s->delayed_shift);
    if (s->cur_hysteresis < 1 || s->cur_hysteresis > s->delayed_shift)
        BAD("checkpoint manifest %s: field \"loss_scaler.cur_hysteresis\" = %d is outside [1, delayed_shift %d]", path,
            s->cur_hysteresis, s->delayed_shift);
    if (s->cur_iter < 0 || s->cur_iter > ZCKPT_MAX_STEPS)
        BAD("checkpoint manifest %s: field \"loss_scaler.cur_iter\" = %lld is outside [0, 2^53]", path,
            (long long)s->cur_iter);
    if (s->last_overflow_iter < -1 || s->last_overflow_iter >= s->cur_iter)
        BAD("checkpoint manifest %s: field \"loss_scaler.last_overflow_iter\" = %lld must lie in [-1, cur_iter %lld)",
            path, (long long)s->last_overflow_iter, (long long)s->cur_iter);
    return ZINC_OK;
}

static int strptr_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

zinc_status zckpt_manifest_validate(const char *path, const zckpt_manifest *m) {
    zinc_status st = ZINC_OK;
    int64_t shard = m->flat_shard, micro = m->micro_batch, accum = m->grad_accum;
    if (zckpt_check_tag(m->tag) != ZINC_OK)
        BAD("checkpoint manifest %s: field \"tag\" = \"%.64s\" is not a valid tag", path, m->tag);
    if ((st = zckpt_meta_validate(path, m->root)) != ZINC_OK) return st;
    for (int i = 0; i < ZCKPT_UID_LEN; i++)
        if (!((m->uid[i] >= '0' && m->uid[i] <= '9') || (m->uid[i] >= 'a' && m->uid[i] <= 'f')))
            BAD("checkpoint manifest %s: field \"uid\" = \"%s\" is not %d hex digits", path, m->uid, ZCKPT_UID_LEN);
    if (m->world_size < 1 || m->world_size > ZCKPT_MAX_WORLD)
        BAD("checkpoint manifest %s: field \"world_size\" = %d is outside [1, %d]", path, m->world_size,
            ZCKPT_MAX_WORLD);
    if (m->stage < 0 || m->stage > 3)
        BAD("checkpoint manifest %s: field \"zero_stage\" = %d is outside [0, 3]", path, m->stage);
    if (m->fp16_enabled != (m->compute_dtype == ZINC_FP16))
        BAD("checkpoint manifest %s: field \"fp16\" (%s) disagrees with \"dtypes.compute\" (%s)", path,
            m->fp16_enabled ? "true" : "false", zinc_dtype_name(m->compute_dtype));
    if (micro < 1 || micro > ZCKPT_MAX_BATCH || accum < 1 || accum > ZCKPT_MAX_BATCH || m->train_batch_size < 1 ||
        m->train_batch_size > ZCKPT_MAX_BATCH || m->train_batch_size != micro * accum * m->world_size)
        BAD("checkpoint manifest %s: field \"batch\": train_batch_size %lld is not train_micro_batch_size_per_gpu "
            "%lld x gradient_accumulation_steps %lld x world_size %d (each in [1, 2^31])",
            path, (long long)m->train_batch_size, (long long)micro, (long long)accum, m->world_size);

    /* Step counters: every zinc_step is taken or skipped (a failed one counts in neither). */
    const int64_t *ctr[4] = {&m->steps, &m->steps_taken, &m->steps_skipped, &m->consecutive_skips};
    const char *cname[4] = {"steps", "steps_taken", "steps_skipped", "consecutive_skips"};
    for (int i = 0; i < 4; i++)
        if (*ctr[i] < 0 || *ctr[i] > ZCKPT_MAX_STEPS)
            BAD("checkpoint manifest %s: field \"step.%s\" = %lld is outside [0, 2^53]", path, cname[i],
                (long long)*ctr[i]);
    if (m->steps_taken + m->steps_skipped > m->steps || m->consecutive_skips > m->steps_skipped)
        BAD("checkpoint manifest %s: field \"step\": steps %lld, steps_taken %lld, steps_skipped %lld and "
            "consecutive_skips %lld are inconsistent (taken + skipped <= steps, consecutive <= skipped)",
            path, (long long)m->steps, (long long)m->steps_taken, (long long)m->steps_skipped,
            (long long)m->consecutive_skips);
    json_t *lr = json_object_get(m->root, "lr_schedule"), *lt = json_object_get(lr, "steps_taken");
    if (!json_is_integer(lt) || json_integer_value(lt) != m->steps_taken)
        BAD("checkpoint manifest %s: field \"lr_schedule.steps_taken\" disagrees with \"step.steps_taken\" %lld", path,
            (long long)m->steps_taken);
    if (!json_is_object(json_object_get(m->root, "config")))
        BAD("checkpoint manifest %s: field \"config\" is missing or not an object", path);
    TRY(check_scaler(path, m));

    /* The parameter table: names unique and non-empty, shapes within range, offsets exactly zinc's layout. */
    if (m->nparams < 1 || m->nparams > ZCKPT_MAX_PARAMS)
        BAD("checkpoint manifest %s: field \"params\" has %d entries (1 to %d)", path, m->nparams, ZCKPT_MAX_PARAMS);
    int64_t off = 0;
    for (int i = 0; i < m->nparams; i++) {
        const zckpt_param *p = &m->params[i];
        int64_t numel = 1;
        if (!p->name[0] || strlen(p->name) > 1024)
            BAD("checkpoint manifest %s: field \"params[%d].name\" is empty or longer than 1024 bytes", path, i);
        for (int d = 0; d < p->ndim; d++)
            if (!mul_ok(numel, p->shape[d], &numel) || p->shape[d] < 1)
                BAD("checkpoint manifest %s: field \"params[%d].shape\" of \"%s\" is impossible (a dimension below 1 "
                    "or more than 2^50 elements)",
                    path, i, p->name);
        if (p->numel != numel)
            BAD("checkpoint manifest %s: field \"params[%d].numel\" of \"%s\" is %lld, its shape has %lld", path, i,
                p->name, (long long)p->numel, (long long)numel);
        if (p->flat_offset != off)
            BAD("checkpoint manifest %s: field \"params[%d].flat_offset\" of \"%s\" is %lld; the layout puts it at "
                "%lld",
                path, i, p->name, (long long)p->flat_offset, (long long)off);
        if (numel > ZCKPT_MAX_ELEMS - off - ZPART_PARAM_ALIGN)
            BAD("checkpoint manifest %s: field \"params\": more than 2^50 elements in all", path);
        off = zpart_align_up(off + numel, ZPART_PARAM_ALIGN);
    }
    /* Names are unique (a sorted copy of the pointers, compared pairwise). */
    const char **names = NULL;
    TRY_ALLOC(names, m->nparams, "checking the checkpoint's parameter names");
    for (int i = 0; i < m->nparams; i++) names[i] = m->params[i].name;
    qsort(names, (size_t)m->nparams, sizeof *names, strptr_cmp);
    for (int i = 1; i < m->nparams; i++)
        if (!strcmp(names[i - 1], names[i])) {
            st = ZERR(ZINC_ERR_CORRUPT, "checkpoint manifest %s: field \"params\": the name \"%s\" appears twice", path,
                      names[i]);
            break;
        }
    free(names);
    if (st != ZINC_OK) return st;
    if (m->flat_numel != off)
        BAD("checkpoint manifest %s: field \"flat.numel\" = %lld; the parameter table gives %lld", path,
            (long long)m->flat_numel, (long long)off);

    /* The files: exactly the ones zinc's save writes for this world size and stage, laid out as it does. */
    zpartition part;
    zpart_init(&part, m->flat_numel, m->world_size, 0);
    if (shard != part.shard)
        BAD("checkpoint manifest %s: field \"flat.shard\" = %lld; %d ranks over %lld elements give %lld", path,
            (long long)shard, m->world_size, (long long)m->flat_numel, (long long)part.shard);
    int want_files = m->stage == 0 ? 1 : m->world_size;
    if (m->nfiles != want_files)
        BAD("checkpoint manifest %s: field \"files\" lists %d files; a stage %d save by %d ranks writes %d", path,
            m->nfiles, m->stage, m->world_size, want_files);
    for (int i = 0; i < m->nfiles; i++) {
        const zckpt_file *f = &m->files[i];
        zckpt_file want;
        int64_t lo = m->stage == 0 ? 0 : (int64_t)i * part.shard, hi = m->stage == 0 ? m->flat_numel : lo + part.shard;
        if (lo > m->flat_numel) lo = m->flat_numel;
        if (hi > m->flat_numel) hi = m->flat_numel;
        zckpt_layout(&want, i, lo, hi, m->stage == 3, m->compute_dtype);
        if (strcmp(f->name, want.name) != 0 || f->rank != i)
            BAD("checkpoint manifest %s: field \"files[%d]\" is \"%s\" of rank %d; expected \"%s\" of rank %d", path, i,
                f->name, f->rank, want.name, i);
        if (f->flat_lo != want.flat_lo || f->flat_hi != want.flat_hi)
            BAD("checkpoint manifest %s: field \"files[%d].flat_lo/flat_hi\" of %s is [%lld, %lld); the layout gives "
                "[%lld, %lld)",
                path, i, f->name, (long long)f->flat_lo, (long long)f->flat_hi, (long long)want.flat_lo,
                (long long)want.flat_hi);
        if (f->bytes != want.bytes || f->block_bytes != want.block_bytes)
            BAD("checkpoint manifest %s: field \"files[%d].bytes\" or \"block_bytes\" of %s is %lld / %lld; the layout "
                "gives %lld / %lld",
                path, i, f->name, (long long)f->bytes, (long long)f->block_bytes, (long long)want.bytes,
                (long long)want.block_bytes);
        for (int s = 0; s < ZCKPT_NSEC; s++)
            if (f->sec_offset[s] != want.sec_offset[s] ||
                (want.sec_offset[s] >= 0 && f->sec_dtype[s] != want.sec_dtype[s]))
                BAD("checkpoint manifest %s: field \"files[%d].sections.%s\" of %s is at %lld (%s); the layout gives "
                    "%lld (%s)",
                    path, i, zckpt_section_names[s], f->name, (long long)f->sec_offset[s],
                    zinc_dtype_name(f->sec_dtype[s]), (long long)want.sec_offset[s],
                    zinc_dtype_name(want.sec_dtype[s]));
    }
    return ZINC_OK;
fail:
    return st;
}
