/* The ds_config schema, key by key (issue 2): every schema key has a row in config_test_keys.c (coverage),
 * each row's default, valid value, "auto" and null land in the right field, and every kind of key refuses
 * wrong JSON types, out-of-range values and fractions with a message naming the key and the range. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_test.h"
#include "zt.h"

/* ------------------------------------------------------------------ coverage: every schema key has a row */

static void join_path(char *out, size_t n, const char *prefix, const char *name) {
    if (*prefix)
        snprintf(out, n, "%s.%s", prefix, name);
    else
        snprintf(out, n, "%s", name);
}

static int in_list(const char *path, int which) {
    switch (which) {
    case ZKEY_ALIAS:
        for (size_t i = 0; i < NALIASES; i++)
            if (!strcmp(aliases[i].path, path)) return 1;
        return 0;
    case ZKEY_LEGACY:
        for (size_t i = 0; i < NLEGACY; i++)
            if (!strcmp(legacy_paths[i], path)) return 1;
        return 0;
    case ZKEY_IGNORED:
        for (size_t i = 0; i < NIGNORED; i++)
            if (!strcmp(ignored[i].path, path)) return 1;
        return 0;
    case ZKEY_REFUSED:
        for (size_t i = 0; i < NREFUSED; i++)
            if (!strcmp(refused[i].path, path)) return 1;
        return 0;
    default: return find_row(path) != NULL;
    }
}

static void test_coverage(void) {
    const zkey_table *all[64];
    size_t n = zkey_all_tables(all, 64);
    ZT_CHECK(n > 10 && n <= 64, "zkey_all_tables returned %zu", n);
    int keys = 0;
    for (size_t t = 0; t < n && t < 64; t++)
        for (size_t i = 0; i < all[t]->nkeys; i++) {
            const zkey_key *k = &all[t]->keys[i];
            if (k->kind == ZKEY_OBJECT) continue;
            char path[512];
            join_path(path, sizeof path, all[t]->path, k->name);
            keys++;
            ZT_CHECK(in_list(path, k->kind), "schema key %s (kind %d) has no row in config_test_keys.c", path,
                     (int)k->kind);
        }
    /* and every row names a schema key of the right kind */
    for (size_t i = 0; i < NROWS; i++) {
        const zkey_key *k = schema_key(rows[i].path, NULL);
        ZT_CHECK(k && k->kind != ZKEY_ALIAS && k->kind != ZKEY_IGNORED && k->kind != ZKEY_REFUSED,
                 "row %s: not a schema key", rows[i].path);
        if (k)
            ZT_CHECK(k->off == rows[i].off, "%s: the schema maps it to offset %zu, the test expects %zu", rows[i].path,
                     k->off, rows[i].off);
    }
    for (size_t i = 0; i < NALIASES; i++) {
        const zkey_key *k = schema_key(aliases[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_ALIAS && k->deprecated == aliases[i].deprecated, "%s: alias row mismatch",
                 aliases[i].path);
    }
    for (size_t i = 0; i < NIGNORED; i++) {
        const zkey_key *k = schema_key(ignored[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_IGNORED, "%s: not an ignored key", ignored[i].path);
    }
    for (size_t i = 0; i < NREFUSED; i++) {
        const zkey_key *k = schema_key(refused[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_REFUSED, "%s: not a refused key", refused[i].path);
    }
    printf("schema: %zu tables, %d keys\n", n, keys);
}

/* ------------------------------------------------------------------ per-key: default, valid value, auto, null */

static void test_key_rows(void) {
    char got[256];
    for (size_t i = 0; i < NROWS; i++) {
        const key_row *r = &rows[i];
        const zkey_key *k = schema_key(r->path, NULL);
        if (!k) continue; /* reported by test_coverage */
        /* the valid value, and no warning for it */
        char *j = build(r->ctx, r->path, r->good);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, r->good, zinc_last_error());
        if (st == ZINC_OK) {
            ZT_CHECK(field_is(&cfg, k, r->want, got, sizeof got), "%s = %s: got %s, want %s", r->path, r->good, got,
                     r->want);
            ZT_CHECK(zcfg_given(&cfg, r->path), "%s: not recorded as given", r->path);
            ZT_CHECK(nwarn() == 0, "%s = %s: unexpected warning %s", r->path, r->good, cap.n ? cap.msg[0] : "");
        }
        free(j);
        if (r->flags & REQUIRED) continue;
        /* absent: the default, recorded as not given */
        j = build(r->ctx, NULL, NULL);
        st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s default: %s", r->path, zinc_last_error());
        if (st == ZINC_OK) {
            ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s default: got %s, want %s", r->path, got, r->def);
            if (strcmp(r->path, "train_batch_size"))
                ZT_CHECK(!zcfg_given(&cfg, r->path), "%s: given without being written", r->path);
        }
        free(j);
        /* null: the default, silently */
        j = build(r->ctx, r->path, "null");
        if (strncmp(r->path, "train_", 5) && strncmp(r->path, "gradient_acc", 12)) {
            st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = null: %s", r->path, zinc_last_error());
            if (st == ZINC_OK)
                ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s = null: got %s, want %s", r->path, got,
                         r->def);
        }
        free(j);
        /* "auto": the default, or the Hugging Face Trainer's value for the keys it fills (those values are
         * checked in test_config_auto.c; batch sizes are derived, tested below); one WARN naming the key and
         * the --set that chooses it */
        if (strncmp(r->path, "train_", 5) && strncmp(r->path, "gradient_acc", 12)) {
            static const char *const hf[] = {"gradient_clipping",
                                             "optimizer.params.lr",
                                             "optimizer.params.betas",
                                             "optimizer.params.eps",
                                             "scheduler.params.warmup_max_lr",
                                             "scheduler.params.warmup_num_steps"};
            bool by_hf = false;
            for (size_t h = 0; h < sizeof hf / sizeof hf[0]; h++) by_hf |= !strcmp(r->path, hf[h]);
            j = build(r->ctx, r->path, "\"auto\"");
            st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = \"auto\": %s", r->path, zinc_last_error());
            if (st == ZINC_OK) {
                if (!by_hf)
                    ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s = auto: got %s, want %s", r->path, got,
                             r->def);
                char flag[600];
                snprintf(flag, sizeof flag, "--set %s=", r->path);
                ZT_CHECK(logged(ZINC_LOG_WARN, r->path, flag) == 1, "%s = auto: not one WARN naming it", r->path);
                ZT_CHECK(strstr(cfg.filled, r->path) != NULL, "%s = auto: not in _filled", r->path);
            }
            free(j);
        }
    }
}

