/* Saves and exports that another user, a second run or a crash cannot turn into damage (issue 18). One
 * process without MPI; the cases that need several processes fork before this process creates an engine.
 *
 *   1. Two savers: while the directory's lock is held, a save fails naming the holder; two processes saving
 *      into one directory at once (5 saves each) never publish a checkpoint that fails its checks.
 *   2. A re-save of an existing tag on a file system without an atomic directory exchange, killed between
 *      its two renames: `latest` still loads (the old checkpoint), and the next save restores it.
 *   3. Links planted where the save writes (latest.tmp, the staging directory) are never followed.
 *   4. Directories: not ours (another owner) or writable by everyone without the sticky bit: refused.
 *   5. Export: refuses links, FIFOs, devices, directories and the checkpoint's own files; an existing
 *      regular file only with ZINC_EXPORT_REPLACE. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "engine_util.h"
#include "zt.h"

static char g_root[4096];
static eu_run g_run = {.stage = 1, .dtype = ZINC_FP32};

static int in_child(int (*fn)(void *), void *arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = fn(arg);
        fflush(stdout);
        _exit(rc);
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    return status;
}

static void path(char *buf, size_t cap, const char *a, const char *b) { snprintf(buf, cap, "%s/%s", a, b); }

/* Trains `steps` and saves into dir with `tag` (NULL: step<N>); returns the save's status. */
static zinc_status train_save(const char *dir, int steps, const char *tag) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = eu_create(&g_run, &e, &m);
    for (int s = 0; st == ZINC_OK && s < steps; s++) st = mlp_train_step(m, s, NULL, NULL);
    if (st == ZINC_OK) st = zinc_save_checkpoint(e, dir, tag);
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}

/* In a child: loads path; exit status = its step count, 200 when the load fails. */
static const char *g_load_path;
static int load_child(void *arg) {
    (void)arg;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = eu_create(&g_run, &e, &m);
    if (st == ZINC_OK) st = zinc_load_checkpoint(e, g_load_path);
    if (st != ZINC_OK) fprintf(stderr, "load %s: %s\n", g_load_path, zinc_last_error());
    int rc = st == ZINC_OK ? (int)zinc_step_count(e) : 200;
    mlp_destroy(m);
    zinc_destroy(e);
    return rc;
}
static int loads_at(const char *p) {
    g_load_path = p;
    int st = in_child(load_child, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every checkpoint step<lo..hi> under dir passes its manifest checks and every file verifies. */
static int all_verify(const char *dir, int lo, int hi) {
    int good = 0;
    for (int s = lo; s <= hi; s++) {
        char tagdir[4300];
        snprintf(tagdir, sizeof tagdir, "%s/step%d", dir, s);
        if (access(tagdir, F_OK) != 0) continue;
        zckpt_manifest m;
        ZT_OK(zckpt_manifest_read(tagdir, &m));
        for (int i = 0; i < m.nfiles; i++) ZT_OK(zckpt_verify_file(&m, i));
        zckpt_manifest_free(&m);
        good++;
    }
    return good;
}

/* ---------------------------------------------------------------- 1. two savers */

static char g_race[4200];
static int racer(void *arg) {
    int base = *(int *)arg, ok = 0, locked = 0;
    for (int k = 0; k < 5; k++) {
        zinc_status st = train_save(g_race, base + k, NULL);
        if (st == ZINC_OK) ok++;
        else if (strstr(zinc_last_error(), "being saved into by another process")) locked++;
        else {
            fprintf(stderr, "racer %d: unexpected error: %s\n", base, zinc_last_error());
            return 100;
        }
    }
    printf("saver %d: %d saves, %d refused by the lock\n", base, ok, locked);
    return locked;
}

static void two_savers(void) {
    path(g_race, sizeof g_race, g_root, "race");
    ZT_OK(zckpt_mkdirs(g_race));
    /* The lock held by someone else: every save fails at once with a message naming the holder. */
    char lock[4300];
    path(lock, sizeof lock, g_race, ZCKPT_LOCK);
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    ZT_CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot take %s", lock);
    int st = in_child(racer, &(int){1});
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 5, "5 saves with the lock held elsewhere: status %d", st);
    close(fd);
    /* Two real savers at once: each save succeeds or is refused by the lock; what is published verifies. */
    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        int rc = racer(&(int){10});
        fflush(stdout);
        _exit(rc);
    }
    pid_t b = fork();
    if (b == 0) {
        int rc = racer(&(int){10});
        fflush(stdout);
        _exit(rc);
    }
    int sa = -1, sb = -1;
    waitpid(a, &sa, 0);
    waitpid(b, &sb, 0);
    ZT_CHECK(WIFEXITED(sa) && WEXITSTATUS(sa) <= 5 && WIFEXITED(sb) && WEXITSTATUS(sb) <= 5,
             "concurrent savers: status %d and %d", sa, sb);
    int good = all_verify(g_race, 10, 14);
    ZT_CHECK(good >= 1, "no checkpoint published by the concurrent savers");
    int at = loads_at(g_race);
    ZT_CHECK(at >= 10 && at <= 14, "`latest` after concurrent savers loads at %d", at);
    printf("two savers: %d checkpoints published, all verify; latest loads at step %d\n", good, at);
}

