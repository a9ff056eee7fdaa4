/* See safetensors.h: a model sharded over several safetensors files by an index, as Hugging Face saves one
 * larger than save_pretrained's max_shard_size. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/safetensors.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"

#define INDEX_SUFFIX ".safetensors.index.json"

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n > k && !strcmp(s + n - k, tail);
}

bool zckpt_st_is_index(const char *path) { return ends_with(path, INDEX_SUFFIX); }

/* The index read whole through the safe reader, its size checked first. */
static zinc_status read_index(const char *what, const char *path, json_t **out) {
    zinc_status st = ZINC_OK;
    FILE *f = NULL;
    struct stat sb;
    TRY(zfile_fopen_input(what, path, &f));
    if (fstat(fileno(f), &sb) != 0) FAIL(ZINC_ERR_IO, "%s: cannot stat %s: %s", what, path, strerror(errno));
    if ((int64_t)sb.st_size > ZCKPT_ST_INDEX_MAX)
        FAIL(ZINC_ERR_CORRUPT, "%s: %s is %lld bytes, more than an index's %lld: not a safetensors index", what, path,
             (long long)sb.st_size, (long long)ZCKPT_ST_INDEX_MAX);
    json_error_t je;
    *out = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    if (!*out) FAIL(ZINC_ERR_CORRUPT, "%s: %s is not JSON (%s, line %d)", what, path, je.text, je.line);
    if (!json_is_object(*out) || !json_is_object(json_object_get(*out, "weight_map")))
        FAIL(ZINC_ERR_CORRUPT, "%s: %s has no \"weight_map\" object (tensor name -> shard file)", what, path);
fail:
    if (f) fclose(f);
    if (st != ZINC_OK) json_decref(*out), *out = NULL;
    return st;
}

/* A shard's name: a plain file of the index's directory. */
static zinc_status check_shard_name(const char *what, const char *index, const char *tensor, const char *shard) {
    if (!shard || !*shard || strchr(shard, '/') || !strcmp(shard, "..") || !ends_with(shard, ".safetensors"))
        return ZERR(ZINC_ERR_CORRUPT,
                    "%s: %s: weight_map[\"%s\"] is %s%s%s: a shard is a file name ending in .safetensors beside the "
                    "index, without a directory",
                    what, index, tensor, shard ? "\"" : "", shard ? shard : "not a string", shard ? "\"" : "");
    return ZINC_OK;
}

/* The distinct shards in the map's order, each opened. */
static zinc_status open_shards(zckpt_st_set *s, const char *what, const char *index, const char *dir, json_t *map) {
    zinc_status st = ZINC_OK;
    const char *tensor;
    json_t *v;
    char path[4096];
    TRY_ALLOC(s->files, json_object_size(map) ? json_object_size(map) : 1, "the safetensors shard table");
    json_object_foreach(map, tensor, v) {
        const char *shard = json_string_value(v);
        TRY(check_shard_name(what, index, tensor, shard));
        int seen = 0;
        for (int i = 0; i < s->nfiles && !seen; i++) seen = !strcmp(strrchr(s->files[i].path, '/') + 1, shard);
        if (seen) continue;
        if (s->nfiles == ZCKPT_ST_SHARDS_MAX)
            FAIL(ZINC_ERR_CORRUPT, "%s: %s names more than %d shards", what, index, ZCKPT_ST_SHARDS_MAX);
        if (snprintf(path, sizeof path, "%s/%s", dir, shard) >= (int)sizeof path)
            FAIL(ZINC_ERR_INVALID_ARG, "%s: the path of shard %s is too long", what, shard);
        TRY(zckpt_st_open(&s->files[s->nfiles], what, path));
        s->nfiles++;
    }
fail:
    return st;
}

/* Both ways: each tensor of the map in its shard, each tensor of a shard in the map under that shard. */
static zinc_status check_map(const zckpt_st_set *s, const char *what, const char *index, json_t *map) {
    const char *tensor;
    json_t *v;
    json_object_foreach(map, tensor, v) {
        const zckpt_st_file *in = NULL;
        const char *shard = json_string_value(v);
        for (int i = 0; i < s->nfiles && !in; i++)
            if (!strcmp(strrchr(s->files[i].path, '/') + 1, shard)) in = &s->files[i];
        if (!zckpt_st_find(in, tensor))
            return ZERR(ZINC_ERR_CORRUPT, "%s: %s puts tensor %s in %s, which has no such tensor", what, index, tensor,
                        in->path);
    }
    for (int i = 0; i < s->nfiles; i++)
        for (int j = 0; j < s->files[i].ntensors; j++) {
            const char *name = s->files[i].t[j].name, *shard = json_string_value(json_object_get(map, name));
            if (!shard || strcmp(shard, strrchr(s->files[i].path, '/') + 1))
                return ZERR(ZINC_ERR_CORRUPT, "%s: %s holds tensor %s, which %s %s%s", what, s->files[i].path, name,
                            index, shard ? "puts in " : "does not list", shard ? shard : "");
        }
    return ZINC_OK;
}

static zinc_status open_index(zckpt_st_set *s, const char *what, const char *path) {
    zinc_status st = ZINC_OK;
    json_t *root = NULL;
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: the path is too long", what);
    char *cut = strrchr(dir, '/');
    if (cut)
        *cut = 0;
    else
        snprintf(dir, sizeof dir, ".");
    TRY(read_index(what, path, &root));
    json_t *map = json_object_get(root, "weight_map");
    if (!json_object_size(map)) FAIL(ZINC_ERR_CORRUPT, "%s: %s: the weight_map is empty", what, path);
    TRY(open_shards(s, what, path, dir, map));
    TRY(check_map(s, what, path, map));
fail:
    json_decref(root);
    return st;
}

zinc_status zckpt_st_set_open(zckpt_st_set *s, const char *what, const char *path) {
    zinc_status st = ZINC_OK;
    memset(s, 0, sizeof *s);
    if (zckpt_st_is_index(path)) {
        TRY(open_index(s, what, path));
    } else {
        TRY_ALLOC(s->files, 1, "the safetensors shard table");
        TRY(zckpt_st_open(&s->files[0], what, path));
        s->nfiles = 1;
    }
fail:
    if (st != ZINC_OK) zckpt_st_set_close(s);
    return st;
}

const zckpt_st_tensor *zckpt_st_set_find(const zckpt_st_set *s, const char *name, const zckpt_st_file **in) {
    for (int i = 0; i < s->nfiles; i++) {
        const zckpt_st_tensor *t = zckpt_st_find(&s->files[i], name);
        if (t) {
            if (in) *in = &s->files[i];
            return t;
        }
    }
    return NULL;
}

void zckpt_st_set_close(zckpt_st_set *s) {
    for (int i = 0; i < s->nfiles; i++) zckpt_st_close(&s->files[i]);
    free(s->files);
    s->files = NULL;
    s->nfiles = 0;
}
