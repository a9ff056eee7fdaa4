/* Checkpoint file plumbing: CRC-32C, paths and tags, durable writes (temporary name, fsync, rename) with
 * the kill-after-bytes test hook, and the verifying shard reader. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "base/core/crc32c.h"

zinc_status zckpt_host_little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    if (b != 1)
        return ZERR(ZINC_ERR_UNSUPPORTED, "checkpoints: zinc's checkpoint files are little-endian and this host is "
                                          "big-endian; conversion is not implemented");
    return ZINC_OK;
}

/* ---------------------------------------------------------------- tags and paths */

zinc_status zckpt_check_tag(const char *tag) {
    size_t n = tag ? strlen(tag) : 0;
    if (n == 0 || n > ZCKPT_TAG_MAX || tag[0] == '.')
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "checkpoint tag \"%s\": a tag has 1 to %d characters and does not start "
                    "with '.'",
                    tag ? tag : "(null)", ZCKPT_TAG_MAX);
    /* Names zinc writes beside the tags: a tag of that name would shadow one or be removed as a leftover. */
    static const char *const reserved[] = {ZCKPT_LATEST, ZCKPT_MANIFEST, ZCKPT_SIDECAR_GPT2};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (!strcmp(tag, reserved[i]))
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "checkpoint tag \"%s\" is reserved: zinc writes a file of that name in the checkpoint "
                        "directory; choose another tag (reserved: latest, manifest.json, zinc_gpt2.json and names "
                        "ending in .tmp)",
                        tag);
    if (n >= 4 && !strcmp(tag + n - 4, ".tmp"))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "checkpoint tag \"%s\" is reserved: names ending in .tmp are zinc's temporary files, removed "
                    "as leftovers by the next save; choose another tag",
                    tag);
    for (size_t i = 0; i < n; i++) {
        char c = tag[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '+'))
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "checkpoint tag \"%s\": character '%c' is not allowed (use letters, "
                        "digits and . _ - +)",
                        tag, c);
    }
    return ZINC_OK;
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

