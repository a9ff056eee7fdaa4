/* See safe_file.h. */
#include "base/core/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/core/error.h"

static const char *kind_of(mode_t m) {
    return S_ISLNK(m)                 ? "a symbolic link"
           : S_ISDIR(m)               ? "a directory"
           : S_ISFIFO(m)              ? "a FIFO"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISSOCK(m)              ? "a socket"
                                      : "a special file";
}

/* Whether the link `name` in directory `dir` (a real directory, dsb its stat) may be followed: dir writable
 * by no one but its owner, who is this user or root; or sticky, with the link owned by this user or root
 * (the kernel's fs.protected_symlinks rule, applied whatever that setting is). */
static zinc_status link_trusted(const char *what, const char *path, const char *dir, const struct stat *dsb,
                                const char *link, const struct stat *lsb) {
    uid_t me = geteuid();
    bool owned = dsb->st_uid == me || dsb->st_uid == 0, link_ours = lsb->st_uid == me || lsb->st_uid == 0;
    bool shared = (dsb->st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (owned && (!shared || ((dsb->st_mode & S_ISVTX) && link_ours))) return ZINC_OK;
    return ZERR(ZINC_ERR_IO,
                "%s %s: the path goes through the symbolic link %s in %s, a directory %s (mode %04o, owner %ld): "
                "whoever else can write there could point it anywhere; refused: give a path without that link "
                "(its target, or a directory of your own)",
                what, path, link, dir, owned ? "other users can write" : "of another user",
                (unsigned)(dsb->st_mode & 07777), (long)dsb->st_uid);
}

zinc_status zfile_check_links(const char *path, const char *what) {
    char cur[ZFILE_PATH_MAX], rest[2 * ZFILE_PATH_MAX], cand[2 * ZFILE_PATH_MAX + 2], target[ZFILE_PATH_MAX];
    if (!path || !*path) return ZINC_OK;
    if (snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: path too long: %.200s", what, path);
    if (path[0] == '/')
        snprintf(cur, sizeof cur, "/");
    else if (!getcwd(cur, sizeof cur))
        return ZERR(ZINC_ERR_IO, "%s %s: cannot read the working directory: %s", what, path, strerror(errno));
    for (int hops = 0; rest[0];) {
        char *c = rest;
        while (*c == '/') c++;
        size_t len = strcspn(c, "/");
        char comp[256];
        if (len >= sizeof comp) return ZINC_OK; /* no such name: nothing on the way is a link */
        memcpy(comp, c, len);
        comp[len] = 0;
        memmove(rest, c + len, strlen(c + len) + 1);
        if (!len || !strcmp(comp, ".")) continue;
        if (!strcmp(comp, "..")) {
            char *slash = strrchr(cur, '/');
            if (slash && slash != cur)
                *slash = 0;
            else
                snprintf(cur, sizeof cur, "/");
            continue;
        }
        snprintf(cand, sizeof cand, "%s%s%s", cur, strcmp(cur, "/") ? "/" : "", comp);
        struct stat lsb, dsb;
        if (lstat(cand, &lsb) != 0) return ZINC_OK; /* not made yet: what follows is made by zinc, no link */
        if (!S_ISLNK(lsb.st_mode)) {
            if (snprintf(cur, sizeof cur, "%s", cand) >= (int)sizeof cur) return ZINC_OK;
            continue;
        }
        if (stat(cur, &dsb) != 0) return ZINC_OK;
        zinc_status st = link_trusted(what, path, cur, &dsb, cand, &lsb);
        if (st != ZINC_OK) return st;
        ssize_t n = readlink(cand, target, sizeof target - 1);
        if (n <= 0 || ++hops > 40) return ZINC_OK; /* the open itself reports a loop or a bad link */
        target[n] = 0;
        char joined[2 * ZFILE_PATH_MAX];
        if (snprintf(joined, sizeof joined, "%s/%s", target, rest) >= (int)sizeof joined) return ZINC_OK;
        snprintf(rest, sizeof rest, "%s", joined);
        if (target[0] == '/') snprintf(cur, sizeof cur, "/");
    }
    return ZINC_OK;
}

zinc_status zfile_check_dir(const char *path, const char *what) {
    struct stat sb;
    zinc_status lt = zfile_check_links(path, what);
    if (lt != ZINC_OK) return lt;
    if (stat(path, &sb) != 0)
        return ZERR(ZINC_ERR_IO, "%s %s: %s (create it, or give a directory that exists)", what, path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return ZERR(ZINC_ERR_IO, "%s %s is not a directory", what, path);
    uid_t me = geteuid();
    if (sb.st_uid != me && sb.st_uid != 0)
        return ZERR(ZINC_ERR_IO,
                    "%s %s belongs to user %ld, not to this user (%ld) or root: another user could "
                    "replace what zinc writes there; use a directory of your own",
                    what, path, (long)sb.st_uid, (long)me);
    if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX))
        return ZERR(ZINC_ERR_IO,
                    "%s %s is writable by every user and not sticky (mode %04o): another user could "
                    "replace what zinc writes there; chmod o-w it or use a directory of your own",
                    what, path, (unsigned)(sb.st_mode & 07777));
    if (access(path, W_OK | X_OK) != 0)
        return ZERR(ZINC_ERR_IO, "%s %s is not writable by this user: %s", what, path, strerror(errno));
    return ZINC_OK;
}

static zinc_status dir_of(const char *path, char *dir, size_t cap) {
    if (!path || !*path) return ZERR(ZINC_ERR_INVALID_ARG, "an output path is empty");
    if (snprintf(dir, cap, "%s", path) >= (int)cap) return ZERR(ZINC_ERR_INVALID_ARG, "path too long: %.200s", path);
    size_t n = strlen(dir);
    if (dir[n - 1] == '/') return ZERR(ZINC_ERR_INVALID_ARG, "%s names a directory; give a file name", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    return ZINC_OK;
}

/* The inputs that exist, by device and inode (a missing one cannot be replaced). */
static void collect_inputs(zfile_out *o, const char *const *inputs) {
    o->nin = 0;
    for (int i = 0; inputs && inputs[i] && o->nin < ZFILE_MAX_INPUTS; i++) {
        struct stat ib;
        if (!*inputs[i] || stat(inputs[i], &ib) != 0) continue;
        struct zfile_input *x = &o->in[o->nin++];
        x->dev = ib.st_dev;
        x->ino = ib.st_ino;
        x->dir = S_ISDIR(ib.st_mode);
        snprintf(x->name, sizeof x->name, "%s", inputs[i]);
    }
}

/* Whether the target (sb when it exists, in directory dir) is one of the inputs, or inside an input
 * directory. */
static zinc_status check_inputs(const zfile_out *o, const char *path, const struct stat *sb, const char *dir) {
    struct stat db;
    bool have_dir = stat(dir, &db) == 0;
    for (int i = 0; i < o->nin; i++) {
        const struct zfile_input *x = &o->in[i];
        if (x->dir) {
            if (have_dir && db.st_dev == x->dev && db.st_ino == x->ino)
                return ZERR(ZINC_ERR_INVALID_ARG,
                            "%s %s is inside %s, which this command reads: refused (it would overwrite its own "
                            "input); write it somewhere else",
                            o->what, path, x->name);
        } else if (sb && sb->st_dev == x->dev && sb->st_ino == x->ino) {
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "%s %s is %s, one of this command's inputs: refused (it would destroy it); give "
                        "another path",
                        o->what, path, x->name);
        }
    }
    return ZINC_OK;
}

static zinc_status check_target(const zfile_out *o, const char *path, const char *dir) {
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT) return ZERR(ZINC_ERR_IO, "%s %s: %s", o->what, path, strerror(errno));
        return check_inputs(o, path, NULL, dir);
    }
    if (!S_ISREG(sb.st_mode))
        return ZERR(ZINC_ERR_IO,
                    "%s %s exists and is %s, not a regular file: refused (zinc replaces only "
                    "regular files); give another path",
                    o->what, path, kind_of(sb.st_mode));
    zinc_status st = check_inputs(o, path, &sb, dir);
    if (st != ZINC_OK) return st;
    if (!(o->flags & ZFILE_REPLACE))
        return ZERR(ZINC_ERR_IO, "%s %s already exists; pass --force to replace it, or give another path", o->what,
                    path);
    return ZINC_OK;
}

