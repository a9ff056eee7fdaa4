/* A damaged or edited manifest never loads as something else (issue 18).
 *
 *   1. Bit-flip sweep: every single-bit flip of a real manifest (every bit of every byte, in memory) must
 *      be refused by the manifest reader that load, inspect and export share; a deterministic sample of
 *      them (every 37th bit) is also written to disk and must fail zinc_load_checkpoint and
 *      zinc_export_safetensors. The figures are printed ("bit flips: N tried, 0 loaded").
 *   2. Edited and resealed manifests (a tool that recomputes the checksum): every field out of range or
 *      inconsistent with the others is refused by the reader, load and export, with a message naming the
 *      file and the field.
 *   3. Special files: a FIFO in place of a shard or of the manifest is refused without blocking (an alarm
 *      fails the test if anything waits). */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/mem/plan.h"
#include "engine_util.h"
#include "zt.h"

static char g_dir[4096], g_tagdir[4200], g_man[4300], g_out[4300];

static char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    if (b) b[len] = 0;
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *p, const char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    ZT_CHECK(f && fwrite(b, 1, n, f) == n, "cannot write %s", p);
    if (f) fclose(f);
}

static zinc_status export_it(void) {
    unlink(g_out);
    return zinc_export_safetensors(g_dir, g_out, ZINC_FP32);
}

/* 1. Every single-bit flip. */
static void sweep(zinc_engine *e, const char *orig, size_t n) {
    char *buf = malloc(n + 1);
    long tried = 0, loaded = 0, disk_tried = 0, disk_loaded = 0;
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) {
            memcpy(buf, orig, n + 1);
            buf[i] = (char)(buf[i] ^ (1 << b));
            zckpt_manifest m;
            tried++;
            if (zckpt_manifest_parse("flipped", buf, n, &m) == ZINC_OK) {
                loaded++;
                ZT_CHECK(0, "bit %d of byte %zu flipped: the manifest still loads", b, i);
                zckpt_manifest_free(&m);
            }
            if ((i * 8 + (size_t)b) % 37 == 0) {
                disk_tried++;
                spit(g_man, buf, n);
                zinc_status a = zinc_load_checkpoint(e, g_dir), x = export_it();
                if (a == ZINC_OK || x == ZINC_OK) {
                    disk_loaded++;
                    ZT_CHECK(0, "bit %d of byte %zu flipped: load %s, export %s", b, i, zinc_status_name(a),
                             zinc_status_name(x));
                }
            }
        }
    }
    spit(g_man, orig, n);
    printf("bit flips: %ld tried (every bit of a %zu-byte manifest), %ld loaded silently; %ld of them through "
           "zinc_load_checkpoint and zinc_export_safetensors, %ld loaded\n",
           tried, n, loaded, disk_tried, disk_loaded);
    free(buf);
}

/* 2. One edit of the parsed manifest, resealed: refused everywhere, naming the file and `field`. */
typedef void (*edit_fn)(json_t *root);
static json_t *at(json_t *root, const char *a, const char *b) {
    json_t *v = json_object_get(root, a);
    return b ? json_object_get(v, b) : v;
}
static json_t *param0(json_t *root) { return json_array_get(json_object_get(root, "params"), 0); }
static json_t *param1(json_t *root) { return json_array_get(json_object_get(root, "params"), 1); }
static json_t *file0(json_t *root) { return json_array_get(json_object_get(root, "files"), 0); }

static void e_steps_neg(json_t *r) { json_object_set_new(at(r, "step", NULL), "steps_taken", json_integer(-1)); }
static void e_steps_huge(json_t *r) {
    json_object_set_new(at(r, "step", NULL), "steps", json_integer((json_int_t)1 << 62));
}
static void e_steps_inconsistent(json_t *r) {
    json_object_set_new(at(r, "step", NULL), "steps_skipped", json_integer(1000));
}
static void e_window0(json_t *r) { json_object_set_new(at(r, "loss_scaler", NULL), "scale_window", json_integer(0)); }
static void e_scale_nan(json_t *r) { json_object_set_new(at(r, "loss_scaler", NULL), "cur_scale", json_real(-1.0)); }
static void e_hyst(json_t *r) { json_object_set_new(at(r, "loss_scaler", NULL), "cur_hysteresis", json_integer(9)); }
static void e_dup_name(json_t *r) { json_object_set(param1(r), "name", json_object_get(param0(r), "name")); }
static void e_shift_offset(json_t *r) {
    json_object_set_new(param1(r), "flat_offset",
                        json_integer(json_integer_value(json_object_get(param1(r), "flat_offset")) + 8));
}
static void e_huge_shape(json_t *r) {
    json_object_set_new(param0(r), "shape", json_pack("[I, I]", (json_int_t)1 << 40, (json_int_t)1 << 40));
}
static void e_numel(json_t *r) {
    json_object_set_new(param0(r), "numel", json_integer(json_integer_value(json_object_get(param0(r), "numel")) + 1));
}
static void e_world_wrap(json_t *r) { json_object_set_new(r, "world_size", json_integer(((json_int_t)1 << 32) + 1)); }
static void e_stage(json_t *r) { json_object_set_new(r, "zero_stage", json_integer(3)); }
static void e_file_bytes(json_t *r) {
    json_object_set_new(file0(r), "bytes", json_integer(json_integer_value(json_object_get(file0(r), "bytes")) + 4096));
}
static void e_sec_offset(json_t *r) {
    json_t *s = json_object_get(json_object_get(file0(r), "sections"), "exp_avg");
    json_object_set_new(s, "offset", json_integer(json_integer_value(json_object_get(s, "offset")) + 4));
}
static void e_file_name(json_t *r) { json_object_set_new(file0(r), "name", json_string("../../etc/passwd")); }
static void e_flat_numel(json_t *r) {
    json_object_set_new(at(r, "flat", NULL), "numel", json_integer(json_integer_value(at(r, "flat", "numel")) + 8));
}
static void e_lr_steps(json_t *r) { json_object_set_new(at(r, "lr_schedule", NULL), "steps_taken", json_integer(0)); }
static void e_batch(json_t *r) { json_object_set_new(at(r, "batch", NULL), "train_batch_size", json_integer(7)); }
static void e_fp16(json_t *r) { json_object_set_new(r, "fp16", json_false()); }
static void e_no_config(json_t *r) { json_object_del(r, "config"); }

