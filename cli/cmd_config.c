/* zinc config check FILE [--world-size N]: validates a ds_config and prints it fully resolved. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "runtime/config/config.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: zinc config check FILE [--world-size N] [--steps N] [--set PATH=VALUE ...] [--quiet]\n"
               "\n"
               "Validates a DeepSpeed ds_config.json as zinc reads it and prints the resolved config as JSON on\n"
               "stdout: every key with its effective value, \"_defaults\" listing the keys the file leaves to\n"
               "defaults, \"_filled\" the \"auto\" values filled and how. Warnings and problems go to stderr. Exit\n"
               "status 0 when valid, 1 when not, 2 on usage errors.\n"
               "  --world-size N    resolve the batch sizes as N ranks would (default 1)\n"
               "  --steps N         the run length, as zinc train --steps: fills scheduler.params.total_num_steps\n"
               "                    when it is \"auto\"\n"
               "  --set PATH=VALUE  fill an \"auto\" or override a value (dotted key path, JSON value); repeatable,\n"
               "                    exactly as zinc train --set\n");
}

int zinc_cmd_config(int argc, char **argv) {
    const char *file = NULL;
    long world = 1;
    long long steps = 0;
    int quiet = 0, nsets = 0;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    if (!sets) {
        fprintf(stderr, "zinc config: out of memory\n");
        return 1;
    }
    int rc = 2;
    zinc_config *c = NULL;
    if (argc < 2 || strcmp(argv[1], "check")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            rc = 0;
            goto done;
        }
        usage(stderr);
        goto done;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--world-size")) {
            char *end = NULL;
            world = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !*argv[i + 1] || *end || world < 1 || world > (1 << 24)) {
                fprintf(stderr, "zinc config: --world-size needs an integer in 1..16777216\n");
                goto done;
            }
            i++;
        } else if (!strcmp(argv[i], "--steps")) {
            char *end = NULL;
            steps = i + 1 < argc ? strtoll(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !*argv[i + 1] || *end || steps < 1 || steps > INT64_MAX / 2) {
                fprintf(stderr, "zinc config: --steps needs an integer in 1..%lld\n", (long long)(INT64_MAX / 2));
                goto done;
            }
            i++;
        } else if (!strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) {
                fprintf(stderr,
                        "zinc config: --set needs PATH=VALUE, for example --set train_micro_batch_size_per_gpu=4\n");
                goto done;
            }
            sets[nsets++] = argv[++i];
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, "zinc config: unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            goto done;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        usage(stderr);
        goto done;
    }
    zlog log = zlog_default();
    if (quiet) log.level = ZINC_LOG_WARN;
    c = malloc(sizeof *c);
    rc = 1;
    if (!c) {
        fprintf(stderr, "zinc config: out of memory\n");
        goto done;
    }
    zcfg_load_opts lo = {.sets = sets, .run_steps = (int64_t)steps};
    if (zcfg_load_file_ex(file, (int)world, &lo, &log, c) != ZINC_OK) {
        fprintf(stderr, "%s\n", zinc_last_error());
    } else {
        char *s = zcfg_dump_json(c);
        if (s) {
            printf("%s\n", s);
            rc = 0;
        }
        free(s);
        fprintf(stderr, "%s: valid for world size %ld\n", file, world);
    }
done:
    free(c);
    free(sets);
    return rc;
}
