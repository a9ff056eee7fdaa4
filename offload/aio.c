/* io_uring file IO with O_DIRECT detection, retry of short and interrupted IO, and fault injection. */
#include "offload/aio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/trace.h"

#define ZAIO_MAX_INFLIGHT 4096
#define ZAIO_MAX_RETRIES 64
#define ZAIO_MAX_FILES 64

typedef struct zaio_piece {
    zaio_req *req;
    int64_t off, len; /* the piece's range in the file */
    int64_t done;     /* bytes transferred so far */
    int retries;
    int inject; /* errno the submitted operation completes with (fault injection) */
    struct zaio_piece *next;
} zaio_piece;

struct zaio {
    zaio_params p;
    struct io_uring ring;
    bool have_ring, files_registered, bufs_registered;
    char backend[320];
    zaio_file files[ZAIO_MAX_FILES];
    int nfiles;
    zaio_piece *pieces, *free_pieces;
    zaio_piece *retry_head, *retry_tail; /* pieces to submit again (short, EAGAIN) */
    zaio_req *pend_head, *pend_tail;     /* requests with bytes not yet cut into pieces */
    int max_inflight, inflight;          /* pieces in the ring */
    zaio_stats stats;
    /* --trace: requests in flight at once each take a free lane (a track), so each track's spans nest */
#define TRACE_LANES 16
    int trace_lane_track[TRACE_LANES];
    bool trace_lane_busy[TRACE_LANES];
};

/* --trace: r was submitted now. */
static void trace_submitted(zaio *a, zaio_req *r) {
    if (!(r->trace_t0 = ztrace_begin())) return;
    for (int k = 0; k < TRACE_LANES; k++)
        if (!a->trace_lane_busy[k]) {
            if (!a->trace_lane_track[k]) {
                char name[32];
                snprintf(name, sizeof name, "nvme %d", k);
                a->trace_lane_track[k] = ztrace_track(name);
            }
            a->trace_lane_busy[k] = true;
            r->trace_lane = k;
            return;
        }
    r->trace_t0 = 0; /* more in flight than lanes: not traced */
}

/* --trace: r completed (its last piece came back). */
static void trace_completed(zaio *a, zaio_req *r) {
    if (!r->trace_t0) return;
    ztrace_span(r->trace_t0, ZTRACE_NVME, r->op == ZAIO_READ ? "read" : "write", a->trace_lane_track[r->trace_lane],
                "bytes", r->len, "ok", r->err == 0);
    a->trace_lane_busy[r->trace_lane] = false;
    r->trace_t0 = 0;
}

/* ---------------------------------------------------------------- fault injection */

static zaio_fault g_fault;
static bool g_fault_on, g_fault_api;
static int64_t g_fault_seen, g_fault_hits;

zaio_fault zaio_fault_none(void) {
    zaio_fault f;
    memset(&f, 0, sizeof f);
    f.offset = -1;
    return f;
}

void zaio_fault_set(const zaio_fault *f) {
    g_fault_api = true;
    g_fault_on = f != NULL;
    if (f) g_fault = *f;
    g_fault_seen = g_fault_hits = 0;
}

int64_t zaio_fault_hits(void) { return g_fault_hits; }
int64_t zaio_fault_seen(void) { return g_fault_seen; }

static const struct {
    const char *name;
    int err;
} errno_names[] = {{"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EAGAIN", EAGAIN}, {"EINTR", EINTR},
                   {"EINVAL", EINVAL}, {"EBADF", EBADF},   {"EFBIG", EFBIG},   {"EROFS", EROFS},
                   {"EDQUOT", EDQUOT}, {"ENOMEM", ENOMEM}, {"ENXIO", ENXIO},   {"EFAULT", EFAULT}};

static const char *errno_name(int err) {
    for (size_t i = 0; i < sizeof errno_names / sizeof *errno_names; i++)
        if (errno_names[i].err == err) return errno_names[i].name;
    return NULL;
}

