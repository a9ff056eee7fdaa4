/* The monitors' directory and their append-only files (monitor_internal.h). A file that is written a
 * record at a time cannot be renamed into place, as the safe writer does with whole files; instead it is
 * created under a name nothing else can hold (O_EXCL), never through a link (O_NOFOLLOW), inside a
 * directory checked as zfile_check_dir checks one and held open by descriptor, so that replacing a path
 * component after the check changes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/core/error.h"
#include "runtime/monitor/monitor_internal.h"

static zinc_status cannot_create(const char *key, const char *path, const char *p, int err) {
    return ZERR(ZINC_ERR_IO, "%s \"%s\": cannot create %s: %s; give a directory this user can write", key, path, p,
                strerror(err));
}

/* os.makedirs(path, exist_ok=True): each missing component, mode 0777 less the umask. */
static zinc_status make_dirs(const char *key, const char *path) {
    char p[ZFILE_PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return ZERR(ZINC_ERR_CONFIG, "%s: the path is too long: %.200s...", key, path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char was = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return cannot_create(key, path, p, errno);
        *s = was;
        if (!was) return ZINC_OK;
    }
}

/* The job directory (already open as fd) must be a directory of this user or root that no other user can
 * write unless it is sticky, and writable by us: the rules of zfile_check_dir, on the descriptor. */
static zinc_status check_job_dir(const zmon_dir *d, const char *key) {
    struct stat sb;
    if (fstat(d->fd, &sb) != 0) return ZERR(ZINC_ERR_IO, "%s: %s: %s", key, d->path, strerror(errno));
    uid_t me = geteuid();
    if (sb.st_uid != me && sb.st_uid != 0)
        return ZERR(ZINC_ERR_IO,
                    "%s: %s belongs to user %ld, not to this user (%ld): another user could replace what zinc "
                    "writes there; choose another job_name or output_path",
                    key, d->path, (long)sb.st_uid, (long)me);
    if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX))
        return ZERR(ZINC_ERR_IO,
                    "%s: %s is writable by every user and not sticky (mode %04o): chmod o-w it or choose another "
                    "job_name",
                    key, d->path, (unsigned)(sb.st_mode & 07777));
    if (faccessat(d->fd, ".", W_OK | X_OK, AT_EACCESS) != 0)
        return ZERR(ZINC_ERR_IO, "%s: %s is not writable by this user: %s", key, d->path, strerror(errno));
    return ZINC_OK;
}

/* The last component of dir, created when missing, opened without following a link. */
static zinc_status open_last(zmon_dir *d, const char *key) {
    if (mkdir(d->path, 0777) != 0 && errno != EEXIST)
        return ZERR(ZINC_ERR_IO, "%s: cannot create %s: %s", key, d->path, strerror(errno));
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd >= 0) return check_job_dir(d, key);
    int err = errno;
    struct stat sb;
    if (lstat(d->path, &sb) == 0 && S_ISLNK(sb.st_mode))
        return ZERR(ZINC_ERR_IO,
                    "%s: %s is a symbolic link: refused (zinc does not write through links); remove it "
                    "or choose another job_name",
                    key, d->path);
    if (err == ENOTDIR)
        return ZERR(ZINC_ERR_IO, "%s: %s exists and is not a directory; choose another job_name or output_path", key,
                    d->path);
    return ZERR(ZINC_ERR_IO, "%s: cannot open %s: %s", key, d->path, strerror(err));
}

/* output_path/job_name into d->path and its parent into parent (the directory made as os.makedirs would). */
static zinc_status dir_paths(zmon_dir *d, const zcfg_monitor *m, const char *key, char *parent) {
    const char *base = m->output_path[0] ? m->output_path : ".";
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/') n--;
    int len = m->job_name[0] ? snprintf(d->path, sizeof d->path, "%.*s/%s", (int)n, base, m->job_name)
                             : snprintf(d->path, sizeof d->path, "%.*s", (int)n, base);
    if (len < 0 || len >= (int)sizeof d->path)
        return ZERR(ZINC_ERR_CONFIG, "%s and job_name: the path is too long (%d bytes; at most %d)", key, len,
                    (int)sizeof d->path - 1);
    snprintf(parent, ZFILE_PATH_MAX, "%s", d->path);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        parent[1] = 0;
    else if (slash)
        *slash = 0;
    else
        snprintf(parent, ZFILE_PATH_MAX, ".");
    return ZINC_OK;
}

/* What zmon_dir_open would refuse, found without making anything that stays: the links on the way, the first
 * missing directory (made and removed again: a probe), an existing parent's owner and mode, a job directory
 * that is a link or no directory. The same messages as the open. */
