/* The ds_config loader's input and output (issue 2): malformed JSON (every truncation fails cleanly, with a
 * position), config files on disk, the dump and its round trip through the loader, and a loader that never
 * prints (everything goes through the log callback). */
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

/* ------------------------------------------------------------------ malformed JSON */

static void test_malformed(void) {
    const char *full = "{\"train_batch_size\":64,\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":0.003,\"betas\":"
                       "[0.9,0.999]}},\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":\"nvme\","
                       "\"nvme_path\":\"/tmp/z\"}},\"fp16\":{\"enabled\":true}}";
    ZT_OK(load(full));
    /* every truncation fails cleanly, with a position */
    size_t len = strlen(full);
    char *buf = malloc(len + 1);
    int bad = 0;
    for (size_t i = 0; i < len; i++) {
        memcpy(buf, full, i);
        buf[i] = 0;
        zinc_status st = load(buf);
        if (st != ZINC_ERR_CONFIG || !strstr(zinc_last_error(), "not valid JSON") ||
            !strstr(zinc_last_error(), "t.json:1:"))
            bad++, fprintf(stderr, "prefix %zu: %s %s\n", i, zinc_status_name(st), zinc_last_error());
    }
    ZT_CHECK(bad == 0, "%d truncations not reported as invalid JSON", bad);
    free(buf);
    /* not an object */
    const char *notobj[] = {"[]",
                            "[{\"train_batch_size\": 8}]",
                            "8",
                            "\"x\"",
                            "null",
                            "true",
                            "",
                            "   \n\t",
                            "{} {}",
                            "{\"train_batch_size\": 8} x",
                            "{'train_batch_size': 8}",
                            "{train_batch_size: 8}",
                            "{\"train_batch_size\": 8,}",
                            "{\"train_batch_size\": 08}",
                            "{\"train_batch_size\": .5}",
                            "{\"train_batch_size\": NaN}",
                            "{\"train_batch_size\": Infinity}",
                            "\xef\xbb\xbf{}"};
    for (size_t i = 0; i < sizeof notobj / sizeof notobj[0]; i++) {
        zinc_status st = load(notobj[i]);
        ZT_CHECK(st == ZINC_ERR_CONFIG, "\"%s\" accepted", notobj[i]);
        ZT_CHECK(strstr(zinc_last_error(), "t.json") != NULL, "\"%s\": no origin: %s", notobj[i], zinc_last_error());
    }
    EXPECT_ERR("[1, 2]", "the top level must be a JSON object");
    /* comments (DeepSpeed reads ds_configs with hjson, which allows them) */
    EXPECT_OK("// a comment\n{\"train_batch_size\": 8, /* block\n comment */ \"steps_per_print\": 3 # hash\n}");
    ZT_CHECK(cfg.steps_per_print == 3, "comments: steps_per_print %lld", (long long)cfg.steps_per_print);
    EXPECT_OK(
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\", "
        "\"nvme_path\": \"/a//b/*c*/#d\"}}}");
    ZT_CHECK(!strcmp(cfg.zero.offload_param.nvme_path, "/a//b/*c*/#d"), "comment markers inside strings: %s",
             cfg.zero.offload_param.nvme_path);
    EXPECT_ERR("{\"train_batch_size\": 8 /* unterminated", "not valid JSON", "unterminated comment");
    EXPECT_ERR("{\"train_batch_size\":\n 8,\n \"x\": tru}", "t.json:3:");
    /* wrong types in nested places */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": [3]}", "zero_optimization", "expected an object");
    EXPECT_ERR("{\"train_batch_size\": \"8\"}", "train_batch_size", "\"8\"", "expected a number");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": \"true\"}}", "fp16.enabled", "\"true\"",
               "true or false");
    /* deep nesting: refused by the parser's depth limit, no stack overflow */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 64);
    size_t k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"tensorboard\": ");
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    strcpy(deep + k, "}");
    EXPECT_ERR(deep, "not valid JSON");
    k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"autotuning\": ");
    for (size_t i = 0; i < 1000; i++) k += (size_t)sprintf(deep + k, "{\"a\":");
    k += (size_t)sprintf(deep + k, "{\"enabled\": true}");
    for (size_t i = 0; i < 1000; i++) deep[k++] = '}';
    strcpy(deep + k, "}");
    ZT_OK(load(deep)); /* 1000 levels inside an ignored block: fine, and found "enabled" */
    ZT_CHECK(logged(ZINC_LOG_WARN, "autotuning", NULL) == 1, "deep autotuning: no warning");
    k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"zero_optimization\": ");
    for (size_t i = 0; i < 1000; i++) k += (size_t)sprintf(deep + k, "{\"stage\":");
    k += (size_t)sprintf(deep + k, "1");
    for (size_t i = 0; i < 1000; i++) deep[k++] = '}';
    strcpy(deep + k, "}");
    EXPECT_ERR(deep, "zero_optimization.stage", "expected a number");
    free(deep);
    /* invalid UTF-8 and bad escapes, in keys and values */
    const char *utf[] = {
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"nvme_path\": "
        "\"\xff\"}}}",
        "{\"train_batch_size\": 8, \"\xc0\xaf\": 1}",                                  /* overlong '/' */
        "{\"train_batch_size\": 8, \"aio\": {\"block_size\": 4096, \"\xe2\x82\": 1}}", /* truncated sequence */
        "{\"train_batch_size\": 8, \"x\": \"\xed\xa0\x80\"}",                          /* UTF-8-encoded surrogate */
        "{\"train_batch_size\": 8, \"x\": \"\xf4\x90\x80\x80\"}",                      /* beyond U+10FFFF */
        "{\"train_batch_size\": 8, \"x\": \"\\ud800\"}",                               /* lone surrogate escape */
        "{\"train_batch_size\": 8, \"x\": \"\\u0000\"}",                               /* NUL inside a string */
        "{\"train_batch_size\": 8, \"x\": \"\\q\"}",                                   /* unknown escape */
        "{\"train_batch_size\": 8, \"x\": \"a\tb\"}",                                  /* raw control character */
        "{\"train_batch_size\": 8, \"x\": \"abc}",                                     /* unterminated string */
    };
    for (size_t i = 0; i < sizeof utf / sizeof utf[0]; i++) {
        zinc_status st = load(utf[i]);
        ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(zinc_last_error(), "not valid JSON"), "utf case %zu: %s %s", i,
                 zinc_status_name(st), zinc_last_error());
    }
    /* a non-ASCII value in an error message is not cut inside a character */
    char text[600];
    int n = snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": \"");
    for (int i = 0; i < 40; i++) n += snprintf(text + n, sizeof text - (size_t)n, "\xc3\xa9");
    snprintf(text + n, sizeof text - (size_t)n, "\"}}");
    ZT_CHECK(load(text) == ZINC_ERR_CONFIG, "string bool accepted");
    json_error_t je;
    char quoted[4200] = "[\"";
    size_t q = 2;
    for (const char *p = zinc_last_error(); *p && q < sizeof quoted - 4; p++)
        quoted[q++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? ' ' : *p;
    strcpy(quoted + q, "\"]");
    json_t *probe = json_loads(quoted, 0, &je);
    ZT_CHECK(probe != NULL, "the message is not valid UTF-8: %s", je.text);
    json_decref(probe);
    /* NULL arguments */
    ZT_ERR(zcfg_load_text(NULL, NULL, 1, NULL, &cfg), ZINC_ERR_INVALID_ARG, NULL);
    ZT_ERR(zcfg_load_text("{}", NULL, 1, NULL, NULL), ZINC_ERR_INVALID_ARG, NULL);
    ZT_ERR(zcfg_load_text("{", NULL, 1, NULL, &cfg), ZINC_ERR_CONFIG, "<json text>");
}

