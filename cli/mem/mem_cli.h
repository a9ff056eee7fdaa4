/* Shared by the zinc mem command's files: the model description (mem_model.c), the options, the config
 * variants and formatting (cmd_mem.c, mem_format.c), and the measurement (mem_measure.c). */
#ifndef ZINC_CLI_MEM_CLI_H
#define ZINC_CLI_MEM_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config/config.h"
#include "runtime/mem/mem_estimate.h"
#include "zinc.h"

typedef struct mparam {
    int module;
    char name[96];
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int64_t numel;
} mparam;

typedef struct mmodel {
    mparam *p;
    int n, cap;
    char **modules;
    int nmodules, mcap;
    char desc[256];
    bool params_only; /* --params: each module one 1-D tensor */
} mmodel;

typedef struct mopts {
    bool measure;
    const char *config;
    int64_t params, largest;
    int64_t layers, width, vocab, context;
    const char *preset;
    const char *shapes;
    int64_t nodes, gpn;
    zinc_device_kind device;
    bool device_set;                          /* --device was given (measure: else the engine's automatic choice) */
    int64_t stage;                            /* -1: the config's */
    const char *offload;                      /* NULL: the config's */
    int offload_i, device_i, units_i, init_i; /* the choices as given (-1: not given) */
    bool json, csv, exact;
    const char *plot;
    int64_t steps, seed;
    bool check, verbose;
    bool init_whole;       /* measure: zinc_build with a whole-tensor init_fn, else zinc_build_ranged */
    int64_t rss_tol_pct;   /* measure --check: the real peak's growth within this % of the estimate */
    int64_t rss_slack_mib; /* ... plus this many MiB */
    bool plan;             /* zinc mem plan */
    bool paper, units_gb;  /* plan: the ZeRO paper's byte model; GB (1e9) instead of GiB */
    bool units_set;
    uint64_t gpu_mem, host_mem, nvme_bytes, act_bytes; /* plan: per GPU, per node, per node, per sample */
    int64_t max_gpus;                                  /* plan: the largest GPU count tried */
    unsigned headroom_pct;                             /* plan: kept free (ZINC_MEM_HEADROOM) */
    int64_t ranks;                                     /* plan without --gpu-mem: ranks (0: not given, 1) */
} mopts;

/* --params N without --largest-layer: modules of N / MC_PARAMS_MODULES (rounded up). */
#define MC_PARAMS_MODULES 16
/* --gpus-per-node: estimate's and measure's, and plan's. */
#define MC_GPN 1
#define MC_PLAN_GPN 8

/* zinc mem's defaults for subcommand `sub` (0 estimate, 1 measure, 2 plan). */
void mc_defaults(mopts *o, int sub);
/* Parses zinc mem's arguments (its option table, mem_options.c) into *o, filled with the subcommand's
 * defaults: 0, or the exit status (0 after --help, 2 on a usage error). */
int mc_parse_args(int argc, char **argv, mopts *o, int *status);
void mc_usage(FILE *f);

void mc_model_free(mmodel *m);
int64_t mc_model_total(const mmodel *m);
int mc_model_arrays(const mmodel *m, int64_t **numel, int **module);
int mc_build_model(const mopts *o, mmodel *m);
void mc_human(char *buf, size_t cap, uint64_t b, bool exact);
void mc_prose(char *buf, size_t cap, uint64_t b, bool exact);
const char *mc_commas(int64_t v, char *buf, size_t cap);
void mc_shuman(char *buf, size_t cap, int64_t d, bool exact);
const char *mc_offload_name(zcfg_offload_device d);
void mc_cat_label(const zest_estimate *e, int c, char *buf, size_t cap);
const char *mc_kind_title(int k);
int mc_cmd_measure(const mopts *o, mmodel *m);
int mc_cmd_estimate(const mopts *o, mmodel *m);

/* One stage x offload variant of the estimate, or why it is not valid. */
typedef struct variant {
    int stage;
    zcfg_offload_device off;
    bool valid;
    char why[160];
    zest_estimate est;
    zest_ds_estimate ds;
} variant;
/* Why zinc's figures differ from DeepSpeed's for one variant: an array of {topic, text} (mem_why.c). P
 * parameters, L the largest module, G ranks, gpn per node. */
json_t *mc_why_list(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param);
/* The same as a bulleted list on stdout. */
void mc_print_why(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param);
char *mc_config_text(json_t *base, int stage, const char *offload);
int mc_load_base(const mopts *o, json_t **base);
zinc_status mc_load_variant(json_t *base, const char *origin, int stage, const char *offload, int world, bool quiet,
                            zinc_config *cfg);
/* The same with zero_optimization.offload_param.device set to offload_param (NULL: the config's), through the
 * loader's overrides (zcfg_load_opts.sets). */
zinc_status mc_load_variant_param(json_t *base, const char *origin, int stage, const char *offload,
                                  const char *offload_param, int world, bool quiet, zinc_config *cfg);
int mc_cmd_plan(const mopts *o, mmodel *m);
double mc_paper_bytes(int stage, double psi, double n);

#endif