zinc_status zfile_check_target(const char *what, const char *path, unsigned flags, const char *const *inputs) {
    zfile_out *o = calloc(1, sizeof *o);
    if (!o) return ZERR(ZINC_ERR_NOMEM, "out of memory checking %s", path);
    o->what = what;
    o->flags = flags;
    collect_inputs(o, inputs);
    char whatdir[160];
    snprintf(whatdir, sizeof whatdir, "%s: the directory", what);
    zinc_status st = dir_of(path, o->dir, sizeof o->dir);
    if (st == ZINC_OK) st = zfile_check_dir(o->dir, whatdir);
    if (st == ZINC_OK) st = check_target(o, path, o->dir);
    free(o);
    return st;
}

bool zfile_inside(const char *path, const char *dir) {
    struct stat db;
    char p[ZFILE_PATH_MAX];
    if (!path || !*path || !dir || stat(dir, &db) != 0 || !S_ISDIR(db.st_mode)) return false;
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return false;
    int fd = -1;
    for (;;) { /* the nearest ancestor that exists (the path's own parent, or higher for one not made yet) */
        char *slash = strrchr(p, '/');
        while (slash && slash > p && slash[1] == 0) *slash = 0, slash = strrchr(p, '/'); /* "a/b/" -> "a/b" */
        if (!slash) {
            snprintf(p, sizeof p, ".");
        } else {
            slash[slash == p ? 1 : 0] = 0;
        }
        if ((fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0 || !strcmp(p, ".") || !strcmp(p, "/")) break;
    }
    for (int depth = 0; fd >= 0 && depth < ZFILE_PATH_MAX; depth++) {
        struct stat sb, ub;
        if (fstat(fd, &sb) != 0) break;
        if (sb.st_dev == db.st_dev && sb.st_ino == db.st_ino) {
            close(fd);
            return true;
        }
        int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(fd);
        fd = up;
        if (fd >= 0 && (fstat(fd, &ub) != 0 || (ub.st_dev == sb.st_dev && ub.st_ino == sb.st_ino))) break; /* "/" */
    }
    if (fd >= 0) close(fd);
    return false;
}

static uint64_t random64(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)&r;
    r = (r ^ (r >> 30)) * 0xbf58476d1ce4e5b9ull;
    return r ^ (r >> 31);
}

