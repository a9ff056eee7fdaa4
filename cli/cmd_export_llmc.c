/* zinc checkpoint export --format llmc: a GPT-2 trained by zinc as an llm.c model file, so llm.c's tools
 * run it. Through the public API only: the checkpoint is consolidated with zinc_export_safetensors into a
 * temporary fp32 file, whose tensors (named as examples/gpt2 registers them) are laid out in llm.c's
 * order. The vocabulary and head count are not in the tensors' shapes: they come from the zinc_gpt2.json
 * that zinc train saves beside the checkpoints, or from --vocab and --heads. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/gpt2_cli.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/core/safe_file.h"
#include "zinc.h"

static int read_safetensors(const char *path, json_t **header, char **data, size_t *data_len) {
    FILE *f = fopen(path, "rb");
    uint64_t hl = 0;
    long total;
    if (!f) return -1;
    int ok =
        fread(&hl, 8, 1, f) == 1 && fseek(f, 0, SEEK_END) == 0 && (total = ftell(f)) > 0 && hl <= (uint64_t)total - 8;
    char *h = ok ? malloc(hl + 1) : NULL;
    ok = ok && h && fseek(f, 8, SEEK_SET) == 0 && fread(h, 1, hl, f) == hl;
    if (ok) {
        h[hl] = 0;
        *data_len = (size_t)total - 8 - hl;
        *data = malloc(*data_len + 1);
        ok = *data && fread(*data, 1, *data_len, f) == *data_len;
        *header = ok ? json_loads(h, 0, NULL) : NULL;
        ok = ok && *header;
    }
    free(h);
    fclose(f);
    return ok ? 0 : -1;
}

int zinc_cmd_export_llmc(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    int version = 3, force = 0;
    long vocab = -1, heads = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--format") && v)
            i++;
        else if (!strcmp(a, "--out") && v)
            out = v, i++;
        else if (!strcmp(a, "--force"))
            force = 1;
        else if (!strcmp(a, "--dtype") && v) {
            if (!strcmp(v, "fp32"))
                version = 3;
            else if (!strcmp(v, "bf16"))
                version = 5;
            else {
                fprintf(stderr,
                        "zinc checkpoint export --format llmc: --dtype must be fp32 (version 3) or bf16 "
                        "(version 5), got \"%s\"\n",
                        v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--vocab") && v)
            vocab = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--heads") && v)
            heads = strtol(v, NULL, 10), i++;
        else if (a[0] == '-' || path) {
            fprintf(stderr, "zinc checkpoint export --format llmc: unexpected \"%s\"\n", a);
            return 2;
        } else
            path = a;
    }
    if (!path || !out) {
        fprintf(stderr, "usage: zinc checkpoint export --format llmc DIR[/TAG] --out FILE.bin [--dtype fp32|bf16] "
                        "[--vocab V --heads H] [--force]\n");
        return 2;
    }
    char err[1024], tmpdir[4200] = "", tmp[4300] = "", tagdir[4096], tag[160], ckdir[4096];
    /* The checkpoint is this command's input: nothing is written inside its tag directory (shards, manifest)
     * nor over its `latest` or zinc_gpt2.json. */
    if (zckpt_resolve(path, tagdir, sizeof tagdir, tag, sizeof tag) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return 1;
    }
    snprintf(ckdir, sizeof ckdir, "%s", tagdir);
    char *cut = strrchr(ckdir, '/');
    if (cut && cut != ckdir) *cut = 0;
    char latest[4200], sidecar[4200];
    snprintf(latest, sizeof latest, "%s/latest", ckdir);
    snprintf(sidecar, sizeof sidecar, "%s/%s", ckdir, GPT2_SHAPE_FILE);
    const char *inputs[] = {tagdir, latest, sidecar, NULL};
    if (zfile_check_target("--out", out, force ? ZFILE_REPLACE : 0, inputs) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return 1;
    }
    gpt2_shape s = {0};
    int64_t given[6] = {-1, vocab > 0 ? vocab : -1, -1, heads > 0 ? heads : -1, -1, -1};
    int sealed = gpt2_shape_sealed(path, &s, err, sizeof err);
    if (sealed < 0 || (sealed == 0 && gpt2_shape_flags_agree(path, &s, given, err, sizeof err))) {
        fprintf(stderr, "zinc checkpoint export: %s\n", err);
        return sealed < 0 ? 1 : 2;
    }
    gpt2_shape sealed_shape = s;
    if (sealed == 1) { /* saved before shapes were sealed: zinc_gpt2.json, or the flags */
        int have = gpt2_shape_load(path, &s, err, sizeof err);
        if (have < 0) {
            fprintf(stderr, "zinc checkpoint export: %s\n", err);
            return 1;
        }
        if (have == 0 && gpt2_shape_flags_agree(path, &s, given, err, sizeof err)) {
            fprintf(stderr, "zinc checkpoint export: %s\n", err);
            return 2;
        }
        if (vocab > 0) s.vocab = (int)vocab;
        if (heads > 0) s.heads = (int)heads;
        if (have != 0 && (vocab <= 0 || heads <= 0)) {
            fprintf(stderr,
                    "zinc checkpoint export: %s has no sealed model shape and no %s (zinc train --model gpt2 --save "
                    "writes them): give --vocab V and --heads H\n",
                    path, GPT2_SHAPE_FILE);
            return 2;
        }
    }
    /* The safetensors step goes through a private directory of its own (mkdtemp: mode 0700, a fresh name)
     * beside the output, so no name in it can be predicted or planted. */
    const char *slash = strrchr(out, '/');
    snprintf(tmpdir, sizeof tmpdir, "%.*s%s.zinc-export-XXXXXX", slash ? (int)(slash - out + 1) : 0, out,
             slash ? "" : "./");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "zinc checkpoint export: cannot create a temporary directory %s: %s\n", tmpdir,
                strerror(errno));
        return 1;
    }
    snprintf(tmp, sizeof tmp, "%s/master.safetensors", tmpdir);
    if (zinc_export_safetensors(path, tmp, ZINC_FP32) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        rmdir(tmpdir);
        return 1;
    }
    json_t *h = NULL;
    char *data = NULL;
    size_t len = 0;
    float *params = NULL;
    int rc = 1;
    if (read_safetensors(tmp, &h, &data, &len)) {
        fprintf(stderr, "zinc checkpoint export: cannot read back %s\n", tmp);
        goto done;
    }
    /* shapes from the tensors */
    json_t *wte = json_object_get(h, "wte"), *wpe = json_object_get(h, "wpe");
    if (!wte || !wpe) {
        fprintf(stderr,
                "zinc checkpoint export: %s is not a GPT-2 checkpoint of zinc's example (no wte/wpe "
                "tensors)\n",
                path);
        goto done;
    }
    s.padded_vocab = (int)json_integer_value(json_array_get(json_object_get(wte, "shape"), 0));
    s.channels = (int)json_integer_value(json_array_get(json_object_get(wte, "shape"), 1));
    s.max_context = (int)json_integer_value(json_array_get(json_object_get(wpe, "shape"), 0));
    s.layers = 0;
    char name[64];
    for (;; s.layers++) {
        snprintf(name, sizeof name, "h%d.ln1w", s.layers);
        if (!json_object_get(h, name)) break;
    }
    if (gpt2_shape_check(&s, err, sizeof err)) {
        fprintf(stderr, "zinc checkpoint export: %s: %s\n", path, err);
        goto done;
    }
    if (sealed == 0 && (s.padded_vocab != sealed_shape.padded_vocab || s.channels != sealed_shape.channels ||
                        s.max_context != sealed_shape.max_context || s.layers != sealed_shape.layers)) {
        fprintf(stderr, "zinc checkpoint export: %s: the tensors' shapes disagree with the sealed model shape\n", path);
        goto done;
    }
    int64_t n = gpt2_num_params(&s);
    params = malloc((size_t)n * sizeof *params);
    if (!params) goto done;
    for (int k = 0; k < GPT2_NKINDS; k++)
        for (int l = 0; l < (k >= GPT2_LN1W && k <= GPT2_FCPROJB ? s.layers : 1); l++) {
            if (k >= GPT2_LN1W && k <= GPT2_FCPROJB)
                snprintf(name, sizeof name, "h%d.%s", l, gpt2_kind_name(k));
            else
                snprintf(name, sizeof name, "%s", gpt2_kind_name(k));
            json_t *t = json_object_get(h, name), *offs = json_object_get(t, "data_offsets");
            int64_t lo = json_integer_value(json_array_get(offs, 0)), hi = json_integer_value(json_array_get(offs, 1));
            int64_t want = gpt2_kind_numel(&s, k) * 4;
            if (!t || hi - lo != want || lo < 0 || (size_t)hi > len) {
                fprintf(stderr, "zinc checkpoint export: %s: tensor %s is missing or has %lld bytes, expected %lld\n",
                        path, name, (long long)(hi - lo), (long long)want);
                goto done;
            }
            memcpy(params + gpt2_llmc_offset(&s, k, l), data + lo, (size_t)want);
        }
    if (gpt2_model_write(out, &s, params, version, force ? ZFILE_REPLACE : 0, inputs, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", err);
        goto done;
    }
    fprintf(stderr,
            "zinc checkpoint export: wrote %s (llm.c version %d, %d layers, %d channels, %d heads, "
            "vocabulary %d padded %d, max context %d)\n",
            out, version, s.layers, s.channels, s.heads, s.vocab, s.padded_vocab, s.max_context);
    rc = 0;
done:
    unlink(tmp);
    rmdir(tmpdir);
    json_decref(h);
    free(data);
    free(params);
    return rc;
}