zinc_status zaio_fault_parse(const char *spec, zaio_fault *out) {
    *out = zaio_fault_none();
    char buf[512];
    if (strlen(spec) >= sizeof buf)
        return ZERR(ZINC_ERR_INVALID_ARG, "ZINC_AIO_FAULT is longer than %zu characters", sizeof buf - 1);
    strcpy(buf, spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ":,", &save); t; t = strtok_r(NULL, ":,", &save)) {
        char *end = NULL;
        if (!strcmp(t, "read"))
            out->op = ZAIO_READ;
        else if (!strcmp(t, "write"))
            out->op = ZAIO_WRITE;
        else if (!strcmp(t, "any"))
            out->op = 0;
        else if (!strcmp(t, "short"))
            out->short_io = true;
        else if (!strcmp(t, "refuse_direct"))
            out->refuse_direct = true;
        else if (!strcmp(t, "no_uring"))
            out->no_uring = true;
        else if (!strncmp(t, "skip=", 5))
            out->skip = strtoll(t + 5, &end, 10);
        else if (!strncmp(t, "count=", 6))
            out->count = strtoll(t + 6, &end, 10);
        else if (!strncmp(t, "offset=", 7))
            out->offset = strtoll(t + 7, &end, 10);
        else if (!strncmp(t, "path=", 5))
            snprintf(out->path, sizeof out->path, "%s", t + 5);
        else if (!strncmp(t, "what=", 5))
            snprintf(out->what, sizeof out->what, "%s", t + 5);
        else if (t[0] >= '0' && t[0] <= '9')
            out->err = (int)strtol(t, &end, 10);
        else {
            int found = 0;
            for (size_t i = 0; i < sizeof errno_names / sizeof *errno_names; i++)
                if (!strcmp(t, errno_names[i].name)) {
                    out->err = errno_names[i].err;
                    found = 1;
                }
            if (!found)
                return ZERR(ZINC_ERR_INVALID_ARG,
                            "ZINC_AIO_FAULT=\"%s\": unknown token \"%s\" (expected read, write, any, an errno name "
                            "such as EIO or ENOSPC, short, refuse_direct, no_uring, skip=N, count=N, offset=N, "
                            "path=TEXT or what=TEXT)",
                            spec, t);
        }
        if (end && *end) return ZERR(ZINC_ERR_INVALID_ARG, "ZINC_AIO_FAULT=\"%s\": \"%s\" is not a number", spec, t);
    }
    return ZINC_OK;
}

/* Whether this piece operation is hit by the fault (counts it). */
static bool fault_hit(const zaio_file *f, const zaio_req *r, int64_t off, int64_t len) {
    if (!g_fault_on || (!g_fault.err && !g_fault.short_io)) return false;
    if (g_fault.op && g_fault.op != (int)r->op) return false;
    if (g_fault.path[0] && !strstr(f->path, g_fault.path)) return false;
    if (g_fault.what[0] && !strstr(r->what, g_fault.what)) return false;
    if (g_fault.offset >= 0 && !(off <= g_fault.offset && g_fault.offset < off + len)) return false;
    if (g_fault_seen++ < g_fault.skip) return false;
    if (g_fault.count > 0 && g_fault_hits >= g_fault.count) return false;
    g_fault_hits++;
    return true;
}

static bool fault_open_hit(const char *path) {
    if (!g_fault_on || !g_fault.refuse_direct) return false;
    if (g_fault.path[0] && !strstr(path, g_fault.path)) return false;
    g_fault_hits++;
    return true;
}

/* ---------------------------------------------------------------- context */

const char *zaio_backend(const zaio *a) { return a->backend; }

zinc_status zaio_create(const zaio_params *p, zaio **out) {
    zinc_status st = ZINC_OK;
    zaio *a = NULL;
    *out = NULL;
    if (!g_fault_api) {
        const char *env = zenv_get(ZENV_AIO_FAULT);
        if (env && *env) {
            zaio_fault f;
            TRY(zaio_fault_parse(env, &f));
            g_fault = f;
            g_fault_on = true;
            g_fault_api = true; /* parsed once per process; counters run across contexts */
        }
    }
    TRY_ALLOC(a, 1, "the IO context");
    a->p = *p;
    if (a->p.block_size < 4096) a->p.block_size = 4096;
    if (a->p.queue_depth < 1) a->p.queue_depth = 1;
    if (a->p.intra_op_parallelism < 1) a->p.intra_op_parallelism = 1;
    int64_t want = (int64_t)a->p.queue_depth * a->p.intra_op_parallelism;
    a->max_inflight = want > ZAIO_MAX_INFLIGHT ? ZAIO_MAX_INFLIGHT : (int)want;
    TRY_ALLOC(a->pieces, a->max_inflight, "IO pieces");
    for (int i = 0; i < a->max_inflight; i++) {
        a->pieces[i].next = a->free_pieces;
        a->free_pieces = &a->pieces[i];
    }
    for (int i = 0; i < ZAIO_MAX_FILES; i++) a->files[i].fd = -1;
    unsigned entries = 1;
    while ((int)entries < a->max_inflight) entries <<= 1;
    int rc = (g_fault_on && g_fault.no_uring) ? -ENOSYS : io_uring_queue_init(entries, &a->ring, 0);
    if (rc == 0) {
        a->have_ring = true;
        snprintf(a->backend, sizeof a->backend, "io_uring");
    } else {
        snprintf(a->backend, sizeof a->backend,
                 "pread/pwrite (io_uring set-up failed: %s; check kernel.io_uring_disabled and the container's "
                 "seccomp profile)",
                 strerror(-rc));
    }
    *out = a;
    return ZINC_OK;
fail:
    zaio_destroy(a);
    return st;
}

