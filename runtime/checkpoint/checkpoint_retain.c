/* zinc_checkpoint_keep_last: after a save has published its tag and `latest`, the directory writers remove
 * the oldest step<N> tags beyond the newest K, never the one `latest` names. Each goes aside first as
 * .step<N>.removing (one rename), then its tree is removed: a kill part-way leaves `latest` and every kept
 * tag whole, and the next save (zckpt_clean_stale) removes what is left aside. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"

/* The step of a tag zinc named itself, else -1: other tags are the user's, kept. Only the canonical spelling
 * "step%lld" counts: "step05" or "step0005" is not what a save of step 5 writes (a user's copy), so it is
 * neither counted nor removed. */
static int64_t step_of(const char *name) {
    if (strncmp(name, "step", 4) || !name[4] || strlen(name) > 22) return -1;
    if (name[4] == '0' && name[5]) return -1; /* a leading zero */
    int64_t v = 0;
    for (const char *c = name + 4; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

int64_t zckpt_latest_step(const char *dir) {
    char path[ZCKPT_PATH_MAX], *tag = NULL;
    size_t n = 0;
    if (snprintf(path, sizeof path, "%s/" ZCKPT_LATEST, dir) >= (int)sizeof path) return -1;
    if (zckpt_read_small(path, &tag, &n) != ZINC_OK) return zinc__error_clear(), -1;
    while (n && (tag[n - 1] == '\n' || tag[n - 1] == '\r' || tag[n - 1] == ' ')) tag[--n] = 0;
    int64_t s = step_of(tag);
    free(tag);
    return s;
}

static int newest_first(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The step tags in dir, newest first (*n of them; malloc'd). */
static zinc_status list_steps(const char *dir, int64_t **out, int *n) {
    zinc_status st = ZINC_OK;
    int cap = 0;
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return ZERR(ZINC_ERR_IO, "cannot list checkpoint directory %s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t s = step_of(de->d_name);
        if (s < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*out, (size_t)cap * sizeof **out);
            if (!grown) FAIL(ZINC_ERR_NOMEM, "out of memory listing the checkpoints of %s", dir);
            *out = grown;
        }
        (*out)[(*n)++] = s;
    }
    if (*n) qsort(*out, (size_t)*n, sizeof **out, newest_first);
fail:
    closedir(d);
    return st;
}

zinc_status zckpt_retain_locked(const char *dir, int keep) {
    zinc_status st = ZINC_OK;
    char path[ZCKPT_PATH_MAX], aside[ZCKPT_PATH_MAX], *latest = NULL;
    int64_t *steps = NULL;
    int n = 0;
    TRY(zckpt_path(path, sizeof path, "%s/%s", dir, ZCKPT_LATEST));
    size_t len = 0;
    TRY(zckpt_read_small(path, &latest, &len));
    while (len && (latest[len - 1] == '\n' || latest[len - 1] == '\r')) latest[--len] = 0;
    int64_t named = step_of(latest);
    TRY(list_steps(dir, &steps, &n));
    const char *kill = zenv_get(ZENV_CKPT_TEST_KILL_IN_RETENTION);
    /* Tags beyond the one `latest` names are not this run's (a longer run's, left in the directory): they take
     * no slot of the K and are not removed. */
    int newer = 0;
    while (named >= 0 && newer < n && steps[newer] > named) newer++;
    for (int i = newer + keep; i < n; i++) {
        if (steps[i] == named) continue;
        TRY(zckpt_path(path, sizeof path, "%s/step%lld", dir, (long long)steps[i]));
        TRY(zckpt_path(aside, sizeof aside, "%s/.step%lld.removing", dir, (long long)steps[i]));
        TRY(zckpt_rmtree(aside));
        if (rename(path, aside) != 0)
            FAIL(ZINC_ERR_IO, "cannot move the old checkpoint %s aside to %s: %s", path, aside, strerror(errno));
        if (kill && *kill == '1') raise(SIGKILL);
        TRY(zckpt_rmtree(aside));
    }
    TRY(zckpt_fsync_dir(dir));
fail:
    free(latest);
    free(steps);
    return st;
}

zinc_status zckpt_retain(const char *dir, int keep) {
    int lock_fd = -1;
    zinc_status st = zckpt_lock_dir(dir, &lock_fd);
    if (st == ZINC_OK) st = zckpt_retain_locked(dir, keep);
    zckpt_unlock_dir(lock_fd);
    return st;
}

zinc_status zinc_checkpoint_keep_last(zinc_engine *e, const char *dir, int keep) {
    if (!e || !dir) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_keep_last: engine or dir is NULL");
    if (keep < 1)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_keep_last: keep %d: want 1 or more checkpoints", keep);
    /* checkpoint.writer.decoupled: the save in flight holds the directory's lock; its publish applies this
     * once the new checkpoint is `latest` (checkpoint_async.c), and this call does not wait for it. */
    zckpt_save_job *job = e->ckpt_async;
    if (job && !strcmp(job->dir, dir)) {
        __atomic_store_n(&job->keep_last, keep, __ATOMIC_RELEASE); /* read by the publisher thread */
        return ZINC_OK;
    }
    zinc_status waited = zckpt_async_wait(e);
    if (waited != ZINC_OK) return waited;
    zinc_status local = zckpt_is_dir_writer(e) ? zckpt_retain(dir, keep) : ZINC_OK;
    return zcomm_agree_status(e->comm, local);
}
