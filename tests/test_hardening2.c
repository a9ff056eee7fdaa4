/* Issue 23 at the public API: size products checked at registration, calls in the wrong state refused,
 * reserved checkpoint tags, the model metadata sealed in a checkpoint, non-finite parameters stopping fp16
 * runs, a loss scale beyond the limits refused at load, and the safe writer's refusals. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/safe_file.h"
#include "runtime/engine/engine_internal.h"
#include "zt.h"

static char g_root[4000];

static void path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_root, name); }

static zinc_engine *bare(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 4}";
    o.log_level = ZINC_LOG_OFF;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    return e;
}

/* 4. Products of user-given sizes: {2^32, 2^32} (signed overflow before the fix), {2^40, 2^24} (2^64 wraps to
 * 0), {2^21, 2^21, 2^21, 2^21} (2^84). */
static void registration_overflow(void) {
    zinc_engine *e = bare();
    if (!e) return;
    int m = zinc_module_add(e, "m");
    const int64_t shapes[3][4] = {{1ll << 32, 1ll << 32}, {1ll << 40, 1ll << 24}, {1 << 21, 1 << 21, 1 << 21, 1 << 21}};
    const int nd[3] = {2, 2, 4};
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        zinc_param *p = zinc_param_add(e, m, name, nd[i], shapes[i], 0);
        ZT_CHECK(!p && strstr(zinc_last_error(), "2^45"), "shape %d registered (%s)", i, zinc_last_error());
    }
    ZT_CHECK(zinc_param_add(e, m, "ok", 2, (int64_t[]){1 << 20, 1 << 20}, 0) != NULL, "a 2^40 parameter refused: %s",
             zinc_last_error());
    zinc_destroy(e);
}

static void bad_options(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 4}";
    zinc_engine *e = NULL;
    o.log_level = (zinc_log_level)99;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "log_level 99");
    o.log_level = ZINC_LOG_OFF;
    o.device = (zinc_device_kind)77;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "device 77");
    ZT_CHECK(e == NULL, "an engine came back from refused options");
}

typedef struct pf_ctx {
    zinc_engine *e;
    zinc_status st;
} pf_ctx;
static void step_inside(void *u, int64_t lo, int64_t hi) {
    pf_ctx *c = u;
    if (lo == 0 && hi > 0) c->st = zinc_step(c->e, NULL);
}

static void wrong_state(void) {
    eu_run r = {.stage = 1, .dtype = ZINC_FP32};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    ZT_CHECK(zinc_module_add(e, "late") < 0 && strstr(zinc_last_error(), "before zinc_build"),
             "zinc_module_add after build: %s", zinc_last_error());
    int64_t x = 1;
    ZT_ERR(zinc_agree_add(e, "late", &x, sizeof x), ZINC_ERR_STATE, "before zinc_build");
    /* one micro-step's gradients so that zinc_step would otherwise run */
    zinc_step_info info;
    mlp_metrics met;
    ZT_OK(mlp_train_step(m, 0, &info, &met));
    pf_ctx c = {e, ZINC_OK};
    ZT_OK(zinc_parallel_for(e, 4, step_inside, &c));
    ZT_CHECK(c.st == ZINC_ERR_STATE && strstr(zinc_last_error(), "zinc_parallel_for"),
             "zinc_step inside a zinc_parallel_for body: %s %s", zinc_status_name(c.st), zinc_last_error());
    /* a broken engine (a step or load failed part-way) refuses to hand out its weights */
    int64_t n = zinc_numel_total(e);
    float *w = malloc((size_t)n * sizeof *w);
    ZT_OK(zinc_gather_master(e, w, (size_t)n));
    zengine_mark_broken(e, "test: marked broken");
    ZT_ERR(zinc_gather_master(e, w, (size_t)n), ZINC_ERR_STATE, "refuses to go on");
    free(w);
    mlp_destroy(m);
    zinc_destroy(e);
}

static int loads(const char *dir) {
    eu_run r = {.stage = 1, .dtype = ZINC_FP32};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&r, &e, &m) != ZINC_OK) return 0;
    zinc_status st = zinc_load_checkpoint(e, dir);
    mlp_destroy(m);
    zinc_destroy(e);
    return st == ZINC_OK;
}