/* ---------------------------------------------------------------- 2. portable re-save, killed */

static char g_resave[4200];
static int resave_killed(void *arg) {
    (void)arg;
    if (train_save(g_resave, 2, "fixed") != ZINC_OK) return 100;
    setenv("ZINC_CKPT_TEST_NO_EXCHANGE", "1", 1);
    setenv("ZINC_CKPT_TEST_KILL_BETWEEN_RENAMES", "1", 1);
    train_save(g_resave, 3, "fixed");
    return 101; /* not killed */
}
static int resave_again(void *arg) {
    (void)arg;
    setenv("ZINC_CKPT_TEST_NO_EXCHANGE", "1", 1);
    return train_save(g_resave, 4, "fixed") == ZINC_OK ? 0 : (fprintf(stderr, "%s\n", zinc_last_error()), 1);
}

static void portable_resave(void) {
    path(g_resave, sizeof g_resave, g_root, "resave");
    int st = in_child(resave_killed, NULL);
    ZT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the re-save was not killed between its renames (%d)", st);
    char fixed[4300], old[4300];
    path(fixed, sizeof fixed, g_resave, "fixed");
    path(old, sizeof old, g_resave, ".fixed.old");
    ZT_CHECK(access(fixed, F_OK) != 0 && access(old, F_OK) == 0, "the kill did not fall between the renames");
    ZT_CHECK(loads_at(g_resave) == 2, "`latest` after a kill between the renames does not load step 2");
    st = in_child(resave_again, NULL);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the next save failed (%d)", st);
    ZT_CHECK(access(old, F_OK) != 0, "%s was left behind", old);
    ZT_CHECK(loads_at(g_resave) == 4, "after the next save `latest` does not load step 4");
    printf("re-save without an atomic exchange, killed between its renames: latest loads the old step; the next "
           "save completes\n");
}

/* ---------------------------------------------------------------- 3, 4. links and directories */

