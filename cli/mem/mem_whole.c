/* See mem_whole.h. The model's options, layout and declared memory come from zinc train's model adapter
 * (train.h's memory hook: the example's own tables), the engine's bytes from the sizing plan, so the
 * estimate cannot drift from what `zinc train --model X` allocates. */
#include "cli/mem/mem_whole.h"

#include <inttypes.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common/commands.h"
#include "cli/common/options.h"
#include "cli/train/train.h"
#include "kernels/thread_pool.h"
#include "base/config/config.h"
#include "base/core/error.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"

/* The estimate's own options; the model's and zinc train's come from their tables (train.h), so every zinc
 * train flag is accepted here and the shape defaults are the trainer's. */
typedef struct wopts {
    int64_t ranks;
    bool json, exact;
} wopts;

bool zcli_mem_whole_wanted(int argc, char **argv) { return zcli_peek(1, argc, argv, "--model") != NULL; }

#define O(f) offsetof(wopts, f)
static const zcli_opt whole_options[] = {{"--ranks", ZCLI_INT, O(ranks), "N", 1, 4096, NULL,
                                          "ranks of the run, on one node"},
                                         {"--json", ZCLI_FLAG, O(json), NULL, 0, 0, NULL,
                                          "each rank's whole_process_peak_bytes and its parts"},
                                         {"--bytes", ZCLI_FLAG, O(exact), NULL, 0, 0, NULL, "exact byte counts"},
                                         {0}};
#undef O
static const zcli_table whole_table = {"the estimate:", whole_options, NULL};

/* Everything one estimate needs: the options, the loaded config, the model's layout and declared memory. */
typedef struct whole {
    wopts o;
    zcli_train_opts to;
    const zcli_train_model *model;
    _Alignas(max_align_t) char model_opts[512];
    zinc_config cfg;
    int W, threads;
    zcli_model_memory mm;
    zplan_declared decl[4];
    zplan_model md;
} whole;

static int parse(int argc, char **argv, whole *w) {
    w->o = (wopts){.ranks = 1};
    zcli_train_defaults(&w->to);
    w->model = zcli_train_model_named(1, argc, argv);
    if (w->model->opts_size > sizeof w->model_opts) return 2;
    w->model->defaults(w->model_opts);
    zcli_cmd c = {.name = "zinc mem estimate --model",
                  .usage = "usage: zinc mem estimate --model gpt2|mlp --config FILE [zinc train's options] "
                           "[--ranks N] [--json]",
                  .about = "The whole training process's resident peak per rank, before it starts: the process at "
                           "start, the\nengine (model states, buffers, the build's scratch, MPI's temporaries), the "
                           "model's activations\nand scratch (from the tables the models allocate from), the data "
                           "and the end of the run.\nEvery zinc train option is taken; those that do not change "
                           "memory (--steps, --report, ...) are ignored.",
                  .tables = {w->model->options, &zcli_train_table, &whole_table},
                  .dst = {w->model_opts, &w->to, &w->o}};
    int r = zcli_parse(&c, 1, argc, argv);
    if (r) return r;
    if (!w->to.config) return zcli_usage_error(&c, "--config FILE is required (the batch comes from it)");
    return 0;
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

/* The config at --ranks ranks, the thread count, the model's declared memory and its layout. */
static int whole_prepare(whole *w) {
    w->W = (int)w->o.ranks;
    zcfg_load_opts lo = {.sets = w->to.sets.v,
                         .run_steps = 1,
                         .run_steps_from = "a placeholder (memory does not use it)"};
    if (zcfg_load_file_ex(w->to.config, w->W, &lo, NULL, &w->cfg) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: %s\n", zinc_last_error());
        return -1;
    }
    w->threads = w->to.threads > 0 ? (int)w->to.threads : zpool_default_threads(w->W);
    zcli_model_memory *m = &w->mm;
    if (w->model->memory(w->model_opts, &w->to, &w->cfg, w->threads, m)) return -1;
    const zplan_declared d[4] = {{ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, m->activations, "activations"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, m->scratch, "scratch"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, m->host, "token ids, BLAS buffers"},
                                 {ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, m->data, "training and validation tokens"}};
    memcpy(w->decl, d, sizeof d);
    w->md = (zplan_model){.nparams = m->nparams,
                          .numel = m->numel,
                          .module = m->module,
                          .muon_rows = m->muon_rows,
                          .ndeclared = 4,
                          .declared = w->decl};
    return 0;
}

static void print_header(const whole *w) {
    const zinc_config *c = &w->cfg;
    printf("zinc mem estimate --model %s; %s; ZeRO stage %d, %s, micro batch %" PRId64 " x %" PRId64
           " accumulation, %d rank%s, %d thread%s per rank\n\n",
           w->mm.describe, w->to.config, c->zero.stage, zinc_dtype_name(c->compute_dtype),
           c->train_micro_batch_size_per_gpu, c->gradient_accumulation_steps, w->W, w->W == 1 ? "" : "s", w->threads,
           w->threads == 1 ? "" : "s");
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
    zest_from_plan(&plan, w->mm.ranged_init ? ZEST_INIT_RANGED : ZEST_INIT_WHOLE, &est);
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
              {"model_activations", w->mm.activations},
              {"model_scratch", w->mm.scratch},
              {"token_ids_and_blas_buffers", w->mm.host},
              {"data", w->mm.data},
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
    static whole w; /* zinc_config is large */
    memset(&w, 0, sizeof w);
    int r = parse(argc, argv, &w), rc = 1;
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
        json_t *j = json_pack("{s:s, s:i, s:i, s:O}", "model", w.model->name, "world_size", w.W, "threads", w.threads,
                              "ranks", ranks);
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
    free(w.mm.numel);
    free(w.mm.muon_rows);
    free(w.mm.module);
    return rc;
}