void zaio_destroy(zaio *a) {
    if (!a) return;
    if (a->have_ring) {
        zaio_drain(a);
        io_uring_queue_exit(&a->ring);
    }
    for (int i = 0; i < a->nfiles; i++) {
        if (a->files[i].fd >= 0) close(a->files[i].fd);
        free(a->files[i].path);
    }
    free(a->pieces);
    free(a);
}

/* ---------------------------------------------------------------- opening files */

static uint32_t sane_align(uint64_t v) {
    if (v < 512) v = 512;
    if (v > (1u << 20) || (v & (v - 1))) return 4096; /* not a power of two: be safe */
    return (uint32_t)v;
}

static uint32_t read_sysfs_u32(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned v = 0;
    if (!f) return 0;
    if (fscanf(f, "%u", &v) != 1) v = 0;
    fclose(f);
    return v;
}

/* The logical block size of the device holding fd's file: BLKSSZGET on the device node where we may open
 * it, else sysfs, else st_blksize. Returns 0 when nothing is known. */
static uint32_t block_align(int fd, const char **source) {
    struct stat sb;
    if (fstat(fd, &sb) != 0) return 0;
    unsigned maj = major(sb.st_dev), mnr = minor(sb.st_dev);
    char path[128];
    snprintf(path, sizeof path, "/dev/block/%u:%u", maj, mnr);
    int bfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (bfd >= 0) {
        int bs = 0;
        int ok = ioctl(bfd, BLKSSZGET, &bs) == 0 && bs > 0;
        close(bfd);
        if (ok) {
            *source = "BLKSSZGET";
            return (uint32_t)bs;
        }
    }
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/queue/logical_block_size", maj, mnr);
    uint32_t v = read_sysfs_u32(path);
    if (!v) { /* a partition: its queue is the parent's */
        snprintf(path, sizeof path, "/sys/dev/block/%u:%u/../queue/logical_block_size", maj, mnr);
        v = read_sysfs_u32(path);
    }
    if (v) {
        *source = "sysfs logical_block_size";
        return v;
    }
    if (sb.st_blksize > 0) {
        *source = "st_blksize";
        return (uint32_t)sb.st_blksize;
    }
    return 0;
}

/* Fills f->align. Returns false when the kernel reports that this file cannot do direct IO. */
static bool detect_align(zaio_file *f) {
#ifdef STATX_DIOALIGN
    struct statx sx;
    memset(&sx, 0, sizeof sx);
    if (statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_offset_align == 0 || sx.stx_dio_mem_align == 0) return false;
        uint32_t v = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align : sx.stx_dio_mem_align;
        f->align = sane_align(v);
        f->align_source = "statx STATX_DIOALIGN";
        return true;
    }
#endif
    const char *src = "default 4096";
    uint32_t v = block_align(f->fd, &src);
    f->align = sane_align(v ? v : 4096);
    f->align_source = src;
    return true;
}

/* One aligned block written and read back: some file systems accept O_DIRECT at open and refuse it at
 * the first IO. Returns 0 or the errno. */
static int probe_direct(int fd, uint32_t align) {
    void *b = NULL;
    if (posix_memalign(&b, align < 4096 ? 4096 : align, align) != 0) return ENOMEM;
    memset(b, 0, align);
    int err = 0;
    ssize_t w = pwrite(fd, b, align, 0);
    if (w < 0)
        err = errno;
    else if (pread(fd, b, align, 0) < 0)
        err = errno;
    free(b);
    if (!err && ftruncate(fd, 0) != 0) err = errno;
    return err;
}

