/* Shared by the ds_config loader tests (tests/test_config_*.c): loading with the log captured, checking
 * error messages, building JSON around one key, and the key table (config_test_keys.c) that says, for every
 * schema key, where it lands, a valid value and its default. */
#ifndef ZINC_TESTS_CONFIG_TEST_H
#define ZINC_TESTS_CONFIG_TEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/config/config.h"
#include "base/config/config_schema.h"

#include "zt.h"

typedef zt_logcap logcap;

/* The log of the last load and the config it produced. */
extern logcap cap;
extern zinc_config cfg;

zinc_status load_w(const char *json, int world);
zinc_status load(const char *json);
/* Log lines at exactly `lv` containing every non-NULL needle. */
int logged(zinc_log_level lv, const char *a, const char *b);
int nwarn(void);
void dump_log(void);
/* Checks the last error contains every needle (NULL-terminated list). */
void check_msg(const char *file, int line, zinc_status st, zinc_status want, const char *const *needles);
#define EXPECT_ERR(json, ...)                                                                                          \
    check_msg(__FILE__, __LINE__, load(json), ZINC_ERR_CONFIG, (const char *[]){__VA_ARGS__, NULL})
#define EXPECT_ERR_W(json, w, ...)                                                                                     \
    check_msg(__FILE__, __LINE__, load_w(json, w), ZINC_ERR_CONFIG, (const char *[]){__VA_ARGS__, NULL})
#define EXPECT_OK(json) ZT_OK(load(json))

/* Sets `path` (dotted) in `root` to `v` (stolen), creating objects on the way. */
void jset(json_t *root, const char *path, json_t *v);
json_t *jparse(const char *text);
/* {"train_batch_size": 8} + ctx (merged) + path = value (value NULL: key absent). malloc'd text. */
char *build(const char *ctx, const char *path, const char *value);
/* The schema key at a canonical dotted path. */
const zkey_key *schema_key(const char *path, const zkey_table **tab);
/* The value of key k in c, as JSON (independent of config_dump.c). */
json_t *field_json(const zinc_config *c, const zkey_key *k);
/* Whether the field equals the expected JSON text (numbers compared exactly, enum names case-insensitively). */
bool field_is(const zinc_config *c, const zkey_key *k, const char *want_text, char *got_out, size_t n);

/* ------------------------------------------------------------------ the key table (config_test_keys.c) */

#define F(field) offsetof(zinc_config, field)
#define NOFF ((size_t)-1)
#define REQUIRED 1 /* the key is required in its context: no default / "auto" / null check */
#define SCHED_WLR "{\"scheduler\":{\"type\":\"WarmupLR\",\"params\":{}}}"
#define SCHED_WDL "{\"scheduler\":{\"type\":\"WarmupDecayLR\",\"params\":{\"total_num_steps\":5000}}}"
#define SCHED_WCL "{\"scheduler\":{\"type\":\"WarmupCosineLR\",\"params\":{\"total_num_steps\":5000}}}"
#define SCHED_LRT "{\"scheduler\":{\"type\":\"LRRangeTest\",\"params\":{}}}"
#define SCHED_OC "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_min_lr\":0.001,\"cycle_max_lr\":0.01}}}"
#define STAGE2 "{\"zero_optimization\":{\"stage\":2}}"
#define STAGE3 "{\"zero_optimization\":{\"stage\":3}}"
#define OPT_LAMB "{\"optimizer\":{\"type\":\"Lamb\"}}"
#define OPT_SGD "{\"optimizer\":{\"type\":\"SGD\"}}"
#define OPT_MUON "{\"optimizer\":{\"type\":\"Muon\"}}"
#define OPT_SGD_MOMENTUM "{\"optimizer\":{\"type\":\"SGD\",\"params\":{\"momentum\":0.9}}}"

typedef struct {
    const char *path; /* canonical JSON path */
    size_t off;       /* the field it must set */
    const char *ctx;  /* JSON merged into {"train_batch_size": 8} */
    const char *good; /* a valid value */
    const char *want; /* its effect, as JSON */
    const char *def;  /* the value when the key is absent (DeepSpeed's default unless noted) */
    int flags;
} key_row;
extern const key_row rows[];
extern const size_t n_rows;
#define NROWS n_rows

/* Other spellings: alias path -> canonical path, whether it warns. */
typedef struct {
    const char *path, *canon, *ctx, *value, *want;
    int deprecated;
} alias_row;
extern const alias_row aliases[];
extern const size_t n_aliases;
#define NALIASES n_aliases

/* Keys with their own translation (ZKEY_LEGACY). */
extern const char *const legacy_paths[];
extern const size_t n_legacy_paths;
#define NLEGACY n_legacy_paths

/* Accepted-and-ignored (warn when active) and refused (error when active) keys: an active and an inactive value. */
typedef struct {
    const char *path, *ctx, *on, *off;
} onoff_row;
extern const onoff_row ignored[], refused[];
extern const size_t n_ignored, n_refused;
#define NIGNORED n_ignored
#define NREFUSED n_refused

const key_row *find_row(const char *path);

#endif
