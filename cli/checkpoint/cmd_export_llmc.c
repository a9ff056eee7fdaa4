/* zinc checkpoint export --format llmc: a GPT-2 trained by zinc as an llm.c model file, so llm.c's tools
 * run it. The checkpoint is consolidated with zinc_export_safetensors into a temporary fp32 file, read back
 * through the checkpoint library's safetensors reader (safetensors.h), whose tensors (named as examples/gpt2
 * registers them) are laid out in llm.c's order. The vocabulary and head count are not in the tensors' shapes: they come from the zinc_gpt2.json
 * that zinc train saves beside the checkpoints, or from --vocab and --heads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/checkpoint/gpt2_cli.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/safe_file.h"
#include "zinc.h"

/* The shape the tensors show (wte, wpe, the blocks), beside the vocabulary and heads already in *s. */
static int shape_from_tensors(const zckpt_st_file *h, const char *path, gpt2_shape *s) {
    char err[1024], name[64];
    const zckpt_st_tensor *wte = zckpt_st_find(h, "wte"), *wpe = zckpt_st_find(h, "wpe");
    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2) {
        fprintf(stderr, "zinc checkpoint export: %s is not a GPT-2 checkpoint of zinc's example (no wte/wpe tensors)\n",
                path);
        return -1;
    }
    s->padded_vocab = (int)wte->shape[0];
    s->channels = (int)wte->shape[1];
    s->max_context = (int)wpe->shape[0];
    s->layers = 0;
    for (;; s->layers++) {
        snprintf(name, sizeof name, "h%d.ln1w", s->layers);
        if (!zckpt_st_find(h, name)) break;
    }
    if (gpt2_shape_check(s, err, sizeof err)) {
        fprintf(stderr, "zinc checkpoint export: %s: %s\n", path, err);
        return -1;
    }
    return 0;
}

/* Every tensor of the safetensors file read to its place in llm.c's order. */
static int llmc_params(const zckpt_st_file *h, const char *path, const gpt2_shape *s, float *params) {
    char name[64];
    for (int k = 0; k < GPT2_NKINDS; k++)
        for (int l = 0; l < (k >= GPT2_LN1W && k <= GPT2_FCPROJB ? s->layers : 1); l++) {
            if (k >= GPT2_LN1W && k <= GPT2_FCPROJB)
                snprintf(name, sizeof name, "h%d.%s", l, gpt2_kind_name(k));
            else
                snprintf(name, sizeof name, "%s", gpt2_kind_name(k));
            const zckpt_st_tensor *t = zckpt_st_find(h, name);
            int64_t want = gpt2_kind_numel(s, k);
            if (!t || t->numel != want) {
                fprintf(stderr,
                        "zinc checkpoint export: %s: tensor %s is missing or has %lld elements, expected %lld\n", path,
                        name, t ? (long long)t->numel : 0LL, (long long)want);
                return -1;
            }
            if (zckpt_st_read_f32(h, t, 0, want, params + gpt2_llmc_offset(s, k, l)) != ZINC_OK) {
                fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
                return -1;
            }
        }
    return 0;
}

/* The checkpoint is this command's input: nothing is written inside its tag directory (shards, manifest) nor
 * over its `latest` or zinc_gpt2.json. Fills the inputs (paths in buf) for the safe writer. */
static int export_inputs(const char *path, char buf[3][4200], const char *inputs[4]) {
    char tag[160];
    if (zckpt_resolve(path, buf[0], sizeof buf[0], tag, sizeof tag) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return -1;
    }
    char ckdir[4200];
    snprintf(ckdir, sizeof ckdir, "%.4100s", buf[0]);
    char *cut = strrchr(ckdir, '/');
    if (cut && cut != ckdir) *cut = 0;
    snprintf(buf[1], sizeof buf[1], "%.4100s/" ZCKPT_LATEST, ckdir);
    snprintf(buf[2], sizeof buf[2], "%.4100s/%s", ckdir, ZCLI_GPT2_SHAPE_FILE);
    inputs[0] = buf[0], inputs[1] = buf[1], inputs[2] = buf[2], inputs[3] = NULL;
    return 0;
}

