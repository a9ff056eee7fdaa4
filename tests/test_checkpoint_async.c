/* checkpoint.writer.decoupled (runtime/checkpoint/checkpoint_async.c), on 1 and 2 ranks (stage 2, fp16):
 *
 *   1. a synchronous save of step 4 and a decoupled one of the same run's step 4 (into the image that
 *      zinc_checkpoint_reserve mapped and its save of step 2 used: host staging never holds two), taken while
 *      the run goes on
 *      to step 6 (the writer works on the snapshot): their shard files hold the same bytes after the header
 *      (which holds the save's uid); the decoupled one is `latest` only once published;
 *   2. resume: an engine loading the decoupled step 4 and training 2 steps has the uninterrupted run's
 *      step-6 master weights, bitwise;
 *   3. a writer whose writes fail (ZINC_CKPT_TEST_WRITE_ERRNO=28, ENOSPC, on the last rank only) fails the
 *      next zinc_step on every rank with the message; `latest` still names step 4; the step then succeeds and
 *      the next save is published.
 *
 *   4. the publish runs off the steps: slowed to 4 s, `latest` stays the previous one through 3 steps.
 *
 * --phase kill (one rank, no MPI, forked engines as tests/test_checkpoint_kill.c): a run whose writer thread
 * raises SIGKILL at points inside the shard file, the manifest and `latest` (ZINC_CKPT_TEST_KILL_AFTER_BYTES)
 * while training goes on leaves the previous `latest` loadable with its weights bitwise. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine_util.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/engine/engine_internal.h"
#include "zt.h"

#define DECOUPLED "\"checkpoint\": {\"writer\": {\"decoupled\": true, \"io_buffer_size\": 4096}}"

static eu_run g_sync = {.stage = 2, .dtype = ZINC_FP16};
static eu_run g_dec = {.stage = 2, .dtype = ZINC_FP16, .extra = DECOUPLED};

static float *master(zinc_engine *e, size_t *n) {
    *n = (size_t)zinc_numel_total(e);
    float *p = malloc(*n * sizeof *p);
    if (p && zinc_gather_master(e, p, *n) != ZINC_OK) {
        free(p);
        return NULL;
    }
    return p;
}

static char *read_all(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*len + 1);
    if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* The shard files of two tag directories: the same names, sizes and bytes after the header. */
static void same_shards(const char *a, const char *b) {
    zckpt_manifest ma, mb;
    ZT_OK(zckpt_manifest_read(a, &ma));
    ZT_OK(zckpt_manifest_read(b, &mb));
    ZT_CHECK(ma.nfiles == mb.nfiles && ma.steps == mb.steps, "%s and %s: %d/%d files, steps %lld/%lld", a, b, ma.nfiles,
             mb.nfiles, (long long)ma.steps, (long long)mb.steps);
    for (int i = 0; i < ma.nfiles && i < mb.nfiles; i++) {
        char pa[8300], pb[8300];
        long la = 0, lb = 0;
        snprintf(pa, sizeof pa, "%s/%s", a, ma.files[i].name);
        snprintf(pb, sizeof pb, "%s/%s", b, mb.files[i].name);
        char *x = read_all(pa, &la), *y = read_all(pb, &lb);
        ZT_CHECK(x && y && la == lb && la > ZCKPT_HEADER_BYTES &&
                     !memcmp(x + ZCKPT_HEADER_BYTES, y + ZCKPT_HEADER_BYTES, (size_t)la - ZCKPT_HEADER_BYTES),
                 "%s and %s differ (%ld and %ld bytes)", pa, pb, la, lb);
        free(x);
        free(y);
        /* the decoupled file's checksums (taken as its writer copied) against the file read back */
        zckpt_file back = mb.files[i];
        back.block_crc = NULL;
        int fd = open(pb, O_RDONLY);
        ZT_CHECK(fd >= 0, "cannot open %s", pb);
        if (fd >= 0) {
            ZT_OK(zckpt_checksum_file(fd, pb, &back));
            int wrong = 0;
            for (int64_t k = 0; back.block_crc && k < back.nblocks; k++)
                wrong += back.block_crc[k] != mb.files[i].block_crc[k];
            ZT_CHECK(back.block_crc && !wrong && back.crc == mb.files[i].crc,
                     "%s: %d block checksums and the file's (%08x, read back %08x) not the manifest's", pb, wrong,
                     mb.files[i].crc, back.crc);
            close(fd);
        }
        free(back.block_crc);
    }
    zckpt_manifest_free(&ma);
    zckpt_manifest_free(&mb);
}

