/* zinc train --model gpt2: GPT-2 (examples/gpt2) on llm.c token files or a text file (bytes as tokens), from
 * a new model or an llm.c checkpoint (--init), as a model of the training driver (train.h). This file: the
 * options, the shape and the data before the engine exists, the build and the step. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common/cli_files.h"
#include "cli/checkpoint/gpt2_cli.h"
#include "cli/train/train_gpt2.h"
#include "examples/gpt2/gpt2_flops.h"
#include "examples/gpt2/gpt2_gemm.h"

#define O(f) offsetof(gpt2_opts, f)
static const zcli_opt gpt2_options[] =
    {{"--layers", ZCLI_INT, O(layers), "L", 1, 1024, NULL, "transformer blocks"},
     {"--width", ZCLI_INT, O(width), "C", 1, 65536, NULL, "channels"},
     {"--heads", ZCLI_INT, O(heads), "H", 1, 65536, NULL, "attention heads"},
     {"--vocab", ZCLI_INT, O(vocab), "V", 1, 65536, NULL, "vocabulary"},
     {"--padded-vocab", ZCLI_INT, O(padded), "VP", 1, 1 << 20, NULL, "rows of wte"},
     {"--max-context", ZCLI_INT, O(max_context), "N", 1, 1 << 20, NULL, "positions in wpe"},
     {"--context", ZCLI_INT, O(context), "T", 1, 1 << 20, NULL, "sequence length"},
     {"--init", ZCLI_TEXT, O(init), "FILE", 0, 0, NULL,
      "start from an llm.c model file (version 3 fp32 or 5 bf16) or a Hugging\nFace GPT-2 (a .safetensors file "
      "or save_pretrained's directory,\nsharded or not, or a model.safetensors.index.json); its shape is the\nmodel's, "
      "and any shape option given must match it"},
     {"--data", ZCLI_TEXT, O(data), "FILE", 0, 0, NULL,
      "llm.c token file (uint16 tokens), read sequentially like llm.c's loader"},
     {"--text", ZCLI_TEXT, O(text), "FILE", 0, 0, NULL,
      "a text file, one token per byte (vocabulary 256); its last 10% is the\nvalidation set unless --val-data "
      "is given"},
     {"--shuffle", ZCLI_FLAG, O(shuffle), NULL, 0, 0, NULL,
      "visit each pass's global batches in a seeded order (--seed), not in\nfile order"},
     {"--val-data", ZCLI_TEXT, O(val_data), "FILE", 0, 0, NULL, "llm.c token file for the validation loss"},
     {"--val-every", ZCLI_INT, O(val_every), "K", 1, (int64_t)1 << 53, NULL,
      "validation loss every K steps and at the end"},
     {"--val-batches", ZCLI_INT, O(val_batches), "N", 1, 1 << 20, NULL, "global batches per validation"},
     {"--sample-every", ZCLI_INT, O(sample_every), "K", 1, (int64_t)1 << 53, NULL,
      "generate --sample-tokens tokens every K steps and at the end"},
     {"--sample-tokens", ZCLI_INT, O(sample_tokens), "N", 1, 1 << 16, NULL, "tokens per sample"},
     {"--gemm", ZCLI_CHOICE, O(gemm_i), "G", 0, 0, GPT2_GEMM_CHOICES,
      "the host's matrix products: oneDNN's AVX-512 kernels (and bf16 dot products),\nOpenBLAS, or auto "
      "(oneDNN where libdnnl2 loads, else OpenBLAS)"},
     {"--products", ZCLI_CHOICE, O(products_i), "P", 0, 0, GPT2_PRODUCTS_CHOICES,
      "the host's matrix products in bf16 (operands rounded to bf16, float sums: with an\nfp32 config this is "
      "torch autocast's scheme) or fp32; auto: bf16 with bf16 compute,\nfp32 otherwise"},
     {0}};
#undef O
/* The shape defaults, settled by zcli_gpt2_shape after parsing (a shape option not given is -1). */
static const zcli_later gpt2_later[] =
    {{"--layers", ZCLI_STR(ZCLI_GPT2_LAYERS)},
     {"--width", ZCLI_STR(ZCLI_GPT2_WIDTH)},
     {"--heads", ZCLI_STR(ZCLI_GPT2_HEADS)},
     {"--vocab", ZCLI_STR(ZCLI_GPT2_BYTE_VOCAB) " with --text, else " ZCLI_STR(ZCLI_GPT2_VOCAB)},
     {"--padded-vocab", "V rounded up to a multiple of " ZCLI_STR(ZCLI_GPT2_VOCAB_ROUND)},
     {"--max-context", "--context"},
     {"--context", "the checkpoint's max context, or --max-context, or " ZCLI_STR(ZCLI_GPT2_CONTEXT)},
     {"--val-every", "the progress cadence, steps_per_print"},
     {0}};
