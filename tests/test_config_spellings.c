/* The ds_config loader's other spellings (issue 2): aliases and deprecated names land on their canonical
 * key (with a warning where DeepSpeed deprecates them), accepted-but-ignored keys warn when active, refused
 * keys fail when active, unknown keys are refused with a suggestion, duplicate keys are refused. */
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

/* ------------------------------------------------------------------ aliases, deprecated and legacy spellings */

static void test_aliases(void) {
    char got[128];
    for (size_t i = 0; i < NALIASES; i++) {
        const alias_row *a = &aliases[i];
        const zkey_key *k = schema_key(a->canon, NULL);
        char *j = build(a->ctx, a->path, a->value);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s: %s", a->path, zinc_last_error());
        if (st == ZINC_OK && k) {
            ZT_CHECK(field_is(&cfg, k, a->want, got, sizeof got), "%s: %s got %s", a->path, a->canon, got);
            const char *canon_name = strrchr(a->canon, '.') ? strrchr(a->canon, '.') + 1 : a->canon;
            if (!strcmp(a->path, "bfloat16")) canon_name = "bf16";
            if (a->deprecated)
                ZT_CHECK(logged(ZINC_LOG_WARN, a->path, canon_name) == 1, "%s: no deprecation warning naming %s",
                         a->path, canon_name);
            else
                ZT_CHECK(nwarn() == 0, "%s: a plain alias warned", a->path);
        }
        free(j);
        /* alias and canonical key together: one setting given twice, in either order */
        if (strcmp(a->path, "bfloat16")) {
            const char *an = strrchr(a->path, '.') + 1, *cn = strrchr(a->canon, '.') + 1;
            char parent[256];
            snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(a->path, '.') - a->path), a->path);
            char text[1024];
            snprintf(text, sizeof text,
                     "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}, \"%s\": "
                     "{\"%s\": %s, \"%s\": %s}}",
                     parent, an, a->value, cn, a->value);
            if (!strcmp(parent, "zero_optimization"))
                snprintf(text, sizeof text,
                         "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"%s\": %s, "
                         "\"%s\": %s}}",
                         an, a->value, cn, a->value);
            EXPECT_ERR(text, an, cn, "keep one");
            if (!strcmp(parent, "zero_optimization"))
                snprintf(text, sizeof text,
                         "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"%s\": %s, "
                         "\"%s\": %s}}",
                         cn, a->value, an, a->value);
            else
                snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"%s\": {\"%s\": %s, \"%s\": %s}}", parent, cn,
                         a->value, an, a->value);
            EXPECT_ERR(text, an, cn, "keep one");
        }
    }
    /* bf16 and its legacy spelling bfloat16 together, in either order */
    EXPECT_ERR("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": false}}",
               "bfloat16", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"bfloat16\": {\"enabled\": true}, \"bf16\": {\"immediate_grad_update\": "
               "true}}",
               "bf16", "keep one");

    /* legacy ZeRO offload flags */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_CPU, "cpu_offload: device %d",
             cfg.zero.offload_optimizer.device);
    ZT_CHECK(logged(ZINC_LOG_WARN, "zero_optimization.cpu_offload", "offload_optimizer") == 1,
             "cpu_offload: no warning naming offload_optimizer");
    ZT_CHECK(zcfg_given(&cfg, "zero_optimization.offload_optimizer.device"), "cpu_offload: device not given");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": false}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_NONE, "cpu_offload false: device %d",
             cfg.zero.offload_optimizer.device);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"cpu_offload_param\": true}}");
    ZT_CHECK(cfg.zero.offload_param.device == ZOFFLOAD_CPU, "cpu_offload_param: device %d",
             cfg.zero.offload_param.device);
    ZT_CHECK(logged(ZINC_LOG_WARN, "cpu_offload_param", "offload_param") == 1, "cpu_offload_param: no warning");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"cpu_offload_use_pin_memory\": true}}");
    ZT_CHECK(cfg.zero.offload_optimizer.pin_memory && cfg.zero.offload_param.pin_memory, "cpu_offload_use_pin_memory");
    ZT_CHECK(logged(ZINC_LOG_WARN, "cpu_offload_use_pin_memory", "pin_memory") == 1, "pin memory: no warning");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": null}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": 1}}",
               "zero_optimization.cpu_offload", "got 1", "true or false", "offload_optimizer");
    /* a legacy flag and the key that replaces it, in either order: conflicting settings are an error */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true, "
               "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}}}",
               "offload_optimizer.device", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, "
               "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}, \"cpu_offload\": true}}",
               "zero_optimization.cpu_offload", "offload_optimizer.device", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"pin_memory\": "
               "false}, \"cpu_offload_use_pin_memory\": true}}",
               "cpu_offload_use_pin_memory", "keep one");

    /* DeepSpeed's deprecated boolean ZeRO block: true is stage 1 */
    zinc_status st = load("{\"train_batch_size\": 8, \"zero_optimization\": true}");
    ZT_CHECK(st == ZINC_OK && cfg.zero.stage == 1, "zero_optimization: true -> stage %d: %s", cfg.zero.stage,
             zinc_last_error());
    ZT_CHECK(logged(ZINC_LOG_WARN, "zero_optimization", "stage") == 1, "boolean zero_optimization: no warning");
    st = load("{\"train_batch_size\": 8, \"zero_optimization\": false}");
    ZT_CHECK(st == ZINC_OK && cfg.zero.stage == 0, "zero_optimization: false -> stage %d", cfg.zero.stage);
}