zinc_status zckpt_resolve(const char *path, char *tagdir, size_t cap, char *tag, size_t tag_cap) {
    zinc_status st = ZINC_OK;
    char buf[ZCKPT_PATH_MAX], *latest = NULL;
    if (!path || !*path) return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint path is empty");
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--; /* "dir/" is "dir" */
    if (n >= sizeof buf - 32) return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint path \"%s\" is too long", path);
    char p[ZCKPT_PATH_MAX];
    memcpy(p, path, n);
    p[n] = 0;
    if (snprintf(buf, sizeof buf, "%s/" ZCKPT_MANIFEST, p) >= (int)sizeof buf)
        return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint path \"%s\" is too long", path);
    if (is_file(buf)) {
        if (snprintf(tagdir, cap, "%s", p) >= (int)cap) FAIL(ZINC_ERR_INVALID_ARG, "checkpoint path too long");
        const char *slash = strrchr(p, '/');
        snprintf(tag, tag_cap, "%s", slash ? slash + 1 : p);
        return ZINC_OK;
    }
    if (snprintf(buf, sizeof buf, "%s/" ZCKPT_LATEST, p) >= (int)sizeof buf)
        return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint path \"%s\" is too long", path);
    if (!is_file(buf)) {
        struct stat sb;
        if (lstat(buf, &sb) == 0)
            FAIL(ZINC_ERR_CORRUPT,
                 "checkpoint %s: %s is %s, not the small file zinc writes there (it names the newest tag): "
                 "remove or rename it, or give DIR/TAG of a checkpoint",
                 p, buf,
                 S_ISDIR(sb.st_mode)    ? "a directory"
                 : S_ISLNK(sb.st_mode)  ? "a symbolic link to nothing usable"
                 : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                        : "a special file");
        if (stat(p, &sb) != 0)
            FAIL(ZINC_ERR_IO,
                 "checkpoint %s: %s (give a checkpoint directory, which holds `latest`, or a tag "
                 "directory, which holds " ZCKPT_MANIFEST ")",
                 p, strerror(errno));
        FAIL(ZINC_ERR_IO,
             "checkpoint %s: neither %s/" ZCKPT_MANIFEST " nor %s/" ZCKPT_LATEST " exists: this is not a "
             "zinc checkpoint, or its save did not finish (an interrupted save leaves a .TAG.partial "
             "directory and never updates `latest`)",
             p, p, p);
    }
    size_t ln = 0;
    TRY(zckpt_read_small(buf, &latest, &ln));
    while (ln && (latest[ln - 1] == '\n' || latest[ln - 1] == '\r' || latest[ln - 1] == ' ')) latest[--ln] = 0;
    if (zckpt_check_tag(latest) != ZINC_OK)
        FAIL(ZINC_ERR_CORRUPT,
             "checkpoint %s: %s does not hold a valid tag (\"%.64s\"); write the tag of the "
             "checkpoint to resume into it, or give DIR/TAG",
             p, buf, latest);
    if (snprintf(tagdir, cap, "%s/%s", p, latest) >= (int)cap) FAIL(ZINC_ERR_INVALID_ARG, "checkpoint path too long");
    snprintf(tag, tag_cap, "%s", latest);
    snprintf(buf, sizeof buf, "%s/" ZCKPT_MANIFEST, tagdir);
    struct stat msb;
    if (stat(buf, &msb) == 0 && !S_ISREG(msb.st_mode))
        FAIL(ZINC_ERR_CORRUPT, "checkpoint %s: %s is not a regular file (%s): refused", p, buf,
             S_ISFIFO(msb.st_mode)  ? "a FIFO"
             : S_ISDIR(msb.st_mode) ? "a directory"
                                    : "a special file");
    if (!is_file(buf)) {
        /* A re-save of this tag on a file system without an atomic directory exchange was interrupted
         * between moving the old directory aside and putting the new one in place: the old one is whole. */
        char old[ZCKPT_PATH_MAX + 32];
        if (snprintf(old, sizeof old, "%s/.%s.old/" ZCKPT_MANIFEST, p, latest) < (int)sizeof old && is_file(old)) {
            if (snprintf(tagdir, cap, "%s/.%s.old", p, latest) >= (int)cap)
                FAIL(ZINC_ERR_INVALID_ARG, "checkpoint path too long");
            goto fail;
        }
    }
    if (!is_file(buf))
        FAIL(ZINC_ERR_IO,
             "checkpoint %s: `latest` names tag \"%s\" but %s does not exist (was the tag directory "
             "removed?); give DIR/TAG of another checkpoint",
             p, latest, buf);
fail:
    free(latest);
    return st;
}

zinc_status zckpt_path(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint path too long: %.200s...", buf);
    return ZINC_OK;
}

zinc_status zckpt_mkdirs(const char *path) {
    char p[ZCKPT_PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint directory path too long: %s", path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return ZERR(ZINC_ERR_IO, "cannot create directory %s: %s (check the path and its permissions)", p,
                            strerror(errno));
            *s = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ZERR(ZINC_ERR_IO, "checkpoint directory %s exists but is not a directory", path);
    return ZINC_OK;
}

zinc_status zckpt_fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ZERR(ZINC_ERR_IO, "cannot open directory %s to sync it: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL) /* some file systems cannot sync directories */
        return ZERR(ZINC_ERR_IO, "fsync of directory %s failed: %s", path, strerror(err));
    return ZINC_OK;
}

zinc_status zckpt_rmtree(const char *path) { return zfile_rmtree(path); }

/* ---------------------------------------------------------------- writing */