static char *latest_of(const char *dir) {
    char p[4200];
    long n = 0;
    snprintf(p, sizeof p, "%s/latest", dir);
    char *s = read_all(p, &n);
    if (s) s[n] = 0;
    return s;
}

/* ---------------------------------------------------------------- the live snapshot's variants */

typedef struct variant {
    const char *name;
    int stage;
    const char *extra, *zero_extra;
    int stream; /* ZINC_FAKE_MEM_AVAILABLE tiny at the save: the writer streams through its slots */
} variant;

#define WRITER(x) "\"checkpoint\": {\"writer\": {\"decoupled\": true, \"io_buffer_size\": 4096" x "}}"
static const variant g_variants[] = {
    {"stage 0", 0, WRITER(""), NULL, 0},
    {"stage 1, chunks of 1024", 1, WRITER(""), "\"sub_group_size\": 1024", 0},
    {"stage 3 (the parameter shard)", 3, WRITER(""), NULL, 0},
    {"stage 2 streaming, two slots", 2, WRITER(""), "\"sub_group_size\": 2048", 1},
    {"stage 3 streaming, one slot", 3, WRITER(", \"io_buffer_double\": false"), NULL, 1},
};

/* A synchronous save of step 4 and a decoupled one taken while steps 5 and 6 run with the writer slowed
 * (ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS: each piece it copies takes 150 ms, so the optimizer step reaches the
 * piece the writer is copying and the pieces it has not reached): the same bytes; and a resume from the decoupled one reaches the same step 6, bitwise. A piece
 * copied after the optimizer changed it fails the first check. */
