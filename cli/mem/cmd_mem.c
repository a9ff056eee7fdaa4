/* zinc mem estimate | measure | plan: per-rank memory by category and memory kind, predicted by the estimator
 * (runtime/mem/mem_estimate.h) and measured from the engine's accounting, with DeepSpeed's own estimators
 * beside them (docs/mem.md). This file: the subcommands' dispatch and the config variants they all load;
 * the estimate is mem_estimate.c (with mem_why.c), measure mem_measure.c, plan mem_plan.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mem/mem_whole.h"
#include "cli/common/commands.h"
#include "cli/common/options.h"
#include "cli/mem/mem_cli.h"

/* ---------------------------------------------------------------- configs */

/* The config as JSON text with the overrides applied: a micro-batch of 1 (batch sizes do not change
 * memory, and any rank count fits), the stage and the optimizer offload, offload_param dropped below
 * stage 3, and an NVMe path placeholder where none is written. */
char *mc_config_text(json_t *base, int stage, const char *offload) {
    json_t *j = json_deep_copy(base);
    if (!j) return NULL;
    json_t *gas = json_object_get(j, "gradient_accumulation_steps");
    json_int_t g = json_is_integer(gas) ? json_integer_value(gas)
                   : json_is_real(gas)  ? (json_int_t)json_real_value(gas)
                                        : 1;
    json_object_del(j, "train_batch_size");
    json_object_set_new(j, "train_micro_batch_size_per_gpu", json_integer(1));
    json_object_set_new(j, "gradient_accumulation_steps", json_integer(g > 0 ? g : 1));
    json_t *z = json_object_get(j, "zero_optimization");
    if (!json_is_object(z)) {
        z = json_object();
        json_object_set_new(j, "zero_optimization", z);
    }
    if (stage >= 0) json_object_set_new(z, "stage", json_integer(stage));
    json_t *st = json_object_get(z, "stage");
    int eff = json_is_integer(st) ? (int)json_integer_value(st) : 0;
    if (eff < 3) json_object_del(z, "offload_param");
    if (offload) {
        json_t *oo = json_object_get(z, "offload_optimizer");
        if (!json_is_object(oo)) {
            oo = json_object();
            json_object_set_new(z, "offload_optimizer", oo);
        }
        json_object_set_new(oo, "device", json_string(offload));
        if (!strcmp(offload, "nvme") && !json_is_string(json_object_get(oo, "nvme_path")))
            json_object_set_new(oo, "nvme_path", json_string("/tmp"));
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static void log_to_stderr(void *u, zinc_log_level l, int rank, const char *msg) {
    (void)u;
    if (rank == 0) fprintf(stderr, "zinc mem: %s%s\n", l >= ZINC_LOG_WARN ? "warning: " : "", msg);
}

/* Loads a variant; quiet for the table (problems are reported for the main config only). */
zinc_status mc_load_variant(json_t *base, const char *origin, int stage, const char *offload, int world, bool quiet,
                            zinc_config *cfg) {
    return mc_load_variant_param(base, origin, stage, offload, NULL, world, quiet, cfg);
}

/* Whether the config writes zero_optimization.offload_param.nvme_path. */
static bool param_path_given(json_t *base) {
    json_t *z = json_object_get(base, "zero_optimization");
    return json_is_string(json_object_get(json_object_get(z, "offload_param"), "nvme_path"));
}

zinc_status mc_load_variant_param(json_t *base, const char *origin, int stage, const char *offload,
                                  const char *offload_param, int world, bool quiet, zinc_config *cfg) {
    char *text = mc_config_text(base, stage, offload);
    if (!text) return ZINC_ERR_NOMEM;
    zlog log = {.fn = quiet ? NULL : log_to_stderr, .level = ZINC_LOG_WARN};
    /* offload_param through the loader's own overrides (--set's), with a placeholder path where none is written */
    char dev[96];
    const char *sets[3] = {NULL, NULL, NULL};
    if (offload_param) {
        snprintf(dev, sizeof dev, "zero_optimization.offload_param.device=\"%s\"", offload_param);
        sets[0] = dev;
        if (!strcmp(offload_param, "nvme") && !param_path_given(base))
            sets[1] = "zero_optimization.offload_param.nvme_path=\"/tmp\"";
    }
    /* the schedule's length changes no byte: an "auto" total_num_steps needs no --steps here */
    zcfg_load_opts lo = {.sets = offload_param ? sets : NULL,
                         .run_steps = 1,
                         .run_steps_from = "a placeholder (the schedule length does not change memory)"};
    zinc_status st = zcfg_load_text_ex(text, origin, world, &lo, &log, cfg);
    free(text);
    return st;
}

int mc_load_base(const mopts *o, json_t **base) {
    json_error_t err;
    *base = o->config ? json_load_file(o->config, 0, &err) : json_object();
    if (!*base) {
        fprintf(stderr, "zinc mem: %s:%d:%d: %s\n", o->config, err.line, err.column, err.text);
        return -1;
    }
    if (!json_is_object(*base)) {
        fprintf(stderr, "zinc mem: %s: the ds_config must be a JSON object\n", o->config);
        json_decref(*base);
        return -1;
    }
    return 0;
}

int zcli_cmd_mem(int argc, char **argv) {
    static const zcli_subs subs = {"zinc mem", "estimate|measure|plan", NULL, false, mc_usage};
    int rc, sub = zcli_subcommand(&subs, argc, argv, &rc);
    if (sub < 0) return rc;
    if (sub == 0 && zcli_mem_whole_wanted(argc - 1, argv + 1))
        return zcli_mem_whole(argc - 1, argv + 1); /* the whole training process (mem_whole.c) */
    mopts o;
    mc_defaults(&o, sub);
    int status;
    if (mc_parse_args(argc, argv, &o, &status)) return status;
    if (o.plan && zest_headroom_read(&o.headroom_pct) != ZINC_OK) {
        fprintf(stderr, "zinc mem plan: %s\n", zinc_last_error());
        return 2;
    }
    mmodel m = {0};
    if (mc_build_model(&o, &m)) {
        mc_model_free(&m);
        return 2;
    }
    rc = o.measure ? mc_cmd_measure(&o, &m) : o.plan ? mc_cmd_plan(&o, &m) : mc_cmd_estimate(&o, &m);
    mc_model_free(&m);
    return rc;
}