static const char *direct_fix =
    "point zero_optimization.offload_optimizer.nvme_path at a local NVMe or SSD file system (ext4, xfs, btrfs), "
    "or set \"zinc\": {\"allow_buffered_io\": true} to use buffered IO there (slower, and the page cache holds "
    "a second copy of the optimizer state)";

zinc_status zaio_open(zaio *a, const char *path, bool allow_buffered, int *out) {
    zinc_status st = ZINC_OK;
    if (a->nfiles >= ZAIO_MAX_FILES)
        return ZERR(ZINC_ERR_INTERNAL, "zaio_open(%s): more than %d files in one IO context", path, ZAIO_MAX_FILES);
    if (a->files_registered)
        return ZERR(ZINC_ERR_INTERNAL, "zaio_open(%s): files must be opened before zaio_register", path);
    zaio_file *f = &a->files[a->nfiles];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path) return ZERR(ZINC_ERR_NOMEM, "out of memory opening %s", path);
    a->nfiles++; /* from here zaio_destroy closes and frees it */
    const int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
    int err = 0;
    if (fault_open_hit(path))
        err = EINVAL;
    else {
        f->fd = open(path, flags | O_DIRECT, 0600);
        if (f->fd < 0) err = errno;
    }
    char why[200] = "";
    if (f->fd >= 0) {
        if (!detect_align(f)) {
            snprintf(why, sizeof why, "statx reports no direct-IO support (STATX_DIOALIGN alignment 0)");
        } else if ((err = probe_direct(f->fd, f->align)) != 0) {
            if (err != EINVAL)
                FAIL(ZINC_ERR_IO, "cannot write %s (offset 0, length %u, O_DIRECT probe): %s", path, f->align,
                     strerror(err));
            snprintf(why, sizeof why, "the first O_DIRECT write of %u bytes failed with EINVAL", f->align);
        } else {
            f->direct = true;
        }
        if (!f->direct) {
            close(f->fd);
            f->fd = -1;
        }
    } else if (err == EINVAL) {
        snprintf(why, sizeof why, "open with O_DIRECT failed with EINVAL");
    } else {
        FAIL(ZINC_ERR_IO, "cannot create %s: %s%s", path, strerror(err),
             err == EACCES || err == EPERM ? " (no permission: choose an nvme_path this user can write)"
             : err == ENOSPC               ? " (the file system is full)"
             : err == EROFS                ? " (the file system is read-only)"
                                           : "");
    }
    if (!f->direct) {
        if (!allow_buffered)
            FAIL(ZINC_ERR_IO,
                 "the file system holding %s refuses O_DIRECT (%s); tmpfs, overlay and some network "
                 "file systems do. Fix: %s",
                 path, why, direct_fix);
        f->fd = open(path, flags, 0600);
        if (f->fd < 0) FAIL(ZINC_ERR_IO, "cannot create %s (buffered): %s", path, strerror(errno));
        f->align = 4096;
        f->align_source = "buffered IO (page size)";
        snprintf(f->why_buffered, sizeof f->why_buffered, "%s", why);
    }
    *out = a->nfiles - 1;
    return ZINC_OK;
fail:
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    return st;
}

zinc_status zaio_adopt(zaio *a, int fd, const char *path, int *out) {
    if (a->nfiles >= ZAIO_MAX_FILES || a->files_registered)
        return ZERR(ZINC_ERR_INTERNAL, "zaio_adopt(%s): too many files, or adopted after zaio_register", path);
    zaio_file *f = &a->files[a->nfiles];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    f->fd = f->path ? dup(fd) : -1;
    if (f->fd < 0) {
        free(f->path);
        return ZERR(ZINC_ERR_NOMEM, "cannot take %s into an IO context: %s", path, strerror(errno));
    }
    a->nfiles++; /* from here zaio_destroy closes its copy of the descriptor */
    int fl = fcntl(f->fd, F_GETFL), err = 0;
    const char *why = NULL;
    if (fault_open_hit(path) || fl < 0 || fcntl(f->fd, F_SETFL, fl | O_DIRECT) != 0)
        why = "the file system refuses O_DIRECT (fcntl F_SETFL failed)";
    else if (!detect_align(f))
        why = "statx reports no direct-IO support (STATX_DIOALIGN alignment 0)";
    else if (f->align > 4096)
        why = "the direct-IO alignment is above 4096 bytes (the checkpoint's sections are 4 KiB aligned)";
    else if ((err = probe_direct(f->fd, f->align)) != 0)
        why = "the first O_DIRECT write failed";
    else
        f->direct = true;
    if (!f->direct) {
        if (fl >= 0) (void)fcntl(f->fd, F_SETFL, fl & ~O_DIRECT);
        f->align = 4096;
        f->align_source = "buffered IO (page size)";
        snprintf(f->why_buffered, sizeof f->why_buffered, "%s%s%s", why, err ? ": " : "", err ? strerror(err) : "");
    }
    *out = a->nfiles - 1;
    return ZINC_OK;
}