void zckpt_writer_init(zckpt_writer *w) {
    w->written = 0;
    w->kill_after = -1;
    w->fail_errno = 0;
    w->image = NULL;
    w->image_bytes = 0;
    const char *k = zenv_get(ZENV_CKPT_TEST_KILL_AFTER_BYTES);
    if (k && *k) {
        char *end = NULL;
        long long v = strtoll(k, &end, 10);
        if (end && !*end && v >= 0) w->kill_after = v;
    }
    const char *f = zenv_get(ZENV_CKPT_TEST_WRITE_ERRNO);
    if (f && *f) w->fail_errno = atoi(f);
}

zinc_status zckpt_pwrite(zckpt_writer *w, int fd, const char *path, const void *buf, size_t n, int64_t off) {
    const char *p = buf;
    size_t left = n;
    if (w->image) {
        if (off < 0 || off + (int64_t)n > w->image_bytes)
            return ZERR(ZINC_ERR_INTERNAL, "checkpoint snapshot of %s: %zu bytes at offset %lld outside its %lld", path,
                        n, (long long)off, (long long)w->image_bytes);
        memcpy(w->image + off, buf, n);
        return ZINC_OK;
    }
    if (w->fail_errno)
        return ZERR(ZINC_ERR_IO,
                    "writing checkpoint file %s (%zu bytes at offset %lld) failed: %s (check free "
                    "space and permissions of its directory)",
                    path, left, (long long)off, strerror(w->fail_errno));
    if (w->kill_after >= 0 && w->written + (int64_t)n >= w->kill_after) {
        left = (size_t)(w->kill_after - w->written); /* write up to the kill point, then die */
        while (left) {
            ssize_t k = pwrite(fd, p, left, (off_t)off);
            if (k <= 0) break;
            p += k, off += k, left -= (size_t)k;
        }
        raise(SIGKILL);
    }
    while (left) {
        ssize_t k = pwrite(fd, p, left, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return ZERR(ZINC_ERR_IO,
                        "writing checkpoint file %s (%zu bytes at offset %lld) failed: %s (check free "
                        "space and permissions of its directory)",
                        path, left, (long long)off, k < 0 ? strerror(errno) : "no progress");
        p += k, off += k, left -= (size_t)k;
    }
    w->written += (int64_t)n;
    return ZINC_OK;
}

zinc_status zckpt_write_small(zckpt_writer *w, const char *dir, const char *name, const void *data, size_t n) {
    zinc_status st = ZINC_OK;
    char fin[ZCKPT_PATH_MAX];
    zfile_out o = {.fd = -1};
    TRY(zckpt_path(fin, sizeof fin, "%s/%s", dir, name));
    /* `latest` is replaced by every save: the file is zinc's own, in a directory it holds locked. */
    TRY(zfile_out_open(&o, "checkpoint file", fin, ZFILE_REPLACE, NULL));
    TRY(zckpt_pwrite(w, o.fd, o.tmp, data, n, 0));
    TRY(zfile_out_commit(&o));
fail:
    if (o.fd >= 0) zfile_out_abort(&o);
    return st;
}

zinc_status zckpt_open_regular(const char *path, int *fd_out) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    *fd_out = -1;
    if (fd < 0)
        return ZERR(ZINC_ERR_IO, "cannot open checkpoint file %s: %s (%s)", path, strerror(errno),
                    errno == ENOENT ? "the file is missing: with checkpoint.use_node_local_storage every node holds "
                                      "only its own ranks' files; copy them here or load an earlier checkpoint"
                                    : "check its permissions");
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int err = errno;
        close(fd);
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint file %s is not a regular file (%s): refused; a checkpoint holds "
                    "only regular files",
                    path,
                    S_ISFIFO(sb.st_mode)                         ? "a FIFO"
                    : S_ISDIR(sb.st_mode)                        ? "a directory"
                    : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                    : S_ISSOCK(sb.st_mode)                       ? "a socket"
                                                                 : strerror(err));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return ZINC_OK;
}