/* ------------------------------------------------------------------ ignored and refused keys */

static void test_ignored_refused(void) {
    for (size_t i = 0; i < NIGNORED; i++) {
        const onoff_row *r = &ignored[i];
        const zkey_key *k = schema_key(r->path, NULL);
        char *j = build(r->ctx, r->path, r->on);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, r->on, zinc_last_error());
        ZT_CHECK(logged(ZINC_LOG_WARN, r->path, k ? k->status : "ignored") == 1, "%s = %s: no warning saying why",
                 r->path, r->on);
        free(j);
        if (r->off) {
            j = build(r->ctx, r->path, r->off);
            ZT_OK(load(j));
            ZT_CHECK(nwarn() == 0, "%s = %s (off): warned", r->path, r->off);
            free(j);
        }
    }
    for (size_t i = 0; i < NREFUSED; i++) {
        const onoff_row *r = &refused[i];
        char *j = build(r->ctx, r->path, r->on);
        zinc_status st = load(j);
        const char *m = zinc_last_error();
        ZT_CHECK(st == ZINC_ERR_CONFIG, "%s = %s: accepted", r->path, r->on);
        if (st == ZINC_ERR_CONFIG) {
            ZT_CHECK(strstr(m, r->path) != NULL, "%s: message lacks the path: %s", r->path, m);
            ZT_CHECK(strstr(m, "does not implement") != NULL && strstr(m, "switch it off") != NULL,
                     "%s: message does not say what to do: %s", r->path, m);
        }
        free(j);
        j = build(r->ctx, r->path, r->off);
        ZT_OK(load(j));
        ZT_CHECK(nwarn() == 0, "%s = %s (off): warned", r->path, r->off);
        free(j);
    }
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"zeropp_loco_param\": {\"err_beta\": "
               "0.8}}}",
               "zero_optimization.zeropp_loco_param", "ZeRO++ LoCo");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"max_grad_norm\": 1.0}}}",
               "optimizer.params.max_grad_norm", "gradient_clipping");
    EXPECT_ERR("{\"train_batch_size\": 8, \"aio\": {\"use_gds\": true}}", "aio.use_gds", "set it to false");
}

/* ------------------------------------------------------------------ unknown keys */

