/* Checkpoint errors, on this run's ranks (CTest runs it with 2): a truncated, corrupted or missing shard
 * file, a damaged manifest and a checkpoint of a different model are detected on every rank with a
 * message naming the file (or the first differing parameter); tags that differ across ranks follow
 * checkpoint.tag_validation; saving inside a micro-step is refused. Rank 0 damages and repairs the
 * files between collective steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "zt.h"

static int g_rank, g_world;

static void sync_ranks(zinc_engine *e) {
    double x = 0;
    zinc_allreduce_sum(e, &x, 1); /* a barrier */
}

static unsigned char *slurp(const char *p, long *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spit(const char *p, const unsigned char *b, long n) {
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(b, 1, (size_t)n, f);
        fclose(f);
    }
}

static zinc_status load_fresh(const eu_run *r, const char *path) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = eu_create(r, &e, &m);
    if (st == ZINC_OK) st = zinc_load_checkpoint(e, path);
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}

/* Damages `file` on rank 0 (how: 't' truncate, 'f' flip a byte, 'd' delete, 'g' garbage), loads on
 * every rank, expects `code` with `needle` in the message, repairs. */
static void damaged(zinc_engine *sync, const eu_run *r, const char *dir, const char *file, char how, zinc_status code,
                    const char *needle) {
    char p[4400];
    long n = 0;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    unsigned char *orig = slurp(p, &n);
    ZT_CHECK(orig != NULL, "cannot read %s", p);
    if (!orig) return;
    sync_ranks(sync);
    if (g_rank == 0) {
        if (how == 't') ZT_CHECK(truncate(p, n / 2) == 0, "truncate %s", p);
        else if (how == 'd') ZT_CHECK(unlink(p) == 0, "unlink %s", p);
        else if (how == 'g') spit(p, (const unsigned char *)"{\"format\": \"zinc-chec", 21);
        else {
            unsigned char *c = malloc((size_t)n);
            memcpy(c, orig, (size_t)n);
            c[n - 100] ^= 0x10; /* in exp_avg_sq */
            spit(p, c, n);
            free(c);
        }
    }
    sync_ranks(sync);
    zinc_status st = load_fresh(r, dir);
    ZT_ERR(st, code, needle);
    const char *what = how == 't' ? "truncated" : how == 'd' ? "deleted" : how == 'g' ? "garbage" : "flipped";
    if (g_rank == 0) printf("%-9s %-18s -> %s: %.200s\n", what, file, zinc_status_name(st), zinc_last_error());
    sync_ranks(sync);
    if (g_rank == 0) spit(p, orig, n);
    sync_ranks(sync);
    free(orig);
}