zinc_status zckpt_read_small(const char *path, char **out, size_t *n) {
    zinc_status st = ZINC_OK;
    char *buf = NULL;
    int fd = -1;
    *out = NULL;
    TRY(zckpt_open_regular(path, &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) FAIL(ZINC_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    if (sb.st_size > (1L << 30))
        FAIL(ZINC_ERR_CORRUPT, "%s is %lld bytes, more than the 1 GiB a checkpoint's small files may have", path,
             (long long)sb.st_size);
    size_t len = (size_t)sb.st_size, got = 0;
    TRY_ALLOC(buf, len + 1, path);
    while (got < len) {
        ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) FAIL(ZINC_ERR_IO, "cannot read %s: %s", path, k < 0 ? strerror(errno) : "it shrank while read");
        got += (size_t)k;
    }
    buf[len] = 0;
    *out = buf;
    *n = len;
    buf = NULL;
fail:
    free(buf);
    if (fd >= 0) close(fd);
    return st;
}

/* ---------------------------------------------------------------- verified reading */

static zinc_status pread_all(int fd, const char *path, void *buf, size_t n, int64_t off) {
    char *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            return ZERR(ZINC_ERR_IO, "reading checkpoint file %s (%zu bytes at offset %lld) failed: %s", path, n,
                        (long long)off, strerror(errno));
        if (k == 0)
            return ZERR(ZINC_ERR_CORRUPT,
                        "checkpoint file %s ends at offset %lld, before the %zu bytes the manifest "
                        "describes there: the file is truncated; restore it or load an earlier "
                        "checkpoint",
                        path, (long long)off, n);
        p += k, off += k, n -= (size_t)k;
    }
    return ZINC_OK;
}

static int64_t block_len(const zckpt_file *f, int64_t b) {
    int64_t lo = b * f->block_bytes, hi = lo + f->block_bytes;
    return (hi < f->bytes ? hi : f->bytes) - lo;
}

/* Reads block b into buf and checks it. */
static zinc_status read_block(zckpt_reader *r, int64_t b, void *buf) {
    const zckpt_file *f = r->f;
    int64_t len = block_len(f, b);
    zinc_status st = pread_all(r->fd, r->path, buf, (size_t)len, b * f->block_bytes);
    if (st != ZINC_OK) return st;
    uint32_t c = zcrc32c(0, buf, (size_t)len);
    if (c != f->block_crc[b])
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint file %s is corrupted: bytes %lld..%lld fail their checksum "
                    "(CRC-32C %08x, the manifest says %08x); restore the file or load an earlier "
                    "checkpoint",
                    r->path, (long long)(b * f->block_bytes), (long long)(b * f->block_bytes + len), c,
                    f->block_crc[b]);
    return ZINC_OK;
}

/* Reads bytes [off, off + n) through stream `slot`'s one-block cache, verifying every block. */
static zinc_status read_bytes(zckpt_reader *r, int slot, int64_t off, int64_t n, uint8_t *dst) {
    zinc_status st = ZINC_OK;
    const zckpt_file *f = r->f;
    if (off < 0 || off + n > f->bytes)
        return ZERR(ZINC_ERR_CORRUPT,
                    "checkpoint file %s: bytes %lld..%lld lie outside the file's %lld bytes (the "
                    "manifest is inconsistent)",
                    r->path, (long long)off, (long long)(off + n), (long long)f->bytes);
    while (n > 0) {
        int64_t b = off / f->block_bytes, boff = off - b * f->block_bytes, blen = block_len(f, b);
        int64_t take = blen - boff < n ? blen - boff : n;
        if (boff == 0 && take == blen && r->cache_block[slot] != b) {
            TRY(read_block(r, b, dst)); /* a whole block: straight into the destination */
        } else {
            if (!r->cache[slot]) {
                r->cache[slot] = malloc((size_t)f->block_bytes);
                if (!r->cache[slot]) FAIL(ZINC_ERR_NOMEM, "out of memory for a checkpoint read buffer");
            }
            if (r->cache_block[slot] != b) {
                r->cache_block[slot] = -1;
                TRY(read_block(r, b, r->cache[slot]));
                r->cache_block[slot] = b;
            }
            memcpy(dst, r->cache[slot] + boff, (size_t)take);
        }
        dst += take, off += take, n -= take;
    }
fail:
    return st;
}

