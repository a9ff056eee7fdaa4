/* See mem_whole.h. The model's layout and its declared memory come from the example itself
 * (gpt2_memory, the table its create allocates from), the engine's bytes from the sizing plan, so the
 * estimate cannot drift from what `zinc train --model gpt2` allocates. */
#include "cli/mem_whole.h"

#include <inttypes.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "examples/gpt2/gpt2.h"
#include "examples/mlp/mlp.h"
#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"

typedef struct wopts {
    const char *config, *init, *data, *text, *val;
    zcli_list sets;
    int64_t layers, width, heads, vocab, padded, max_context, context;
    int64_t ranks, threads;
    bool json, exact;
    int model_i;                            /* 0: gpt2, 1: mlp (zinc train's MLP) */
    int64_t hidden, depth, in_dim, classes; /* the MLP's flags */
} wopts;

bool zcli_mem_whole_wanted(int argc, char **argv) { return zcli_peek(1, argc, argv, "--model") != NULL; }

#define O(f) offsetof(wopts, f)
static const zcli_opt whole_options[] =
    {{"--model", ZCLI_CHOICE, O(model_i), "M", 0, 0, "gpt2|mlp", "the trainer whose whole process is estimated"},
     {"--config", ZCLI_TEXT, O(config), "FILE", 0, 0, NULL, "the ds_config.json (the batch comes from it)"},
     {"--set", ZCLI_LIST, O(sets), "PATH=VALUE", 0, 0, NULL, "override a ds_config value, as zinc train"},
     {"--ranks", ZCLI_INT, O(ranks), "N", 1, 4096, NULL, "ranks of the run (default 1)"},
     {"--threads", ZCLI_INT, O(threads), "T", 1, 1024, NULL, "threads per rank (default: cores / ranks)"},
     {"--layers", ZCLI_INT, O(layers), "L", 1, 1024, NULL, "gpt2: transformer blocks (default 4)"},
     {"--width", ZCLI_INT, O(width), "C", 1, 65536, NULL, "gpt2: channels (default 128)"},
     {"--heads", ZCLI_INT, O(heads), "H", 1, 65536, NULL, "gpt2: attention heads (default 4)"},
     {"--vocab", ZCLI_INT, O(vocab), "V", 1, 65536, NULL, "gpt2: vocabulary (default 256 with --text, else 50257)"},
     {"--padded-vocab", ZCLI_INT, O(padded), "VP", 1, 1 << 20, NULL, "gpt2: rows of wte"},
     {"--max-context", ZCLI_INT, O(max_context), "N", 1, 1 << 20, NULL, "gpt2: positions in wpe"},
     {"--context", ZCLI_INT, O(context), "T", 1, 1 << 20, NULL, "gpt2: sequence length"},
     {"--init", ZCLI_TEXT, O(init), "FILE", 0, 0, NULL, "gpt2: an llm.c model file (its shape)"},
     {"--data", ZCLI_TEXT, O(data), "FILE", 0, 0, NULL, "gpt2: the llm.c token file the run holds"},
     {"--text", ZCLI_TEXT, O(text), "FILE", 0, 0, NULL, "gpt2: the text file the run holds (one token per byte)"},
     {"--val-data", ZCLI_TEXT, O(val), "FILE", 0, 0, NULL, "gpt2: the validation token file"},
     {"--hidden", ZCLI_INT, O(hidden), "N", 1, 65536, NULL, "mlp: hidden width (default 128)"},
     {"--depth", ZCLI_INT, O(depth), "N", 0, 65536, NULL, "mlp: hidden layers (default 2)"},
     {"--in-dim", ZCLI_INT, O(in_dim), "N", 1, 512, NULL, "mlp: input features (default 32)"},
     {"--classes", ZCLI_INT, O(classes), "N", 2, 65536, NULL, "mlp: classes (default 8)"},
     {"--json", ZCLI_FLAG, O(json), NULL, 0, 0, NULL, "each rank's whole_process_peak_bytes and its parts"},
     {"--bytes", ZCLI_FLAG, O(exact), NULL, 0, 0, NULL, "exact byte counts"},
     {0}};
#undef O
static const zcli_table whole_table = {"options:", whole_options};