zinc_status zaio_set_direct(zaio *a, int file, bool direct) {
    zaio_file *f = &a->files[file];
    int fl = fcntl(f->fd, F_GETFL);
    if (fl < 0 || fcntl(f->fd, F_SETFL, direct ? fl | O_DIRECT : fl & ~O_DIRECT) != 0)
        return ZERR(ZINC_ERR_IO, "cannot switch O_DIRECT %s on %s: %s", direct ? "on" : "off", f->path,
                    strerror(errno));
    f->direct = direct;
    return ZINC_OK;
}

const zaio_file *zaio_file_info(const zaio *a, int file) {
    return file >= 0 && file < a->nfiles ? &a->files[file] : NULL;
}

zinc_status zaio_preallocate(zaio *a, int file, int64_t bytes) {
    zaio_file *f = &a->files[file];
    if (bytes <= 0) return ZINC_OK;
    int rc = posix_fallocate(f->fd, 0, bytes);
    if (rc == 0) return ZINC_OK;
    if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG) {
        struct statvfs sv;
        unsigned long long avail = 0;
        if (fstatvfs(f->fd, &sv) == 0) avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
        return ZERR(ZINC_ERR_IO,
                    "cannot reserve %lld bytes for %s (offset 0, length %lld): %s; %llu bytes are free there. Fix: "
                    "free space, point zero_optimization.offload_optimizer.nvme_path at a larger disk, or use more "
                    "ranks (each holds 1/N of the optimizer state in stages 1-3)",
                    (long long)bytes, f->path, (long long)bytes, strerror(rc), avail);
    }
    /* EOPNOTSUPP/EINVAL: no preallocation here; a plain size will do. */
    if (ftruncate(f->fd, bytes) != 0)
        return ZERR(ZINC_ERR_IO, "cannot set the size of %s to %lld bytes: %s", f->path, (long long)bytes,
                    strerror(errno));
    return ZINC_OK;
}

zinc_status zaio_register(zaio *a, void *const *bufs, const size_t *lens, int n, bool *bufs_registered, char *why,
                          size_t why_cap) {
    zinc_status st = ZINC_OK;
    struct iovec *iov = NULL;
    int *fds = NULL;
    *bufs_registered = false;
    if (why && why_cap) why[0] = 0;
    if (!a->have_ring) {
        if (why && why_cap) snprintf(why, why_cap, "no io_uring");
        return ZINC_OK;
    }
    if (a->nfiles > 0) {
        TRY_ALLOC(fds, a->nfiles, "registered files");
        for (int i = 0; i < a->nfiles; i++) fds[i] = a->files[i].fd;
        a->files_registered = io_uring_register_files(&a->ring, fds, (unsigned)a->nfiles) == 0;
    }
    if (n > 0) {
        TRY_ALLOC(iov, n, "registered buffers");
        for (int i = 0; i < n; i++) iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = lens[i]};
        int rc = io_uring_register_buffers(&a->ring, iov, (unsigned)n);
        if (rc == 0)
            *bufs_registered = a->bufs_registered = true;
        else if (why && why_cap)
            snprintf(why, why_cap, "%s%s", strerror(-rc),
                     rc == -ENOMEM ? " (locked memory limit: raise it with ulimit -l / RLIMIT_MEMLOCK)" : "");
    }
fail:
    free(iov);
    free(fds);
    return st;
}

/* ---------------------------------------------------------------- submission and completion */

bool zaio_req_done(const zaio_req *r) { return !r->busy; }
bool zaio_req_ok(const zaio_req *r) { return !r->busy && r->err == 0; }