static void edited(zinc_engine *e, const char *orig, size_t n, const char *what, edit_fn fn, const char *field) {
    json_t *root = json_loadb(orig, n, 0, NULL);
    ZT_CHECK(root != NULL, "the saved manifest does not parse");
    if (!root) return;
    json_object_del(root, "manifest_crc32c");
    fn(root);
    char *text = zckpt_manifest_seal(root);
    json_decref(root);
    spit(g_man, text, strlen(text));
    zckpt_manifest m;
    zinc_status st = zckpt_manifest_read(g_tagdir, &m);
    ZT_CHECK(st == ZINC_ERR_CORRUPT, "%s: the reader says %s", what, zinc_status_name(st));
    if (st == ZINC_OK) zckpt_manifest_free(&m);
    const char *msg = zinc_last_error();
    ZT_CHECK(strstr(msg, "manifest.json") && strstr(msg, field),
             "%s: the message names neither the file nor "
             "\"%s\": %s",
             what, field, msg);
    printf("%-28s -> %.220s\n", what, strstr(msg, "checkpoint manifest") ? strstr(msg, "checkpoint manifest") : msg);
    ZT_ERR(zinc_load_checkpoint(e, g_dir), ZINC_ERR_CORRUPT, field);
    ZT_ERR(export_it(), ZINC_ERR_CORRUPT, field);
    free(text);
    spit(g_man, orig, n);
}

static void fifo_cases(zinc_engine *e, const char *orig, size_t n) {
    char shard[4400], aside[4400];
    snprintf(shard, sizeof shard, "%s/rank00000.zshard", g_tagdir);
    snprintf(aside, sizeof aside, "%s/rank00000.aside", g_tagdir);
    ZT_CHECK(rename(shard, aside) == 0 && mkfifo(shard, 0600) == 0, "cannot make a FIFO in place of %s", shard);
    zckpt_manifest m;
    ZT_OK(zckpt_manifest_read(g_tagdir, &m));
    ZT_ERR(zckpt_verify_file(&m, 0), ZINC_ERR_CORRUPT, "not a regular file");
    zckpt_manifest_free(&m);
    ZT_ERR(zinc_load_checkpoint(e, g_dir), ZINC_ERR_CORRUPT, "not a regular file");
    ZT_ERR(export_it(), ZINC_ERR_CORRUPT, "not a regular file");
    unlink(shard);
    ZT_CHECK(rename(aside, shard) == 0, "cannot restore %s", shard);

    unlink(g_man);
    ZT_CHECK(mkfifo(g_man, 0600) == 0, "cannot make a FIFO manifest");
    ZT_ERR(zckpt_manifest_read(g_tagdir, &m), ZINC_ERR_CORRUPT, "FIFO");
    ZT_ERR(export_it(), ZINC_ERR_CORRUPT, "FIFO");
    unlink(g_man);
    spit(g_man, orig, n);
    printf("FIFO in place of a shard and of the manifest: refused without blocking\n");
}

/* The same manifest as zinc wrote it before the seal existed: no manifest_crc32c, format_version 1. */
static char *as_version1(const char *orig, size_t n, edit_fn fn) {
    json_t *root = json_loadb(orig, n, 0, NULL);
    if (!root) return NULL;
    json_object_del(root, "manifest_crc32c");
    json_object_set_new(root, "format_version", json_integer(1));
    if (fn) fn(root);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    return text;
}

/* Checkpoints saved before the seal still load (validated, with a warning); an unsealed manifest that
 * claims the sealed format, or a version-1 one with a bad field, does not. */
