/* The caller's integers sealed in a checkpoint's manifest ("meta": zinc_checkpoint_meta_set/get). They are
 * part of the sealed text, so an edit is refused with the rest of a damaged manifest. */
#include <stdio.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"

static bool key_ok(const char *key) {
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n > ZINC_META_KEY_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

zinc_status zinc_checkpoint_meta_set(zinc_engine *e, const char *key, int64_t value) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_meta_set: engine is NULL");
    if (!key_ok(key))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_checkpoint_meta_set: key \"%.64s\" must have 1 to %d characters of [A-Za-z0-9._-]",
                    key ? key : "(null)", ZINC_META_KEY_MAX);
    for (int i = 0; i < e->nmeta; i++)
        if (!strcmp(e->meta[i].key, key)) {
            e->meta[i].value = value;
            return ZINC_OK;
        }
    if (e->nmeta == ZINC_META_MAX)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_meta_set(\"%s\"): at most %d keys", key, ZINC_META_MAX);
    snprintf(e->meta[e->nmeta].key, sizeof e->meta[e->nmeta].key, "%s", key);
    e->meta[e->nmeta++].value = value;
    return ZINC_OK;
}

zinc_status zckpt_meta_validate(const char *path, const json_t *root) {
    json_t *meta = json_object_get(root, "meta");
    if (!meta) return ZINC_OK;
    if (!json_is_object(meta) || json_object_size(meta) > ZINC_META_MAX)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint manifest %s: field \"meta\" is not an object of at most %d integers",
                    path, ZINC_META_MAX);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!key_ok(k) || !json_is_integer(v))
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint manifest %s: field \"meta.%.64s\" is not a valid key with an "
                        "integer value",
                        path, k);
    }
    return ZINC_OK;
}

zinc_status zinc_checkpoint_meta_get(const char *checkpoint, const char *key, int64_t *value, int *found) {
    zinc_status st = ZINC_OK;
    zckpt_manifest m;
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1];
    memset(&m, 0, sizeof m);
    if (!checkpoint || !value || !found)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_meta_get: checkpoint, value and found are required");
    *found = 0;
    if (!key_ok(key))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_meta_get: key \"%.64s\" is not a valid key",
                    key ? key : "(null)");
    TRY(zckpt_resolve(checkpoint, tagdir, sizeof tagdir, tag, sizeof tag));
    TRY(zckpt_manifest_read(tagdir, &m));
    json_t *v = json_object_get(json_object_get(m.root, "meta"), key);
    if (v) {
        *value = (int64_t)json_integer_value(v);
        *found = 1;
    }
fail:
    zckpt_manifest_free(&m);
    return st;
}