static int64_t piece_len(const zaio *a, const zaio_req *r) {
    uint32_t al = a->files[r->file].align;
    int64_t per = (r->len + a->p.intra_op_parallelism - 1) / a->p.intra_op_parallelism;
    per = (per + al - 1) / al * al;
    int64_t bs = a->p.block_size / al * al;
    if (bs < al) bs = al;
    return per < bs ? per : bs;
}

static void unlink_pending(zaio *a, zaio_req *r) {
    zaio_req *prev = NULL;
    for (zaio_req *q = a->pend_head; q; prev = q, q = q->next)
        if (q == r) {
            if (prev)
                prev->next = q->next;
            else
                a->pend_head = q->next;
            if (a->pend_tail == q) a->pend_tail = prev;
            q->next = NULL;
            return;
        }
}

static void req_fail(zaio *a, zaio_req *r, int err, int64_t off, int64_t len) {
    if (r->err) return;
    r->err = err;
    r->err_off = off;
    r->err_len = len;
    if (r->carved < r->len) unlink_pending(a, r); /* cut no more pieces */
    r->carved = r->len;
}

static void req_piece_done(zaio *a, zaio_piece *pc) {
    zaio_req *r = pc->req;
    pc->next = a->free_pieces;
    a->free_pieces = pc;
    if (--r->inflight == 0 && r->carved >= r->len) {
        r->busy = false;
        trace_completed(a, r);
    }
}

static void push_retry(zaio *a, zaio_piece *pc) {
    pc->next = NULL;
    if (a->retry_tail)
        a->retry_tail->next = pc;
    else
        a->retry_head = pc;
    a->retry_tail = pc;
}

/* Handles the result of one operation on a piece (bytes transferred or -errno). */
static void complete(zaio *a, zaio_piece *pc, int64_t res) {
    zaio_req *r = pc->req;
    int64_t off = pc->off + pc->done, rem = pc->len - pc->done;
    if (pc->inject) {
        res = -pc->inject;
        pc->inject = 0;
    }
    if (res == -EAGAIN || res == -EINTR) {
        if (++pc->retries <= ZAIO_MAX_RETRIES) {
            a->stats.again_retries++;
            push_retry(a, pc);
            return;
        }
        req_fail(a, r, (int)-res, off, rem);
    } else if (res < 0) {
        req_fail(a, r, (int)-res, off, rem);
    } else if (res == 0) {
        req_fail(a, r, r->op == ZAIO_READ ? -1 : ENOSPC, off, rem);
    } else {
        if (r->op == ZAIO_READ)
            a->stats.bytes_read += (uint64_t)res;
        else
            a->stats.bytes_written += (uint64_t)res;
        pc->done += res;
        if (pc->done < pc->len) {
            a->stats.short_resubmits++;
            pc->retries = 0;
            push_retry(a, pc);
            return;
        }
    }
    req_piece_done(a, pc);
}

/* The next piece to submit: a retry first, else a new piece cut from the oldest pending request. */
static zaio_piece *next_piece(zaio *a) {
    while (a->retry_head) {
        zaio_piece *pc = a->retry_head;
        a->retry_head = pc->next;
        if (!a->retry_head) a->retry_tail = NULL;
        if (!pc->req->err) return pc;
        req_piece_done(a, pc); /* its request already failed */
    }
    while (a->pend_head && a->free_pieces) {
        zaio_req *r = a->pend_head;
        if (r->carved >= r->len) {
            a->pend_head = r->next;
            if (!a->pend_head) a->pend_tail = NULL;
            if (r->inflight == 0) r->busy = false;
            continue;
        }
        int64_t len = piece_len(a, r);
        if (len > r->len - r->carved) len = r->len - r->carved;
        zaio_piece *pc = a->free_pieces;
        a->free_pieces = pc->next;
        *pc = (zaio_piece){.req = r, .off = r->off + r->carved, .len = len};
        r->carved += len;
        r->inflight++;
        if (r->carved >= r->len) {
            a->pend_head = r->next;
            if (!a->pend_head) a->pend_tail = NULL;
        }
        return pc;
    }
    return NULL;
}

/* The length this operation asks for: all that remains, or (fault) about half of it, aligned. */
static int64_t op_len(const zaio *a, const zaio_piece *pc, bool shorten) {
    int64_t rem = pc->len - pc->done;
    if (!shorten) return rem;
    uint32_t al = a->files[pc->req->file].align;
    int64_t half = rem / 2 / al * al;
    return half > 0 ? half : rem;
}