/* The model's vocabulary and heads: the shape sealed in the checkpoint (flags that disagree are refused), or,
 * for a checkpoint saved before shapes were sealed, zinc_gpt2.json or the flags. *sealed says which. The
 * exit status on failure, else 0. */
int zcli_gpt2_export_shape(const char *path, int64_t vocab, int64_t heads, gpt2_shape *s, int *sealed) {
    char err[1024];
    int64_t given[6] = {-1, vocab > 0 ? vocab : -1, -1, heads > 0 ? heads : -1, -1, -1};
    *sealed = zcli_gpt2_shape_sealed(path, s, err, sizeof err);
    if (*sealed < 0 || (*sealed == 0 && zcli_gpt2_shape_flags_agree(path, s, given, err, sizeof err))) {
        fprintf(stderr, "zinc checkpoint export: %s\n", err);
        return *sealed < 0 ? 1 : 2;
    }
    if (*sealed == 0) return 0;
    int have = zcli_gpt2_shape_load(path, s, err, sizeof err);
    if (have < 0 || (have == 0 && zcli_gpt2_shape_flags_agree(path, s, given, err, sizeof err))) {
        fprintf(stderr, "zinc checkpoint export: %s\n", err);
        return have < 0 ? 1 : 2;
    }
    if (vocab > 0) s->vocab = (int)vocab;
    if (heads > 0) s->heads = (int)heads;
    if (have != 0 && (vocab <= 0 || heads <= 0)) {
        fprintf(stderr,
                "zinc checkpoint export: %s has no sealed model shape and no %s (zinc train --model gpt2 --save "
                "writes them): give --vocab V and --heads H\n",
                path, ZCLI_GPT2_SHAPE_FILE);
        return 2;
    }
    return 0;
}

/* The checkpoint's fp32 master weights as safetensors in a private directory of its own beside `out` (mkdtemp:
 * mode 0700, a fresh name), so no name in it can be predicted or planted. */
static int export_master(const char *path, const char *out, char *tmpdir, size_t dcap, char *tmp, size_t tcap) {
    const char *slash = strrchr(out, '/');
    snprintf(tmpdir, dcap, "%.*s%s.zinc-export-XXXXXX", slash ? (int)(slash - out + 1) : 0, out, slash ? "" : "./");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "zinc checkpoint export: cannot create a temporary directory %s: %s\n", tmpdir,
                strerror(errno));
        tmpdir[0] = 0;
        return -1;
    }
    snprintf(tmp, tcap, "%s/master.safetensors", tmpdir);
    if (zinc_export_safetensors(path, tmp, ZINC_FP32) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return -1;
    }
    return 0;
}

int zcli_export_llmc(const char *path, const char *out, int version, int64_t vocab, int64_t heads, int force) {
    char err[1024], tmpdir[4200] = "", tmp[4300] = "", ibuf[3][4200];
    const char *inputs[4];
    gpt2_shape s = {0}, sealed_shape;
    int sealed = 1, rc = export_inputs(path, ibuf, inputs) ? 1 : 0;
    if (!rc && zfile_check_target("--out", out, force ? ZFILE_REPLACE : 0, inputs) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        rc = 1;
    }
    if (!rc) rc = zcli_gpt2_export_shape(path, vocab, heads, &s, &sealed);
    if (rc) return rc;
    sealed_shape = s;
    zckpt_st_file h = {.fd = -1};
    float *params = NULL;
    rc = 1;
    if (export_master(path, out, tmpdir, sizeof tmpdir, tmp, sizeof tmp)) goto done;
    if (zckpt_st_open(&h, "the consolidated master weights", tmp) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: cannot read back %s: %s\n", tmp, zinc_last_error());
        goto done;
    }
    if (shape_from_tensors(&h, path, &s)) goto done;
    if (sealed == 0 && memcmp(&s, &sealed_shape, sizeof s)) {
        fprintf(stderr, "zinc checkpoint export: %s: the tensors' shapes disagree with the sealed model shape\n", path);
        goto done;
    }
    if (!(params = malloc((size_t)gpt2_num_params(&s) * sizeof *params)) || llmc_params(&h, path, &s, params))
        goto done;
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
    if (tmp[0]) unlink(tmp);
    if (tmpdir[0]) rmdir(tmpdir);
    zckpt_st_close(&h);
    free(params);
    return rc;
}