static int parse(int argc, char **argv, wopts *o) {
    *o = (wopts){.layers = -1,
                 .width = -1,
                 .heads = -1,
                 .vocab = -1,
                 .padded = -1,
                 .max_context = -1,
                 .context = -1,
                 .ranks = 1,
                 .hidden = 128,
                 .depth = 2,
                 .in_dim = 32,
                 .classes = 8};
    zcli_cmd c = {.name = "zinc mem estimate --model",
                  .usage = "usage: zinc mem estimate --model gpt2|mlp --config FILE [zinc train's model options] "
                           "[--ranks N] [--json]",
                  .about = "The whole training process's resident peak per rank, before it starts: the process at "
                           "start, the\nengine (model states, buffers, the build's scratch, MPI's temporaries), the "
                           "model's activations\nand scratch (from the tables the models allocate from), the data "
                           "and the end of the run.",
                  .tables = {&whole_table},
                  .dst = {o}};
    int r = zcli_parse(&c, 1, argc, argv);
    if (r) return r;
    if (!o->config) return zcli_usage_error(&c, "--config FILE is required (the batch comes from it)");
    return 0;
}

/* The shape as zinc train --model gpt2 picks it: the checkpoint's, or the flags' with its defaults. */
static int shape_of(const wopts *o, gpt2_shape *s, int *context) {
    char err[1024];
    if (o->init) {
        gpt2_model_file mf;
        if (gpt2_model_open(o->init, &mf, err, sizeof err) != ZINC_OK) {
            fprintf(stderr, "zinc mem estimate: --init: %s\n", err);
            return -1;
        }
        *s = mf.shape;
        gpt2_model_close(&mf);
        *context = (int)(o->context > 0 ? o->context : s->max_context);
    } else {
        s->layers = (int)(o->layers > 0 ? o->layers : 4);
        s->channels = (int)(o->width > 0 ? o->width : 128);
        s->heads = (int)(o->heads > 0 ? o->heads : 4);
        s->vocab = (int)(o->vocab > 0 ? o->vocab : o->text ? 256 : 50257);
        s->padded_vocab = (int)(o->padded > 0 ? o->padded : (s->vocab + 63) / 64 * 64);
        *context = (int)(o->context > 0 ? o->context : o->max_context > 0 ? o->max_context : 256);
        s->max_context = (int)(o->max_context > 0 ? o->max_context : *context);
    }
    if (gpt2_shape_check(s, err, sizeof err) || *context > s->max_context) {
        fprintf(stderr, "zinc mem estimate: the model's %s\n",
                *context > s->max_context ? "--context is longer than its max context" : err);
        return -1;
    }
    return 0;
}

/* Bytes of tokens the trainer holds: llm.c token files as uint16 after the 1 KiB header; a text file one
 * uint16 per byte, plus its last 10% copied as the validation set unless --val-data is given. */
static int data_bytes(const wopts *o, uint64_t *out) {
    const char *paths[] = {o->data, o->text, o->val};
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
            *out += 2 * b + (o->val ? 0 : 2 * (b / 10));
        else
            *out += b > 1024 ? b - 1024 : 0;
    }
    return 0;
}

/* GPT-2's parameters in registration order (examples/gpt2/gpt2.c's create): embed (wte, wpe), one module
 * per block (its 12 tensors), lnf. */
static int gpt2_layout(const gpt2_shape *s, int64_t **numel, int **module) {
    int n = 4 + 12 * s->layers, k = 0;
    *numel = calloc((size_t)n, sizeof **numel);
    *module = calloc((size_t)n, sizeof **module);
    if (!*numel || !*module) return -1;
    (*numel)[k] = gpt2_kind_numel(s, GPT2_WTE), (*module)[k++] = 0;
    (*numel)[k] = gpt2_kind_numel(s, GPT2_WPE), (*module)[k++] = 0;
    for (int l = 0; l < s->layers; l++)
        for (int kind = GPT2_LN1W; kind <= GPT2_FCPROJB; kind++)
            (*numel)[k] = gpt2_kind_numel(s, kind), (*module)[k++] = 1 + l;
    (*numel)[k] = gpt2_kind_numel(s, GPT2_LNFW), (*module)[k++] = 1 + s->layers;
    (*numel)[k] = gpt2_kind_numel(s, GPT2_LNFB), (*module)[k++] = 1 + s->layers;
    return n;
}