static void spit(const char *p, const char *text) {
    FILE *f = fopen(p, "w");
    ZT_CHECK(f != NULL, "cannot write %s", p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}
static int same_text(const char *p, const char *text) {
    char buf[256] = "";
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return !strcmp(buf, text);
}

typedef struct save_arg {
    const char *dir;
    int steps;
    const char *needle; /* NULL: must succeed */
} save_arg;
static int save_child(void *arg) {
    const save_arg *a = arg;
    zinc_status st = train_save(a->dir, a->steps, NULL);
    if (!a->needle) return st == ZINC_OK ? 0 : (fprintf(stderr, "save: %s\n", zinc_last_error()), 1);
    if (st == ZINC_OK) return 2;
    if (!strstr(zinc_last_error(), a->needle)) return fprintf(stderr, "save: %s\n", zinc_last_error()), 3;
    printf("  refused: %.200s\n", zinc_last_error());
    return 0;
}
static void save_expect(const char *dir, int steps, const char *needle, const char *what) {
    save_arg a = {dir, steps, needle};
    int st = in_child(save_child, &a);
    ZT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", what, st);
}

static void links_and_dirs(void) {
    char dir[4200], victim[4300], vdir[4300], link1[4300], link2[4300], vfile[4400];
    path(dir, sizeof dir, g_root, "links");
    path(victim, sizeof victim, g_root, "victim.txt");
    path(vdir, sizeof vdir, g_root, "victim_dir");
    ZT_OK(zckpt_mkdirs(dir));
    ZT_OK(zckpt_mkdirs(vdir));
    spit(victim, "precious\n");
    path(vfile, sizeof vfile, vdir, "keep.txt");
    spit(vfile, "keep\n");
    path(link1, sizeof link1, dir, "latest.tmp");
    path(link2, sizeof link2, dir, ".step2.partial");
    ZT_CHECK(symlink(victim, link1) == 0 && symlink(vdir, link2) == 0, "cannot plant links");
    save_expect(dir, 2, NULL, "a save with planted links");
    ZT_CHECK(same_text(victim, "precious\n") && same_text(vfile, "keep\n"), "a planted link was followed");
    ZT_CHECK(loads_at(dir) == 2, "the save with planted links does not load");
    printf("links at latest.tmp and .step2.partial: not followed, the victims unchanged, the save loads\n");

    char open_dir[4200], sticky[4200], other[4200];
    path(open_dir, sizeof open_dir, g_root, "world_writable");
    path(sticky, sizeof sticky, g_root, "sticky");
    path(other, sizeof other, g_root, "other_owner");
    ZT_OK(zckpt_mkdirs(open_dir));
    ZT_OK(zckpt_mkdirs(sticky));
    ZT_CHECK(chmod(open_dir, 0777) == 0 && chmod(sticky, 01777) == 0, "chmod failed");
    save_expect(open_dir, 2, "writable by every user", "a world-writable directory");
    save_expect(sticky, 2, NULL, "a sticky world-writable directory");
    if (geteuid() == 0) {
        ZT_OK(zckpt_mkdirs(other));
        ZT_CHECK(chown(other, 4242, 4242) == 0, "chown failed");
        save_expect(other, 2, "belongs to user 4242", "a directory of another user");
    } else {
        printf("(not root: the other-owner case is not run)\n");
    }
}

/* ---------------------------------------------------------------- 5. export */

static void export_cases(void) {
    char dir[4200], out[4300], victim[4300], lnk[4300], fifo[4300], shard[4400], odir[4300], oout[4400];
    path(dir, sizeof dir, g_root, "links"); /* saved above at step 2 */
    path(out, sizeof out, g_root, "out.safetensors");
    path(victim, sizeof victim, g_root, "victim.txt");
    path(lnk, sizeof lnk, g_root, "link.safetensors");
    path(fifo, sizeof fifo, g_root, "fifo.safetensors");
    snprintf(shard, sizeof shard, "%s/step2/rank00000.zshard", dir);
    path(odir, sizeof odir, g_root, "world_writable");
    path(oout, sizeof oout, odir, "x.safetensors");
    unlink(out);
    ZT_OK(zinc_export_safetensors(dir, out, ZINC_FP32));
    ZT_ERR(zinc_export_safetensors(dir, out, ZINC_FP32), ZINC_ERR_IO, "--force");
    ZT_OK(zinc_export_safetensors_ex(dir, out, ZINC_BF16, ZINC_EXPORT_REPLACE));
    ZT_CHECK(symlink(victim, lnk) == 0, "cannot plant a link");
    ZT_ERR(zinc_export_safetensors_ex(dir, lnk, ZINC_FP32, ZINC_EXPORT_REPLACE), ZINC_ERR_IO, "symbolic link");
    ZT_CHECK(same_text(victim, "precious\n"), "export followed a link");
    ZT_CHECK(mkfifo(fifo, 0600) == 0, "cannot make a FIFO");
    ZT_ERR(zinc_export_safetensors_ex(dir, fifo, ZINC_FP32, ZINC_EXPORT_REPLACE), ZINC_ERR_IO, "FIFO");
    ZT_ERR(zinc_export_safetensors_ex(dir, "/dev/null", ZINC_FP32, ZINC_EXPORT_REPLACE), ZINC_ERR_IO, "device");
    ZT_ERR(zinc_export_safetensors_ex(dir, shard, ZINC_FP32, ZINC_EXPORT_REPLACE), ZINC_ERR_INVALID_ARG,
           "checkpoint's own file");
    ZT_ERR(zinc_export_safetensors_ex(dir, oout, ZINC_FP32, 0), ZINC_ERR_IO, "writable by every user");
    ZT_CHECK(loads_at(dir) == 2, "the checkpoint no longer loads after the refused exports");
    printf("export: existing file (needs --force), link, FIFO, /dev/null, own shard, open directory: refused\n");
}

int main(void) {
    zt_name = "checkpoint_safety";
    alarm(600);
    path(g_root, sizeof g_root, zt_build_dir(), "ckpt_test/safety");
    ZT_OK(zckpt_rmtree(g_root));
    ZT_OK(zckpt_mkdirs(g_root));
    two_savers();
    portable_resave();
    links_and_dirs();
    export_cases();
    return zt_finish();
}