/* ------------------------------------------------------------------ files */

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        abort();
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_files(void) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/test_config_tmp_%d", zt_build_dir(), (int)getpid());
    mkdir(dir, 0755);
    zlog l = {zt_logcap_fn, &cap, ZINC_LOG_DEBUG, 0};
    snprintf(path, sizeof path, "%s/ok.json", dir);
    const char *ok = "{\"train_batch_size\": 8, \"bfloat16\": {\"enabled\": true}}";
    write_file(path, ok, strlen(ok));
    cap.n = 0;
    ZT_OK(zcfg_load_file(path, 2, &l, &cfg));
    ZT_CHECK(cfg.bf16_enabled && cfg.train_micro_batch_size_per_gpu == 4 && !strcmp(cfg.source, path), "file load");
    ZT_CHECK(logged(ZINC_LOG_WARN, path, "bfloat16") == 1, "warnings name the file");
    snprintf(path, sizeof path, "%s/nul.json", dir);
    write_file(path, "{\"train_batch_size\": 8}\0 ", 25);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "NUL byte");
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char *bad = "{\n\"train_batch_size\": 8,\n\"zero_optimization\": {\"stage\": 9}}";
    write_file(path, bad, strlen(bad));
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "bad.json: zero_optimization.stage: 9 is out of range");
    snprintf(path, sizeof path, "%s/empty.json", dir);
    write_file(path, "", 0);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "empty.json");
    snprintf(path, sizeof path, "%s/missing.json", dir);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_IO, "missing.json");
    ZT_ERR(zcfg_load_file(dir, 1, &l, &cfg), ZINC_ERR_IO, "not a regular file");
    ZT_ERR(zcfg_load_file(NULL, 1, &l, &cfg), ZINC_ERR_INVALID_ARG, NULL);
    const char *names[] = {"ok.json", "nul.json", "bad.json", "empty.json"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------ the dump, and its round trip */

/* Reloads the dump (without its "_" keys) and checks every field comes back identical. */
static void roundtrip(const char *what, int world) {
    zinc_config a = cfg;
    char *s = zcfg_dump_json(&a);
    ZT_CHECK(s != NULL, "%s: dump failed", what);
    if (!s) return;
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    ZT_CHECK(root != NULL, "%s: the dump is not JSON: %s", what, je.text);
    if (!root) {
        free(s);
        return;
    }
    ZT_CHECK(json_integer_value(json_object_get(root, "_world_size")) == world, "%s: _world_size", what);
    json_t *defaults = json_object_get(root, "_defaults");
    ZT_CHECK(json_is_array(defaults), "%s: no _defaults", what);
    /* _defaults lists exactly the dumped keys the file did not write */
    size_t i;
    json_t *d;
    json_array_foreach(defaults, i, d) {
        ZT_CHECK(!zcfg_given(&a, json_string_value(d)), "%s: %s is given but listed in _defaults", what,
                 json_string_value(d));
    }
    const char *drop[] = {"_source", "_world_size", "_compute_dtype", "_defaults", "_filled"};
    for (size_t j = 0; j < 5; j++) json_object_del(root, drop[j]);
    char *again = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    zinc_status st = load_w(again, world);
    ZT_CHECK(st == ZINC_OK, "%s: the dump does not load: %s\n%s", what, zinc_last_error(), s);
    if (st == ZINC_OK) {
        const zkey_table *all[64];
        size_t nt = zkey_all_tables(all, 64);
        char g1[256], g2[256];
        for (size_t t = 0; t < nt && t < 64; t++)
            for (size_t k = 0; k < all[t]->nkeys; k++) {
                const zkey_key *key = &all[t]->keys[k];
                json_t *v1 = field_json(&a, key);
                if (!v1) continue;
                char *t1 = json_dumps(v1, JSON_ENCODE_ANY | JSON_COMPACT);
                bool same = t1 && field_is(&cfg, key, t1, g2, sizeof g2);
                snprintf(g1, sizeof g1, "%s", t1 ? t1 : "?");
                ZT_CHECK(same, "%s: %s.%s changed through the dump: %s -> %s", what, all[t]->path, key->name, g1, g2);
                free(t1);
                json_decref(v1);
            }
        ZT_CHECK(cfg.compute_dtype == a.compute_dtype && cfg.comm_dtype == a.comm_dtype &&
                     cfg.grad_accum_dtype == a.grad_accum_dtype && cfg.world_size == a.world_size,
                 "%s: resolved fields changed through the dump", what);
    }
    free(again);
    free(s);
}

static void test_dump(void) {
    ZT_OK(load_w("{\"train_batch_size\": 16, \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": 2}}", 2));
    char *s = zcfg_dump_json(&cfg);
    ZT_CHECK(s && strstr(s, "\"_defaults\"") && strstr(s, "\"optimizer.params.lr\"") &&
                 strstr(s, "\"zero_optimization.overlap_comm\""),
             "dump lacks _defaults entries: %s", s ? s : "NULL");
    ZT_CHECK(s && !strstr(s, "\"gradient_clipping\",") && !strstr(s, "\"zero_optimization.stage\""),
             "written keys listed as defaults");
    /* numbers print short where that is exact */
    ZT_CHECK(s && strstr(s, "\"lr\": 0.001") && strstr(s, "\"eps\": 1e-8") && strstr(s, "0.999"), "dump numbers: %s",
             s ? s : "");
    free(s);
    roundtrip("simple", 2);
    /* every row's valid config survives the round trip */
    for (size_t i = 0; i < NROWS; i++) {
        char *j = build(rows[i].ctx, rows[i].path, rows[i].good);
        if (load(j) == ZINC_OK) roundtrip(rows[i].path, 1);
        free(j);
    }
    /* values that need all 17 digits */
    ZT_OK(load("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"lr\": 0.1234567890123456789, \"betas\": "
               "[0.1, 0.99999999999999978]}}}"));
    roundtrip("17 digits", 1);
    ZT_OK(
        load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
             "0.0003, \"cycle_max_lr\": 0.003}}, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3, "
             "\"offload_param\": {\"device\": \"cpu\", \"nvme_path\": \"/tmp/\\\"q\\\"\"}}}"));
    roundtrip("onecycle nvme", 1);
}