/* The MLP's parameters in registration order (examples/mlp/mlp.c): one module per layer, weight then bias. */
static int mlp_layout(const mlp_config *c, int64_t **numel, int **module) {
    int layers = c->depth + 1, n = 2 * layers;
    *numel = calloc((size_t)n, sizeof **numel);
    *module = calloc((size_t)n, sizeof **module);
    if (!*numel || !*module) return -1;
    for (int l = 0; l < layers; l++) {
        int in = l == 0 ? c->in_dim : c->hidden, out = l == layers - 1 ? c->classes : c->hidden;
        (*numel)[2 * l] = (int64_t)out * in, (*module)[2 * l] = l;
        (*numel)[2 * l + 1] = out, (*module)[2 * l + 1] = l;
    }
    return n;
}

static void human(char *b, size_t cap, uint64_t v, bool exact) {
    if (exact)
        snprintf(b, cap, "%" PRIu64, v);
    else
        snprintf(b, cap, "%.1f MiB", (double)v / 1048576.0);
}

static bool cuda_build(void) {
#ifdef ZINC_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

/* Everything one estimate needs: the options, the loaded config, the model's layout and declared memory. */
typedef struct whole {
    wopts o;
    zinc_config cfg;
    gpt2_shape s;
    mlp_config ml;
    int context, W, threads;
    uint64_t act, scr, host, data;
    zplan_declared decl[4];
    zplan_model md;
    int64_t *numel;
    int *module;
} whole;

/* The config at --ranks ranks, the thread count, the model's declared memory and its layout. */
static int whole_prepare(whole *w) {
    wopts *o = &w->o;
    bool mlp = o->model_i == 1;
    w->W = (int)o->ranks;
    if (!mlp && (shape_of(o, &w->s, &w->context) || data_bytes(o, &w->data))) return -1;
    zcfg_load_opts lo = {.sets = o->sets.v, .run_steps = 1, .run_steps_from = "a placeholder (memory does not use it)"};
    if (zcfg_load_file_ex(o->config, w->W, &lo, NULL, &w->cfg) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: %s\n", zinc_last_error());
        return -1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    w->threads = (int)(o->threads > 0 ? o->threads : cores / w->W > 0 ? cores / w->W : 1);
    const zinc_config *c = &w->cfg;
    zinc_dtype grad = c->zero.stage <= 1 ? c->grad_accum_dtype : c->compute_dtype;
    gpt2_config mc = {.shape = w->s, .context = w->context};
    w->ml = mlp_default_config();
    w->ml.hidden = (int)o->hidden, w->ml.depth = (int)o->depth, w->ml.in_dim = (int)o->in_dim;
    w->ml.classes = (int)o->classes;
    zinc_status st =
        mlp ? mlp_memory(&w->ml, c->train_micro_batch_size_per_gpu, &w->act, &w->scr)
            : gpt2_memory(&mc, (int)c->train_micro_batch_size_per_gpu, c->gradient_accumulation_steps, c->compute_dtype,
                          grad, zcfg_given(c, "activation_checkpointing"), w->threads, 0, &w->act, &w->scr, &w->host);
    if (st != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: the model's memory cannot be sized for these options and this batch\n");
        return -1;
    }
    const zplan_declared d[4] = {{ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, w->act, "activations"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, w->scr, "scratch"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, w->host, "token ids, BLAS buffers"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, w->data, "training and validation tokens"}};
    memcpy(w->decl, d, sizeof d);
    int np = mlp ? mlp_layout(&w->ml, &w->numel, &w->module) : gpt2_layout(&w->s, &w->numel, &w->module);
    if (np < 0) return -1;
    w->md = (zplan_model){.nparams = np, .numel = w->numel, .module = w->module, .ndeclared = 4, .declared = w->decl};
    return 0;
}

static void print_header(const whole *w) {
    const zinc_config *c = &w->cfg;
    const mlp_config *ml = &w->ml;
    if (w->o.model_i == 1)
        printf("zinc mem estimate --model mlp: %d inputs, %d hidden layers of %d, %d classes", ml->in_dim, ml->depth,
               ml->hidden, ml->classes);
    else
        printf("zinc mem estimate --model gpt2: %d layers, %d channels, %d heads, vocabulary %d (padded %d), context "
               "%d, %" PRId64 " parameters",
               w->s.layers, w->s.channels, w->s.heads, w->s.vocab, w->s.padded_vocab, w->context,
               gpt2_num_params(&w->s));
    printf("; %s; ZeRO stage %d, %s, micro batch %" PRId64 " x %" PRId64 " accumulation, %d rank%s, %d thread%s per "
           "rank\n\n",
           w->o.config, c->zero.stage, zinc_dtype_name(c->compute_dtype), c->train_micro_batch_size_per_gpu,
           c->gradient_accumulation_steps, w->W, w->W == 1 ? "" : "s", w->threads, w->threads == 1 ? "" : "s");
}

/* One rank's figure and its parts, as JSON. */
static json_t *rank_json(const whole *w, int rank) {
    zplan plan;
    zest_estimate est;
    zplan_device dev = zplan_device_for(ZINC_DEVICE_CPU);
    if (zplan_make(&w->md, &w->cfg, w->W, rank, &dev, &plan) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: %s\n", zinc_last_error());
        return NULL;
    }
    zest_from_plan(&plan, w->o.init != NULL, &est); /* --init builds ranged (examples/gpt2) */
    zplan_free(&plan);
    uint64_t base = zest_baseline_bytes(w->W, cuda_build()), peak = base + zest_rss(&est, true), engine = 0;
    json_t *parts = json_object();
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
        uint64_t b = est.bytes[ZINC_MEMKIND_HOST][c] + est.bytes[ZINC_MEMKIND_PINNED][c];
        if (c != ZINC_MEM_ACTIVATIONS && c != ZINC_MEM_SCRATCH) engine += b;
        if (b) json_object_set_new(parts, zinc_mem_category_name((zinc_mem_category)c), json_integer((json_int_t)b));
    }
    const struct {
        const char *key;
        uint64_t v;
    } kv[] = {{"process_at_start", base},
              {"engine", engine},
              {"model_activations", w->act},
              {"model_scratch", w->scr},
              {"token_ids_and_blas_buffers", w->host},
              {"data", w->data},
              {"init_scratch_at_build", est.init_scratch},
              {"mpi_temporaries", est.comm_temp}};
    for (size_t k = 0; k < sizeof kv / sizeof *kv; k++)
        json_object_set_new(parts, kv[k].key, json_integer((json_int_t)kv[k].v));
    return json_pack("{s:i, s:I, s:I, s:o}", "rank", rank, "whole_process_peak_bytes", (json_int_t)peak, "nvme_bytes",
                     (json_int_t)est.total[ZINC_MEMKIND_NVME], "parts", parts);
}

static void print_rank(const json_t *r, bool exact) {
    const json_t *parts = json_object_get(r, "parts");
    const char *const rows[][2] = {{"process at start", "process_at_start"},
                                   {"engine (model states, buffers)", "engine"},
                                   {"  init scratch (at build)", "init_scratch_at_build"},
                                   {"  MPI temporaries", "mpi_temporaries"},
                                   {"model activations", "model_activations"},
                                   {"model scratch", "model_scratch"},
                                   {"token ids, BLAS buffers", "token_ids_and_blas_buffers"},
                                   {"data (tokens)", "data"}};
    char b[64];
    printf("rank %d\n", (int)json_integer_value(json_object_get(r, "rank")));
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        human(b, sizeof b, (uint64_t)json_integer_value(json_object_get(parts, rows[k][1])), exact);
        printf("  %-34s %14s\n", rows[k][0], b);
    }
    human(b, sizeof b, (uint64_t)json_integer_value(json_object_get(r, "whole_process_peak_bytes")), exact);
    printf("  %-34s %14s\n\n", "whole-process peak", b);
}

int zcli_mem_whole(int argc, char **argv) {
    whole w = {0};
    int r = parse(argc, argv, &w.o), rc = 1;
    if (r) return r == 1 ? 0 : r;
    json_t *ranks = json_array();
    if (!ranks || whole_prepare(&w)) goto done;
    if (!w.o.json) print_header(&w);
    for (int rank = 0; rank < w.W; rank++) {
        json_t *one = rank_json(&w, rank);
        if (!one) goto done;
        if (!w.o.json) print_rank(one, w.o.exact);
        json_array_append_new(ranks, one);
    }
    if (w.o.json) {
        json_t *j = json_pack("{s:s, s:i, s:i, s:O}", "model", w.o.model_i == 1 ? "mlp" : "gpt2", "world_size", w.W,
                              "threads", w.threads, "ranks", ranks);
        char *t = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        if (t) printf("%s\n", t);
        free(t);
        json_decref(j);
    } else {
        printf("The peak is the larger of the build (the engine without its step buffers, plus the init scratch) and "
               "the steps (everything, the model's memory and MPI's temporaries); the process at start is a measured "
               "constant (docs/mem.md).\n");
    }
    rc = 0;
done:
    json_decref(ranks);
    free(w.numel);
    free(w.module);
    return rc;
}