static void legacy_cases(zinc_engine *e, const char *orig, size_t n) {
    char *v1 = as_version1(orig, n, NULL);
    ZT_CHECK(v1 != NULL, "cannot make a version-1 manifest");
    if (!v1) return;
    spit(g_man, v1, strlen(v1));
    ZT_OK(zinc_load_checkpoint(e, g_dir));
    ZT_OK(export_it());
    char *bad = as_version1(orig, n, e_steps_neg);
    spit(g_man, bad, strlen(bad));
    ZT_ERR(zinc_load_checkpoint(e, g_dir), ZINC_ERR_CORRUPT, "steps_taken");
    free(bad);
    json_t *root = json_loadb(orig, n, 0, NULL);
    json_object_del(root, "manifest_crc32c");
    bad = json_dumps(root, JSON_INDENT(1)); /* version 2 without its seal */
    json_decref(root);
    spit(g_man, bad, strlen(bad));
    ZT_ERR(zinc_load_checkpoint(e, g_dir), ZINC_ERR_CORRUPT, "manifest_crc32c");
    free(bad);
    free(v1);
    spit(g_man, orig, n);
    printf("version-1 manifest (no seal): loads and exports; with steps_taken -1 or claiming version 2: refused\n");
}

/* The sizing plan counts a decoupled save's snapshot by zplan_ckpt_file_bytes (runtime/mem sits below the
 * checkpoint code, so it cannot call zckpt_layout): the two must agree on every shard file's size. */
static void plan_sizes_agree(void) {
    const int64_t ns[] = {0, 1, 1023, 1024, 4096, 100003, 1 << 22};
    const zinc_dtype dts[] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int with = 0; with < 2; with++)
            for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
                zckpt_file f;
                zckpt_layout(&f, 1, 7, 7 + ns[i], with, dts[d]);
                uint64_t plan = zplan_ckpt_file_bytes(ns[i], with, dts[d]);
                ZT_CHECK((uint64_t)f.bytes == plan,
                         "n %lld, params %d, dtype %d: the layout has %lld bytes, the plan %llu", (long long)ns[i],
                         with, (int)dts[d], (long long)f.bytes, (unsigned long long)plan);
            }
}

int main(void) {
    zt_name = "checkpoint_manifest";
    plan_sizes_agree();
    alarm(600); /* a FIFO that blocks fails the test instead of hanging it */
    eu_run r = {.stage = 2, .dtype = ZINC_FP16};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return zt_finish();
    snprintf(g_dir, sizeof g_dir, "%s/ckpt_test/manifest", zt_build_dir());
    snprintf(g_tagdir, sizeof g_tagdir, "%s/step3", g_dir);
    snprintf(g_man, sizeof g_man, "%s/manifest.json", g_tagdir);
    snprintf(g_out, sizeof g_out, "%s/out.safetensors", g_dir);
    for (int s = 0; s < 3; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, g_dir, NULL));
    size_t n = 0;
    char *orig = slurp(g_man, &n);
    ZT_CHECK(orig != NULL, "cannot read %s", g_man);
    if (!orig) return zt_finish();
    ZT_OK(zinc_load_checkpoint(e, g_dir));
    ZT_OK(export_it());

    sweep(e, orig, n);

    edited(e, orig, n, "steps_taken -1", e_steps_neg, "steps_taken");
    edited(e, orig, n, "steps 2^62", e_steps_huge, "steps");
    edited(e, orig, n, "skipped > steps", e_steps_inconsistent, "step");
    edited(e, orig, n, "scale_window 0", e_window0, "scale_window");
    edited(e, orig, n, "cur_scale -1", e_scale_nan, "cur_scale");
    edited(e, orig, n, "cur_hysteresis 9 of 2", e_hyst, "cur_hysteresis");
    edited(e, orig, n, "duplicate tensor name", e_dup_name, "appears twice");
    edited(e, orig, n, "shifted flat_offset", e_shift_offset, "flat_offset");
    edited(e, orig, n, "shape 2^40 x 2^40", e_huge_shape, "shape");
    edited(e, orig, n, "numel + 1", e_numel, "numel");
    edited(e, orig, n, "world_size 2^32 + 1", e_world_wrap, "world_size");
    edited(e, orig, n, "zero_stage 2 -> 3", e_stage, "files");
    edited(e, orig, n, "file bytes + 4096", e_file_bytes, "bytes");
    edited(e, orig, n, "section offset + 4", e_sec_offset, "exp_avg");
    edited(e, orig, n, "file name ../../etc/passwd", e_file_name, "passwd");
    edited(e, orig, n, "flat.numel + 8", e_flat_numel, "numel");
    edited(e, orig, n, "lr_schedule.steps_taken", e_lr_steps, "lr_schedule.steps_taken");
    edited(e, orig, n, "train_batch_size 7", e_batch, "train_batch_size");
    edited(e, orig, n, "fp16 false, compute fp16", e_fp16, "fp16");
    edited(e, orig, n, "no config", e_no_config, "config");

    fifo_cases(e, orig, n);
    legacy_cases(e, orig, n);

    /* Repaired: loads and exports again. */
    ZT_OK(zinc_load_checkpoint(e, g_dir));
    ZT_OK(export_it());
    free(orig);
    mlp_destroy(m);
    zinc_destroy(e);
    return zt_finish();
}
