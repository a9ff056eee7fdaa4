/* Every .json file in ds_configs/ is a valid ds_config for world sizes 1, 2 and 4: it loads without warnings, its
 * batch triad resolves by DeepSpeed's rules, what its name promises holds (zeroN_ is stage N; fp16, bf16,
 * fp32, cpu_offload, nvme), and it survives the round trip through the resolved dump. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config.h"
#include "base/config/config_schema.h"
#include "zt.h"

static zt_logcap lc = {.echo = ZINC_LOG_OFF};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Field-by-field equality through the schema (the struct has padding, so no memcmp). */
static int same_fields(const zinc_config *a, const zinc_config *b, const zkey_table *t, char *what, size_t n) {
    for (size_t i = 0; i < t->nkeys; i++) {
        const zkey_key *k = &t->keys[i];
        const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
        int eq = 1;
        switch (k->kind) {
        case ZKEY_OBJECT:
            if (!same_fields(a, b, k->sub, what, n)) return 0;
            continue;
        case ZKEY_BOOL: eq = *(const bool *)pa == *(const bool *)pb; break;
        case ZKEY_INT:
        case ZKEY_ENUM: eq = *(const int *)pa == *(const int *)pb; break;
        case ZKEY_I64:
        case ZKEY_SIZE: eq = *(const int64_t *)pa == *(const int64_t *)pb; break;
        case ZKEY_F64: eq = *(const double *)pa == *(const double *)pb; break;
        case ZKEY_BETAS: eq = !memcmp(pa, pb, 2 * sizeof(double)); break;
        case ZKEY_DTYPE: eq = *(const zinc_dtype *)pa == *(const zinc_dtype *)pb; break;
        case ZKEY_STR: eq = !strcmp(pa, pb); break;
        default: continue;
        }
        if (!eq) {
            snprintf(what, n, "%s.%s", t->path, k->name);
            return 0;
        }
    }
    return 1;
}

static void check_file(const char *dir, const char *name, int world) {
    char path[4096 + 512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    zt_logcap_clear(&lc);
    zlog log = {zt_logcap_fn, &lc, ZINC_LOG_DEBUG, 0};
    static zinc_config c, again;
    zinc_status st = zcfg_load_file(path, world, &log, &c);
    ZT_CHECK(st == ZINC_OK, "%s at world size %d: %s", name, world, zinc_last_error());
    if (st != ZINC_OK) return;
    int warnings = zt_logcap_count_from(&lc, ZINC_LOG_WARN, NULL);
    ZT_CHECK(warnings == 0, "%s at world size %d: %d warning(s), first: %s", name, world, warnings,
             zt_logcap_first(&lc, ZINC_LOG_WARN, NULL));
    ZT_CHECK(c.world_size == world && c.train_micro_batch_size_per_gpu >= 1 && c.gradient_accumulation_steps >= 1 &&
                 c.train_batch_size == c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * world,
             "%s at world size %d: batch %lld != %lld x %lld x %d", name, world, (long long)c.train_batch_size,
             (long long)c.train_micro_batch_size_per_gpu, (long long)c.gradient_accumulation_steps, world);
    /* what the file name promises */
    int stage = -1;
    if (sscanf(name, "zero%d_", &stage) == 1)
        ZT_CHECK(c.zero.stage == stage, "%s: stage %d, the name says %d", name, c.zero.stage, stage);
    if (strstr(name, "fp16")) ZT_CHECK(c.fp16.enabled && c.compute_dtype == ZINC_FP16, "%s: fp16 not enabled", name);
    if (strstr(name, "bf16")) ZT_CHECK(c.bf16_enabled && c.compute_dtype == ZINC_BF16, "%s: bf16 not enabled", name);
    if (strstr(name, "fp32")) ZT_CHECK(c.compute_dtype == ZINC_FP32, "%s: not fp32", name);
    if (strstr(name, "cpu_offload"))
        ZT_CHECK(c.zero.offload_optimizer.device == ZOFFLOAD_CPU || c.zero.offload_param.device == ZOFFLOAD_CPU,
                 "%s: no CPU offload", name);
    if (strstr(name, "nvme"))
        ZT_CHECK((c.zero.offload_optimizer.device == ZOFFLOAD_NVME && c.zero.offload_optimizer.nvme_path[0]) ||
                     (c.zero.offload_param.device == ZOFFLOAD_NVME && c.zero.offload_param.nvme_path[0]),
                 "%s: no NVMe offload with a path", name);
    if (strstr(name, "onecycle")) ZT_CHECK(c.scheduler.type == ZSCHED_ONE_CYCLE, "%s: not OneCycle", name);
    /* the resolved dump reads back to the same config */
    char *dump = zcfg_dump_json(&c);
    ZT_CHECK(dump != NULL, "%s: no dump", name);
    if (!dump) return;
    json_error_t je;
    json_t *root = json_loads(dump, 0, &je);
    ZT_CHECK(root && json_is_array(json_object_get(root, "_defaults")), "%s: dump is not JSON with _defaults: %s", name,
             je.text);
    if (root) {
        const char *drop[] = {"_source", "_world_size", "_compute_dtype", "_defaults", "_filled"};
        for (int i = 0; i < 5; i++) json_object_del(root, drop[i]);
        char *text = json_dumps(root, JSON_COMPACT);
        zt_logcap_clear(&lc);
        st = zcfg_load_text(text, name, world, &log, &again);
        ZT_CHECK(st == ZINC_OK, "%s: the dump does not load: %s", name, zinc_last_error());
        char what[600] = "";
        if (st == ZINC_OK)
            ZT_CHECK(same_fields(&c, &again, &zkey_top, what, sizeof what) && again.compute_dtype == c.compute_dtype &&
                         again.comm_dtype == c.comm_dtype && again.grad_accum_dtype == c.grad_accum_dtype,
                     "%s: %s changed through the dump", name, what[0] ? what : "a resolved dtype");
        free(text);
        json_decref(root);
    }
    free(dump);
}

int main(void) {
    zt_name = "test_config_files";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ds_configs", zt_source_dir());
    DIR *d = opendir(dir);
    ZT_CHECK(d != NULL, "cannot open %s (set ZINC_SOURCE_DIR)", dir);
    if (!d) return zt_finish();
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    /* the examples named in the README and used by the engine tests */
    ZT_CHECK(n >= 7, "only %d ds_configs in %s", n, dir);
    const char *must[] = {"zero0_fp32.json", "zero2_cpu_offload.json", "zero3_nvme_offload.json"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        int found = 0;
        for (int j = 0; j < n; j++) found |= !strcmp(names[j], must[i]);
        ZT_CHECK(found, "%s missing from ds_configs/", must[i]);
    }
    const int worlds[] = {1, 2, 4};
    for (int i = 0; i < n; i++) {
        for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) check_file(dir, names[i], worlds[w]);
        printf("%s: checked for world sizes 1, 2, 4\n", names[i]);
        free(names[i]);
    }
    return zt_finish();
}
