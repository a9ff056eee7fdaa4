/* See mem_whole.h. The model's layout and its declared memory come from the example itself
 * (gpt2_memory, the table its create allocates from), the engine's bytes from the sizing plan, so the
 * estimate cannot drift from what `zinc train --model gpt2` allocates. */
#include "cli/mem_whole.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "examples/gpt2/gpt2.h"
#include "examples/mlp/mlp.h"
#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"

#define MAX_SETS 64

typedef struct wopts {
    const char *config, *init, *data, *text, *val;
    const char *sets[MAX_SETS + 1];
    int nsets;
    int64_t layers, width, heads, vocab, padded, max_context, context;
    int64_t ranks, threads;
    bool json, exact;
    bool mlp;                               /* --model mlp (zinc train's MLP) */
    int64_t hidden, depth, in_dim, classes; /* its flags */
} wopts;

bool zcli_mem_whole_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model")) return true;
    return false;
}

static void usage(FILE *f) {
    fprintf(f, "usage: zinc mem estimate --model gpt2 --config FILE [model flags as zinc train --model gpt2]\n"
               "                         [--ranks N] [--threads T] [--json] [--bytes]\n"
               "\n"
               "The whole training process's resident peak per rank, before it starts: the process at start, the\n"
               "engine (model states, buffers, the build's initialisation scratch, MPI's temporaries), the model's\n"
               "activations and scratch (from the same table the model allocates from), the data and the end of the\n"
               "run. Model flags: --layers --width --heads --vocab --padded-vocab --max-context --context, or\n"
               "--init FILE (an llm.c model file: its shape); --data/--text/--val-data FILE (the tokens held in\n"
               "memory); --set PATH=VALUE as for zinc train. The micro batch comes from the config at --ranks\n"
               "(default 1) ranks; --threads as zinc train (default: cores / ranks). --json: each rank's\n"
               "whole_process_peak_bytes and its parts.\n");
}

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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct {
            const char *name;
            int64_t *dst, lo, hi;
        } ints[] = {{"--layers", &o->layers, 1, 1024},          {"--width", &o->width, 1, 65536},
                    {"--heads", &o->heads, 1, 65536},           {"--vocab", &o->vocab, 1, 65536},
                    {"--padded-vocab", &o->padded, 1, 1 << 20}, {"--max-context", &o->max_context, 1, 1 << 20},
                    {"--context", &o->context, 1, 1 << 20},     {"--ranks", &o->ranks, 1, 4096},
                    {"--threads", &o->threads, 1, 1024},        {"--hidden", &o->hidden, 1, 65536},
                    {"--depth", &o->depth, 0, 65536},           {"--in-dim", &o->in_dim, 1, 512},
                    {"--classes", &o->classes, 2, 65536}};
        int matched = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints && !matched; k++) {
            if (strcmp(a, ints[k].name)) continue;
            char *end = NULL;
            long long x = v ? strtoll(v, &end, 10) : 0;
            if (!v || !*v || *end || x < ints[k].lo || x > ints[k].hi) {
                fprintf(stderr, "zinc mem estimate: %s needs an integer in %lld..%lld, got \"%s\"\n", a,
                        (long long)ints[k].lo, (long long)ints[k].hi, v ? v : "");
                return -1;
            }
            *ints[k].dst = x, i++, matched = 1;
        }
        if (matched) continue;
        const char **strs[] = {&o->config, &o->init, &o->data, &o->text, &o->val};
        const char *snames[] = {"--config", "--init", "--data", "--text", "--val-data"};
        for (size_t k = 0; k < sizeof strs / sizeof *strs && !matched; k++)
            if (!strcmp(a, snames[k])) {
                if (!v || !*v) {
                    fprintf(stderr, "zinc mem estimate: %s needs a path\n", a);
                    return -1;
                }
                *strs[k] = v, i++, matched = 1;
            }
        if (matched) continue;
        if (!strcmp(a, "--model")) {
            if (!v || (strcmp(v, "gpt2") && strcmp(v, "mlp"))) {
                fprintf(stderr, "zinc mem estimate: --model takes gpt2 or mlp (got \"%s\")\n", v ? v : "");
                return -1;
            }
            o->mlp = !strcmp(v, "mlp");
            i++;
        } else if (!strcmp(a, "--set")) {
            if (!v || o->nsets == MAX_SETS) {
                fprintf(stderr, "zinc mem estimate: --set needs PATH=VALUE (at most %d)\n", MAX_SETS);
                return -1;
            }
            o->sets[o->nsets++] = v, i++;
        } else if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--bytes"))
            o->exact = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "zinc mem estimate --model gpt2: unknown option \"%s\" (see --help)\n", a);
            return -1;
        }
    }
    if (!o->config) {
        fprintf(stderr, "zinc mem estimate --model gpt2: --config FILE is required (the batch comes from it)\n");
        return -1;
    }
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

