/* See gpt2_cli.h: the model shape saved beside a GPT-2's checkpoints. */
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/gpt2_cli.h"

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
    char path[4096], tmp[4200];
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/%s", dir, ZCLI_GPT2_SHAPE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "model", "gpt2", "max_context", s->max_context,
                          "vocab", s->vocab, "layers", s->layers, "heads", s->heads, "channels", s->channels,
                          "padded_vocab", s->padded_vocab);
    int rc = !j || json_dump_file(j, tmp, JSON_INDENT(2)) != 0 || rename(tmp, path) != 0;
    json_decref(j);
    if (rc) snprintf(err, cap, "%s: cannot write the model shape: %s", path, strerror(errno));
    return rc ? -1 : 0;
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
