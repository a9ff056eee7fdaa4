/* zinc checkpoint inspect|export: look into a checkpoint and consolidate it into a safetensors file, in
 * one process, reading the shard files directly (no MPI, no engine). */
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "cli/common/commands.h"
#include "cli/checkpoint/gpt2_cli.h"
#include "cli/common/options.h"
#include "zinc.h"

typedef struct inspect_opts {
    const char *path;
    bool verify, json;
    int64_t show;
} inspect_opts;

typedef struct export_opts {
    const char *path, *out;
    int format, dtype; /* safetensors|llmc, fp32|bf16|fp16 */
    int64_t vocab, heads;
    bool force;
} export_opts;

#define O(f) offsetof(inspect_opts, f)
static const zcli_opt inspect_options[] = {{"--verify", ZCLI_FLAG, O(verify), NULL, 0, 0, NULL,
                                            "read every file and check its size and checksums (exit 1 on a bad file)"},
                                           {"--json", ZCLI_FLAG, O(json), NULL, 0, 0, NULL,
                                            "print manifest.json instead"},
                                           {"--params", ZCLI_INT, O(show), "N", 0, 1000000000, NULL,
                                            "list the first N parameters (0: all)"},
                                           {0}};
#undef O
#define O(f) offsetof(export_opts, f)
static const zcli_opt export_options[] =
    {{"--out", ZCLI_TEXT, O(out), "FILE", 0, 0, NULL, "the file to write (required)"},
     {"--format", ZCLI_CHOICE, O(format), "F", 0, 0, "safetensors|llmc|hf",
      "safetensors: one tensor per parameter; llmc: an llm.c GPT-2\nmodel file (a GPT-2 trained by zinc "
      "train --model gpt2); hf: a Hugging Face\nGPT2LMHeadModel directory (--out DIR: model.safetensors, config.json)"},
     {"--dtype", ZCLI_CHOICE, O(dtype), "T", 0, 0, "fp32|bf16|fp16",
      "fp32, or rounded to bf16 / fp16 (llmc: fp32 is version 3, bf16\nversion 5)"},
     {"--force", ZCLI_FLAG, O(force), NULL, 0, 0, NULL,
      "replace an existing FILE (only a regular file that is not part of\nthe checkpoint)"},
     {"--vocab", ZCLI_INT, O(vocab), "V", 1, 65536, NULL,
      "llmc, hf: the vocabulary, when the checkpoint has no zinc_gpt2.json"},
     {"--heads", ZCLI_INT, O(heads), "H", 1, 65536, NULL,
      "llmc, hf: the head count, when the checkpoint has no zinc_gpt2.json"},
     {0}};
#undef O
static const zcli_table inspect_table = {"inspect:", inspect_options, NULL},
                        export_table = {"export:", export_options, NULL};

static const char checkpoint_usage[] =
    "usage: zinc checkpoint inspect DIR[/TAG] [--verify] [--json] [--params N]\n"
    "       zinc checkpoint export DIR[/TAG] --out FILE.safetensors [--dtype fp32|bf16|fp16] [--force]\n"
    "       zinc checkpoint export --format llmc DIR[/TAG] --out FILE.bin [--dtype fp32|bf16] (a GPT-2)\n"
    "       zinc checkpoint export --format hf DIR[/TAG] --out HFDIR [--dtype fp32|bf16|fp16] (a GPT-2)";
static const char checkpoint_about[] =
    "DIR is a checkpoint directory (its `latest` names the tag) and DIR/TAG one checkpoint, as written by\n"
    "zinc train --save or zinc_save_checkpoint (docs/checkpoints.md).\n"
    "inspect prints the step, the saving run's ranks, stage and dtypes, loss scale, LR position, the\n"
    "parameter table and the shard files. export writes the consolidated fp32 master weights.";

/* The subcommands' defaults. */
static const inspect_opts inspect_defaults = {.show = 20};
static const export_opts export_defaults = {.vocab = -1, .heads = -1};

static void usage(FILE *f) {
    inspect_opts io = inspect_defaults;
    export_opts eo = export_defaults;
    zcli_cmd c = {.name = "zinc checkpoint",
                  .usage = checkpoint_usage,
                  .about = checkpoint_about,
                  .tables = {&inspect_table, &export_table},
                  .dst = {&io, &eo}};
    zcli_help(&c, f);
}