static void test_unknown(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimisation\": {\"stage\": 2}}", "t.json: zero_optimisation",
               "did you mean \"zero_optimization\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpus\": 2}",
               "did you mean \"train_micro_batch_size_per_gpu\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage3_prefetch_bucket_sise\": 5}}",
               "zero_optimization.stage3_prefetch_bucket_sise", "did you mean \"stage3_prefetch_bucket_size\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enable\": true}}", "fp16.enable", "did you mean \"enabled\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"Fp16\": {\"enabled\": true}}", "did you mean \"fp16\"?");
    /* a key in the wrong place: say where it belongs (DeepSpeed issue #2721) */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"aio\": {\"block_size\": 4096}}}",
               "t.json: zero_optimization.aio", "\"aio\" belongs at the top level");
    EXPECT_ERR("{\"train_batch_size\": 8, \"lr\": 0.1}", "t.json: lr", "belongs inside \"optimizer.params\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"ratio\": 0.5}}}",
               "zero_optimization.offload_param.ratio", "belongs inside \"zero_optimization.offload_optimizer\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"stage\": 2}", "belongs inside \"zero_optimization\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 16, "
               "\"stage3_max_live_parameters\": 5}}",
               "fp16.stage3_max_live_parameters", "belongs inside \"zero_optimization\"");
    /* nothing close: at the top level a warning (DeepSpeed ignores unknown top-level keys); in a section, list
     * what is allowed */
    EXPECT_OK("{\"train_batch_size\": 8, \"completely_unrelated\": 1}");
    ZT_CHECK(logged(ZINC_LOG_WARN, "completely_unrelated", "DeepSpeed ignores unknown top-level keys") == 1,
             "unknown top-level key not warned");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"learning_rate_value\": 1}}}",
               "optimizer.params.learning_rate_value", "allowed in \"optimizer.params\" are:", "lr, betas");
    /* problems are collected: three mistakes, three lines */
    zinc_status st = load("{\"train_batch_size\": 8, \"zero_optimisation\": {}, \"fp16\": {\"enabled\": 3}, "
                          "\"steps_per_print\": -5, \"_comment\": \"a note\"}");
    const char *m = zinc_last_error();
    ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(m, "(3 problems)") && strstr(m, "zero_optimisation") &&
                 strstr(m, "fp16.enabled") && strstr(m, "steps_per_print"),
             "three problems: %s", m);
    int lines = 0;
    for (const char *p = m; (p = strstr(p, "\nt.json: ")); p++) lines++;
    ZT_CHECK(lines == 3, "three problems on %d lines: %s", lines, m);
    /* an empty key still names a path */
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"\": 1}}", "t.json: optimizer.\"\"", "unknown key");
    /* a very long key does not overflow anything */
    char *big = malloc(200000);
    strcpy(big, "{\"train_batch_size\": 8, \"fp16\": {\"");
    size_t n = strlen(big);
    memset(big + n, 'k', 100000);
    strcpy(big + n + 100000, "\": 1}}");
    EXPECT_ERR(big, "unknown key");
    free(big);
    /* many unknown keys: all reported, the message stays bounded */
    char *many = malloc(400000);
    size_t len = (size_t)sprintf(many, "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": false");
    for (int i = 0; i < 5000; i++) len += (size_t)sprintf(many + len, ", \"junk_%d\": %d", i, i);
    strcpy(many + len, "}}");
    EXPECT_ERR(many, "(5000 problems)", "junk_0");
    free(many);
}

/* ------------------------------------------------------------------ duplicates */

static void test_duplicates(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"train_batch_size\": 16}", "t.json:1:", "duplicate", "once per object");
    EXPECT_ERR("{\"train_batch_size\": 8,\n \"zero_optimization\": {\"stage\": 1,\n \"stage\": 2}}",
               "t.json:3:", "duplicate");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"fp16\": {\"enabled\": false}}", "duplicate");
}

int main(void) {
    zt_name = "test_config_spellings";
    test_aliases();
    test_ignored_refused();
    test_unknown();
    test_duplicates();
    if (zt_failed) dump_log();
    return zt_finish();
}
