/* The ds_config schema: one table per JSON object, each key with its C field, type, range and meaning.
 * The loader (config_load.c), the dumper (config_dump.c) and the README's key table all read these
 * tables, so a key is described once. */
#ifndef ZINC_RUNTIME_CONFIG_SCHEMA_H
#define ZINC_RUNTIME_CONFIG_SCHEMA_H

#include <stddef.h>

#include "base/config/config.h"

typedef enum {
    ZKEY_BOOL,    /* bool */
    ZKEY_INT,     /* int; a float with a fractional part is an error */
    ZKEY_I64,     /* int64_t; a float with a fractional part is an error */
    ZKEY_SIZE,    /* int64_t element/byte count; floats (5e8) accepted, rounded with a warning if fractional */
    ZKEY_F64,     /* double */
    ZKEY_ENUM,    /* int-sized enum, matched case-insensitively against `names` (index = value) */
    ZKEY_DTYPE,   /* zinc_dtype from "fp32"/"fp16"/"bf16" (and torch spellings); sets the bool at aux_off */
    ZKEY_STR,     /* char[ZCFG_PATH_MAX] */
    ZKEY_BETAS,   /* [beta1, beta2]: two doubles at off and off + sizeof(double) */
    ZKEY_NAMES,   /* a list of names from `names` (exact match), stored as the unsigned mask of their indexes */
    ZKEY_OBJECT,  /* a nested table */
    ZKEY_ALIAS,   /* another spelling of `target` in the same table; `deprecated` says whether it warns */
    ZKEY_LEGACY,  /* a deprecated key with its own translation (handled by name in config_load.c) */
    ZKEY_IGNORED, /* a DeepSpeed key zinc accepts and ignores, with a warning saying why */
    ZKEY_REFUSED  /* a DeepSpeed key zinc does not implement and that changes the math when active: error */
} zkey_kind;

typedef struct zkey_table zkey_table;

typedef struct zkey_key {
    const char *name;
    zkey_kind kind;
    size_t off;               /* offset of the field in zinc_config */
    double lo, hi;            /* inclusive range for numbers */
    const char *const *names; /* ZKEY_ENUM: value names, NULL-terminated */
    const zkey_table *sub;    /* ZKEY_OBJECT */
    const char *target;       /* ZKEY_ALIAS: canonical key; ZKEY_LEGACY: what replaces it */
    int deprecated;           /* ZKEY_ALIAS: warn when used */
    unsigned mask;            /* scheduler params: the scheduler types (1 << type) the key belongs to */
    unsigned optimizers;      /* optimizer params: the optimizer types (1 << type) that take it; 0 = all */
    size_t aux_off;           /* ZKEY_DTYPE: the bool field that records "was given"; 0 = none */
    const char *meaning;      /* one line for the README table and the dump */
    const char *status;       /* "implemented", or why not */
} zkey_key;

struct zkey_table {
    const char *path; /* "" for the top level, else "zero_optimization" etc. */
    const zkey_key *keys;
    size_t nkeys;
};

extern const zkey_table zkey_top;
extern const char *const zkey_scheduler_names[];
extern const char *const zkey_optimizer_names[];
/* The collectives comms_logger.prof_ops may name (base/comm/comm_log.h's op names; the engine maps
 * them by name and a test checks the two lists agree). */
extern const char *const zkey_comm_op_names[];
extern const zkey_table zkey_optimizer_params;

/* An optimizer's default for one of its parameters where its DeepSpeed class's differs from zcfg_defaults
 * (Adam's); the list ends with type ZOPT_COUNT. */
typedef struct zkey_optimizer_default {
    zcfg_optimizer_type type;
    const char *key; /* in optimizer.params */
    double value;
} zkey_optimizer_default;
extern const zkey_optimizer_default zkey_optimizer_defaults[];
/* Whether optimizer `type` takes optimizer.params.<k>. */
bool zkey_optimizer_takes(zcfg_optimizer_type type, const zkey_key *k);

/* Finds `name` in `t` (exact match); NULL if absent. */
const zkey_key *zkey_find(const zkey_table *t, const char *name);

/* Every table reachable from zkey_top, for "belongs in ..." suggestions. Returns the count; fills up to
 * `max` pointers. */
size_t zkey_all_tables(const zkey_table **out, size_t max);

#endif