static void sync_op(zaio *a, zaio_piece *pc) {
    zaio_req *r = pc->req;
    zaio_file *f = &a->files[r->file];
    int64_t off = pc->off + pc->done;
    char *addr = (char *)r->buf + (pc->off - r->off) + pc->done;
    bool hit = fault_hit(f, r, off, pc->len - pc->done);
    if (hit && g_fault.err) {
        pc->inject = g_fault.err;
        complete(a, pc, 0);
        return;
    }
    int64_t len = op_len(a, pc, hit);
    ssize_t n = r->op == ZAIO_READ ? pread(f->fd, addr, (size_t)len, off) : pwrite(f->fd, addr, (size_t)len, off);
    a->stats.pieces++;
    complete(a, pc, n < 0 ? -(int64_t)errno : (int64_t)n);
}

/* Submits pieces while there is room. */
static zinc_status fill(zaio *a) {
    if (!a->have_ring) {
        zaio_piece *pc;
        while ((pc = next_piece(a))) sync_op(a, pc);
        return ZINC_OK;
    }
    if (!a->p.overlap_events && a->inflight > 0) return ZINC_OK;
    int prepared = 0;
    while (a->inflight < a->max_inflight) {
        zaio_piece *pc = next_piece(a);
        if (!pc) break;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&a->ring);
        if (!sqe) {
            io_uring_submit(&a->ring);
            prepared = 0;
            sqe = io_uring_get_sqe(&a->ring);
        }
        if (!sqe) { /* the submission queue is full: try again after the next reap */
            pc->next = a->retry_head;
            a->retry_head = pc;
            if (!a->retry_tail) a->retry_tail = pc;
            break;
        }
        zaio_req *r = pc->req;
        zaio_file *f = &a->files[r->file];
        int64_t off = pc->off + pc->done;
        char *addr = (char *)r->buf + (pc->off - r->off) + pc->done;
        bool hit = fault_hit(f, r, off, pc->len - pc->done);
        if (hit && g_fault.err) {
            io_uring_prep_nop(sqe);
            pc->inject = g_fault.err;
        } else {
            unsigned len = (unsigned)op_len(a, pc, hit);
            int fd = a->files_registered ? r->file : f->fd;
            bool fixed = a->bufs_registered && r->buf_index >= 0;
            if (r->op == ZAIO_READ) {
                if (fixed)
                    io_uring_prep_read_fixed(sqe, fd, addr, len, (uint64_t)off, r->buf_index);
                else
                    io_uring_prep_read(sqe, fd, addr, len, (uint64_t)off);
            } else {
                if (fixed)
                    io_uring_prep_write_fixed(sqe, fd, addr, len, (uint64_t)off, r->buf_index);
                else
                    io_uring_prep_write(sqe, fd, addr, len, (uint64_t)off);
            }
            if (a->files_registered) sqe->flags |= IOSQE_FIXED_FILE;
        }
        io_uring_sqe_set_data(sqe, pc);
        a->inflight++;
        a->stats.pieces++;
        prepared++;
        if (a->p.single_submit) {
            int rc = io_uring_submit(&a->ring);
            if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
                return ZERR(ZINC_ERR_IO, "io_uring_submit failed: %s", strerror(-rc));
            prepared = 0;
        }
    }
    if (prepared) {
        int rc = io_uring_submit(&a->ring);
        if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
            return ZERR(ZINC_ERR_IO, "io_uring_submit failed: %s", strerror(-rc));
    }
    return ZINC_OK;
}

/* Reaps completions; with `block`, waits for at least one when anything is in flight. */
static zinc_status reap(zaio *a, bool block) {
    if (!a->have_ring) return ZINC_OK;
    struct io_uring_cqe *cqe = NULL;
    if (block && a->inflight > 0 && io_uring_cq_ready(&a->ring) == 0) {
        int rc; /* submits anything a busy ring left in the queue, then waits */
        do rc = io_uring_submit_and_wait(&a->ring, 1);
        while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
        if (rc < 0) return ZERR(ZINC_ERR_IO, "io_uring_submit_and_wait failed: %s", strerror(-rc));
    }
    unsigned head, seen = 0;
    zaio_piece *done[256];
    int64_t res[256];
    int nd = 0;
    io_uring_for_each_cqe(&a->ring, head, cqe) {
        zaio_piece *pc = io_uring_cqe_get_data(cqe);
        seen++;
        if (pc) {
            done[nd] = pc;
            res[nd] = cqe->res;
            nd++;
        }
        if (nd == 256) break;
    }
    io_uring_cq_advance(&a->ring, seen);
    for (int i = 0; i < nd; i++) {
        a->inflight--;
        complete(a, done[i], res[i]);
    }
    return ZINC_OK;
}