static void one_variant(const variant *v, const char *base, int rank) {
    char dsync[4400], ddec[4400], ta[4500], tb[4500];
    eu_run rs = {.stage = v->stage, .dtype = ZINC_FP16, .zero_extra = v->zero_extra};
    eu_run rd = rs;
    rd.extra = v->extra;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    size_t n = 0, n2 = 0;
    snprintf(dsync, sizeof dsync, "%s/sync", base);
    snprintf(ddec, sizeof ddec, "%s/dec", base);
    ZT_OK(eu_create(&rs, &e, &m));
    for (int s = 0; s < 4; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, dsync, NULL));
    mlp_destroy(m);
    zinc_destroy(e);
    ZT_OK(eu_create(&rd, &e, &m));
    for (int s = 0; s < 4; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    setenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS", "150", 1);
    if (v->stream) setenv("ZINC_FAKE_MEM_AVAILABLE", "4096", 1);
    ZT_OK(zinc_save_checkpoint(e, ddec, NULL));
    unsetenv("ZINC_FAKE_MEM_AVAILABLE");
    usleep(30000); /* the writer has taken its first piece and copies it slowly: the step must wait for it */
    for (int s = 4; s < 6; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_checkpoint_wait(e));
    unsetenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS");
    float *ref6 = master(e, &n);
    mlp_destroy(m);
    zinc_destroy(e);
    snprintf(ta, sizeof ta, "%s/step4", dsync);
    snprintf(tb, sizeof tb, "%s/step4", ddec);
    if (rank == 0) same_shards(ta, tb);
    ZT_OK(eu_create(&rd, &e, &m));
    ZT_OK(zinc_load_checkpoint(e, tb));
    for (int s = 4; s < 6; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    float *got6 = master(e, &n2);
    ZT_CHECK(ref6 && got6 && n2 == n && !memcmp(got6, ref6, n * sizeof *got6),
             "%s: resumed from the decoupled step 4, step 6 differs from the run that saved it", v->name);
    if (rank == 0) printf("%s: the decoupled step 4 equals the synchronous one; resume bitwise\n", v->name);
    free(ref6);
    free(got6);
    mlp_destroy(m);
    zinc_destroy(e);
}

static int exists(const char *dir, const char *tag) {
    char p[8400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s/manifest.json", dir, tag);
    return stat(p, &sb) == 0;
}

/* zinc.checkpoint_busy: a second save while the first is written is skipped ("skip") or waits ("wait"). */
static void busy_policy(const char *base, int rank, const char *policy) {
    char dir[4200], extra[256];
    snprintf(dir, sizeof dir, "%s/busy_%s", base, policy);
    snprintf(extra, sizeof extra, "%s, \"zinc\": {\"checkpoint_busy\": \"%s\"}", DECOUPLED, policy);
    eu_run r = {.stage = 2, .dtype = ZINC_FP16, .extra = extra};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    setenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS", "300", 1);
    ZT_OK(zinc_save_checkpoint(e, dir, "first"));
    unsetenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS");
    ZT_OK(zinc_save_checkpoint(e, dir, "second"));
    ZT_OK(zinc_checkpoint_wait(e));
    if (rank == 0) {
        char *l = latest_of(dir);
        int skip = !strcmp(policy, "skip");
        ZT_CHECK(exists(dir, "first") && exists(dir, "second") == !skip && l &&
                     !strcmp(l, skip ? "first\n" : "second\n"),
                 "zinc.checkpoint_busy %s: first %d, second %d, latest %s", policy, exists(dir, "first"),
                 exists(dir, "second"), l ? l : "(none)");
        free(l);
        printf("zinc.checkpoint_busy %s: the second save %s\n", policy, skip ? "was skipped" : "waited");
    }
    mlp_destroy(m);
    zinc_destroy(e);
}

/* The publish (the manifest, the directory, `latest`, their fsyncs) is not a step's: with it slowed to 4 s
 * (ZINC_CKPT_TEST_PUBLISH_DELAY_MS, the directory writer's), the steps after every writer is done go on while
 * `latest` still names the previous checkpoint; zinc_checkpoint_wait then publishes it. A publish made by the
 * step that finds the writers done (or by the save call) would be over, `latest` the new one, when it returns. */
static void publish_off_step(const char *base, int rank) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/publish", base);
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&g_dec, &e, &m));
    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, dir, "first"));
    ZT_OK(zinc_checkpoint_wait(e));
    setenv("ZINC_CKPT_TEST_PUBLISH_DELAY_MS", "4000", 1);
    ZT_OK(zinc_save_checkpoint(e, dir, "second"));
    /* the steps until the writers are done and the publish has begun (a few, for this small file), then 2 more */
    int s = 2, publishing = 0;
    for (; s < 60 && publishing < 3; s++) {
        usleep(20000);
        ZT_OK(mlp_train_step(m, s, NULL, NULL));
        publishing += e->ckpt_async && ((zckpt_save_job *)e->ckpt_async)->publishing;
    }
    ZT_CHECK(publishing == 3, "the save of \"second\" was not publishing for 3 steps of %d", s - 2);
    if (rank == 0) {
        char *l = latest_of(dir);
        ZT_CHECK(l && !strcmp(l, "first\n"),
                 "latest is %s while the publish of \"second\" is slowed to 4 s: a step waited for the publish",
                 l ? l : "(none)");
        free(l);
    }
    ZT_OK(zinc_checkpoint_wait(e));
    unsetenv("ZINC_CKPT_TEST_PUBLISH_DELAY_MS");
    if (rank == 0) {
        char *l = latest_of(dir);
        ZT_CHECK(l && !strcmp(l, "second\n"), "after zinc_checkpoint_wait latest is %s, expected second",
                 l ? l : "(none)");
        free(l);
        printf("the publish ran off the steps: latest stayed \"first\" through 3 steps, then \"second\"\n");
    }
    mlp_destroy(m);
    zinc_destroy(e);
}

