/* zinc checkpoint export --format hf: a GPT-2 trained by zinc as a Hugging Face model directory that
 * transformers.GPT2LMHeadModel.from_pretrained(DIR) loads: DIR/model.safetensors (GPT2LMHeadModel's names with
 * "transformer.", the Conv1D weights transposed to (in, out), wte without its padding rows, no lm_head.weight:
 * the head is tied, as save_pretrained writes it) and DIR/config.json (GPT2Config's fields). The tensors are
 * streamed from the shard files by the checkpoint library's safetensors writer (zckpt_st_export): memory is the
 * largest block matrix (4 C^2 floats) plus two 4 MiB pieces, never the whole model. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/checkpoint/gpt2_cli.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/safe_file.h"

/* The tensor plan: every HF tensor from its zinc parameter (by zinc's name, of zinc's shape). */
static int build_plan(const zckpt_manifest *m, const gpt2_shape *s, zckpt_st_out *t, char (*names)[160]) {
    int nt = 0;
    for (int k = 0; k < GPT2_NKINDS; k++)
        for (int l = 0; l < (k >= GPT2_LN1W && k <= GPT2_FCPROJB ? s->layers : 1); l++, nt++) {
            char zname[64];
            if (k >= GPT2_LN1W && k <= GPT2_FCPROJB)
                snprintf(zname, sizeof zname, "h%d.%s", l, gpt2_kind_name(k));
            else
                snprintf(zname, sizeof zname, "%s", gpt2_kind_name(k));
            int p = 0;
            while (p < m->nparams && strcmp(m->params[p].name, zname)) p++;
            if (p == m->nparams || m->params[p].numel != gpt2_kind_numel(s, k)) {
                fprintf(stderr,
                        "zinc checkpoint export: %s: parameter %s is missing or has %lld elements, the GPT-2 shape "
                        "sealed in it (%d layers, width %d) needs %lld\n",
                        m->dir, zname, p == m->nparams ? 0LL : (long long)m->params[p].numel, s->layers, s->channels,
                        (long long)gpt2_kind_numel(s, k));
                return -1;
            }
            zcli_gpt2_hf_name("transformer.", k, l, names[nt], sizeof names[nt]);
            t[nt] = (zckpt_st_out){.name = names[nt], .param = p, .transpose = zcli_gpt2_hf_conv1d(k) != 0};
            t[nt].ndim = zcli_gpt2_hf_shape(s, k, t[nt].shape);
        }
    return nt;
}

/* config.json: GPT2Config's fields for this shape and what zinc's GPT-2 computes. */
static int write_config(const char *dir, const gpt2_shape *s, zinc_dtype dt, int force, const char *const *inputs) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ZCLI_HF_CONFIG);
    json_t *j =
        json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:n, s:s, s:f, s:f, s:f, s:f, s:f, s:b, s:b, s:b, s:s, "
                  "s:s}",
                  "architectures", "GPT2LMHeadModel", "model_type", "gpt2", "vocab_size", s->vocab, "n_positions",
                  s->max_context, "n_ctx", s->max_context, "n_embd", s->channels, "n_layer", s->layers, "n_head",
                  s->heads, "n_inner", "activation_function", "gelu_new", "layer_norm_epsilon", 1e-5,
                  "initializer_range", 0.02, "resid_pdrop", 0.0, "embd_pdrop", 0.0, "attn_pdrop", 0.0,
                  "scale_attn_weights", 1, "tie_word_embeddings", 1, "use_cache", 1, "torch_dtype",
                  dt == ZINC_FP32   ? "float32"
                  : dt == ZINC_BF16 ? "bfloat16"
                                    : "float16",
                  "producer", "zinc checkpoint export --format hf");
    if (j && s->vocab == ZCLI_GPT2_VOCAB)
        json_object_set_new(j, "bos_token_id", json_integer(ZCLI_GPT2_EOT)),
            json_object_set_new(j, "eos_token_id", json_integer(ZCLI_GPT2_EOT));
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    zinc_status st =
        text ? zfile_write("--out's config.json", path, text, strlen(text), force ? ZFILE_REPLACE : 0, inputs)
             : ZINC_ERR_NOMEM;
    free(text);
    if (st != ZINC_OK)
        fprintf(stderr, "zinc checkpoint export: %s\n", st == ZINC_ERR_NOMEM ? "out of memory" : zinc_last_error());
    return st != ZINC_OK ? -1 : 0;
}

/* DIR: made when missing (one level), else an existing directory; checked as a directory zinc writes into. */
static int make_out_dir(const char *out) {
    struct stat sb;
    if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "zinc checkpoint export: --out %s exists and is not a directory (--format hf writes a "
                "directory: model.safetensors, config.json)\n",
                out);
        return -1;
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "zinc checkpoint export: cannot create --out %s: %s\n", out, strerror(errno));
        return -1;
    }
    if (zfile_check_dir(out, "--out") != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return -1;
    }
    return 0;
}

/* A checkpoint saved before shapes were sealed, without zinc_gpt2.json: the rest of the shape from its tensors. */
static void shape_from_manifest(const zckpt_manifest *m, gpt2_shape *s) {
    for (int i = 0; i < m->nparams; i++) {
        const zckpt_param *p = &m->params[i];
        if (!strcmp(p->name, "wte") && p->ndim == 2) s->padded_vocab = (int)p->shape[0], s->channels = (int)p->shape[1];
        if (!strcmp(p->name, "wpe") && p->ndim == 2) s->max_context = (int)p->shape[0];
        if (!strcmp(p->name + (p->name[0] == 'h' ? strcspn(p->name, ".") : 0), ".ln1w")) s->layers++;
    }
}

int zcli_export_hf(const char *path, const char *out, zinc_dtype dtype, int64_t vocab, int64_t heads, int force) {
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1], weights[4200], (*names)[160] = NULL;
    gpt2_shape s = {0};
    zckpt_manifest m;
    zckpt_st_out *t = NULL;
    int sealed = 1, rc = zcli_gpt2_export_shape(path, vocab, heads, &s, &sealed);
    if (rc) return rc;
    if (zckpt_resolve(path, tagdir, sizeof tagdir, tag, sizeof tag) != ZINC_OK ||
        zckpt_manifest_read(tagdir, &m) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return 1;
    }
    rc = 1;
    char why[256];
    if (s.layers == 0) shape_from_manifest(&m, &s);
    if (gpt2_shape_check(&s, why, sizeof why)) {
        fprintf(stderr, "zinc checkpoint export: %s: not a GPT-2 of zinc's example: %s\n", path, why);
        goto done;
    }
    int n = 4 + 12 * s.layers;
    if (!(t = calloc((size_t)n, sizeof *t)) || !(names = calloc((size_t)n, sizeof *names))) goto done;
    if (build_plan(&m, &s, t, names) != n || make_out_dir(out)) goto done;
    snprintf(weights, sizeof weights, "%s/%s", out, ZCLI_HF_WEIGHTS);
    if (zckpt_st_export(&m, weights, dtype, force ? ZINC_EXPORT_REPLACE : 0, t, n) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        goto done;
    }
    const char *inputs[] = {m.dir, NULL};
    if (write_config(out, &s, dtype, force, inputs)) goto done;
    fprintf(stderr,
            "zinc checkpoint export: wrote %s (Hugging Face GPT2LMHeadModel, %s: %d layers, width %d, %d heads, "
            "vocabulary %d, max context %d)\n",
            out, zinc_dtype_name(dtype), s.layers, s.channels, s.heads, s.vocab, s.max_context);
    rc = 0;
done:
    free(t);
    free(names);
    zckpt_manifest_free(&m);
    return rc;
}