int zcli_mem_whole(int argc, char **argv) {
    wopts o;
    int r = parse(argc, argv, &o);
    if (r) return r < 0 ? 2 : 0;
    gpt2_shape s = {0};
    int context = 0, W = (int)o.ranks, rc = 1;
    uint64_t data = 0;
    if (!o.mlp && (shape_of(&o, &s, &context) || data_bytes(&o, &data))) return 1;
    zinc_config cfg;
    zcfg_load_opts lo = {.sets = o.sets,
                         .run_steps = 1,
                         .run_steps_from = "a placeholder (memory does not depend on it)"};
    if (zcfg_load_file_ex(o.config, W, &lo, NULL, &cfg) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: %s\n", zinc_last_error());
        return 1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(o.threads > 0 ? o.threads : cores / W > 0 ? cores / W : 1);
    int stage = cfg.zero.stage;
    zinc_dtype grad = stage <= 1 ? cfg.grad_accum_dtype : cfg.compute_dtype;
    gpt2_config mc = {.shape = s, .context = context};
    mlp_config ml = mlp_default_config();
    ml.hidden = (int)o.hidden, ml.depth = (int)o.depth, ml.in_dim = (int)o.in_dim, ml.classes = (int)o.classes;
    uint64_t act = 0, scr = 0, host = 0;
    if (o.mlp) {
        if (mlp_memory(&ml, cfg.train_micro_batch_size_per_gpu, &act, &scr) != ZINC_OK) {
            fprintf(stderr, "zinc mem estimate: the MLP's memory cannot be sized for these flags\n");
            return 1;
        }
    } else if (gpt2_memory(&mc, (int)cfg.train_micro_batch_size_per_gpu, cfg.gradient_accumulation_steps,
                           cfg.compute_dtype, grad, zcfg_given(&cfg, "activation_checkpointing"), threads, 0, &act,
                           &scr, &host) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: the model's memory cannot be sized for this shape and batch\n");
        return 1;
    }
    zplan_declared decl[4] = {{ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, act, "gpt2 activations"},
                              {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, scr, "gpt2 scratch"},
                              {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, host, "gpt2 token ids, BLAS buffers"},
                              {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, data, "training and validation tokens"}};
    int64_t *numel = NULL;
    int *module = NULL;
    int np = o.mlp ? mlp_layout(&ml, &numel, &module) : gpt2_layout(&s, &numel, &module);
    json_t *ranks = json_array();
    if (np < 0 || !ranks) goto done;
    zplan_model md = {.nparams = np,
                      .numel = numel,
                      .module = module,
                      .nmodules = o.mlp ? 0 : 2 + s.layers,
                      .ndeclared = 4,
                      .declared = decl};
    zplan_device dev = zplan_device_for(ZINC_DEVICE_CPU);
    if (!o.json && o.mlp)
        printf("zinc mem estimate --model mlp: %d inputs, %d hidden layers of %d, %d classes; %s; ZeRO stage %d, %s, "
               "micro batch %" PRId64 ", %d rank%s\n\n",
               ml.in_dim, ml.depth, ml.hidden, ml.classes, o.config, stage, zinc_dtype_name(cfg.compute_dtype),
               cfg.train_micro_batch_size_per_gpu, W, W == 1 ? "" : "s");
    else if (!o.json)
        printf("zinc mem estimate --model gpt2: %d layers, %d channels, %d heads, vocabulary %d (padded %d), context "
               "%d, %" PRId64 " parameters; %s; ZeRO stage %d, %s, micro batch %" PRId64 " x %" PRId64
               " accumulation, %d rank%s, %d thread%s per rank\n\n",
               s.layers, s.channels, s.heads, s.vocab, s.padded_vocab, context, gpt2_num_params(&s), o.config, stage,
               zinc_dtype_name(cfg.compute_dtype), cfg.train_micro_batch_size_per_gpu, cfg.gradient_accumulation_steps,
               W, W == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
    for (int rank = 0; rank < W; rank++) {
        zplan plan;
        zest_estimate est;
        if (zplan_make(&md, &cfg, W, rank, &dev, &plan) != ZINC_OK) {
            fprintf(stderr, "zinc mem estimate: %s\n", zinc_last_error());
            goto done;
        }
        zest_from_plan(&plan, o.init != NULL, &est); /* --init builds ranged (examples/gpt2) */
        zplan_free(&plan);
        uint64_t base = zest_baseline_bytes(W, cuda_build()), growth = zest_rss(&est, true);
        uint64_t peak = base + growth;
        uint64_t engine = 0;
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            if (c != ZINC_MEM_ACTIVATIONS && c != ZINC_MEM_SCRATCH)
                engine += est.bytes[ZINC_MEMKIND_HOST][c] + est.bytes[ZINC_MEMKIND_PINNED][c];
        json_t *parts = json_object();
        json_object_set_new(parts, "process_at_start", json_integer((json_int_t)base));
        json_object_set_new(parts, "engine", json_integer((json_int_t)engine));
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
            uint64_t b = est.bytes[ZINC_MEMKIND_HOST][c] + est.bytes[ZINC_MEMKIND_PINNED][c];
            if (b)
                json_object_set_new(parts, zinc_mem_category_name((zinc_mem_category)c), json_integer((json_int_t)b));
        }
        json_object_set_new(parts, "model_activations", json_integer((json_int_t)act));
        json_object_set_new(parts, "model_scratch", json_integer((json_int_t)scr));
        json_object_set_new(parts, "token_ids_and_blas_buffers", json_integer((json_int_t)host));
        json_object_set_new(parts, "data", json_integer((json_int_t)data));
        json_object_set_new(parts, "init_scratch_at_build", json_integer((json_int_t)est.init_scratch));
        json_object_set_new(parts, "mpi_temporaries", json_integer((json_int_t)est.comm_temp));
        json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:o}", "rank", rank, "whole_process_peak_bytes",
                                               (json_int_t)peak, "nvme_bytes", (json_int_t)est.total[ZINC_MEMKIND_NVME],
                                               "parts", parts));
        if (o.json) continue;
        char b[64];
        printf("rank %d\n", rank);
        const char *const rows[][2] = {{"process at start", "process_at_start"},
                                       {"engine (model states, buffers)", "engine"},
                                       {"  init scratch (at build)", "init_scratch_at_build"},
                                       {"  MPI temporaries", "mpi_temporaries"},
                                       {"model activations", "model_activations"},
                                       {"model scratch", "model_scratch"},
                                       {"token ids, BLAS buffers", "token_ids_and_blas_buffers"},
                                       {"data (tokens)", "data"}};
        for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
            human(b, sizeof b, (uint64_t)json_integer_value(json_object_get(parts, rows[k][1])), o.exact);
            printf("  %-34s %14s\n", rows[k][0], b);
        }
        human(b, sizeof b, peak, o.exact);
        printf("  %-34s %14s\n\n", "whole-process peak", b);
    }
    if (o.json) {
        json_t *j = json_pack("{s:s, s:i, s:i, s:o}", "model", o.mlp ? "mlp" : "gpt2", "world_size", W, "threads",
                              threads, "ranks", json_incref(ranks));
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
    free(numel);
    free(module);
    return rc;
}
