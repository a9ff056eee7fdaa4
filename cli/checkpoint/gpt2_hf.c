/* Hugging Face GPT-2 (transformers' GPT2LMHeadModel) as zinc's GPT-2 sees it, both ways: the tensor names, the
 * Conv1D layout and the config (this file), the --init reader (below) and the export (export_hf.c).
 *
 * HF stores the four matrices of a block as Conv1D weights, (in, out): c_attn [C, 3C] (q, k, v along out, as
 * zinc's qkvw [3C, C] has them along its rows), attn.c_proj [C, C], mlp.c_fc [C, 4C], mlp.c_proj [4C, C];
 * zinc (llm.c's layout) stores (out, in), so they are transposed each way. wte is [V, C] in HF (zinc pads it
 * to padded_vocab rows, zeros beyond V); the head is tied (lm_head.weight, when a file has it, is wte and
 * is not read). Names carry "transformer." (GPT2LMHeadModel's state dict) or not (GPT2Model's): both read. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/checkpoint/gpt2_cli.h"
#include "base/core/safe_file.h"

static const char *const hf_names[GPT2_NKINDS] = {"wte.weight",         "wpe.weight",         "ln_1.weight",
                                                  "ln_1.bias",          "attn.c_attn.weight", "attn.c_attn.bias",
                                                  "attn.c_proj.weight", "attn.c_proj.bias",   "ln_2.weight",
                                                  "ln_2.bias",          "mlp.c_fc.weight",    "mlp.c_fc.bias",
                                                  "mlp.c_proj.weight",  "mlp.c_proj.bias",    "ln_f.weight",
                                                  "ln_f.bias"};

static int per_layer(int kind) { return kind >= GPT2_LN1W && kind <= GPT2_FCPROJB; }

int zcli_gpt2_hf_conv1d(int kind) {
    return kind == GPT2_QKVW || kind == GPT2_ATTPROJW || kind == GPT2_FCW || kind == GPT2_FCPROJW;
}

void zcli_gpt2_hf_name(const char *prefix, int kind, int layer, char *buf, size_t cap) {
    if (per_layer(kind))
        snprintf(buf, cap, "%sh.%d.%s", prefix, layer, hf_names[kind]);
    else
        snprintf(buf, cap, "%s%s", prefix, hf_names[kind]);
}

int zcli_gpt2_hf_shape(const gpt2_shape *s, int kind, int64_t shape[2]) {
    int64_t C = s->channels;
    switch (kind) {
    case GPT2_WTE: shape[0] = s->vocab, shape[1] = C; return 2;
    case GPT2_WPE: shape[0] = s->max_context, shape[1] = C; return 2;
    case GPT2_QKVW: shape[0] = C, shape[1] = 3 * C; return 2;
    case GPT2_ATTPROJW: shape[0] = C, shape[1] = C; return 2;
    case GPT2_FCW: shape[0] = C, shape[1] = 4 * C; return 2;
    case GPT2_FCPROJW: shape[0] = 4 * C, shape[1] = C; return 2;
    default: shape[0] = gpt2_kind_numel(s, kind); return 1;
    }
}

int zcli_gpt2_hf_path(const char *path) {
    struct stat sb;
    size_t n = strlen(path), k = strlen(".safetensors");
    return (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) || (n > k && !strcmp(path + n - k, ".safetensors")) ||
           zckpt_st_is_index(path);
}

/* ---------------------------------------------------------------- --init: reading */