static double jnum(json_t *o, const char *a, const char *b) {
    json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static const char *jstr(json_t *o, const char *a, const char *b) {
    json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_is_string(v) ? json_string_value(v) : "?";
}

static void print_header(const zckpt_manifest *m) {
    int64_t total = 0, bytes = 0;
    for (int i = 0; i < m->nparams; i++) total += m->params[i].numel;
    for (int i = 0; i < m->nfiles; i++) bytes += m->files[i].bytes;
    printf("checkpoint %s\n", m->dir);
    printf("  tag %s, written by zinc %s, id %s\n", m->tag, m->zinc_version, m->uid);
    printf("  step %" PRId64 " (%" PRId64 " taken, %" PRId64 " skipped)\n", m->steps, m->steps_taken, m->steps_skipped);
    printf("  saved by %d rank%s at ZeRO stage %d; compute %s, grad %s, comm %s; master and Adam state fp32\n",
           m->world_size, m->world_size == 1 ? "" : "s", m->stage, jstr(m->root, "dtypes", "compute"),
           jstr(m->root, "dtypes", "grad"), jstr(m->root, "dtypes", "comm"));
    printf("  train_batch_size %" PRId64 "; next lr %.6g (scheduler %s)\n", m->train_batch_size,
           jnum(m->root, "lr_schedule", "next_lr"), jstr(json_object_get(m->root, "lr_schedule"), "scheduler", "type"));
    if (m->fp16_enabled)
        printf("  fp16 loss scale %g (%s, hysteresis %d of %d, window %" PRId64 ", last overflow at %" PRId64 ")\n",
               m->scaler.cur_scale, m->scaler.dynamic ? "dynamic" : "static", m->scaler.cur_hysteresis,
               m->scaler.delayed_shift, m->scaler.scale_window, m->scaler.last_overflow_iter);
    printf("  %d parameters, %" PRId64 " elements; %d shard file%s, %.2f MiB\n", m->nparams, total, m->nfiles,
           m->nfiles == 1 ? "" : "s", (double)bytes / 1048576.0);
}

static void print_tables(const zckpt_manifest *m, int64_t show) {
    printf("\n  %-40s %-20s %12s %12s\n", "parameter", "shape", "numel", "flat offset");
    for (int i = 0; i < m->nparams && (show <= 0 || i < show); i++) {
        char shape[96];
        size_t k = 0;
        for (int d = 0; d < m->params[i].ndim && k < sizeof shape - 24; d++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? "x" : "", m->params[i].shape[d]);
        printf("  %-40s %-20s %12" PRId64 " %12" PRId64 "\n", m->params[i].name, shape, m->params[i].numel,
               m->params[i].flat_offset);
    }
    if (show > 0 && m->nparams > show) printf("  ... %d more (--params 0 lists all)\n", m->nparams - (int)show);
    printf("\n  %-20s %6s %14s %14s %14s %10s\n", "file", "rank", "flat lo", "flat hi", "bytes", "crc32c");
    for (int i = 0; i < m->nfiles; i++) {
        const zckpt_file *f = &m->files[i];
        printf("  %-20s %6d %14" PRId64 " %14" PRId64 " %14" PRId64 "   %08" PRIx32 "\n", f->name, f->rank, f->flat_lo,
               f->flat_hi, f->bytes, f->crc);
    }
}

/* Reads every shard file and checks it: the number of bad files. */
static int verify_files(zckpt_manifest *m, bool as_json) {
    int bad = 0;
    for (int i = 0; i < m->nfiles; i++) {
        if (zckpt_verify_file(m, i) != ZINC_OK) {
            fprintf(stderr, "zinc checkpoint inspect: %s\n", zinc_last_error());
            bad++;
        }
    }
    fprintf(as_json ? stderr : stdout, "\n  verify: %d of %d file%s good\n", m->nfiles - bad, m->nfiles,
            m->nfiles == 1 ? "" : "s");
    return bad;
}

static int inspect(const inspect_opts *o) {
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1];
    zckpt_manifest m;
    if (zckpt_resolve(o->path, tagdir, sizeof tagdir, tag, sizeof tag) != ZINC_OK ||
        zckpt_manifest_read(tagdir, &m) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint inspect: %s\n", zinc_last_error());
        return 1;
    }
    if (o->json) {
        json_dumpf(m.root, stdout, JSON_INDENT(1));
        fputc('\n', stdout);
    } else {
        print_header(&m);
        print_tables(&m, o->show);
    }
    int rc = o->verify && verify_files(&m, o->json) ? 1 : 0;
    zckpt_manifest_free(&m);
    return rc;
}

static int export_cmd(const zcli_cmd *c, const export_opts *o) {
    static const zinc_dtype dtypes[] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    if (!o->path || !o->out) {
        zcli_usage_error(c, "a checkpoint path and --out FILE are required");
        usage(stderr);
        return 2;
    }
    if (o->format == 1) {
        if (o->dtype == 2)
            return zcli_usage_error(c, "--format llmc takes --dtype fp32 (version 3) or bf16 (version 5)");
        return zcli_export_llmc(o->path, o->out, o->dtype == 1 ? 5 : 3, o->vocab, o->heads, o->force);
    }
    zinc_dtype dt = dtypes[o->dtype];
    if (o->format == 2) return zcli_export_hf(o->path, o->out, dt, o->vocab, o->heads, o->force);
    if (o->vocab > 0 || o->heads > 0) return zcli_usage_error(c, "--vocab and --heads are for --format llmc and hf");
    if (zinc_export_safetensors_ex(o->path, o->out, dt, o->force ? ZINC_EXPORT_REPLACE : 0) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return 1;
    }
    fprintf(stderr, "zinc checkpoint export: wrote %s (%s)\n", o->out, zinc_dtype_name(dt));
    return 0;
}

int zcli_cmd_checkpoint(int argc, char **argv) {
    static const zcli_subs subs = {"zinc checkpoint", "inspect|export", "subcommand", true, usage};
    int rc, sub = zcli_subcommand(&subs, argc, argv, &rc);
    if (sub < 0) return rc;
    bool is_inspect = sub == 0;
    inspect_opts io = inspect_defaults;
    export_opts eo = export_defaults;
    zcli_cmd c = {.name = is_inspect ? "zinc checkpoint inspect" : "zinc checkpoint export",
                  .usage = checkpoint_usage,
                  .about = checkpoint_about,
                  .positional = "checkpoint path",
                  .tables = {is_inspect ? &inspect_table : &export_table},
                  .dst = {is_inspect ? (void *)&io : (void *)&eo},
                  .pos_dst = is_inspect ? &io.path : &eo.path};
    int pr = zcli_parse(&c, 2, argc, argv);
    if (pr) return pr == 1 ? 0 : 2;
    if (is_inspect && !io.path) {
        usage(stderr);
        return 2;
    }
    return is_inspect ? inspect(&io) : export_cmd(&c, &eo);
}