/* A non-finite exp_avg in a piece the optimizer step copied itself (the writer slowed in its first piece,
 * ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS) is still refused: the writer checks the guard's copies, and a later step
 * fails on every rank with the message; `latest` stays the previous one. */
static void nonfinite_guarded(const char *base, int rank) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/nonfinite", base);
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    size_t n = 0;
    ZT_OK(eu_create(&g_dec, &e, &m));
    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, dir, "good"));
    ZT_OK(zinc_checkpoint_wait(e));
    /* a NaN in exp_avg (zinc_set_master refuses one) near the end of the last rank's file: the writer's last piece */
    float *ma = NULL, *mm = NULL, *mv = NULL;
    ZT_CHECK(zstate_host_arrays(e->state, &ma, &mm, &mv) && mm, "the store is not host memory");
    /* the last parameter element of the last rank's range (the range may end in alignment padding) */
    int64_t numel = e->part.numel, hi = e->own_hi < numel ? e->own_hi : numel, at = -1;
    const zinc_param *bad = NULL;
    for (int i = 0; i < e->nparams; i++) {
        int64_t end = e->params[i]->flat_offset + e->params[i]->numel, last = (end < hi ? end : hi) - 1;
        if (last >= e->own_lo && last >= e->params[i]->flat_offset && last > at) at = last, bad = e->params[i];
    }
    if (rank != zinc_world_size(e) - 1) bad = NULL;
    if (mm && bad) mm[at - e->own_lo] = NAN;
    (void)n;
    setenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS", "300", 1);
    ZT_OK(zinc_save_checkpoint(e, dir, "bad"));
    unsetenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS");
    usleep(30000); /* the writer is inside its first piece: the step copies the others, the NaN's too */
    /* the step's guard copies the pieces the writer has not reached; its update then goes non-finite too and
     * fails the step (the NaN is in the state it reads): the save's own outcome is zinc_checkpoint_wait's */
    (void)mlp_train_step(m, 2, NULL, NULL);
    zinc_status st = zinc_checkpoint_wait(e);
    ZT_CHECK(st != ZINC_OK && strstr(zinc_last_error(), "refusing to save"),
             "a NaN in a piece the step copied was saved: %s", st == ZINC_OK ? "(ok)" : zinc_last_error());
    if (bad && st != ZINC_OK) { /* the element named is the one planted */
        char want[256];
        snprintf(want, sizeof want, "exp_avg state of parameter \"%s\" element %lld is nan", bad->name,
                 (long long)(at - bad->flat_offset));
        ZT_CHECK(strstr(zinc_last_error(), want), "the refusal does not name %s: %s", want, zinc_last_error());
    }
    if (rank == 0) {
        char *l = latest_of(dir);
        ZT_CHECK(l && !strcmp(l, "good\n"), "after the refused save latest is %s, expected good", l ? l : "(none)");
        free(l);
        printf("a NaN the optimizer step's guard copied is refused by the writer\n");
    }
    mlp_destroy(m);
    zinc_destroy(e);
}

static void live_snapshots(const char *base, int rank) {
    char dir[4300];
    for (size_t i = 0; i < sizeof g_variants / sizeof *g_variants; i++) {
        snprintf(dir, sizeof dir, "%s/variant%zu", base, i);
        one_variant(&g_variants[i], dir, rank);
    }
    busy_policy(base, rank, "skip");
    busy_policy(base, rank, "wait");
    publish_off_step(base, rank);
    nonfinite_guarded(base, rank);
}

