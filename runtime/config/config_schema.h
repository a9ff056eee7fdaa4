/* The ds_config schema: one table per JSON object, each key with its C field, type, range and meaning.
 * The loader (config_load.c), the dumper (config_dump.c) and the README's key table all read these
 * tables, so a key is described once. */
#ifndef ZINC_RUNTIME_CONFIG_SCHEMA_H
#define ZINC_RUNTIME_CONFIG_SCHEMA_H

#include <stddef.h>

#include "runtime/config/config.h"

typedef enum {
    ZK_BOOL,       /* bool */
    ZK_INT,        /* int; a float with a fractional part is an error */
    ZK_I64,        /* int64_t; a float with a fractional part is an error */
    ZK_SIZE,       /* int64_t element/byte count; floats (5e8) accepted, rounded with a warning if fractional */
    ZK_F64,        /* double */
    ZK_ENUM,       /* int-sized enum, matched case-insensitively against `names` (index = value) */
    ZK_DTYPE,      /* zinc_dtype from "fp32"/"fp16"/"bf16" (and torch spellings); sets the bool at aux_off */
    ZK_STR,        /* char[ZCFG_PATH_MAX] */
    ZK_BETAS,      /* [beta1, beta2]: two doubles at off and off + sizeof(double) */
    ZK_OBJECT,     /* a nested table */
    ZK_ALIAS,      /* another spelling of `target` in the same table; `deprecated` says whether it warns */
    ZK_LEGACY,     /* a deprecated key with its own translation (handled by name in config_load.c) */
    ZK_IGNORED,    /* a DeepSpeed key zinc accepts and ignores, with a warning saying why */
    ZK_REFUSED     /* a DeepSpeed key zinc does not implement and that changes the math when active: error */
} zk_kind;

typedef struct zk_table zk_table;

typedef struct zk_key {
    const char *name;
    zk_kind kind;
    size_t off;                 /* offset of the field in zinc_config */
    double lo, hi;              /* inclusive range for numbers */
    const char *const *names;   /* ZK_ENUM: value names, NULL-terminated */
    const zk_table *sub;        /* ZK_OBJECT */
    const char *target;         /* ZK_ALIAS: canonical key; ZK_LEGACY: what replaces it */
    int deprecated;             /* ZK_ALIAS: warn when used */
    unsigned mask;              /* scheduler params: the scheduler types (1 << type) the key belongs to */
    size_t aux_off;             /* ZK_DTYPE: the bool field that records "was given"; 0 = none */
    const char *meaning;        /* one line for the README table and the dump */
    const char *status;         /* "implemented", or why not */
} zk_key;

struct zk_table {
    const char *path;           /* "" for the top level, else "zero_optimization" etc. */
    const zk_key *keys;
    size_t nkeys;
};

extern const zk_table zk_top;
extern const char *const zk_scheduler_names[];
extern const char *const zk_optimizer_names[];

/* Finds `name` in `t` (exact match); NULL if absent. */
const zk_key *zk_find(const zk_table *t, const char *name);

/* Every table reachable from zk_top, for "belongs in ..." suggestions. Returns the count; fills up to
 * `max` pointers. */
size_t zk_all_tables(const zk_table **out, size_t max);

#endif