zinc_status zfile_out_open(zfile_out *o, const char *what, const char *path, unsigned flags,
                           const char *const *inputs) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->what = what;
    o->flags = flags;
    collect_inputs(o, inputs);
    zinc_status st = dir_of(path, o->dir, sizeof o->dir);
    if (st != ZINC_OK) return st;
    snprintf(o->path, sizeof o->path, "%s", path);
    char whatdir[160];
    snprintf(whatdir, sizeof whatdir, "%s: the directory", what);
    if ((st = zfile_check_dir(o->dir, whatdir)) != ZINC_OK) return st;
    if ((st = check_target(o, path, o->dir)) != ZINC_OK) return st;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int tries = 0; tries < 64; tries++) {
        if (snprintf(o->tmp, sizeof o->tmp, "%s/.%.200s.%016llx.tmp", o->dir, base, (unsigned long long)random64()) >=
            (int)sizeof o->tmp)
            return ZERR(ZINC_ERR_INVALID_ARG, "path too long: %.200s", path);
        o->fd = open(o->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (o->fd >= 0) return ZINC_OK;
        if (errno != EEXIST && errno != ELOOP) break;
    }
    return ZERR(ZINC_ERR_IO,
                "%s %s: cannot create a temporary file in %s: %s (check the directory's permissions "
                "and free space)",
                what, path, o->dir, strerror(errno));
}

zinc_status zfile_out_write(zfile_out *o, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t k = write(o->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return ZERR(ZINC_ERR_IO, "%s %s: writing failed: %s (check free space)", o->what, o->path,
                        k < 0 ? strerror(errno) : "no progress");
        p += k, n -= (size_t)k;
    }
    return ZINC_OK;
}

FILE *zfile_out_stream(zfile_out *o) {
    int d = dup(o->fd);
    FILE *f = d >= 0 ? fdopen(d, "wb") : NULL;
    if (!f && d >= 0) close(d);
    return f;
}

void zfile_out_abort(zfile_out *o) {
    if (o->fd >= 0) close(o->fd);
    if (o->fd >= 0 || o->tmp[0]) unlink(o->tmp);
    o->fd = -1;
    o->tmp[0] = 0;
}