static int collective(void) {
    char base[4096], dsync[4200], ddec[4200], ta[4300], tb[4300];
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    size_t n = 0, n2 = 0;
    float *ref6 = NULL, *got6 = NULL;
    ZT_OK(eu_create(&g_sync, &e, &m));
    int rank = zinc_rank(e), world = zinc_world_size(e);
    snprintf(base, sizeof base, "%s/ckpt_test/async_np%d", zt_build_dir(), world);
    snprintf(dsync, sizeof dsync, "%s/sync", base);
    snprintf(ddec, sizeof ddec, "%s/dec", base);
    if (rank == 0) {
        ZT_OK(zckpt_rmtree(base));
        ZT_OK(zckpt_mkdirs(base));
    }
    /* 1. synchronous step 4 */
    for (int s = 0; s < 4; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_save_checkpoint(e, dsync, NULL));
    mlp_destroy(m);
    zinc_destroy(e);

    /* the decoupled save of step 4, written while steps 5 and 6 run, into the image a save of step 2 left
     * (the engine keeps it from one save to the next: what it held must not show) */
    ZT_OK(eu_create(&g_dec, &e, &m));
    for (int s = 0; s < 2; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    zinc_memory_report mr0, mr1, mr2, mrr;
    ZT_OK(zinc_memory_get(e, &mr0));
    ZT_OK(zinc_checkpoint_reserve(e)); /* the image now, its pages faulted in by a thread of its own */
    ZT_OK(zinc_checkpoint_reserve(e)); /* again: nothing more */
    ZT_CHECK(zinc_checkpoint_reserve(NULL) == ZINC_ERR_INVALID_ARG && strstr(zinc_last_error(), "NULL"),
             "zinc_checkpoint_reserve(NULL): %s", zinc_last_error());
    ZT_OK(zinc_memory_get(e, &mrr));
    ZT_OK(zinc_save_checkpoint(e, ddec, "warm"));
    for (int s = 2; s < 4; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_checkpoint_wait(e));
    ZT_OK(zinc_memory_get(e, &mr1));
    ZT_OK(zinc_save_checkpoint(e, ddec, NULL));
    for (int s = 4; s < 6; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    ZT_OK(zinc_checkpoint_wait(e));
    ZT_OK(zinc_checkpoint_wait(e)); /* nothing in flight: at once */
    ZT_OK(zinc_memory_get(e, &mr2));
    { /* the second save took the kept image: the staging memory never held two */
        uint64_t s0 = mr0.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING],
                 s1 = mr1.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING],
                 p2 = mr2.peak[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING], img = s1 - s0;
        ZT_CHECK(s1 > s0, "no snapshot image kept after the first decoupled save (host staging %llu -> %llu)",
                 (unsigned long long)s0, (unsigned long long)s1);
        ZT_CHECK(mrr.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] == s1,
                 "zinc_checkpoint_reserve mapped %llu bytes of staging, the saves use %llu",
                 (unsigned long long)(mrr.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] - s0), (unsigned long long)img);
        ZT_CHECK(p2 < s1 + img / 2,
                 "the second decoupled save did not reuse the first one's image: host staging peaked at %llu bytes, "
                 "%llu with one image",
                 (unsigned long long)p2, (unsigned long long)s1);
    }
    ref6 = master(e, &n);
    ZT_CHECK(ref6 != NULL, "gathering the master weights failed");
    snprintf(ta, sizeof ta, "%s/step4", dsync);
    snprintf(tb, sizeof tb, "%s/step4", ddec);
    if (rank == 0) {
        same_shards(ta, tb);
        char *l = latest_of(ddec);
        ZT_CHECK(l && !strcmp(l, "step4\n"), "latest of %s is %s, expected step4", ddec, l ? l : "(none)");
        free(l);
    }

    /* 3. a writer that fails: the next step fails on every rank, latest stays at step 4 */
    if (rank == world - 1) setenv("ZINC_CKPT_TEST_WRITE_ERRNO", "28", 1);
    ZT_OK(zinc_save_checkpoint(e, ddec, NULL)); /* step 6: the snapshot is taken, the writer fails */
    if (rank == world - 1) unsetenv("ZINC_CKPT_TEST_WRITE_ERRNO");
    usleep(200000); /* the writer has failed by now (it does not matter if not: the poll waits for it) */
    zinc_status st = mlp_train_step(m, 6, NULL, NULL);
    while (st == ZINC_OK && zinc_step_count(e) < 9) st = mlp_train_step(m, zinc_step_count(e), NULL, NULL);
    ZT_CHECK(st != ZINC_OK, "a failed decoupled write did not fail a step");
    ZT_CHECK(strstr(zinc_last_error(), "not saved") && strstr(zinc_last_error(), "No space left"),
             "the step's error does not say the checkpoint failed with ENOSPC: %s", zinc_last_error());
    if (rank == 0) {
        char *l = latest_of(ddec);
        ZT_CHECK(l && !strcmp(l, "step4\n"), "after the failed write latest is %s, expected step4", l ? l : "(none)");
        free(l);
    }
    ZT_OK(zinc_step(e, NULL)); /* the failed call stepped nothing: its gradients are still there */
    int64_t at = zinc_step_count(e);
    ZT_OK(zinc_save_checkpoint(e, ddec, NULL));
    ZT_OK(zinc_checkpoint_wait(e));
    if (rank == 0) {
        char *l = latest_of(ddec), want[32];
        snprintf(want, sizeof want, "step%lld\n", (long long)at);
        ZT_CHECK(l && !strcmp(l, want), "after the failure the next save is not latest: %s", l ? l : "(none)");
        free(l);
    }
    /* 3b. EIO from io_uring itself (the ring's fault point, offload/aio.h), on rank 0 */
    if (rank == 0) setenv("ZINC_AIO_FAULT", "write:EIO:count=1", 1);
    ZT_OK(zinc_save_checkpoint(e, ddec, "eio"));
    st = zinc_checkpoint_wait(e); /* the writer thread reads ZINC_AIO_FAULT: unset only after it */
    if (rank == 0) unsetenv("ZINC_AIO_FAULT");
    ZT_CHECK(st != ZINC_OK && strstr(zinc_last_error(), "not saved") && strstr(zinc_last_error(), "Input/output"),
             "an EIO of the writer's ring was not reported: %s", st == ZINC_OK ? "(ok)" : zinc_last_error());
    mlp_destroy(m);
    zinc_destroy(e);

    /* 2. resume from the decoupled step 4: step 6 bitwise */
    ZT_OK(eu_create(&g_dec, &e, &m));
    ZT_OK(zinc_load_checkpoint(e, tb));
    ZT_CHECK(zinc_step_count(e) == 4, "the decoupled checkpoint loads at step %lld", (long long)zinc_step_count(e));
    for (int s = 4; s < 6; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
    got6 = master(e, &n2);
    ZT_CHECK(got6 && n2 == n && !memcmp(got6, ref6, n * sizeof *got6),
             "resumed from the decoupled step 4, step 6 differs from the uninterrupted run");
    mlp_destroy(m);
    zinc_destroy(e);
    free(ref6);
    free(got6);
    live_snapshots(base, rank);
    return zt_finish();
}