/* 3 and 5: reserved tags; a later save and load still work; the caller's meta sealed with the checkpoint. */
static void tags_and_meta(void) {
    char dir[4200], p[4400];
    path(dir, sizeof dir, "tags");
    eu_run r = {.stage = 1, .dtype = ZINC_FP32};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    zinc_step_info info;
    mlp_metrics met;
    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, &info, &met));
    ZT_OK(zinc_checkpoint_meta_set(e, "model.heads", 4));
    ZT_OK(zinc_checkpoint_meta_set(e, "model.heads", 6)); /* replaced */
    ZT_ERR(zinc_checkpoint_meta_set(e, "bad key", 1), ZINC_ERR_INVALID_ARG, "characters");
    ZT_OK(zinc_save_checkpoint(e, dir, "good"));
    const char *reserved[] = {"latest", "latest.tmp", "manifest.json", "zinc_gpt2.json", "x.tmp"};
    for (int i = 0; i < 5; i++) ZT_ERR(zinc_save_checkpoint(e, dir, reserved[i]), ZINC_ERR_INVALID_ARG, "reserved");
    ZT_OK(zinc_save_checkpoint(e, dir, NULL));
    ZT_CHECK(loads(dir), "the directory no longer loads after the refused tags: %s", zinc_last_error());
    int64_t v = 0;
    int found = 0;
    ZT_OK(zinc_checkpoint_meta_get(dir, "model.heads", &v, &found));
    ZT_CHECK(found == 1 && v == 6, "meta model.heads: found %d value %lld", found, (long long)v);
    ZT_OK(zinc_checkpoint_meta_get(dir, "model.vocab", &v, &found));
    ZT_CHECK(found == 0, "a key never set was found");
    /* an edit of the sealed value is refused with the rest of a damaged manifest */
    snprintf(p, sizeof p, "%s/good/manifest.json", dir);
    char *text = NULL;
    size_t len = 0;
    ZT_OK(zckpt_read_small(p, &text, &len));
    char *at = text ? strstr(text, "\"model.heads\": 6") : NULL;
    ZT_CHECK(at != NULL, "the manifest does not hold the meta value");
    if (at) {
        at[strlen("\"model.heads\": ")] = '4';
        FILE *f = fopen(p, "wb");
        fwrite(text, 1, len, f);
        fclose(f);
        char good[4400];
        snprintf(good, sizeof good, "%s/good", dir);
        ZT_ERR(zinc_checkpoint_meta_get(good, "model.heads", &v, &found), ZINC_ERR_CORRUPT, NULL);
    }
    free(text);
    /* 7. `latest` a directory: named as such */
    char lat[4400], d2[4300];
    path(d2, sizeof d2, "latest_dir");
    ZT_OK(zinc_save_checkpoint(e, d2, NULL));
    snprintf(lat, sizeof lat, "%s/latest", d2);
    unlink(lat);
    mkdir(lat, 0755);
    ZT_ERR(zinc_load_checkpoint(e, d2), ZINC_ERR_CORRUPT, "is a directory");
    mlp_destroy(m);
    zinc_destroy(e);
}

/* 6. fp16: an update that makes a parameter non-finite stops the run (it used to skip every later step). */
static void fp16_nonfinite_params(void) {
    eu_run r = {.stage = 2,
                .dtype = ZINC_FP16,
                .optimizer = "{\"type\": \"AdamW\", \"params\": {\"lr\": 1000, \"weight_decay\": 1000}}"};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    zinc_step_info info;
    mlp_metrics met;
    zinc_status st = ZINC_OK;
    for (int s = 0; s < 4 && st == ZINC_OK; s++) st = mlp_train_step(m, s, &info, &met);
    ZT_CHECK(st == ZINC_ERR_NONFINITE && strstr(zinc_last_error(), "non-finite"),
             "fp16 with lr x weight_decay 1e6 (weights beyond 65504): %s %s", zinc_status_name(st), zinc_last_error());
    mlp_destroy(m);
    zinc_destroy(e);
}

