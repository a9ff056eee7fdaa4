/* zinc mem estimate --model gpt2: the model's layout and declared memory from the example itself (the shape
 * as zinc train picks it, gpt2_memory's tables, the token files' sizes), without building it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/train/train_gpt2.h"

/* Bytes of tokens the trainer holds: llm.c token files as uint16 after the 1 KiB header; a text file one
 * uint16 per byte, plus its last 10% copied as the validation set unless --val-data is given. */
static int data_bytes(const gpt2_opts *g, uint64_t *out) {
    const char *paths[] = {g->data, g->text, g->val_data};
    *out = 0;
    for (int i = 0; i < 3; i++) {
        struct stat sb;
        if (!paths[i]) continue;
        if (stat(paths[i], &sb) != 0) {
            fprintf(stderr, "zinc mem estimate: cannot read %s\n", paths[i]);
            return -1;
        }
        uint64_t b = (uint64_t)sb.st_size;
        if (i == 1)
            *out += 2 * b + (g->val_data ? 0 : 2 * (b / 10));
        else
            *out += b > 1024 ? b - 1024 : 0;
    }
    return 0;
}

/* GPT-2's parameters in registration order (examples/gpt2/gpt2.c's create): embed (wte, wpe), one module
 * per block (its 12 tensors), lnf. */
static int layout(const gpt2_shape *s, zcli_model_memory *out) {
    int n = 4 + 12 * s->layers, k = 0;
    int64_t *numel = out->numel = calloc((size_t)n, sizeof *numel);
    int *module = out->module = calloc((size_t)n, sizeof *module);
    int64_t *rows = out->muon_rows = calloc((size_t)n, sizeof *rows);
    if (!numel || !module || !rows) return -1;
    numel[k] = gpt2_kind_numel(s, GPT2_WTE), module[k++] = 0;
    numel[k] = gpt2_kind_numel(s, GPT2_WPE), module[k++] = 0;
    for (int l = 0; l < s->layers; l++)
        for (int kind = GPT2_LN1W; kind <= GPT2_FCPROJB; kind++)
            rows[k] = gpt2_kind_muon_rows(s, kind), numel[k] = gpt2_kind_numel(s, kind), module[k++] = 1 + l;
    numel[k] = gpt2_kind_numel(s, GPT2_LNFW), module[k++] = 1 + s->layers;
    numel[k] = gpt2_kind_numel(s, GPT2_LNFB), module[k++] = 1 + s->layers;
    out->nparams = n;
    return 0;
}

int zcli_gpt2_memory(const void *model_opts, const zcli_train_opts *o, const zinc_config *cfg, int threads,
                     zcli_model_memory *out) {
    const gpt2_opts *g = model_opts;
    gpt2_shape s;
    int64_t context;
    zcli_gpt2_init f = {0};
    if (zcli_gpt2_select_products(g)) return -1; /* the BLAS buffers are the backend's */
    int bad = zcli_gpt2_shape(g, o->resume, &s, &context, &f);
    zcli_gpt2_init_close(&f);
    if (bad || data_bytes(g, &out->data)) return -1;
    gpt2_config mc = {.shape = s, .context = (int)context};
    if (gpt2_memory(&mc, (int)cfg->train_micro_batch_size_per_gpu, cfg->gradient_accumulation_steps, cfg->compute_dtype,
                    zcfg_grad_dtype(cfg), zcfg_given(cfg, "activation_checkpointing"), threads, 0, &out->activations,
                    &out->scratch, &out->host) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: the model's memory cannot be sized for these options and this batch\n");
        return -1;
    }
    out->ranged_init = g->init != NULL; /* --init builds ranged (examples/gpt2) */
    snprintf(out->describe, sizeof out->describe,
             "gpt2: %d layers, %d channels, %d heads, vocabulary %d (padded %d), context %" PRId64 ", %" PRId64
             " parameters",
             s.layers, s.channels, s.heads, s.vocab, s.padded_vocab, context, gpt2_num_params(&s));
    return layout(&s, out);
}