/* ---------------------------------------------------------------- --phase kill */

static char g_dir[4096], g_ref[4200];

static int child_save(int steps, int decoupled, const char *dump) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(decoupled ? &g_dec : &g_sync, &e, &m) != ZINC_OK) goto bad;
    for (int s = 0; s < steps; s++)
        if (mlp_train_step(m, s, NULL, NULL) != ZINC_OK) goto bad;
    if (zinc_save_checkpoint(e, g_dir, NULL) != ZINC_OK) goto bad;
    for (int s = steps; s < steps + 3; s++) /* training goes on while the writer writes */
        if (mlp_train_step(m, s, NULL, NULL) != ZINC_OK) goto bad;
    if (zinc_checkpoint_wait(e) != ZINC_OK) goto bad;
    if (dump) {
        size_t n = 0;
        float *p = NULL;
        if (zinc_load_checkpoint(e, g_dir) != ZINC_OK || !(p = master(e, &n))) goto bad;
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(p, sizeof *p, n, f) != n) goto bad;
        fclose(f);
        free(p);
    }
    mlp_destroy(m);
    zinc_destroy(e);
    return 0;
bad:
    fprintf(stderr, "child: %s\n", zinc_last_error());
    return 1;
}

static int child_check(int want) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    size_t n = 0;
    long len = 0;
    if (eu_create(&g_sync, &e, &m) != ZINC_OK) return 1;
    if (zinc_load_checkpoint(e, g_dir) != ZINC_OK) {
        fprintf(stderr, "checker: %s\n", zinc_last_error());
        return 2;
    }
    float *p = master(e, &n);
    char *q = read_all(g_ref, &len);
    int rc = zinc_step_count(e) == want && p && q && len == (long)(n * sizeof *p) && !memcmp(p, q, (size_t)len) ? 0 : 1;
    if (rc) fprintf(stderr, "checker: latest is at step %lld or not its weights\n", (long long)zinc_step_count(e));
    free(p);
    free(q);
    mlp_destroy(m);
    zinc_destroy(e);
    return rc;
}