/* config.json beside the weights, when there is one: NULL (and 0) when absent, -1 on a bad file. */
static int read_config(const char *dir, json_t **out, char *err, size_t cap) {
    char path[4300];
    *out = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, ZCLI_HF_CONFIG);
    if (access(path, F_OK) != 0) return 0;
    int fd = -1;
    if (zfile_open_input("--init's config.json", path, &fd) != ZINC_OK) {
        snprintf(err, cap, "%s", zinc_last_error());
        return -1;
    }
    char buf[1 << 16];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    json_error_t je;
    if (n < 0 || n == (ssize_t)sizeof buf || !(*out = json_loadb(buf, (size_t)n, 0, &je)) || !json_is_object(*out)) {
        snprintf(err, cap, "%s: %s", path,
                 n < 0                      ? strerror(errno)
                 : n == (ssize_t)sizeof buf ? "larger than 64 KiB"
                                            : "not a JSON object");
        json_decref(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* What zinc's GPT-2 computes, checked against config.json: GELU with tanh, LayerNorm eps 1e-5, a 4C MLP. */
static int check_config(json_t *c, const char *path, gpt2_shape *s, char *err, size_t cap) {
    const char *act = json_string_value(json_object_get(c, "activation_function"));
    json_t *eps = json_object_get(c, "layer_norm_epsilon"), *inner = json_object_get(c, "n_inner");
    if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
        snprintf(err, cap, "%s: activation_function \"%s\": zinc's GPT-2 computes GELU with tanh (gelu_new)", path,
                 act);
        return -1;
    }
    if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12)) {
        snprintf(err, cap, "%s: layer_norm_epsilon %g: zinc's GPT-2 has LayerNorm eps 1e-5", path,
                 json_number_value(eps));
        return -1;
    }
    if (inner && !json_is_null(inner) && json_integer_value(inner) != 4 * (json_int_t)s->channels) {
        snprintf(err, cap, "%s: n_inner %" JSON_INTEGER_FORMAT ": zinc's GPT-2 has an MLP of 4 x n_embd = %d", path,
                 json_integer_value(inner), 4 * s->channels);
        return -1;
    }
    if (json_is_false(json_object_get(c, "tie_word_embeddings"))) {
        snprintf(err, cap, "%s: tie_word_embeddings false: zinc's GPT-2 ties the head to wte", path);
        return -1;
    }
    if (json_is_true(json_object_get(c, "scale_attn_by_inverse_layer_idx"))) {
        snprintf(err, cap, "%s: scale_attn_by_inverse_layer_idx true: zinc's GPT-2 does not scale so", path);
        return -1;
    }
    static const char *const keys[5] = {"n_positions", "vocab_size", "n_layer", "n_head", "n_embd"};
    int *have[5] = {&s->max_context, &s->vocab, &s->layers, &s->heads, &s->channels};
    for (int i = 0; i < 5; i++) {
        json_t *v = json_object_get(c, keys[i]);
        if (i == 3 && json_is_integer(v))
            s->heads = (int)json_integer_value(v);
        else if (v && json_integer_value(v) != *have[i]) {
            snprintf(err, cap, "%s: %s %" JSON_INTEGER_FORMAT " disagrees with the weights, whose tensors give %d",
                     path, keys[i], json_integer_value(v), *have[i]);
            return -1;
        }
    }
    return 0;
}

/* The shape the tensors show: V and C from wte, the max context from wpe, the layers counted. */
static int shape_from_tensors(zcli_gpt2_hf *h, char *err, size_t cap) {
    const zckpt_st_tensor *wte = zckpt_st_set_find(&h->set, "transformer.wte.weight", NULL), *wpe;
    h->prefix = "transformer.";
    if (!wte && (wte = zckpt_st_set_find(&h->set, "wte.weight", NULL))) h->prefix = "";
    char name[160];
    zcli_gpt2_hf_name(h->prefix, GPT2_WPE, 0, name, sizeof name);
    if (!wte || !(wpe = zckpt_st_set_find(&h->set, name, NULL)) || wte->ndim != 2 || wpe->ndim != 2) {
        snprintf(err, cap,
                 "%s is not a Hugging Face GPT-2: no 2-D transformer.wte.weight and transformer.wpe.weight "
                 "(nor wte.weight, wpe.weight)",
                 h->path);
        return -1;
    }
    h->s.vocab = (int)(wte->shape[0] <= 1 << 20 ? wte->shape[0] : -1);
    h->s.channels = (int)(wte->shape[1] <= 1 << 20 ? wte->shape[1] : -1);
    h->s.max_context = (int)(wpe->shape[0] <= 1 << 21 ? wpe->shape[0] : -1);
    for (h->s.layers = 0; h->s.layers <= 1024; h->s.layers++) {
        zcli_gpt2_hf_name(h->prefix, GPT2_LN1W, h->s.layers, name, sizeof name);
        if (!zckpt_st_set_find(&h->set, name, NULL)) break;
    }
    return 0;
}