/* ------------------------------------------------------------------ the library never prints */

static void test_silent(void) {
    fflush(stderr);
    fflush(stdout);
    char path[1100];
    snprintf(path, sizeof path, "%s/test_config_silent_%d.txt", zt_build_dir(), (int)getpid());
    FILE *f = fopen(path, "w+");
    if (!f) return;
    int saved_err = dup(2), saved_out = dup(1);
    dup2(fileno(f), 2);
    dup2(fileno(f), 1);
    zinc_config c;
    zcfg_load_text("{\"train_batch_size\": 8, \"bfloat16\": {}, \"wandb\": {\"enabled\": true}, \"zero_optimization\": "
                   "{\"reduce_bucket_size\": 1.5}}",
                   NULL, 1, NULL, &c);
    zcfg_load_text("{\"x\": 1}", NULL, 1, NULL, &c);
    zlog off = {0};
    zcfg_load_text("{\"train_batch_size\": 8, \"bfloat16\": {}}", NULL, 1, &off, &c);
    fflush(stderr);
    fflush(stdout);
    dup2(saved_err, 2);
    dup2(saved_out, 1);
    close(saved_err);
    close(saved_out);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    unlink(path);
    ZT_CHECK(n == 0, "the loader printed %ld bytes without a log callback", n);
}

int main(void) {
    zt_name = "test_config_input";
    test_malformed();
    test_files();
    test_dump();
    test_silent();
    if (zt_failed) dump_log();
    return zt_finish();
}
