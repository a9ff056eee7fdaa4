/* See gpt2_cli.h: the model shape saved beside a GPT-2's checkpoints. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/checkpoint/gpt2_cli.h"
#include "base/core/safe_file.h"

/* mkdir -p */
static void make_dirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            mkdir(p, 0755);
            *c = '/';
        }
    mkdir(p, 0755);
}

int zcli_gpt2_shape_save(const char *dir, const gpt2_shape *s, char *err, size_t cap) {
    char path[4096];
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/%s", dir, ZCLI_GPT2_SHAPE_FILE);
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "model", "gpt2", "max_context", s->max_context,
                          "vocab", s->vocab, "layers", s->layers, "heads", s->heads, "channels", s->channels,
                          "padded_vocab", s->padded_vocab);
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    /* zinc's own file beside the checkpoints (replaced by every run that saves there) */
    zinc_status st =
        text ? zfile_write("the model shape", path, text, strlen(text), ZFILE_REPLACE, NULL) : ZINC_ERR_NOMEM;
    free(text);
    if (st != ZINC_OK) snprintf(err, cap, "%s: cannot write the model shape: %s", path, zinc_last_error());
    return st != ZINC_OK ? -1 : 0;
}

/* The shape's fields by the names the checkpoint's meta and the flags use. */
static int *field(gpt2_shape *s, int i) {
    int *f[6] = {&s->max_context, &s->vocab, &s->layers, &s->heads, &s->channels, &s->padded_vocab};
    return f[i];
}
static const char *const meta_keys[6] = {"gpt2.max_context", "gpt2.vocab",    "gpt2.layers",
                                         "gpt2.heads",       "gpt2.channels", "gpt2.padded_vocab"};
const char *const zcli_gpt2_shape_flags[6] = {"--max-context", "--vocab", "--layers",
                                              "--heads",       "--width", "--padded-vocab"};

int zcli_gpt2_shape_seal(zinc_engine *e, const gpt2_shape *s) {
    gpt2_shape c = *s;
    for (int i = 0; i < 6; i++)
        if (zinc_checkpoint_meta_set(e, meta_keys[i], *field(&c, i)) != ZINC_OK) return -1;
    return 0;
}

int zcli_gpt2_shape_sealed(const char *checkpoint, gpt2_shape *s, char *err, size_t cap) {
    gpt2_shape got = {0};
    int nfound = 0;
    for (int i = 0; i < 6; i++) {
        int64_t v = 0;
        int found = 0;
        if (zinc_checkpoint_meta_get(checkpoint, meta_keys[i], &v, &found) != ZINC_OK) {
            snprintf(err, cap, "%s", zinc_last_error());
            return -1;
        }
        if (found && (v < 0 || v > INT32_MAX)) {
            snprintf(err, cap, "%s: meta %s = %lld is out of range", checkpoint, meta_keys[i], (long long)v);
            return -1;
        }
        if (found) *field(&got, i) = (int)v, nfound++;
    }
    if (nfound == 0) return 1;
    char why[256];
    if (nfound != 6 || gpt2_shape_check(&got, why, sizeof why)) {
        snprintf(err, cap, "%s: the sealed GPT-2 shape is incomplete or invalid (%s)", checkpoint,
                 nfound != 6 ? "some keys missing" : why);
        return -1;
    }
    *s = got;
    return 0;
}

int zcli_gpt2_shape_flags_agree(const char *checkpoint, const gpt2_shape *s, const int64_t given[6], char *err,
                                size_t cap) {
    gpt2_shape c = *s;
    for (int i = 0; i < 6; i++)
        if (given[i] >= 0 && given[i] != *field(&c, i)) {
            snprintf(err, cap,
                     "%s %lld disagrees with the checkpoint %s, whose model has %s %d: drop "
                     "the flag or give %d; a model of another shape needs a new run",
                     zcli_gpt2_shape_flags[i], (long long)given[i], checkpoint, zcli_gpt2_shape_flags[i], *field(&c, i),
                     *field(&c, i));
            return -1;
        }
    return 0;
}

static int load_one(const char *path, gpt2_shape *s, char *err, size_t cap) {
    if (access(path, F_OK) != 0) return 1;
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        snprintf(err, cap, "%s: line %d: %s", path, je.line, je.text);
        return -1;
    }
    int rc =
        json_unpack(j, "{s:i, s:i, s:i, s:i, s:i, s:i}", "max_context", &s->max_context, "vocab", &s->vocab, "layers",
                    &s->layers, "heads", &s->heads, "channels", &s->channels, "padded_vocab", &s->padded_vocab);
    json_decref(j);
    char why[256];
    if (rc != 0)
        snprintf(err, cap, "%s: needs integer max_context, vocab, layers, heads, channels, padded_vocab", path);
    else if (gpt2_shape_check(s, why, sizeof why))
        snprintf(err, cap, "%s: %s", path, why), rc = -1;
    return rc ? -1 : 0;
}

int zcli_gpt2_shape_load(const char *path, gpt2_shape *s, char *err, size_t cap) {
    char p[4096], copy[4096];
    snprintf(p, sizeof p, "%s/%s", path, ZCLI_GPT2_SHAPE_FILE);
    int rc = load_one(p, s, err, cap);
    if (rc != 1) return rc;
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(p, sizeof p, "%s/%s", dirname(copy), ZCLI_GPT2_SHAPE_FILE);
    return load_one(p, s, err, cap);
}

int zcli_gpt2_padded_vocab(int v) {
    return (v + ZCLI_GPT2_VOCAB_ROUND - 1) / ZCLI_GPT2_VOCAB_ROUND * ZCLI_GPT2_VOCAB_ROUND;
}