zinc_status zfile_out_commit(zfile_out *o) {
    zinc_status st = ZINC_OK;
    if (fsync(o->fd) != 0) {
        st = ZERR(ZINC_ERR_IO, "%s %s: fsync failed: %s (check free space)", o->what, o->path, strerror(errno));
        goto fail;
    }
    if (close(o->fd) != 0) {
        o->fd = -1;
        st = ZERR(ZINC_ERR_IO, "%s %s: closing failed: %s", o->what, o->path, strerror(errno));
        goto fail;
    }
    o->fd = -1;
    /* Again, just before the rename: something may have been put in the target's place meanwhile. */
    if ((st = check_target(o, o->path, o->dir)) != ZINC_OK) goto fail;
    if (rename(o->tmp, o->path) != 0) {
        st = ZERR(ZINC_ERR_IO, "%s: cannot rename %s to %s: %s", o->what, o->tmp, o->path, strerror(errno));
        goto fail;
    }
    o->tmp[0] = 0;
    int dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int rc = fsync(dfd), err = errno;
        close(dfd);
        if (rc != 0 && err != EINVAL) /* some file systems cannot sync directories */
            return ZERR(ZINC_ERR_IO, "fsync of directory %s failed: %s", o->dir, strerror(err));
    }
    return ZINC_OK;
fail:
    zfile_out_abort(o);
    return st;
}

zinc_status zfile_write(const char *what, const char *path, const void *data, size_t n, unsigned flags,
                        const char *const *inputs) {
    zfile_out o;
    zinc_status st = zfile_out_open(&o, what, path, flags, inputs);
    if (st != ZINC_OK) return st;
    if ((st = zfile_out_write(&o, data, n)) != ZINC_OK) {
        zfile_out_abort(&o);
        return st;
    }
    return zfile_out_commit(&o);
}

zinc_status zfile_open_input(const char *what, const char *path, int *fd_out) {
    *fd_out = -1;
    if (!path || !*path) return ZERR(ZINC_ERR_INVALID_ARG, "%s: the path is empty", what);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        return ZERR(ZINC_ERR_IO, "%s %s: cannot open it: %s", what, path,
                    err == EISDIR ? "it is a directory; give a file" : strerror(err));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int err = errno;
        bool known = fstat(fd, &sb) == 0;
        close(fd);
        if (known && S_ISDIR(sb.st_mode))
            return ZERR(ZINC_ERR_IO, "%s %s is a directory, not a file; give a file", what, path);
        return ZERR(ZINC_ERR_IO,
                    "%s %s is %s, not a regular file: refused (zinc reads inputs only from regular "
                    "files; copy the data into one)",
                    what, path, known ? kind_of(sb.st_mode) : strerror(err));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return ZINC_OK;
}

zinc_status zfile_fopen_input(const char *what, const char *path, FILE **f) {
    int fd;
    *f = NULL;
    zinc_status st = zfile_open_input(what, path, &fd);
    if (st != ZINC_OK) return st;
    *f = fdopen(fd, "rb");
    if (!*f) {
        close(fd);
        return ZERR(ZINC_ERR_IO, "%s %s: %s", what, path, strerror(errno));
    }
    return ZINC_OK;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

zinc_status zfile_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return ZINC_OK;
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return ZERR(ZINC_ERR_IO, "cannot remove %s: %s (remove it by hand)", path, strerror(errno));
    return ZINC_OK;
}

/* The public doors (zinc.h) for a model's own files. */
zinc_status zinc_file_open_input(const char *what, const char *path, FILE **f) {
    if (!what || !path || !f) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_file_open_input: NULL argument");
    return zfile_fopen_input(what, path, f);
}

zinc_status zinc_file_write(const char *what, const char *path, int n, const void *const *data, const size_t *len,
                            unsigned flags, const char *const *inputs) {
    if (!what || !path || n < 0 || (n && (!data || !len)))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_file_write: NULL argument or negative count");
    zfile_out o;
    zinc_status st = zfile_out_open(&o, what, path, flags, inputs);
    for (int i = 0; st == ZINC_OK && i < n; i++) st = zfile_out_write(&o, data[i], len[i]);
    if (st == ZINC_OK) return zfile_out_commit(&o);
    zfile_out_abort(&o);
    return st;
}
