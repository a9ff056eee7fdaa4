/* Shared state of the ds_config loader (config_load.c) and resolver (config_resolve.c). */
#ifndef ZINC_RUNTIME_CONFIG_INTERNAL_H
#define ZINC_RUNTIME_CONFIG_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "base/config/config.h"
#include "base/config/config_schema.h"

typedef struct zcfg_loader {
    const char *origin; /* file name for messages */
    const zlog *log;
    zinc_config *c;
    char *err; /* collected problems, one per line */
    size_t elen, ecap;
    int nerr;
    char autos[2048];      /* paths written as "auto" (after --set), as "|path|path|" */
    char bad[2048];        /* paths that had a problem, as "|path|path|": rules that span keys skip them */
    char unresolved[1024]; /* "auto" keys nothing fills, with the flag that would: reported once */
    const zcfg_load_opts *opts;
    char via[2048];             /* "canonical=spelling|" for settings given through another spelling */
    bool sched_type_bad;        /* scheduler.type was refused: its parameters are not checked against it */
    bool optimizer_refused;     /* a DeepSpeed optimizer zinc does not implement: its params are not checked */
    bool sched_params_reported; /* parameters without a scheduler type: reported once */
} zcfg_loader;

/* Records one problem ("ORIGIN: PATH: message"). */
void zcfg_problem(zcfg_loader *L, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void zcfg_mark_given(zinc_config *c, const char *path);
void zcfg_mark_auto(zcfg_loader *L, const char *path);
/* Whether `path` was written "auto" and is not filled yet. */
bool zcfg_is_auto(const zcfg_loader *L, const char *path);
/* Whether a problem was recorded at `path` or below it. */
bool zcfg_had_problem(const zcfg_loader *L, const char *path);
/* Fills the "auto" at `path` with `v` (stolen; NULL: keep the value the field holds): validates it as the file's value would be, marks it given,
 * records it for "_filled" and logs a WARN naming the key, the value and `how` (which says where the value
 * comes from and the flag that changes it). */
void zcfg_fill(zcfg_loader *L, const char *path, json_t *v, const char *how);
/* A key's schema entry from its canonical dotted path; NULL if there is none. */
const zkey_key *zcfg_lookup(const char *path);
/* Reports the "auto" keys nothing filled, now holding their resolved defaults (config_auto.c). */
void zcfg_report_default_autos(zcfg_loader *L);
/* Applies the --set overrides to the parsed file (config_override.c). */
void zcfg_apply_sets(zcfg_loader *L, json_t *root);
/* Fills every "auto" the way the Hugging Face Trainer does with its default TrainingArguments
 * (config_auto.c); the batch triad is left to zcfg_resolve. */
void zcfg_fill_autos(zcfg_loader *L);
/* A key's value as JSON (config_dump.c); NULL for kinds without one. */
json_t *zcfg_key_json(const zinc_config *c, const zkey_key *k);
bool zcfg_parse_dtype(const char *s, zinc_dtype *out);
/* The fewest significant digits (1..17) that print x so that it reads back exactly. */
int zcfg_shortest_digits(double x);

/* Derives the batch triad, dtypes and resolved defaults, and checks the rules that span keys. */
void zcfg_resolve(zcfg_loader *L);
/* The tensorboard and csv_monitor blocks (config_monitor.c): DeepSpeed's defaults, and the checks of
 * job_name and output_path. */
void zcfg_monitor_defaults(zcfg_monitor *m);
void zcfg_resolve_monitors(zcfg_loader *L);
/* zinc.deterministic_reduction's rules (config_determinism.c): what the fixed reduction tree needs. */
void zcfg_resolve_determinism(zcfg_loader *L);
/* ZeRO++'s rules (config_zeropp.c): DeepSpeed 0.19.8's constraints on qwZ, hpZ and qgZ. */
void zcfg_resolve_zeropp(zcfg_loader *L);

#endif