/* The tensors' slots: wte, wpe, 12 per block, lnfw, lnfb (registration order). */
static int slot(const gpt2_shape *s, int kind, int layer) {
    return kind < GPT2_LN1W  ? kind
           : per_layer(kind) ? 2 + layer * 12 + (kind - GPT2_LN1W)
                             : 2 + s->layers * 12 + (kind - GPT2_LNFW);
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* The HF buffers a file may hold beside the weights: the tied head, the attention's causal-mask buffers. */
static int hf_extra(const char *n) {
    size_t len = strlen(n);
    return !strcmp(n, "lm_head.weight") || (len > 10 && !strcmp(n + len - 10, ".attn.bias")) ||
           (len > 17 && !strcmp(n + len - 17, ".attn.masked_bias"));
}

/* Every tensor the shape needs, of its shape; the file's others must be ones HF adds (hf_extra). */
static int find_tensors(zcli_gpt2_hf *h, char *err, size_t cap) {
    char name[160], got[96], want_s[96];
    for (int k = 0; k < GPT2_NKINDS; k++)
        for (int l = 0; l < (per_layer(k) ? h->s.layers : 1); l++) {
            zcli_gpt2_hf_name(h->prefix, k, l, name, sizeof name);
            const zckpt_st_file *in = NULL;
            const zckpt_st_tensor *t = zckpt_st_set_find(&h->set, name, &in);
            int64_t want[2];
            int nd = zcli_gpt2_hf_shape(&h->s, k, want);
            if (!t) {
                snprintf(err, cap, "%s has no tensor %s (a GPT-2 of %d layers has it)", h->path, name, h->s.layers);
                return -1;
            }
            if (t->ndim != nd || t->shape[0] != want[0] || (nd == 2 && t->shape[1] != want[1])) {
                shape_text(got, sizeof got, t->ndim, t->shape);
                shape_text(want_s, sizeof want_s, nd, want);
                snprintf(err, cap,
                         "%s: tensor %s has shape %s, expected %s for the shape the file gives (width %d from "
                         "%swte.weight, %d positions from %swpe.weight, %d layers): a damaged or another model's file",
                         h->path, name, got, want_s, h->s.channels, h->prefix, h->s.max_context, h->prefix,
                         h->s.layers);
                return -1;
            }
            h->t[slot(&h->s, k, l)] = t;
            h->tf[slot(&h->s, k, l)] = in;
        }
    for (int f = 0; f < h->set.nfiles; f++)
        for (int i = 0; i < h->set.files[f].ntensors; i++) {
            const zckpt_st_tensor *t = &h->set.files[f].t[i];
            int known = hf_extra(t->name);
            for (int j = 0; j < 4 + 12 * h->s.layers && !known; j++) known = h->t[j] == t;
            if (!known) {
                snprintf(err, cap, "%s: tensor %s is not one of a GPT-2's (GPT2LMHeadModel, %d layers)",
                         h->set.files[f].path, t->name, h->s.layers);
                return -1;
            }
        }
    return 0;
}

/* The flags given (zcli_gpt2_shape_flags order; -1: not given) against the file's shape, naming where it has
 * each value. --padded-vocab is free (HF has no padding rows). */
static int flags_agree(const zcli_gpt2_hf *h, const int64_t given[6], char *err, size_t cap) {
    const gpt2_shape *s = &h->s;
    int have[5] = {s->max_context, s->vocab, s->layers, s->heads, s->channels};
    const char *from[5] = {"wpe.weight's rows", "wte.weight's rows", "h.N blocks", "config.json's n_head",
                           "wte.weight's columns"};
    for (int i = 0; i < 5; i++)
        if (given[i] >= 0 && given[i] != have[i]) {
            snprintf(err, cap, "%s %lld disagrees with %s, whose model has %d (%s%s): drop %s or give %d",
                     zcli_gpt2_shape_flags[i], (long long)given[i], h->path, have[i], i == 3 ? "" : h->prefix, from[i],
                     zcli_gpt2_shape_flags[i], have[i]);
            return -1;
        }
    return 0;
}

/* PATH: a directory (HF's save_pretrained: model.safetensors, or the shards of model.safetensors.index.json;
 * config.json), a .safetensors file or an index (config.json beside it, if any). */
static int open_weights(const char *path, zcli_gpt2_hf *h, json_t **config, char *err, size_t cap) {
    struct stat sb;
    char dir[4200];
    int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    snprintf(h->path, sizeof h->path, is_dir ? "%s/" ZCLI_HF_WEIGHTS : "%s", path);
    if (is_dir && access(h->path, F_OK) != 0) {
        snprintf(h->path, sizeof h->path, "%s/" ZCLI_HF_INDEX, path);
        if (access(h->path, F_OK) != 0) {
            snprintf(err, cap,
                     "--init %s: the directory has neither %s nor %s (Hugging Face's save_pretrained writes one)", path,
                     ZCLI_HF_WEIGHTS, ZCLI_HF_INDEX);
            return -1;
        }
    }
    snprintf(dir, sizeof dir, "%s", is_dir ? path : h->path);
    if (!is_dir) {
        char *cut = strrchr(dir, '/');
        if (cut)
            *cut = 0;
        else
            snprintf(dir, sizeof dir, ".");
    }
    if (zckpt_st_set_open(&h->set, "--init", h->path) != ZINC_OK) {
        snprintf(err, cap, "%s", zinc_last_error());
        return -1;
    }
    return read_config(dir, config, err, cap);
}

int zcli_gpt2_hf_open(const char *path, const int64_t given[6], zcli_gpt2_hf *h, char *err, size_t cap) {
    json_t *config = NULL;
    char why[512];
    memset(h, 0, sizeof *h);
    int rc = open_weights(path, h, &config, err, cap);
    if (!rc) rc = shape_from_tensors(h, err, cap);
    if (!rc) {
        h->s.heads = given[3] > 0 ? (int)given[3] : -1;
        if (config)
            rc = check_config(config, h->path, &h->s, err, cap);
        else if (h->s.heads < 0)
            snprintf(err, cap, "%s has no %s beside it to give the head count: give --heads H", h->path,
                     ZCLI_HF_CONFIG),
                rc = -1;
    }
    if (!rc) rc = flags_agree(h, given, err, cap);
    if (!rc) {
        h->s.padded_vocab = given[5] > 0 ? (int)given[5] : zcli_gpt2_padded_vocab(h->s.vocab);
        if (gpt2_shape_check(&h->s, why, sizeof why)) snprintf(err, cap, "%s: the model's %s", h->path, why), rc = -1;
    }
    if (!rc && (!(h->t = calloc((size_t)(4 + 12 * h->s.layers), sizeof *h->t)) ||
                !(h->tf = calloc((size_t)(4 + 12 * h->s.layers), sizeof *h->tf))))
        snprintf(err, cap, "out of memory"), rc = -1;
    if (!rc) rc = find_tensors(h, err, cap);
    json_decref(config);
    if (rc) zcli_gpt2_hf_close(h);
    return rc;
}

/* A Conv1D weight: zinc's [R, K] elements [first, first + n) from HF's [K, R]. HF row i (zinc's column i)
 * holds the piece's zinc rows r0 + (i < c0) .. r1 - (i > c1): one contiguous read per HF row, so a rank reads
 * exactly the bytes of its own elements. */
static zinc_status read_transposed(const zckpt_st_file *f, const zckpt_st_tensor *t, int64_t first, int64_t n,
                                   float *out) {
    int64_t K = t->shape[0], R = t->shape[1], last = first + n - 1;
    int64_t r0 = first / K, c0 = first % K, r1 = last / K, c1 = last % K;
    float *row = malloc((size_t)(r1 - r0 + 1) * sizeof *row);
    if (!row) return ZINC_ERROR(ZINC_ERR_NOMEM, "gpt2: --init: out of memory reading %s", t->name);
    zinc_status st = ZINC_OK;
    for (int64_t i = 0; i < K && st == ZINC_OK; i++) {
        int64_t lo = r0 + (i < c0), hi = r1 - (i > c1);
        if (hi < lo) continue;
        st = zckpt_st_read_f32(f, t, i * R + lo, hi - lo + 1, row);
        for (int64_t r = lo; st == ZINC_OK && r <= hi; r++) out[r * K + i - first] = row[r - lo];
    }
    free(row);
    return st;
}

zinc_status zcli_gpt2_hf_read(void *ctx, int kind, int layer, int64_t first, int64_t n, float *out) {
    const zcli_gpt2_hf *h = ctx;
    const zckpt_st_tensor *t = h->t[slot(&h->s, kind, layer)];
    const zckpt_st_file *f = h->tf[slot(&h->s, kind, layer)];
    if (n <= 0) return ZINC_OK;
    if (zcli_gpt2_hf_conv1d(kind)) return read_transposed(f, t, first, n, out);
    int64_t have = t->numel - first < n ? t->numel - first : n; /* wte: the padding rows beyond V are 0 */
    if (have < 0) have = 0;
    for (int64_t i = have; i < n; i++) out[i] = 0.0f;
    return have ? zckpt_st_read_f32(f, t, first, have, out) : ZINC_OK;
}

void zcli_gpt2_hf_close(zcli_gpt2_hf *h) {
    zckpt_st_set_close(&h->set);
    free(h->t);
    free(h->tf);
    h->t = NULL;
    h->tf = NULL;
}
