/* zinc config check FILE [--world-size N]: validates a ds_config and prints it fully resolved. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common/commands.h"
#include "cli/common/options.h"
#include "base/config/config.h"
#include "runtime/engine/engine_internal.h"
#include "zinc.h"

typedef struct config_opts {
    const char *file;
    int64_t world, steps;
    bool quiet;
    zcli_list sets;
} config_opts;

#define O(f) offsetof(config_opts, f)
static const zcli_opt config_options[] =
    {{"--world-size", ZCLI_INT, O(world), "N", 1, 1 << 24, NULL, "resolve the batch sizes as N ranks would"},
     {"--steps", ZCLI_INT, O(steps), "N", 1, INT64_MAX / 2, NULL,
      "the run length, as zinc train --steps: fills\nscheduler.params.total_num_steps when it is \"auto\""},
     {"--set", ZCLI_LIST, O(sets), "PATH=VALUE", 0, 0, NULL,
      "fill an \"auto\" or override a value (dotted key path, JSON value);\nrepeatable, exactly as zinc train --set"},
     {"--quiet", ZCLI_FLAG, O(quiet), NULL, 0, 0, NULL, "only warnings and errors on stderr"},
     {0}};
#undef O
static const zcli_table config_table = {"options:", config_options, NULL};

static const char config_usage[] =
    "usage: zinc config check FILE [--world-size N] [--steps N] [--set PATH=VALUE ...] [--quiet]";

/* Loads and resolves the file; prints the JSON on stdout. The exit status. */
static int check(const config_opts *o) {
    zlog log = zlog_default();
    if (o->quiet) log.level = ZINC_LOG_WARN;
    zinc_config *c = malloc(sizeof *c);
    if (!c) {
        fprintf(stderr, "zinc config: out of memory\n");
        return 1;
    }
    int rc = 1;
    zcfg_load_opts lo = {.sets = o->sets.v, .run_steps = o->steps};
    /* the config's rules, then what zinc_create checks of it beyond them (the device, the monitors'
     * directories): one function for both, so a file this accepts is not refused by zinc train for them */
    if (zcfg_load_file_ex(o->file, (int)o->world, &lo, &log, c) != ZINC_OK ||
        zengine_check_run(c, ZINC_DEVICE_AUTO, true) != ZINC_OK) {
        fprintf(stderr, "%s\n", zinc_last_error());
    } else {
        char *s = zcfg_dump_json(c);
        if (s) {
            printf("%s\n", s);
            rc = 0;
        }
        free(s);
        fprintf(stderr, "%s: valid for world size %lld\n", o->file, (long long)o->world);
    }
    free(c);
    return rc;
}

static const char config_about[] =
    "Validates a DeepSpeed ds_config.json as zinc reads it and prints the resolved config as JSON on\nstdout: every "
    "key with its effective value, \"_defaults\" listing the keys the file leaves to\ndefaults, \"_filled\" the "
    "\"auto\" values filled and how. Warnings and problems go to stderr. Exit\nstatus 0 when valid, 1 when not, 2 "
    "on usage errors.";

static const config_opts config_defaults = {.world = 1};

static void usage(FILE *f) {
    config_opts o = config_defaults;
    zcli_cmd c = {.name = "zinc config",
                  .usage = config_usage,
                  .about = config_about,
                  .tables = {&config_table},
                  .dst = {&o}};
    zcli_help(&c, f);
}

int zcli_cmd_config(int argc, char **argv) {
    config_opts o = config_defaults;
    zcli_cmd c = {.name = "zinc config",
                  .usage = config_usage,
                  .about = config_about,
                  .positional = "FILE",
                  .tables = {&config_table},
                  .dst = {&o},
                  .pos_dst = &o.file};
    static const zcli_subs subs = {"zinc config", "check", NULL, false, usage};
    int rc;
    if (zcli_subcommand(&subs, argc, argv, &rc) < 0) return rc;
    int pr = zcli_parse(&c, 2, argc, argv);
    if (pr) return pr == 1 ? 0 : 2;
    if (!o.file) {
        zcli_help(&c, stderr);
        return 2;
    }
    return check(&o);
}