zinc_status zaio_submit(zaio *a, zaio_req *r) {
    if (r->file < 0 || r->file >= a->nfiles)
        return ZERR(ZINC_ERR_INTERNAL, "zaio_submit: file %d is not open", r->file);
    const zaio_file *f = &a->files[r->file];
    if (f->direct && ((r->off | r->len) % f->align || (uintptr_t)r->buf % f->align))
        return ZERR(ZINC_ERR_INTERNAL,
                    "zaio_submit(%s): offset %lld, length %lld or buffer %p is not a multiple of the O_DIRECT "
                    "alignment %u",
                    f->path, (long long)r->off, (long long)r->len, r->buf, f->align);
    r->carved = r->done = 0;
    r->inflight = 0;
    r->err = 0;
    r->err_off = r->err_len = 0;
    r->busy = r->len > 0;
    r->next = NULL;
    if (!r->busy) return ZINC_OK;
    trace_submitted(a, r);
    if (a->pend_tail)
        a->pend_tail->next = r;
    else
        a->pend_head = r;
    a->pend_tail = r;
    return fill(a);
}

static const char *hint(int err) {
    switch (err) {
    case ENOSPC:
    case EDQUOT:
        return "The file system is full (or over quota): free space there or point "
               "zero_optimization.offload_optimizer.nvme_path at a larger disk";
    case EIO:
        return "The device reported an IO error: check the disk (dmesg, smartctl) or move "
               "zero_optimization.offload_optimizer.nvme_path to another device";
    case EINVAL:
        return "The kernel refused the request (O_DIRECT alignment or file system support): try \"zinc\": "
               "{\"allow_buffered_io\": true} or another file system";
    case EROFS: return "The file system is read-only: remount it read-write or choose another nvme_path";
    case EAGAIN:
    case EINTR: return "The request was retried 64 times without progress: the device or file system is overloaded";
    case -1: return "The file is shorter than expected: was it truncated or replaced while zinc ran?";
    default: return "Check the file system holding nvme_path";
    }
}

zinc_status zaio_req_error(const zaio *a, const zaio_req *r) {
    const char *path = a->files[r->file].path;
    const char *en = r->err > 0 ? errno_name(r->err) : NULL;
    return ZERR(ZINC_ERR_IO, "NVMe offload: %s %s%s%s failed at offset %lld, length %lld: %s%s%s%s. %s",
                r->op == ZAIO_READ ? "reading" : "writing", r->what[0] ? r->what : "", r->what[0] ? " in " : "", path,
                (long long)r->err_off, (long long)r->err_len, r->err > 0 ? strerror(r->err) : "unexpected end of file",
                en ? " (" : "", en ? en : "", en ? ")" : "", hint(r->err));
}

zinc_status zaio_complete(zaio *a, zaio_req *r) {
    zinc_status st = ZINC_OK;
    while (r->busy) {
        TRY(fill(a));
        if (!r->busy) break;
        if (a->have_ring && a->inflight == 0 && !a->retry_head && !a->pend_head)
            return ZERR(ZINC_ERR_INTERNAL, "zaio_wait: request on %s is neither queued nor in flight",
                        a->files[r->file].path);
        TRY(reap(a, true));
    }
fail:
    return st;
}

zinc_status zaio_wait(zaio *a, zaio_req *r) {
    zinc_status st = zaio_complete(a, r);
    if (st != ZINC_OK) return st;
    return r->err ? zaio_req_error(a, r) : ZINC_OK;
}

zinc_status zaio_poll(zaio *a) {
    zinc_status st = ZINC_OK;
    TRY(reap(a, false));
    TRY(fill(a));
fail:
    return st;
}

void zaio_drain(zaio *a) {
    while (a->inflight > 0 || a->retry_head || a->pend_head) {
        if (fill(a) != ZINC_OK) break;
        if (reap(a, true) != ZINC_OK) break;
    }
}

void zaio_stats_get(const zaio *a, zaio_stats *out) { *out = a->stats; }