static const zcli_table gpt2_table = {"model and data (GPT-2):", gpt2_options, gpt2_later};

static void gpt2_defaults(void *p) {
    *(gpt2_opts *)p = (gpt2_opts){.val_batches = 4,
                                  .sample_tokens = 64,
                                  .layers = -1,
                                  .width = -1,
                                  .heads = -1,
                                  .vocab = -1,
                                  .padded = -1,
                                  .max_context = -1,
                                  .context = -1,
                                  .gemm_i = 0,
                                  .products_i = 0};
}

/* A shape option that must agree with the --init checkpoint: -1 when not given. */
static int check_flag(const char *init, const char *flag, int64_t given, int have, int field) {
    if (given < 0 || given == have) return 0;
    fprintf(stderr, "zinc train: %s %lld does not match %s: its header[%d] (%s) is %d; drop the flag or give %d\n",
            flag, (long long)given, init, field, flag + 2, have, have);
    return -1;
}

/* The shape from --init's header (the options must agree with it). */
static int shape_from_llmc(const gpt2_opts *g, gpt2_model_file *f, gpt2_shape *s) {
    char err[1024];
    /* read piece by piece while the engine builds: no copy of the model in memory */
    if (gpt2_model_open(g->init, f, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc train: --init: %s\n", err);
        return -1;
    }
    *s = f->shape;
    if (check_flag(g->init, "--max-context", g->max_context, s->max_context, 2) ||
        check_flag(g->init, "--vocab", g->vocab, s->vocab, 3) ||
        check_flag(g->init, "--layers", g->layers, s->layers, 4) ||
        check_flag(g->init, "--heads", g->heads, s->heads, 5) ||
        check_flag(g->init, "--width", g->width, s->channels, 6) ||
        check_flag(g->init, "--padded-vocab", g->padded, s->padded_vocab, 7))
        return -1;
    return 0;
}

/* The shape from --init's file: llm.c's header, or a Hugging Face GPT-2's tensors and config.json. */
static int shape_from_init(const gpt2_opts *g, zcli_gpt2_init *in, gpt2_shape *s, int64_t *context) {
    char err[1024];
    int64_t given[6] = {g->max_context, g->vocab, g->layers, g->heads, g->width, g->padded};
    if ((in->is_hf = zcli_gpt2_hf_path(g->init))) {
        if (zcli_gpt2_hf_open(g->init, given, &in->hf, err, sizeof err)) {
            fprintf(stderr, "zinc train: --init: %s\n", err);
            return -1;
        }
        *s = in->hf.s;
    } else if (shape_from_llmc(g, &in->llmc, s)) {
        return -1;
    }
    if (*context > s->max_context) {
        fprintf(stderr, "zinc train: --context %lld is longer than %s allows: its %s is %d; give --context 1..%d\n",
                (long long)*context, g->init, in->is_hf ? "max context (wpe.weight's rows)" : "header[2] (max context)",
                s->max_context, s->max_context);
        return -1;
    }
    if (*context < 0) *context = s->max_context;
    return 0;
}

void zcli_gpt2_init_close(zcli_gpt2_init *in) {
    if (in->is_hf)
        zcli_gpt2_hf_close(&in->hf);
    else
        gpt2_model_close(&in->llmc);
    in->is_hf = 0;
}

/* The shape of a resumed run: the one sealed in its checkpoint (or, saved before shapes were sealed, its
 * zinc_gpt2.json); a shape option that disagrees is refused naming both values. 0 found, 1 none, -1 refused. */
static int shape_from_resume(const gpt2_opts *g, const char *resume, gpt2_shape *s) {
    char err[1024];
    int64_t given[6] = {g->max_context, g->vocab, g->layers, g->heads, g->width, g->padded};
    int have = zcli_gpt2_shape_sealed(resume, s, err, sizeof err);
    if (have == 1) have = zcli_gpt2_shape_load(resume, s, err, sizeof err);
    if (have < 0 || (have == 0 && zcli_gpt2_shape_flags_agree(resume, s, given, err, sizeof err))) {
        fprintf(stderr, "zinc train: --resume: %s\n", err);
        return -1;
    }
    return have;
}

/* The shape of a resumed run, else the options'. */
static int shape_from_options(const gpt2_opts *g, const char *resume, gpt2_shape *s, int64_t *context) {
    char err[1024];
    int have = resume ? shape_from_resume(g, resume, s) : 1;
    if (have < 0) return -1;
    if (have == 1) {
        s->layers = (int)(g->layers > 0 ? g->layers : ZCLI_GPT2_LAYERS);
        s->channels = (int)(g->width > 0 ? g->width : ZCLI_GPT2_WIDTH);
        s->heads = (int)(g->heads > 0 ? g->heads : ZCLI_GPT2_HEADS);
        s->vocab = (int)(g->vocab > 0 ? g->vocab : g->text ? ZCLI_GPT2_BYTE_VOCAB : ZCLI_GPT2_VOCAB);
        s->padded_vocab = (int)(g->padded > 0 ? g->padded : zcli_gpt2_padded_vocab(s->vocab));
        if (*context < 0) *context = g->max_context > 0 ? g->max_context : ZCLI_GPT2_CONTEXT;
        s->max_context = (int)(g->max_context > 0 ? g->max_context : *context);
    } else if (*context < 0) {
        *context = s->max_context;
    }
    if (gpt2_shape_check(s, err, sizeof err)) {
        fprintf(stderr, "zinc train: the model's %s\n", err);
        return -1;
    }
    if (*context > s->max_context) {
        fprintf(stderr, "zinc train: --context %lld is longer than --max-context %d\n", (long long)*context,
                s->max_context);
        return -1;
    }
    return 0;
}

int zcli_gpt2_shape(const gpt2_opts *g, const char *resume, gpt2_shape *s, int64_t *context, zcli_gpt2_init *init) {
    *context = g->context;
    return g->init ? shape_from_init(g, init, s, context) : shape_from_options(g, resume, s, context);
}

/* The training and validation tokens: --data or --text (its last 10% validates unless --val-data). */
static int read_data(const gpt2_opts *g, gpt2_run *r) {
    char err[1024];
    r->train_name = g->text ? g->text : g->data;
    r->val_name = g->val_data ? g->val_data : g->text;
    if (g->text) {
        if (gpt2_tokens_from_text(g->text, &r->train, err, sizeof err) != ZINC_OK) {
            fprintf(stderr, "zinc train: --text: %s\n", err);
            return -1;
        }
        int64_t ntrain = r->train.n - r->train.n / 10;
        if (!g->val_data && r->train.n - ntrain > 0) {
            r->val.n = r->train.n - ntrain;
            r->val.tok = malloc((size_t)r->val.n * sizeof *r->val.tok);
            if (r->val.tok) memcpy(r->val.tok, r->train.tok + ntrain, (size_t)r->val.n * sizeof *r->val.tok);
            r->train.n = ntrain;
        }
    } else if (gpt2_tokens_read(g->data, &r->train, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc train: --data: %s\n", err);
        return -1;
    }
    if (g->val_data && gpt2_tokens_read(g->val_data, &r->val, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc train: --val-data: %s\n", err);
        return -1;
    }
    if (gpt2_tokens_check(&r->train, r->s.vocab, r->train_name, err, sizeof err) != ZINC_OK ||
        (r->val.n && gpt2_tokens_check(&r->val, r->s.vocab, r->val_name, err, sizeof err) != ZINC_OK)) {
        fprintf(stderr, "zinc train: %s\n", err);
        return -1;
    }
    return 0;
}

int zcli_gpt2_select_products(const gpt2_opts *g) {
    static const char *const gemm_names[] = {"auto", "openblas", "onednn"};
    gpt2_gemm_backend gemm;
    if (gpt2_gemm_parse(gemm_names[g->gemm_i < 0 ? 0 : g->gemm_i], &gemm) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        return 2;
    }
    gpt2_gemm_select(gemm); /* process-wide, before the model exists */
    static const char *const products_names[] = {"auto", "fp32", "bf16"};
    gpt2_products products;
    if (gpt2_products_parse(products_names[g->products_i < 0 ? 0 : g->products_i], &products) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        return 2;
    }
    gpt2_products_select(products);
    return 0;
}

static int gpt2_prepare(zcli_train *t) {
    const gpt2_opts *g = t->model_opts;
    int sel = zcli_gpt2_select_products(g);
    if (sel) return sel;
    if (!g->data == !g->text) {
        fprintf(stderr, "zinc train --model gpt2: one of --data FILE (llm.c tokens) or --text FILE is required\n");
        return 2;
    }
    if (g->init && t->o->resume) {
        fprintf(stderr,
                "zinc train: --init %s and --resume %s both give the starting weights; the checkpoint would "
                "win without a word: give one of them\n",
                g->init, t->o->resume);
        return 2;
    }
    const char *in[] = {g->init, g->data, g->text, g->val_data};
    for (int i = 0, k = 1; i < 4; i++)
        if (in[i]) t->inputs[k++] = in[i];
    gpt2_run *r = calloc(1, sizeof *r);
    if (!(t->model = r)) return 1;
    r->val_losses = json_array();
    int bad = zcli_gpt2_shape(g, t->o->resume, &r->s, &r->context, &r->init_file);
    return bad || read_data(g, r) ? 1 : 0;
}

static int gpt2_build(zcli_train *t) {
    const gpt2_opts *g = t->model_opts;
    gpt2_run *r = t->model;
    const gpt2_shape *s = &r->s;
    int64_t shape[7] = {s->layers, s->channels, s->heads, s->vocab, s->padded_vocab, s->max_context, r->context};
    int64_t given = (g->init ? 1 : 0) | (g->shuffle ? 2 : 0);
    if (zcli_agree(t->e, "which of --init/--shuffle were given", &given, sizeof given) ||
        zcli_agree(t->e, "--val-every", &g->val_every, sizeof g->val_every) ||
        zcli_agree(t->e, "the model shape and --context", shape, sizeof shape))
        return -1;
    if (zcli_gpt2_shape_seal(t->e, s)) return zcli_train_fail("sealing the model shape");
    gpt2_config mc = {.shape = *s, .context = (int)r->context};
    if (g->init && r->init_file.is_hf)
        mc.init_read = zcli_gpt2_hf_read, mc.init_ctx = &r->init_file.hf;
    else if (g->init)
        mc.init_file = &r->init_file.llmc;
    if (gpt2_create(t->e, &mc, &r->m) != ZINC_OK) return zcli_train_fail("building the model failed");
    /* --peak-flops sgemm calibrates the products' own backend (oneDNN or OpenBLAS, float or bf16) */
    if (gpt2_model_bf16_products(r->m)) {
        t->gemm_bf16 = gpt2_gemm_bf16;
        t->gemm_name = "oneDNN bf16 gemm";
    } else {
        t->gemm = gpt2_sgemm;
        t->gemm_name = gpt2_gemm_selected() == GPT2_GEMM_ONEDNN ? "oneDNN sgemm" : "OpenBLAS sgemm";
    }
    if (gpt2_declare_flops(r->m) != ZINC_OK) return zcli_train_fail("declaring the model's FLOPs");
    zcli_gpt2_init_close(&r->init_file);
    if (g->shuffle) gpt2_shuffle(r->m, (uint64_t)t->o->seed);
    return 0;
}

static int gpt2_micro(zcli_train *t, int64_t step, int64_t j) {
    gpt2_run *r = t->model;
    return gpt2_train_microstep(r->m, &r->train, step, j) == ZINC_OK ? 0 : -1;
}

static int gpt2_step_end(zcli_train *t, double *loss) {
    gpt2_run *r = t->model;
    return gpt2_step_loss(r->m, loss) == ZINC_OK ? 0 : -1;
}

static int64_t gpt2_numel(zcli_train *t) { return gpt2_num_params(&((gpt2_run *)t->model)->s); }

static void gpt2_free(zcli_train *t) {
    gpt2_run *r = t->model;
    if (!r) return;
    json_decref(r->val_losses);
    json_decref(r->sample_text);
    zcli_gpt2_init_close(&r->init_file);
    gpt2_tokens_free(&r->train);
    gpt2_tokens_free(&r->val);
    gpt2_destroy(r->m);
    free(r);
}

const zcli_train_model zcli_model_gpt2 = {
    .name = "gpt2",
    .options = &gpt2_table,
    .opts_size = sizeof(gpt2_opts),
    .usage = "usage: zinc train --model gpt2 --config FILE (--data FILE | --text FILE) [options]",
    .about = "Trains GPT-2 (examples/gpt2) with a DeepSpeed ds_config.json; the micro batch comes from the config,\n"
             "the sequence length from --context. Several ranks: mpirun -np N zinc train --model gpt2 ...\n"
             "A new model takes its shape from the options below; with --init, from the checkpoint.\n"
             "--threads N also sets the model's compute threads; --device cuda runs cuBLAS and the model's\n"
             "kernels on the GPU (ZINC_EXPERIMENTAL_CUDA=1; never run on a GPU yet).",
    .defaults = gpt2_defaults,
    .prepare = gpt2_prepare,
    .build = gpt2_build,
    .start = zcli_gpt2_start,
    .micro_step = gpt2_micro,
    .step_end = gpt2_step_end,
    .after_step = zcli_gpt2_after_step,
    .finish = zcli_gpt2_finish,
    .numel = gpt2_numel,
    .summary = zcli_gpt2_summary,
    .report = zcli_gpt2_report,
    .destroy = gpt2_free,
    .memory = zcli_gpt2_memory,
};
