/* Writing checkpoint files where another local user, a second run or a crash cannot turn a save into
 * damage: directories checked before use, files created exclusively without following links, one saver
 * per checkpoint directory (a lock file), and the leftovers of interrupted saves cleaned or recovered. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"

zinc_status zckpt_check_dir(const char *path, const char *what) { return zfile_check_dir(path, what); }

zinc_status zckpt_create_excl(const char *path, int flags, int *fd_out) {
    *fd_out = -1;
    /* A leftover of an interrupted save (or a planted link) is removed, never followed: unlink removes the
     * link itself, and the create below fails rather than follow one planted again in between. */
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return ZERR(ZINC_ERR_IO, "cannot create %s: a directory of that name is in the way; remove it", path);
        if (unlink(path) != 0 && errno != ENOENT)
            return ZERR(ZINC_ERR_IO, "cannot remove the stale %s: %s", path, strerror(errno));
    }
    int fd = open(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return ZERR(ZINC_ERR_IO, "cannot create %s: %s (%s)", path, strerror(errno),
                    errno == EEXIST || errno == ELOOP ? "something was put in its place while zinc wrote; check who "
                                                        "else writes into this directory"
                                                      : "check the directory's permissions and free space");
    *fd_out = fd;
    return ZINC_OK;
}

zinc_status zckpt_lock_dir(const char *dir, int *fd_out) {
    char p[ZCKPT_PATH_MAX];
    *fd_out = -1;
    zinc_status st = zckpt_path(p, sizeof p, "%s/" ZCKPT_LOCK, dir);
    if (st != ZINC_OK) return st;
    int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) return ZERR(ZINC_ERR_IO, "cannot open the checkpoint lock file %s: %s", p, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ZERR(ZINC_ERR_IO, "checkpoint lock file %s is not a regular file: remove it", p);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char owner[64] = "";
        ssize_t k = pread(fd, owner, sizeof owner - 1, 0);
        owner[k > 0 ? k : 0] = 0;
        owner[strcspn(owner, "\n")] = 0;
        close(fd);
        if (err == EWOULDBLOCK)
            return ZERR(ZINC_ERR_IO,
                        "checkpoint directory %s is being saved into by another process (%s holds %s): "
                        "two runs must not save into one directory; use another --save directory or "
                        "wait for it to finish",
                        dir, owner[0] ? owner : "unknown", p);
        return ZERR(ZINC_ERR_IO, "cannot lock %s: %s", p, strerror(err));
    }
    char me[64];
    int n = snprintf(me, sizeof me, "pid %ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, me, (size_t)n, 0) < 0) { /* the owner is only for messages */
    }
    *fd_out = fd;
    return ZINC_OK;
}

void zckpt_unlock_dir(int fd) {
    if (fd >= 0) close(fd); /* closing releases the flock */
}

/* Under the lock: `.TAG.old` (a re-save interrupted between its two renames) goes back to TAG when TAG is
 * missing, else it is removed; stale `.TAG.partial` directories and `*.tmp` files are removed. */
zinc_status zckpt_clean_stale(const char *dir) {
    zinc_status st = ZINC_OK;
    DIR *d = opendir(dir);
    if (!d) return ZERR(ZINC_ERR_IO, "cannot list checkpoint directory %s: %s", dir, strerror(errno));
    struct dirent *de;
    char p[ZCKPT_PATH_MAX], q[ZCKPT_PATH_MAX];
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        size_t len = strlen(n);
        /* .TAG.partial: an interrupted save; .TAG.removing: an interrupted zinc_checkpoint_keep_last */
        if ((len > 9 && n[0] == '.' && !strcmp(n + len - 8, ".partial")) ||
            (len > 10 && n[0] == '.' && !strcmp(n + len - 9, ".removing"))) {
            TRY(zckpt_path(p, sizeof p, "%s/%s", dir, n));
            TRY(zckpt_rmtree(p));
        } else if (len > 5 && n[0] == '.' && !strcmp(n + len - 4, ".old")) {
            TRY(zckpt_path(p, sizeof p, "%s/%s", dir, n));
            TRY(zckpt_path(q, sizeof q, "%s/%.*s", dir, (int)(len - 5), n + 1));
            struct stat sb;
            if (lstat(q, &sb) != 0 && errno == ENOENT && zckpt_check_tag(q + strlen(dir) + 1) == ZINC_OK) {
                if (rename(p, q) != 0) FAIL(ZINC_ERR_IO, "cannot restore %s to %s: %s", p, q, strerror(errno));
            } else {
                TRY(zckpt_rmtree(p));
            }
        } else if (len > 4 && !strcmp(n + len - 4, ".tmp")) {
            TRY(zckpt_path(p, sizeof p, "%s/%s", dir, n));
            if (unlink(p) != 0 && errno != ENOENT)
                FAIL(ZINC_ERR_IO, "cannot remove the stale %s: %s", p, strerror(errno));
        }
    }
fail:
    closedir(d);
    return st;
}