static int run_child(int what, const char *kill_after) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (kill_after) setenv("ZINC_CKPT_TEST_KILL_AFTER_BYTES", kill_after, 1);
        _exit(what == 0 ? child_save(4, 0, g_ref) : what == 1 ? child_save(6, 1, NULL) : child_check(4));
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    return status;
}

static int kill_phase(void) {
    snprintf(g_dir, sizeof g_dir, "%s/ckpt_test/async_kill", zt_build_dir());
    snprintf(g_ref, sizeof g_ref, "%s/ckpt_test/async_kill_ref4.bin", zt_build_dir());
    ZT_OK(zckpt_rmtree(g_dir));
    int st = run_child(0, NULL);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the synchronous save of step 4 failed");
    char tagdir[4200];
    snprintf(tagdir, sizeof tagdir, "%s/step4", g_dir);
    zckpt_manifest man;
    ZT_OK(zckpt_manifest_read(tagdir, &man));
    long long shard = man.files[0].bytes;
    zckpt_manifest_free(&man);
    /* points inside the shard file (the whole image is written, gaps included), the manifest, `latest` */
    long long points[] = {0, 100, shard / 3, shard - 1, shard + 7};
    for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
        char k[32];
        snprintf(k, sizeof k, "%lld", points[i]);
        st = run_child(1, k);
        ZT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "kill after %s bytes: the writer was not killed", k);
        st = run_child(2, NULL);
        ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kill after %s bytes: latest does not load as step 4", k);
        printf("writer killed after %8s bytes: latest loads step 4, bitwise\n", k);
    }
    st = run_child(1, NULL);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the clean decoupled save after the kills failed");
    char *l = latest_of(g_dir);
    ZT_CHECK(l && !strcmp(l, "step6\n"), "after the clean save latest is %s", l ? l : "(none)");
    free(l);
    return zt_finish();
}

/* ---------------------------------------------------------------- --phase kill20 */

#define K20_STEPS 24
#define K20_EVERY 3

/* A run of K20_STEPS steps saving every K20_EVERY (decoupled, the writer slowed so that it writes most of the
 * time); with `ref`, the master weights of every saved step are dumped there. */
static int child_run(const char *ref) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&g_dec, &e, &m) != ZINC_OK) goto bad;
    for (int s = 0; s < K20_STEPS; s++) {
        if (mlp_train_step(m, s, NULL, NULL) != ZINC_OK) goto bad;
        if ((s + 1) % K20_EVERY) continue;
        if (zinc_save_checkpoint(e, g_dir, NULL) != ZINC_OK) goto bad;
        if (ref) {
            char path[4400];
            size_t n = 0;
            float *p = master(e, &n);
            snprintf(path, sizeof path, "%s/step%d.bin", ref, s + 1);
            FILE *f = p ? fopen(path, "wb") : NULL;
            if (!f || fwrite(p, sizeof *p, n, f) != n) goto bad;
            fclose(f);
            free(p);
        }
    }
    if (zinc_checkpoint_wait(e) != ZINC_OK) goto bad;
    mlp_destroy(m);
    zinc_destroy(e);
    return 0;
bad:
    fprintf(stderr, "child: %s\n", zinc_last_error());
    return 1;
}

/* `latest` resolves, every file of it verifies (size, whole-file and block checksums), and it loads with the
 * reference run's master weights of its step, bitwise. */