/* ------------------------------------------------------------------ per-kind invalid values, from the schema */

static void expect_bad(const key_row *r, const char *value, const char *n1, const char *n2) {
    char *j = build(r->ctx, r->path, value);
    zinc_status st = load(j);
    const char *m = zinc_last_error();
    ZT_CHECK(st == ZINC_ERR_CONFIG, "%s = %s: accepted (%s)", r->path, value, zinc_status_name(st));
    if (st == ZINC_ERR_CONFIG) {
        /* every error names the file, the JSON path, the value and what is allowed */
        char pathneedle[600];
        snprintf(pathneedle, sizeof pathneedle, "t.json: %s", r->path);
        ZT_CHECK(strstr(m, pathneedle) != NULL, "%s = %s: message lacks the path: %s", r->path, value, m);
        ZT_CHECK(!n1 || strstr(m, n1), "%s = %s: message lacks \"%s\": %s", r->path, value, n1, m);
        ZT_CHECK(!n2 || strstr(m, n2), "%s = %s: message lacks \"%s\": %s", r->path, value, n2, m);
        ZT_CHECK(strstr(m, "(1 problem)") != NULL, "%s = %s: one mistake, several problems: %s", r->path, value, m);
    }
    free(j);
}

static void test_bad_values(void) {
    char v[64], shown[96];
    for (size_t i = 0; i < NROWS; i++) {
        const key_row *r = &rows[i];
        const zkey_key *k = schema_key(r->path, NULL);
        if (!k) continue;
        expect_bad(r, "{\"x\": 1}", "{\"x\":1}", NULL); /* an object where a scalar belongs */
        switch (k->kind) {
        case ZKEY_BOOL:
            expect_bad(r, "\"yes\"", "\"yes\"", "true or false");
            expect_bad(r, "1", "got 1", "true or false");
            break;
        case ZKEY_INT:
        case ZKEY_I64:
        case ZKEY_SIZE:
        case ZKEY_F64: {
            expect_bad(r, "\"ten\"", "\"ten\"", "expected a number");
            expect_bad(r, "true", "got true", "expected a number");
            expect_bad(r, "[1]", "[1]", "expected a number");
            double below = floor(k->lo) == k->lo ? k->lo - 1 : floor(k->lo);
            snprintf(v, sizeof v, "%.0f", below);
            snprintf(shown, sizeof shown, "%s is out of range", v);
            expect_bad(r, v, shown, "allowed");
            if (k->hi < 1e15) {
                double above = floor(k->hi) + 1;
                snprintf(v, sizeof v, "%.0f", above);
                snprintf(shown, sizeof shown, "%s is out of range", v);
                expect_bad(r, v, shown, "allowed");
            } else {
                expect_bad(r, "1e300", "out of range", "allowed");
            }
            if (k->kind == ZKEY_INT || k->kind == ZKEY_I64) {
                snprintf(v, sizeof v, "%.1f", k->lo + 0.5);
                expect_bad(r, v, v, "whole number");
            }
            break;
        }
        case ZKEY_ENUM: {
            char first[64];
            snprintf(first, sizeof first, "\"%s\"", k->names[0]);
            expect_bad(r, "\"bogus\"", "\"bogus\" is not one of", first);
            expect_bad(r, "3", "3 is not one of", first);
            break;
        }
        case ZKEY_DTYPE:
            expect_bad(r, "\"int8\"", "\"int8\" is not a dtype", "\"bf16\"");
            expect_bad(r, "16", "16 is not a dtype", "\"fp16\"");
            break;
        case ZKEY_STR:
            expect_bad(r, "5", "got 5", "expected a string");
            expect_bad(r, "false", "got false", "expected a string");
            break;
        case ZKEY_BETAS:
            expect_bad(r, "0.9", "got 0.9", "expected [beta1, beta2]");
            expect_bad(r, "[0.9]", "got [0.9]", "expected [beta1, beta2]");
            expect_bad(r, "[0.9, 0.99, 0.999]", "0.999]", "expected [beta1, beta2]");
            expect_bad(r, "[0.9, 1.5]", "betas[1]", "out of range");
            expect_bad(r, "[-0.1, 0.9]", "betas[0]", "out of range");
            expect_bad(r, "[0.9, \"x\"]", "\"x\"", "expected a number");
            break;
        case ZKEY_NAMES: {
            /* a list of names; an unknown one names its index and lists the valid names */
            char first[64], idx[600];
            snprintf(first, sizeof first, "\"%s\"", k->names[0]);
            snprintf(idx, sizeof idx, "%s[1]", r->path);
            expect_bad(r, "\"all_reduce\"", "expected a list", first);
            expect_bad(r, "[\"all_reduce\", \"reduce\"]", idx, "\"reduce\" is not an op");
            expect_bad(r, "[\"all_reduce\", 3]", idx, first);
            break;
        }
        default: break;
        }
        /* sizes accept floats and round them with a warning; other integers refuse fractions */
        if (k->kind == ZKEY_SIZE && k->lo + 0.4 <= k->hi) {
            snprintf(v, sizeof v, "%.1f", k->lo + 0.4);
            char *j = build(r->ctx, r->path, v);
            zinc_status st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, v, zinc_last_error());
            if (st == ZINC_OK) {
                char want[64], got[128];
                snprintf(want, sizeof want, "%.0f", k->lo);
                ZT_CHECK(field_is(&cfg, k, want, got, sizeof got), "%s = %s: got %s, want %s", r->path, v, got, want);
                ZT_CHECK(logged(ZINC_LOG_WARN, r->path, "rounded to") == 1, "%s = %s: no rounding warning", r->path, v);
            }
            free(j);
        }
    }
    /* objects given as scalars */
    const char *objs[] = {"optimizer",
                          "optimizer.params",
                          "scheduler",
                          "scheduler.params",
                          "fp16",
                          "bf16",
                          "zero_optimization.offload_optimizer",
                          "zero_optimization.offload_param",
                          "aio",
                          "checkpoint",
                          "checkpoint.parallel_write",
                          "data_types",
                          "zinc"};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        key_row r = {objs[i], 0, !strcmp(objs[i], "scheduler.params") ? SCHED_WLR : NULL, NULL, NULL, NULL, 0};
        expect_bad(&r, "5", "got 5", "expected an object");
        expect_bad(&r, "[{}]", "got [{}]", "expected an object");
        expect_bad(&r, "\"x\"", "got \"x\"", "expected an object");
    }
}

int main(void) {
    zt_name = "test_config_schema";
    test_coverage();
    test_key_rows();
    test_bad_values();
    if (zt_failed) dump_log();
    return zt_finish();
}
