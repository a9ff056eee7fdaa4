/* zinc config check FILE [--world-size N]: validates a ds_config and prints it fully resolved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: zinc config check FILE [--world-size N] [--quiet]\n"
               "\n"
               "Validates a DeepSpeed ds_config.json as zinc reads it and prints the resolved config as JSON on\n"
               "stdout: every key with its effective value, \"_defaults\" listing the keys the file leaves to\n"
               "defaults. Warnings and problems go to stderr. Exit status 0 when valid, 1 when not, 2 on usage\n"
               "errors. --world-size (default 1) resolves the batch sizes as that many ranks would.\n");
}

int zinc_cmd_config(int argc, char **argv) {
    const char *file = NULL;
    long world = 1;
    int quiet = 0;
    if (argc < 2 || strcmp(argv[1], "check")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--world-size")) {
            char *end = NULL;
            world = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || world < 1 || world > (1 << 24)) {
                fprintf(stderr, "zinc config: --world-size needs an integer in 1..16777216\n");
                return 2;
            }
            i++;
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, "zinc config: unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        usage(stderr);
        return 2;
    }
    zlog log = zlog_default();
    if (quiet) log.level = ZINC_LOG_WARN;
    zinc_config *c = malloc(sizeof *c);
    if (!c) {
        fprintf(stderr, "zinc config: out of memory\n");
        return 1;
    }
    int rc = 1;
    if (zcfg_load_file(file, (int)world, &log, c) != ZINC_OK) {
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
    free(c);
    return rc;
}