/* 6. A manifest whose loss scale is beyond 2^64 (resealed, so only the field check can refuse it). */
static void scale_limits(void) {
    char dir[4200], p[4400];
    path(dir, sizeof dir, "scale");
    eu_run r = {.stage = 1, .dtype = ZINC_FP16};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    zinc_step_info info;
    mlp_metrics met;
    ZT_OK(mlp_train_step(m, 0, &info, &met));
    ZT_OK(zinc_save_checkpoint(e, dir, "t"));
    snprintf(p, sizeof p, "%s/t", dir);
    zckpt_manifest man;
    memset(&man, 0, sizeof man);
    ZT_OK(zckpt_manifest_read(p, &man));
    json_object_set_new(json_object_get(man.root, "loss_scaler"), "cur_scale", json_real(1e300));
    json_object_del(man.root, "manifest_crc32c");
    char *text = zckpt_manifest_seal(man.root);
    snprintf(p, sizeof p, "%s/t/manifest.json", dir);
    FILE *f = fopen(p, "wb");
    if (f && text) fputs(text, f);
    if (f) fclose(f);
    free(text);
    zckpt_manifest_free(&man);
    ZT_ERR(zinc_load_checkpoint(e, dir), ZINC_ERR_CORRUPT, "cur_scale");
    mlp_destroy(m);
    zinc_destroy(e);
}

/* 1, 2. The safe writer and reader themselves. */
static void safe_files(void) {
    char out[4200], victim[4200], lnk[4200], fifo[4200], d[4200];
    path(out, sizeof out, "w.bin");
    path(victim, sizeof victim, "victim.txt");
    path(lnk, sizeof lnk, "link.bin");
    path(fifo, sizeof fifo, "fifo");
    path(d, sizeof d, "adir");
    unlink(out);
    FILE *f = fopen(victim, "w");
    fputs("precious\n", f);
    fclose(f);
    ZT_OK(zfile_write("--out", out, "a", 1, 0, NULL));
    ZT_ERR(zfile_write("--out", out, "b", 1, 0, NULL), ZINC_ERR_IO, "--force");
    ZT_OK(zfile_write("--out", out, "b", 1, ZFILE_REPLACE, NULL));
    const char *in[] = {victim, NULL};
    ZT_ERR(zfile_write("--out", victim, "x", 1, ZFILE_REPLACE, in), ZINC_ERR_INVALID_ARG, "inputs");
    symlink(victim, lnk);
    ZT_ERR(zfile_write("--out", lnk, "x", 1, ZFILE_REPLACE, NULL), ZINC_ERR_IO, "symbolic link");
    mkfifo(fifo, 0600);
    ZT_ERR(zfile_write("--out", fifo, "x", 1, ZFILE_REPLACE, NULL), ZINC_ERR_IO, "FIFO");
    mkdir(d, 0755);
    const char *din[] = {d, NULL};
    char inside[4300];
    snprintf(inside, sizeof inside, "%s/new.bin", d);
    ZT_ERR(zfile_write("--out", inside, "x", 1, 0, din), ZINC_ERR_INVALID_ARG, "reads");
    int fd = -1;
    ZT_ERR(zfile_open_input("--data", fifo, &fd), ZINC_ERR_IO, "FIFO");
    ZT_ERR(zfile_open_input("--data", d, &fd), ZINC_ERR_IO, "is a directory");
    ZT_OK(zfile_open_input("--data", victim, &fd));
    if (fd >= 0) close(fd);
    f = fopen(victim, "r");
    char buf[32] = "";
    ZT_CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "precious\n"), "the victim was changed: %s", buf);
    if (f) fclose(f);
    /* no temporary files left behind */
    int left = 0;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '\\.tmp$'", g_root);
    FILE *pp = popen(cmd, "r");
    if (pp && fscanf(pp, "%d", &left) != 1) left = -1;
    if (pp) pclose(pp);
    ZT_CHECK(left == 0, "%d temporary files left", left);
}

int main(void) {
    zt_name = "hardening2";
    snprintf(g_root, sizeof g_root, "%s/hardening2_test", zt_build_dir());
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_root, g_root);
    if (system(cmd) != 0) return zt_skip("cannot make the test directory");
    registration_overflow();
    bad_options();
    wrong_state();
    tags_and_meta();
    fp16_nonfinite_params();
    scale_limits();
    safe_files();
    return zt_finish();
}
