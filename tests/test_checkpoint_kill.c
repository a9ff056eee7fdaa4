/* An interrupted save leaves the previous checkpoint loadable. One rank, no MPI; every engine runs in a
 * forked child (the parent never creates one, so forking stays safe):
 *
 *   1. a child trains 4 steps, saves step4 and dumps its master weights;
 *   2. a child trains 6 steps and saves step6 into a scratch directory, to learn how many bytes a save
 *      writes (shard data, then manifest.json, then `latest`);
 *   3. for kill points inside the shard header, the sections, the manifest and `latest`, a child with
 *      ZINC_CKPT_TEST_KILL_AFTER_BYTES=N trains 6 steps and saves: the writer raises SIGKILL after N
 *      bytes. Then a checker child loads DIR (through `latest`): it must be step 4 with the dumped
 *      weights, bitwise; DIR/step6 must not exist unless the kill came after the manifest (then it
 *      must load as step 6);
 *   4. a clean save of step 6 afterwards succeeds, removes the stale staging directory and moves
 *      `latest` on. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "engine_util.h"
#include "zt.h"

static char g_dir[4096], g_scratch[4096], g_ref[4200];
static eu_run g_run = {.stage = 2, .dtype = ZINC_FP16};

static int train_and_save(const char *dir, int steps, const char *dump) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&g_run, &e, &m) != ZINC_OK) goto bad;
    for (int s = 0; s < steps; s++)
        if (mlp_train_step(m, s, NULL, NULL) != ZINC_OK) goto bad;
    if (zinc_save_checkpoint(e, dir, NULL) != ZINC_OK) goto bad;
    if (dump) {
        size_t n = (size_t)zinc_numel_total(e);
        float *p = malloc(n * sizeof *p);
        FILE *f = fopen(dump, "wb");
        if (!p || !f || zinc_gather_master(e, p, n) != ZINC_OK || fwrite(p, sizeof *p, n, f) != n) goto bad;
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

/* Loads `path`; 0 when it is at step `want` (and, with a reference dump, has its weights), 1 if it loads
 * wrong, 2 if loading fails. */
static int check_load(const char *path, int want, const char *ref) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    if (eu_create(&g_run, &e, &m) != ZINC_OK) return 1;
    if (zinc_load_checkpoint(e, path) != ZINC_OK) {
        fprintf(stderr, "checker: %s\n", zinc_last_error());
        return 2;
    }
    int rc = zinc_step_count(e) == want ? 0 : 1;
    if (rc) fprintf(stderr, "checker: %s is at step %lld, expected %d\n", path, (long long)zinc_step_count(e), want);
    if (ref && rc == 0) {
        size_t n = (size_t)zinc_numel_total(e);
        float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
        FILE *f = fopen(ref, "rb");
        if (!p || !q || !f || fread(q, sizeof *q, n, f) != n || zinc_gather_master(e, p, n) != ZINC_OK ||
            memcmp(p, q, n * sizeof *p) != 0) {
            fprintf(stderr, "checker: %s does not hold the step-%d weights\n", path, want);
            rc = 1;
        }
        if (f) fclose(f);
        free(p);
        free(q);
    }
    mlp_destroy(m);
    zinc_destroy(e);
    return rc;
}

/* Runs fn in a child; returns its wait status. */
typedef int (*child_fn)(void *);
static int in_child(child_fn fn, void *arg, const char *kill_after) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (kill_after) setenv("ZINC_CKPT_TEST_KILL_AFTER_BYTES", kill_after, 1);
        _exit(fn(arg));
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    return status;
}