zinc_status zckpt_reader_open(zckpt_reader *r, const zckpt_manifest *m, int i) {
    zinc_status st = ZINC_OK;
    uint8_t hdr[ZCKPT_HEADER_BYTES];
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->m = m;
    r->f = &m->files[i];
    for (int s = 0; s <= ZCKPT_NSEC; s++) r->cache_block[s] = -1;
    if (snprintf(r->path, sizeof r->path, "%s/%s", m->dir, r->f->name) >= (int)sizeof r->path)
        FAIL(ZINC_ERR_INVALID_ARG, "checkpoint path too long: %s/%s", m->dir, r->f->name);
    TRY(zckpt_open_regular(r->path, &r->fd));
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) FAIL(ZINC_ERR_IO, "cannot stat %s: %s", r->path, strerror(errno));
    if ((int64_t)sb.st_size != r->f->bytes)
        FAIL(ZINC_ERR_CORRUPT,
             "checkpoint file %s is %lld bytes but the manifest says %lld: the file is %s; restore "
             "it or load an earlier checkpoint",
             r->path, (long long)sb.st_size, (long long)r->f->bytes,
             (int64_t)sb.st_size < r->f->bytes ? "truncated" : "not the one this manifest describes");
    TRY(read_bytes(r, ZCKPT_NSEC, 0, ZCKPT_HEADER_BYTES, hdr));
    TRY(zckpt_header_check(m, r->f, r->path, hdr));
    return ZINC_OK;
fail:
    zckpt_reader_close(r);
    return st;
}

zinc_status zckpt_reader_read(zckpt_reader *r, int sec, int64_t x, int64_t n, void *dst) {
    const zckpt_file *f = r->f;
    if (f->sec_offset[sec] < 0)
        return ZERR(ZINC_ERR_CORRUPT, "checkpoint file %s has no %s section", r->path, zckpt_section_names[sec]);
    if (x < f->flat_lo || x + n > f->flat_hi)
        return ZERR(ZINC_ERR_INTERNAL, "checkpoint read of [%lld, %lld) outside file %s's range [%lld, %lld)",
                    (long long)x, (long long)(x + n), r->path, (long long)f->flat_lo, (long long)f->flat_hi);
    int64_t esz = (int64_t)zinc_dtype_size(f->sec_dtype[sec]);
    return read_bytes(r, sec, f->sec_offset[sec] + (x - f->flat_lo) * esz, n * esz, dst);
}

void zckpt_reader_close(zckpt_reader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    for (int s = 0; s <= ZCKPT_NSEC; s++) {
        free(r->cache[s]);
        r->cache[s] = NULL;
        r->cache_block[s] = -1;
    }
}

zinc_status zckpt_verify_file(const zckpt_manifest *m, int i) {
    zinc_status st = ZINC_OK;
    zckpt_reader r;
    uint8_t *buf = NULL;
    TRY(zckpt_reader_open(&r, m, i));
    TRY_ALLOC(buf, (size_t)r.f->block_bytes, "checkpoint verification");
    uint32_t whole = 0;
    for (int64_t b = 0; b < r.f->nblocks; b++) {
        TRY(read_block(&r, b, buf)); /* checked against block_crc[b]: combined, not read again */
        whole = zcrc32c_combine(whole, r.f->block_crc[b], (size_t)block_len(r.f, b));
    }
    if (whole != r.f->crc)
        FAIL(ZINC_ERR_CORRUPT,
             "checkpoint file %s: whole-file CRC-32C %08x differs from the manifest's %08x (the "
             "manifest is inconsistent); load an earlier checkpoint",
             r.path, whole, r.f->crc);
fail:
    free(buf);
    zckpt_reader_close(&r);
    return st;
}
