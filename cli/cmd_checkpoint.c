/* zinc checkpoint inspect|export: look into a checkpoint and consolidate it into a safetensors file, in
 * one process, reading the shard files directly (no MPI, no engine). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "cli/commands.h"
#include "cli/gpt2_cli.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: zinc checkpoint inspect DIR[/TAG] [--verify] [--json] [--params N]\n"
               "       zinc checkpoint export DIR[/TAG] --out FILE.safetensors [--dtype fp32|bf16|fp16] [--force]\n"
               "       zinc checkpoint export --format llmc DIR[/TAG] --out FILE.bin [--dtype fp32|bf16] (a GPT-2)\n"
               "\n"
               "DIR is a checkpoint directory (its `latest` names the tag) and DIR/TAG one checkpoint, as written by\n"
               "zinc train --save or zinc_save_checkpoint (docs/checkpoints.md).\n"
               "\n"
               "inspect   prints the step, the saving run's ranks, stage and dtypes, loss scale, LR position, the\n"
               "          parameter table (the first N, default 20; --params 0 for all) and the shard files.\n"
               "          --verify reads every file and checks its size and checksums (exit 1 on a bad file).\n"
               "          --json prints manifest.json instead.\n"
               "export    writes the consolidated fp32 master weights as a safetensors file (one tensor per\n"
               "          parameter), in fp32 (default) or rounded to bf16 / fp16. An existing FILE is replaced only\n"
               "          with --force, and only when it is a regular file that is not part of the checkpoint.\n");
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

static int inspect(int argc, char **argv) {
    const char *path = NULL;
    int verify = 0, as_json = 0;
    long show = 20;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--verify"))
            verify = 1;
        else if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (!strcmp(argv[i], "--params")) {
            char *end = NULL;
            if (i + 1 >= argc) {
                fprintf(stderr, "zinc checkpoint inspect: --params needs a value\n");
                return 2;
            }
            errno = 0;
            show = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || errno || show < 0 || show > 1000000000) {
                fprintf(stderr, "zinc checkpoint inspect: --params \"%s\" is not a count in [0, 1000000000]\n",
                        argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "zinc checkpoint inspect: unknown option \"%s\"\n", argv[i]);
            return 2;
        } else if (!path)
            path = argv[i];
        else {
            fprintf(stderr, "zinc checkpoint inspect: one checkpoint path, got \"%s\" too\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char tagdir[ZCKPT_PATH_MAX], tag[ZCKPT_TAG_MAX + 1];
    zckpt_manifest m;
    if (zckpt_resolve(path, tagdir, sizeof tagdir, tag, sizeof tag) != ZINC_OK ||
        zckpt_manifest_read(tagdir, &m) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint inspect: %s\n", zinc_last_error());
        return 1;
    }
    int rc = 0;
    if (as_json) {
        json_dumpf(m.root, stdout, JSON_INDENT(1));
        fputc('\n', stdout);
    } else {
        int64_t total = 0, bytes = 0;
        for (int i = 0; i < m.nparams; i++) total += m.params[i].numel;
        for (int i = 0; i < m.nfiles; i++) bytes += m.files[i].bytes;
        printf("checkpoint %s\n", m.dir);
        printf("  tag %s, written by zinc %s, id %s\n", m.tag, m.zinc_version, m.uid);
        printf("  step %" PRId64 " (%" PRId64 " taken, %" PRId64 " skipped)\n", m.steps, m.steps_taken,
               m.steps_skipped);
        printf("  saved by %d rank%s at ZeRO stage %d; compute %s, grad %s, comm %s; master and Adam state fp32\n",
               m.world_size, m.world_size == 1 ? "" : "s", m.stage, jstr(m.root, "dtypes", "compute"),
               jstr(m.root, "dtypes", "grad"), jstr(m.root, "dtypes", "comm"));
        printf("  train_batch_size %" PRId64 "; next lr %.6g (scheduler %s)\n", m.train_batch_size,
               jnum(m.root, "lr_schedule", "next_lr"),
               jstr(json_object_get(m.root, "lr_schedule"), "scheduler", "type"));
        if (m.fp16_enabled)
            printf("  fp16 loss scale %g (%s, hysteresis %d of %d, window %" PRId64 ", last overflow at %" PRId64 ")\n",
                   m.scaler.cur_scale, m.scaler.dynamic ? "dynamic" : "static", m.scaler.cur_hysteresis,
                   m.scaler.delayed_shift, m.scaler.scale_window, m.scaler.last_overflow_iter);
        printf("  %d parameters, %" PRId64 " elements; %d shard file%s, %.2f MiB\n", m.nparams, total, m.nfiles,
               m.nfiles == 1 ? "" : "s", (double)bytes / 1048576.0);
        printf("\n  %-40s %-20s %12s %12s\n", "parameter", "shape", "numel", "flat offset");
        for (int i = 0; i < m.nparams && (show <= 0 || i < show); i++) {
            char shape[96];
            size_t k = 0;
            for (int d = 0; d < m.params[i].ndim && k < sizeof shape - 24; d++)
                k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? "x" : "", m.params[i].shape[d]);
            printf("  %-40s %-20s %12" PRId64 " %12" PRId64 "\n", m.params[i].name, shape, m.params[i].numel,
                   m.params[i].flat_offset);
        }
        if (show > 0 && m.nparams > show) printf("  ... %d more (--params 0 lists all)\n", m.nparams - (int)show);
        printf("\n  %-20s %6s %14s %14s %14s %10s\n", "file", "rank", "flat lo", "flat hi", "bytes", "crc32c");
        for (int i = 0; i < m.nfiles; i++) {
            const zckpt_file *f = &m.files[i];
            printf("  %-20s %6d %14" PRId64 " %14" PRId64 " %14" PRId64 "   %08" PRIx32 "\n", f->name, f->rank,
                   f->flat_lo, f->flat_hi, f->bytes, f->crc);
        }
    }
    if (verify) {
        int bad = 0;
        for (int i = 0; i < m.nfiles; i++) {
            if (zckpt_verify_file(&m, i) != ZINC_OK) {
                fprintf(stderr, "zinc checkpoint inspect: %s\n", zinc_last_error());
                bad++;
            }
        }
        fprintf(as_json ? stderr : stdout, "\n  verify: %d of %d file%s good\n", m.nfiles - bad, m.nfiles,
                m.nfiles == 1 ? "" : "s");
        if (bad) rc = 1;
    }
    zckpt_manifest_free(&m);
    return rc;
}

static int export_cmd(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    zinc_dtype dt = ZINC_FP32;
    unsigned flags = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "--out") || !strcmp(a, "--dtype")) && !v) {
            fprintf(stderr, "zinc checkpoint export: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--force"))
            flags |= ZINC_EXPORT_REPLACE;
        else if (!strcmp(a, "--out") && v)
            out = v, i++;
        else if (!strcmp(a, "--dtype") && v) {
            if (!strcmp(v, "fp32"))
                dt = ZINC_FP32;
            else if (!strcmp(v, "bf16"))
                dt = ZINC_BF16;
            else if (!strcmp(v, "fp16"))
                dt = ZINC_FP16;
            else {
                fprintf(stderr, "zinc checkpoint export: --dtype must be fp32, bf16 or fp16, got \"%s\"\n", v);
                return 2;
            }
            i++;
        } else if (a[0] == '-') {
            fprintf(stderr, "zinc checkpoint export: unknown option \"%s\" (or it lacks its value)\n", a);
            return 2;
        } else if (!path)
            path = a;
        else {
            fprintf(stderr, "zinc checkpoint export: one checkpoint path, got \"%s\" too\n", a);
            return 2;
        }
    }
    if (!path || !out) {
        fprintf(stderr, "zinc checkpoint export: a checkpoint path and --out FILE are required\n");
        usage(stderr);
        return 2;
    }
    if (zinc_export_safetensors_ex(path, out, dt, flags) != ZINC_OK) {
        fprintf(stderr, "zinc checkpoint export: %s\n", zinc_last_error());
        return 1;
    }
    fprintf(stderr, "zinc checkpoint export: wrote %s (%s)\n", out, zinc_dtype_name(dt));
    return 0;
}

int zinc_cmd_checkpoint(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "inspect")) return inspect(argc - 2, argv + 2);
    if (!strcmp(argv[1], "export")) {
        for (int i = 2; i + 1 < argc; i++) /* --format llmc: an llm.c GPT-2 model file (cmd_export_llmc.c) */
            if (!strcmp(argv[i], "--format") && !strcmp(argv[i + 1], "llmc"))
                return zinc_cmd_export_llmc(argc - 2, argv + 2);
        return export_cmd(argc - 2, argv + 2);
    }
    fprintf(stderr, "zinc checkpoint: unknown subcommand \"%s\" (inspect or export)\n", argv[1]);
    usage(stderr);
    return 2;
}