static void tag_case(const char *policy, zinc_status want) {
    char extra[256], dir[4200], tag[32];
    snprintf(extra, sizeof extra, "\"checkpoint\": {\"tag_validation\": \"%s\"}", policy);
    eu_run r = {.stage = 1, .dtype = ZINC_FP32, .extra = extra};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    ZT_OK(mlp_train_step(m, 0, NULL, NULL));
    snprintf(dir, sizeof dir, "%s/ckpt_test/errors_tags_%s", zt_build_dir(), policy);
    snprintf(tag, sizeof tag, "t%d", g_rank);
    zinc_status st = zinc_save_checkpoint(e, dir, tag);
    if (want == ZINC_OK) {
        ZT_OK(st);
        ZT_OK(zinc_load_checkpoint(e, dir));
        char p[4300];
        snprintf(p, sizeof p, "%s/t0/manifest.json", dir);
        ZT_CHECK(access(p, R_OK) == 0, "tag_validation %s: rank 0's tag t0 was not used", policy);
    } else {
        ZT_ERR(st, want, "differs across ranks");
    }
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "checkpoint_errors";
    eu_run r = {.stage = 2, .dtype = ZINC_BF16};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return zt_finish();
    g_rank = zinc_rank(e);
    g_world = zinc_world_size(e);
    char dir[4200], tagdir[4300];
    snprintf(dir, sizeof dir, "%s/ckpt_test/errors_np%d", zt_build_dir(), g_world);
    snprintf(tagdir, sizeof tagdir, "%s/step2", dir);

    /* Saving inside a micro-step is refused (on every rank). */
    ZT_OK(zinc_module_enter(e, 0, ZINC_FORWARD));
    ZT_ERR(zinc_save_checkpoint(e, dir, NULL), ZINC_ERR_STATE, "between");
    ZT_OK(zinc_module_exit(e, 0, ZINC_FORWARD));
    ZT_ERR(zinc_save_checkpoint(e, dir, "a/b"), ZINC_ERR_INVALID_ARG, "not allowed");

    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, dir, NULL));
    ZT_OK(load_fresh(&r, dir));

    const char *last = g_world > 1 ? "rank00001.zshard" : "rank00000.zshard";
    damaged(e, &r, tagdir, last, 't', ZINC_ERR_CORRUPT, last);
    damaged(e, &r, tagdir, "rank00000.zshard", 'f', ZINC_ERR_CORRUPT, "rank00000.zshard is corrupted");
    damaged(e, &r, tagdir, last, 'd', ZINC_ERR_IO, last);
    damaged(e, &r, tagdir, "manifest.json", 'g', ZINC_ERR_CORRUPT, "manifest.json");
    ZT_OK(load_fresh(&r, dir)); /* repaired */

    /* A path that is not a checkpoint. */
    ZT_ERR(load_fresh(&r, "/nonexistent/ckpt"), ZINC_ERR_IO, "/nonexistent/ckpt");

    /* A checkpoint of a different model: the first differing parameter is named. */
    {
        zinc_engine *e2 = NULL;
        mlp_model *m2 = NULL;
        char cfg[4096];
        eu_config(&r, cfg, sizeof cfg);
        zinc_options o = zinc_default_options();
        o.config_json = cfg;
        o.device = ZINC_DEVICE_CPU;
        o.log_level = ZINC_LOG_ERROR;
        o.cpu_threads = 1;
        mlp_config mc = eu_model();
        mc.hidden += 16;
        ZT_OK(zinc_create(&o, &e2));
        if (e2) ZT_OK(mlp_create(e2, &mc, &m2));
        if (m2) {
            zinc_status st = zinc_load_checkpoint(e2, dir);
            ZT_ERR(st, ZINC_ERR_CORRUPT, "parameter 0 is \"fc1.weight\" [48, 16] in the checkpoint but \"fc1.weight\" "
                                         "[64, 16] in this model");
            if (g_rank == 0) printf("other model -> %.200s\n", zinc_last_error());
        }
        mlp_destroy(m2);
        zinc_destroy(e2);
    }
    mlp_destroy(m);
    zinc_destroy(e);

    if (g_world > 1) {
        tag_case("Fail", ZINC_ERR_INVALID_ARG);
        tag_case("Warn", ZINC_OK);
        tag_case("Ignore", ZINC_OK);
    }

    /* Node-local storage: on one node the first rank of the node writes the manifest. */
    {
        eu_run rl = {.stage = 3, .dtype = ZINC_FP32, .extra = "\"checkpoint\": {\"use_node_local_storage\": true}"};
        char d2[4200];
        snprintf(d2, sizeof d2, "%s/ckpt_test/errors_nodelocal_np%d", zt_build_dir(), g_world);
        ZT_OK(eu_create(&rl, &e, &m));
        if (e) {
            ZT_OK(mlp_train_step(m, 0, NULL, NULL));
            ZT_OK(zinc_save_checkpoint(e, d2, "nl"));
            ZT_OK(zinc_load_checkpoint(e, d2));
            ZT_CHECK(zinc_step_count(e) == 1, "node-local checkpoint at step %lld", (long long)zinc_step_count(e));
        }
        mlp_destroy(m);
        zinc_destroy(e);
    }
    return zt_finish();
}