static int check_latest(const char *ref, long long *step) {
    char tagdir[4200], tag[256], path[4400];
    zckpt_manifest man;
    long len = 0;
    size_t n = 0;
    if (zckpt_resolve(g_dir, tagdir, sizeof tagdir, tag, sizeof tag) != ZINC_OK ||
        zckpt_manifest_read(tagdir, &man) != ZINC_OK)
        return fprintf(stderr, "checker: %s\n", zinc_last_error()), 1;
    int bad = 0;
    for (int i = 0; i < man.nfiles; i++) bad |= zckpt_verify_file(&man, i) != ZINC_OK;
    zckpt_manifest_free(&man);
    if (bad) return fprintf(stderr, "checker: %s: %s\n", tagdir, zinc_last_error()), 1;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&g_sync, &e, &m) != ZINC_OK || zinc_load_checkpoint(e, g_dir) != ZINC_OK)
        return fprintf(stderr, "checker: %s\n", zinc_last_error()), 1;
    *step = (long long)zinc_step_count(e);
    snprintf(path, sizeof path, "%s/step%lld.bin", ref, *step);
    float *p = master(e, &n);
    char *q = read_all(path, &len);
    int rc = p && q && len == (long)(n * sizeof *p) && !memcmp(p, q, (size_t)len) ? 0 : 1;
    if (rc) fprintf(stderr, "checker: latest (step %lld) does not hold the weights of its step\n", *step);
    free(p);
    free(q);
    mlp_destroy(m);
    zinc_destroy(e);
    return rc;
}

/* Whether a save was in flight: a staging directory or a temporary file left in the checkpoint directory. */
static int write_in_flight(void) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "find '%s' -name '.*.partial' -o -name '*.tmp' | grep -q .", g_dir);
    return system(cmd) == 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int kill20_phase(void) {
    char ref[4200];
    snprintf(g_dir, sizeof g_dir, "%s/ckpt_test/async_kill20", zt_build_dir());
    snprintf(ref, sizeof ref, "%s/ckpt_test/async_kill20_ref", zt_build_dir());
    ZT_OK(zckpt_rmtree(g_dir));
    ZT_OK(zckpt_rmtree(ref));
    ZT_OK(zckpt_mkdirs(ref));
    setenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS", "8", 1);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("kill20: seed %u\n", seed);
    srand(seed);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(child_run(ref));
    int st = -1;
    waitpid(pid, &st, 0);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reference run failed");
    double t0 = now_s(); /* the length of a run as the killed ones run (no dumps) */
    pid = fork();
    if (pid == 0) _exit(child_run(NULL));
    waitpid(pid, &st, 0);
    double T = now_s() - t0;
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the timing run failed");
    int mid = 0, killed = 0;
    for (int k = 0; k < 20; k++) {
        double at = T * (0.05 + 0.85 * (double)rand() / RAND_MAX);
        fflush(stdout);
        pid = fork();
        if (pid == 0) _exit(child_run(NULL));
        usleep((useconds_t)(at * 1e6));
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        int in_flight = write_in_flight();
        killed += WIFSIGNALED(st);
        mid += in_flight;
        long long step = -1;
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            long long s = -1;
            int rc = check_latest(ref, &s);
            printf("kill %2d at %.3f s of %.3f%s: latest is step %lld, verified, loads bitwise%s\n", k + 1, at, T,
                   WIFSIGNALED(st) ? "" : " (the run had ended)", s, in_flight ? " (a write was in flight)" : "");
            fflush(stdout);
            _exit(rc);
        }
        waitpid(c, &st, 0);
        ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kill %d at %.3f s: latest does not load and verify", k + 1,
                 at);
        (void)step;
    }
    printf("kill20: %d of 20 kills killed the run, %d of them with a save in flight\n", killed, mid);
    ZT_CHECK(killed >= 10, "only %d of 20 kills came before the run ended (the machine's load changed?)", killed);
    unsetenv("ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS");
    return zt_finish();
}

int main(int argc, char **argv) {
    zt_name = "checkpoint_async";
    if (argc > 2 && !strcmp(argv[1], "--phase") && !strcmp(argv[2], "kill")) return kill_phase();
    if (argc > 2 && !strcmp(argv[1], "--phase") && !strcmp(argv[2], "kill20")) return kill20_phase();
    return collective();
}