static zinc_status dir_check(const char *block, const zcfg_monitor *m) {
    zinc_status st = ZINC_OK;
    zmon_dir d = {.block = block, .fd = -1};
    char key[64], jkey[64], parent[ZFILE_PATH_MAX], p[ZFILE_PATH_MAX];
    snprintf(key, sizeof key, "%s.output_path", block);
    snprintf(jkey, sizeof jkey, "%s.job_name", block);
    TRY(dir_paths(&d, m, key, parent));
    TRY(zfile_check_links(parent, key));
    struct stat sb;
    snprintf(p, sizeof p, "%s", parent);
    for (char *s = p + 1;; s++) { /* the first component that does not exist, probed */
        if (*s != '/' && *s != 0) continue;
        char was = *s;
        *s = 0;
        if (stat(p, &sb) != 0) {
            if (mkdir(p, 0777) != 0) TRY(cannot_create(key, parent, p, errno));
            rmdir(p);
            return ZINC_OK; /* the rest is made inside it, by this user */
        }
        *s = was;
        if (!was) break;            /* the parent itself: zfile_check_dir below says what it is */
        if (!S_ISDIR(sb.st_mode)) { /* os.makedirs fails on the next component, as make_dirs does */
            char *next = s + 1 + strcspn(s + 1, "/");
            *next = 0;
            TRY(cannot_create(key, parent, p, ENOTDIR));
        }
    }
    TRY(zfile_check_dir(parent, key));
    if (lstat(d.path, &sb) == 0 && S_ISLNK(sb.st_mode))
        FAIL(ZINC_ERR_IO,
             "%s: %s is a symbolic link: refused (zinc does not write through links); remove it or choose another "
             "job_name",
             jkey, d.path);
    if (lstat(d.path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        FAIL(ZINC_ERR_IO, "%s: %s exists and is not a directory; choose another job_name or output_path", jkey, d.path);
fail:
    return st;
}

zinc_status zmon_check(const zcfg_monitor *tb, const zcfg_monitor *csv) {
    zinc_status st = ZINC_OK;
    if (tb && tb->enabled) TRY(dir_check("tensorboard", tb));
    if (csv && csv->enabled) TRY(dir_check("csv_monitor", csv));
fail:
    return st;
}

zinc_status zmon_dir_open(zmon_dir *d, const zcfg_monitor *m) {
    char key[64], parent[ZFILE_PATH_MAX];
    snprintf(key, sizeof key, "%s.output_path", d->block);
    d->fd = -1;
    zinc_status st = dir_paths(d, m, key, parent);
    if (st != ZINC_OK) return st;
    /* the parent of the job directory: created as DeepSpeed's makedirs would, then checked */
    st = zfile_check_links(parent, key); /* before a directory is made through a planted link */
    if (st == ZINC_OK) st = make_dirs(key, parent);
    if (st == ZINC_OK) st = zfile_check_dir(parent, key);
    if (st == ZINC_OK) {
        snprintf(key, sizeof key, "%s.job_name", d->block);
        st = open_last(d, key);
    }
    if (st != ZINC_OK) zmon_dir_close(d);
    return st;
}

void zmon_dir_close(zmon_dir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

zinc_status zmon_file_create(const zmon_dir *d, const char *name, zmon_file *f) {
    snprintf(f->path, sizeof f->path, "%s/%s", d->path, name);
    f->failed = false;
    f->created = false;
    f->err = 0;
    f->size = 0;
    f->fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (f->fd < 0) {
        f->err = errno;
        return ZERR(ZINC_ERR_IO, "%s: cannot create %s: %s", d->block, f->path, strerror(errno));
    }
    if (flock(f->fd, LOCK_EX | LOCK_NB) != 0) { /* a fresh file: only a racing process could hold it */
        int err = errno;
        close(f->fd);
        f->fd = -1;
        return ZERR(ZINC_ERR_IO, "%s: %s is locked by another process: %s", d->block, f->path, strerror(err));
    }
    f->created = true;
    return ZINC_OK;
}

bool zmon_file_write(zmon_file *f, const void *data, size_t n, const zlog *log, const char *block) {
    if (f->fd < 0 || f->failed) return false;
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(f->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            f->err = w < 0 ? errno : EIO;
            int cut = ftruncate(f->fd, f->size); /* failing too leaves a cut record, which readers skip */
            (void)cut;
            if (log)
                ZLOG_WARN(log, "%s: writing %s failed: %s; this monitor writes nothing more (training goes on)", block,
                          f->path, strerror(f->err));
            f->failed = true;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    f->size += p - (const char *)data;
    return true;
}

void zmon_file_discard(const zmon_dir *d, zmon_file *f) {
    if (f->fd < 0 || !f->created) return;
    unlinkat(d->fd, strrchr(f->path, '/') + 1, 0);
    close(f->fd);
    f->fd = -1;
}

void zmon_file_close(zmon_file *f, const zlog *log, const char *block) {
    if (f->fd < 0) return;
    if (fsync(f->fd) != 0 && !f->failed)
        ZLOG_WARN(log, "%s: fsync of %s failed: %s (its last records may be lost)", block, f->path, strerror(errno));
    close(f->fd);
    f->fd = -1;
}