static int exited(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

static int save4(void *a) { return train_and_save(g_dir, 4, (const char *)a); }
static int save6(void *a) { return train_and_save((const char *)a, 6, NULL); }
static int load_latest(void *a) { return check_load(g_dir, 4, (const char *)a); }
typedef struct load_arg {
    const char *path;
    int want;
} load_arg;
static int load_path(void *a) {
    const load_arg *l = a;
    return check_load(l->path, l->want, NULL);
}

static long long file_size(const char *dir, const char *name) {
    char p[8300];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 ? (long long)sb.st_size : -1;
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

int main(void) {
    zt_name = "checkpoint_kill";
    snprintf(g_dir, sizeof g_dir, "%s/ckpt_test/kill", zt_build_dir());
    snprintf(g_scratch, sizeof g_scratch, "%s/ckpt_test/kill_scratch", zt_build_dir());
    snprintf(g_ref, sizeof g_ref, "%s/ckpt_test/kill_ref4.bin", zt_build_dir());
    ZT_OK(zckpt_rmtree(g_dir));
    ZT_OK(zckpt_rmtree(g_scratch));

    ZT_CHECK(exited(in_child(save4, g_ref, NULL), 0), "saving step 4 failed");
    ZT_CHECK(exited(in_child(save6, g_scratch, NULL), 0), "saving step 6 (scratch) failed");

    /* Bytes a step-6 save writes: the shard file's header and three sections (the alignment gaps between
     * them are not written), the manifest, `latest`. */
    char tagdir[4200];
    snprintf(tagdir, sizeof tagdir, "%s/step6", g_scratch);
    zckpt_manifest man;
    ZT_OK(zckpt_manifest_read(tagdir, &man));
    if (man.nfiles != 1) return zt_finish();
    long long n = man.files[0].flat_hi - man.files[0].flat_lo;
    long long shard = ZCKPT_HEADER_BYTES + 3 * 4 * n;
    long long mlen = file_size(tagdir, ZCKPT_MANIFEST), llen = file_size(g_scratch, ZCKPT_LATEST);
    zckpt_manifest_free(&man);
    ZT_CHECK(mlen > 0 && llen == 6, "scratch manifest %lld bytes, latest %lld bytes", mlen, llen);
    printf("a save writes %lld shard bytes, %lld manifest bytes, %lld bytes of latest\n", shard, mlen, llen);

    struct {
        long long at;
        const char *where;
    } points[] = {
        {0, "before anything"},
        {100, "in the shard header"},
        {ZCKPT_HEADER_BYTES + 4 * n + 17, "in exp_avg"},
        {shard - 1, "at the end of exp_avg_sq"},
        {shard + 5, "in the manifest"},
        {shard + mlen, "right after the manifest"},
        {shard + mlen + 3, "in latest"},
    };
    char partial[4200], step6[4200];
    snprintf(partial, sizeof partial, "%s/.step6.partial", g_dir);
    snprintf(step6, sizeof step6, "%s/step6", g_dir);
    for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
        char k[32];
        snprintf(k, sizeof k, "%lld", points[i].at);
        int st = in_child(save6, g_dir, k);
        ZT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "kill after %s bytes (%s): the save was not killed", k,
                 points[i].where);
        ZT_CHECK(exited(in_child(load_latest, g_ref, NULL), 0),
                 "kill after %s bytes (%s): the previous checkpoint does not load as step 4", k, points[i].where);
        int installed = points[i].at > shard + mlen;
        if (installed) {
            load_arg la = {step6, 6};
            ZT_CHECK(exited(in_child(load_path, &la, NULL), 0), "kill %s: step6 was installed but does not load",
                     points[i].where);
        } else {
            ZT_CHECK(!exists(step6), "kill %s: step6 exists before its manifest was complete", points[i].where);
            load_arg la = {step6, 6};
            ZT_CHECK(exited(in_child(load_path, &la, NULL), 2), "kill %s: loading the missing step6 did not fail",
                     points[i].where);
        }
        printf("killed after %6s bytes (%-26s): latest loads step 4%s\n", k, points[i].where,
               installed ? ", step6 complete" : ", no step6");
        if (installed) ZT_OK(zckpt_rmtree(step6)); /* so the next point starts without it */
    }

    ZT_CHECK(exited(in_child(save6, g_dir, NULL), 0), "the clean save after the kills failed");
    ZT_CHECK(!exists(partial), "the clean save left %s", partial);
    load_arg la = {g_dir, 6};
    ZT_CHECK(exited(in_child(load_path, &la, NULL), 0), "after the clean save, latest does not load as step 6");
    return zt_finish();
}
