/* The NVMe optimizer-state store (zero_optimization.offload_optimizer.device "nvme").
 *
 * Files: <nvme_path>/zinc-<pid of rank 0>-<random>/rank<r>/{master,exp_avg,exp_avg_sq}.swp (no exp_avg_sq
 * in a 2-tensor store: Lion), one run directory per run (rank 0 creates it and broadcasts its name), mode
 * 0700 for directories and 0600 for files, all removed by zstate_destroy. Chunk c of each tensor sits at offset c x stride, stride = the
 * chunk's bytes rounded up to the O_DIRECT alignment; the last chunk is padded with zeros.
 *
 * Buffers: offload_optimizer.buffer_count swap buffers, each holding one chunk of every tensor (nt x
 * stride bytes, nt = zstate_ctx.tensors, registered with io_uring). A pass needs 3: while chunk i is in
 * use, chunk i+1 is being read and chunk i-1 written; every further buffer adds a chunk of read-ahead.
 *
 * Integrity: every chunk of every tensor has a CRC32C, computed before its write and checked after its
 * read (ZINC_ERR_CORRUPT names file, chunk and offset). A chunk's new checksum takes effect only when
 * its write completed; a chunk whose write failed is marked lost, and reading it is an error until a
 * ZSTATE_WRITE pass stores it again. A read error at chunk i fails the pass at acquire(i), before the
 * caller sees the chunk: chunks before i are updated (their writes are finished by the abort), chunks
 * from i on are untouched. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/core/clock.h"
#include "base/core/crc32c.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "base/core/signals.h"
#include "offload/aio.h"
#include "offload/state.h"
#include "offload/state_nvme.h"

#define NT ZSTATE_MAX_TENSORS                /* array bound; a store uses its first z->nt */
#define NV_MIN_BUFFERS ZCFG_NVME_MIN_BUFFERS /* also refused at load (config_resolve.c) */

static const char *const file_names[NT] = {"master.swp", "exp_avg.swp", "exp_avg_sq.swp"};
static const char *const tensor_names[NT] = {"master", "exp_avg", "exp_avg_sq"};
static const zinc_mem_category cats[NT] = {ZINC_MEM_MASTER, ZINC_MEM_EXP_AVG, ZINC_MEM_EXP_AVG_SQ};

enum { SLOT_FREE = 0, SLOT_READING, SLOT_IN_USE, SLOT_WRITING };
enum { CHUNK_UNWRITTEN = 0, CHUNK_VALID, CHUNK_LOST };

typedef struct nv_slot {
    char *buf; /* nt x stride bytes */
    int64_t chunk;
    int state;
    uint32_t crc[NT]; /* of the data being written */
    zaio_req req[NT];
} nv_slot;

typedef struct zstate_nvme {
    zstate base;
    zaio *aio;
    int nt; /* tensors kept: master, exp_avg and, when 3, exp_avg_sq */
    int file[NT];
    char *run_dir, *rank_dir, *path[NT];
    bool made_rank_dir, made_files[NT];
    int sig_run, sig_rank; /* zsig_remember slots: removed if SIGTERM/SIGINT ends the process (-1: none) */
    int64_t stride;        /* bytes per chunk in each file */
    uint32_t align;
    int nbuf;
    bool bufs_registered;
    nv_slot *slot;
    uint32_t *crc;   /* nchunks x nt: the stored chunks' checksums */
    uint8_t *cstate; /* nchunks: CHUNK_* */
    zinc_mem_kind buf_kind;
    uint64_t buf_bytes;  /* counted as staging */
    uint64_t file_bytes; /* per tensor, counted as NVMe (exp_avg_sq: voff[nchunks]) */
    int64_t *voff;       /* nchunks + 1: the exp_avg_sq file's chunk offsets (ctx.vgaps compacts it) */
    bool counted_files;
    int64_t next_read; /* the next chunk whose read the pass has not issued */
    /* statistics: this pass (reported at debug level) and the totals */
    struct timespec pass_t0;
    uint64_t pass_rbytes, pass_wbytes;
    zstate_nvme_stats stats;
} zstate_nvme;

static int64_t chunk_n(const zstate *s, int64_t c) {
    int64_t lo = c * s->chunk;
    return s->n - lo < s->chunk ? s->n - lo : s->chunk;
}

static int64_t chunk_io_len(const zstate_nvme *z, int64_t c) {
    return zstate_nvme_chunk_io_bytes(z->base.n, z->base.chunk, z->align, c);
}

/* Tensor t's chunk c: its offset and IO length in the file, and its data bytes (exp_avg_sq holds only the
 * chunk's elements outside ctx.vgaps). */
static int64_t t_off(const zstate_nvme *z, int t, int64_t c) { return t == 2 ? z->voff[c] : c * z->stride; }
static int64_t t_io(const zstate_nvme *z, int t, int64_t c) {
    return t == 2 ? z->voff[c + 1] - z->voff[c] : chunk_io_len(z, c);
}
static int64_t t_bytes(const zstate_nvme *z, int t, int64_t c) {
    int64_t lo = c * z->base.chunk, n = chunk_n(&z->base, c);
    const zstate_vgaps *g = &z->base.ctx.vgaps;
    return (t == 2 ? zstate_v_kept(g, lo + n) - zstate_v_kept(g, lo) : n) * (int64_t)sizeof(float);
}
static uint64_t t_file_bytes(const zstate_nvme *z, int t) {
    return t == 2 ? (uint64_t)z->voff[z->base.nchunks] : z->file_bytes;
}

/* ---------------------------------------------------------------- slots */

static void submit_slot(zstate_nvme *z, int si, int64_t c, zaio_op op, zinc_status *st) {
    nv_slot *s = &z->slot[si];
    for (int t = 0; t < z->nt; t++) {
        zaio_req *r = &s->req[t];
        memset(r, 0, sizeof *r);
        r->op = op;
        r->file = z->file[t];
        r->buf = s->buf + (size_t)t * (size_t)z->stride;
        r->buf_index = z->bufs_registered ? si * z->nt + t : -1;
        r->off = t_off(z, t, c);
        r->len = t_io(z, t, c);
        snprintf(r->what, sizeof r->what, "chunk %lld of %lld (%s)", (long long)c, (long long)z->base.nchunks,
                 tensor_names[t]);
        zinc_status rc = zaio_submit(z->aio, r);
        if (rc != ZINC_OK && *st == ZINC_OK) *st = rc;
    }
}

static bool slot_io_done(const zstate_nvme *z, const nv_slot *s) {
    for (int t = 0; t < z->nt; t++)
        if (!zaio_req_done(&s->req[t])) return false;
    return true;
}

/* Waits for the slot's requests (one per tensor); returns the first failure (with its message when
 * `report`). */
static zinc_status wait_slot(zstate_nvme *z, nv_slot *s, bool report) {
    zinc_status first = ZINC_OK;
    double t0 = slot_io_done(z, s) ? 0 : zclock_now_s();
    for (int t = 0; t < z->nt; t++) {
        zaio_req *r = &s->req[t];
        zinc_status st = zaio_complete(z->aio, r); /* fails only when the ring itself fails */
        if (st != ZINC_OK) {
            zaio_drain(z->aio); /* finish what we can */
            if (first == ZINC_OK) first = st;
        }
    }
    if (t0 > 0) z->stats.wait_s += zclock_now_s() - t0;
    if (first != ZINC_OK) return first;
    for (int t = 0; t < z->nt; t++)
        if (!zaio_req_ok(&s->req[t])) return report ? zaio_req_error(z->aio, &s->req[t]) : ZINC_ERR_IO;
    return ZINC_OK;
}

/* A slot whose writes are complete: the chunk's new checksums take effect, or it is marked lost. */
static zinc_status retire_write(zstate_nvme *z, nv_slot *s, bool report) {
    zinc_status st = wait_slot(z, s, report);
    int64_t c = s->chunk;
    if (st == ZINC_OK) {
        for (int t = 0; t < z->nt; t++) z->crc[c * z->nt + t] = s->crc[t];
        z->cstate[c] = CHUNK_VALID;
        z->stats.chunks_written++;
        for (int t = 0; t < z->nt; t++) z->pass_wbytes += (uint64_t)s->req[t].len;
    } else {
        z->cstate[c] = CHUNK_LOST;
    }
    s->state = SLOT_FREE;
    s->chunk = -1;
    return st;
}

/* Retires the slots whose writes finished, without blocking. */
static zinc_status reap_writes(zstate_nvme *z) {
    zinc_status st = zaio_poll(z->aio), first = st;
    for (int i = 0; i < z->nbuf; i++) {
        nv_slot *s = &z->slot[i];
        if (s->state == SLOT_WRITING && slot_io_done(z, s)) {
            st = retire_write(z, s, first == ZINC_OK);
            if (first == ZINC_OK) first = st;
        }
    }
    return first;
}

/* Makes slot si free, waiting for its writes (READ passes never leave a slot busy here). */
static zinc_status free_slot(zstate_nvme *z, int si) {
    nv_slot *s = &z->slot[si];
    if (s->state == SLOT_WRITING) return retire_write(z, s, true);
    if (s->state == SLOT_READING) {
        (void)wait_slot(z, s, false);
        s->state = SLOT_FREE;
    }
    if (s->state != SLOT_FREE)
        return ZERR(ZINC_ERR_INTERNAL, "NVMe store: buffer %d still holds chunk %lld in use", si, (long long)s->chunk);
    return ZINC_OK;
}

static zinc_status check_readable(const zstate_nvme *z, int64_t c) {
    if (z->cstate[c] == CHUNK_VALID) return ZINC_OK;
    if (z->cstate[c] == CHUNK_LOST)
        return ZERR(ZINC_ERR_IO,
                    "NVMe offload: chunk %lld of %lld (offset %lld, length %lld in %s and the %s "
                    "files) is lost: its write failed in an earlier pass, so the optimizer state there is unknown. "
                    "Restore the run from a checkpoint",
                    (long long)c, (long long)z->base.nchunks, (long long)(c * z->stride), (long long)chunk_io_len(z, c),
                    z->path[0], z->nt > 2 ? "exp_avg, exp_avg_sq" : "exp_avg");
    return ZERR(ZINC_ERR_INTERNAL, "NVMe store: chunk %lld read before it was ever written", (long long)c);
}

/* Issues reads for chunks next_read .. limit-1 while their buffers are free (never blocks). */
static zinc_status read_ahead(zstate_nvme *z, int64_t limit) {
    zinc_status st = ZINC_OK;
    if (limit > z->base.nchunks) limit = z->base.nchunks;
    while (z->next_read < limit) {
        int64_t c = z->next_read;
        int si = (int)(c % z->nbuf);
        nv_slot *s = &z->slot[si];
        if (s->state == SLOT_WRITING) {
            TRY(zaio_poll(z->aio));
            if (!slot_io_done(z, s)) break;
            TRY(retire_write(z, s, true));
        }
        if (s->state != SLOT_FREE || z->cstate[c] != CHUNK_VALID) break; /* acquire reports a bad chunk */
        s->chunk = c;
        s->state = SLOT_READING;
        submit_slot(z, si, c, ZAIO_READ, &st);
        z->next_read++;
        if (st != ZINC_OK) goto fail;
    }
fail:
    return st;
}

static void clock_now(struct timespec *t) { clock_gettime(CLOCK_MONOTONIC, t); }

static zinc_status nv_pass_begin(zstate *base, zstate_mode mode) {
    zstate_nvme *z = (zstate_nvme *)base;
    for (int i = 0; i < z->nbuf; i++)
        if (z->slot[i].state != SLOT_FREE)
            return ZERR(ZINC_ERR_INTERNAL, "NVMe store: buffer %d busy at the start of a pass", i);
    z->next_read = 0;
    z->pass_rbytes = z->pass_wbytes = 0;
    clock_now(&z->pass_t0);
    if (mode & ZSTATE_READ) return read_ahead(z, z->nbuf);
    return ZINC_OK;
}

/* CRC32C of a chunk's array in sub-blocks, reaping and refilling the ring between them: on the stepping
 * thread the checksum takes ~1/14 s per GB, long enough for the queued IO to finish and the disk to idle
 * unless new IO is submitted meanwhile. Same value as one zcrc32c over the whole range. */
#define CRC_POLL_BYTES ((size_t)4 << 20)
static zinc_status crc_polled(zstate_nvme *z, const char *p, size_t bytes, uint32_t *out) {
    zinc_status st = ZINC_OK;
    uint32_t crc = 0;
    for (size_t off = 0; off < bytes; off += CRC_POLL_BYTES) {
        size_t k = bytes - off < CRC_POLL_BYTES ? bytes - off : CRC_POLL_BYTES;
        crc = zcrc32c(crc, p + off, k);
        if (off + k < bytes) TRY(zaio_poll(z->aio));
    }
    *out = crc;
fail:
    return st;
}

static zinc_status nv_poll(zstate *base) { return zaio_poll(((zstate_nvme *)base)->aio); }

static zinc_status nv_acquire(zstate *base, int64_t c, zstate_view *out) {
    zinc_status st = ZINC_OK;
    zstate_nvme *z = (zstate_nvme *)base;
    int si = (int)(c % z->nbuf);
    nv_slot *s = &z->slot[si];
    int64_t n = chunk_n(base, c);
    if (base->mode & ZSTATE_READ) {
        if (!(s->state == SLOT_READING && s->chunk == c)) {
            TRY(free_slot(z, si));
            TRY(check_readable(z, c));
            if (z->next_read != c)
                FAIL(ZINC_ERR_INTERNAL, "NVMe store: read-ahead at chunk %lld, acquire asks for %lld",
                     (long long)z->next_read, (long long)c);
            s->chunk = c;
            s->state = SLOT_READING;
            submit_slot(z, si, c, ZAIO_READ, &st);
            z->next_read = c + 1;
            if (st != ZINC_OK) goto fail;
        }
        TRY(read_ahead(z, c + z->nbuf));
        st = wait_slot(z, s, true);
        if (st != ZINC_OK) {
            s->state = SLOT_FREE;
            s->chunk = -1;
            goto fail;
        }
        z->stats.chunks_read++;
        for (int t = 0; t < z->nt; t++) {
            z->pass_rbytes += (uint64_t)s->req[t].len;
            uint32_t got = 0;
            st = crc_polled(z, s->buf + (size_t)t * (size_t)z->stride, (size_t)t_bytes(z, t, c), &got);
            if (st != ZINC_OK) {
                s->state = SLOT_FREE;
                s->chunk = -1;
                goto fail;
            }
            uint32_t want = z->crc[c * z->nt + t];
            if (got != want) {
                s->state = SLOT_FREE;
                s->chunk = -1;
                FAIL(ZINC_ERR_CORRUPT,
                     "NVMe offload: checksum mismatch in %s, chunk %lld of %lld (offset %lld, length %lld): stored "
                     "CRC32C 0x%08" PRIx32 ", read 0x%08" PRIx32 ". The file was changed behind zinc's back or the "
                     "device returned wrong data; the optimizer state is not trustworthy: restore from a "
                     "checkpoint and check the disk",
                     z->path[t], (long long)c, (long long)base->nchunks, (long long)t_off(z, t, c),
                     (long long)t_bytes(z, t, c), want, got);
            }
        }
    } else {
        TRY(free_slot(z, si));
        s->chunk = c;
    }
    s->state = SLOT_IN_USE;
    int ahead = 0, behind = 0;
    for (int i = 0; i < z->nbuf; i++) {
        const nv_slot *o = &z->slot[i];
        if (o->state == SLOT_READING && o->chunk > c && !slot_io_done(z, o)) ahead++;
        if (o->state == SLOT_WRITING && o->chunk < c && !slot_io_done(z, o)) behind++;
    }
    if (ahead > z->stats.max_reads_ahead) z->stats.max_reads_ahead = ahead;
    if (behind > z->stats.max_writes_behind) z->stats.max_writes_behind = behind;
    float *b = (float *)s->buf;
    int64_t fs = z->stride / (int64_t)sizeof(float);
    *out = (zstate_view){.lo = c * base->chunk,
                         .n = n,
                         .master = b,
                         .m = b + fs,
                         .v = z->nt > 2 ? b + 2 * fs : NULL,
                         .vn = t_bytes(z, 2, c) / (int64_t)sizeof(float)};
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nv_release(zstate *base, int64_t c) {
    zinc_status st = ZINC_OK;
    zstate_nvme *z = (zstate_nvme *)base;
    int si = (int)(c % z->nbuf);
    nv_slot *s = &z->slot[si];
    if (s->state != SLOT_IN_USE || s->chunk != c)
        return ZERR(ZINC_ERR_INTERNAL, "NVMe store: chunk %lld released but not acquired", (long long)c);
    if (base->mode & ZSTATE_WRITE) {
        for (int t = 0; t < z->nt; t++) {
            size_t bytes = (size_t)t_bytes(z, t, c), io = (size_t)t_io(z, t, c);
            char *p = s->buf + (size_t)t * (size_t)z->stride;
            if (io > bytes) memset(p + bytes, 0, io - bytes);
            TRY(crc_polled(z, p, bytes, &s->crc[t]));
        }
        s->state = SLOT_WRITING;
        submit_slot(z, si, c, ZAIO_WRITE, &st);
        if (st != ZINC_OK) goto fail;
    } else {
        s->state = SLOT_FREE;
        s->chunk = -1;
    }
    TRY(reap_writes(z));
fail:
    return st;
}

/* Finishes every slot: writes retire (first failure reported when `report`), reads are dropped. */
static zinc_status finish_all(zstate_nvme *z, bool report) {
    zinc_status first = ZINC_OK;
    for (int i = 0; i < z->nbuf; i++) {
        nv_slot *s = &z->slot[i];
        if (s->state == SLOT_WRITING) {
            zinc_status st = retire_write(z, s, report && first == ZINC_OK);
            if (first == ZINC_OK) first = st;
        } else if (s->state == SLOT_READING) {
            (void)wait_slot(z, s, false);
        }
        s->state = SLOT_FREE;
        s->chunk = -1;
    }
    return first;
}

static zinc_status nv_pass_end(zstate *base) {
    zstate_nvme *z = (zstate_nvme *)base;
    zinc_status st = finish_all(z, true);
    z->stats.passes++;
    z->stats.bytes_read += z->pass_rbytes;
    z->stats.bytes_written += z->pass_wbytes;
    if (st == ZINC_OK) {
        struct timespec t1;
        clock_now(&t1);
        double dt = (double)(t1.tv_sec - z->pass_t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - z->pass_t0.tv_nsec);
        ZLOG_DEBUG(base->ctx.log, "NVMe store pass: read %.1f MiB, wrote %.1f MiB in %.3f s (%.0f MiB/s)",
                   (double)z->pass_rbytes / 1048576.0, (double)z->pass_wbytes / 1048576.0, dt,
                   dt > 0 ? (double)(z->pass_rbytes + z->pass_wbytes) / 1048576.0 / dt : 0.0);
    }
    return st;
}

static void nv_pass_abort(zstate *base) {
    zstate_nvme *z = (zstate_nvme *)base;
    zaio_drain(z->aio);
    (void)finish_all(z, false);
    z->stats.passes++;
    z->stats.bytes_read += z->pass_rbytes;
    z->stats.bytes_written += z->pass_wbytes;
}

static void nv_destroy(zstate *base);

zinc_status zstate_nvme_stats_get(const zstate *s, zstate_nvme_stats *out) {
    if (!s || s->ops->destroy != nv_destroy)
        return ZERR(ZINC_ERR_INVALID_ARG, "zstate_nvme_stats_get: not an NVMe optimizer-state store");
    const zstate_nvme *z = (const zstate_nvme *)s;
    *out = z->stats;
    out->buffers = z->nbuf;
    out->align = z->align;
    const zaio_file *f = z->aio ? zaio_file_info(z->aio, z->file[0]) : NULL;
    out->direct = f && f->direct;
    return ZINC_OK;
}

/* ---------------------------------------------------------------- creation and removal */

static void nv_destroy(zstate *base) {
    zstate_nvme *z = (zstate_nvme *)base;
    zmemtrack *t = base->ctx.mem;
    if (z->aio) zaio_drain(z->aio);
    zaio_destroy(z->aio); /* closes the files */
    zsig_forget(z->sig_rank);
    zsig_forget(z->sig_run);
    for (int k = 0; k < z->nt; k++) {
        if (z->made_files[k]) unlink(z->path[k]);
        free(z->path[k]);
        if (z->counted_files) zmem_sub(t, ZINC_MEMKIND_NVME, cats[k], t_file_bytes(z, k));
    }
    if (z->made_rank_dir) rmdir(z->rank_dir);
    if (z->run_dir) rmdir(z->run_dir); /* fails while other ranks still have theirs: the last one removes it */
    for (int i = 0; z->slot && i < z->nbuf; i++) free(z->slot[i].buf);
    if (z->buf_bytes) zmem_sub(t, z->buf_kind, ZINC_MEM_STAGING, z->buf_bytes);
    free(z->slot);
    free(z->crc);
    free(z->voff);
    free(z->cstate);
    free(z->run_dir);
    free(z->rank_dir);
    free(z);
}

static const zstate_ops nvme_ops = {"nvme",        nv_pass_begin, nv_acquire, nv_release, nv_pass_end,
                                    nv_pass_abort, nv_destroy,    nv_poll,    NULL};

static char *path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p) return NULL;
    memcpy(p, a, la);
    size_t k = la;
    if (k == 0 || p[k - 1] != '/') p[k++] = '/';
    memcpy(p + k, b, lb + 1);
    return p;
}

/* mkdir -p with mode 0700 for the directories it creates. */
static zinc_status make_dirs(const char *path) {
    char buf[ZCFG_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ZERR(ZINC_ERR_CONFIG, "zero_optimization.offload_optimizer.nvme_path is too long (%zu characters)",
                    strlen(path));
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return ZERR(ZINC_ERR_IO,
                            "cannot create the directory %s (for zero_optimization.offload_optimizer.nvme_path %s): "
                            "%s. Fix: create it yourself or choose an nvme_path this user can write",
                            buf, path, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ZERR(ZINC_ERR_CONFIG, "zero_optimization.offload_optimizer.nvme_path %s is not a directory", path);
    if (access(path, W_OK | X_OK) != 0)
        return ZERR(ZINC_ERR_IO,
                    "zero_optimization.offload_optimizer.nvme_path %s is not writable by this user (%s): choose a "
                    "directory you can write",
                    path, strerror(errno));
    return ZINC_OK;
}

/* Run directories of processes that no longer exist on this host (a run killed by SIGKILL, a crash, a
 * machine reset; SIGTERM and SIGINT remove their own through base/core/signals.h) are removed: only
 * directories named zinc-PID-XXXXXXXX, owned by this user, whose PID is not running here. nvme_path is
 * node-local storage (each node its own disk), so a PID names a process of this host. */
static void remove_stale(const zlog *log, const char *root) {
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid = 0;
        char hex[16];
        if (sscanf(de->d_name, "zinc-%ld-%8[0-9a-f]", &pid, hex) != 2 || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *p = path_join(root, de->d_name);
        struct stat sb;
        if (p && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid()) {
            if (zfile_rmtree(p) == ZINC_OK)
                ZLOG_WARN(log,
                          "NVMe offload: removed %s, the swap files of run %ld, which is no longer running on this "
                          "host (it did not exit cleanly)",
                          p, pid);
            else
                ZLOG_WARN(log, "NVMe offload: %s", zinc_last_error());
        }
        free(p);
    }
    closedir(d);
}

typedef struct run_msg {
    int32_t status;
    char name[96];
    char error[1800];
} run_msg;

/* Rank 0 creates the run directory under nvme_path and tells the others its name (collective: every rank
 * gets the same outcome). */
static zinc_status make_run_dir(const zstate_ctx *c, const char *root, char name[96]) {
    run_msg msg;
    memset(&msg, 0, sizeof msg);
    zinc_status st = ZINC_OK;
    if (c->comm->rank == 0) {
        st = make_dirs(root);
        if (st == ZINC_OK) remove_stale(c->log, root);
        for (int attempt = 0; st == ZINC_OK; attempt++) {
            uint32_t rnd = 0;
            if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
                rnd = (uint32_t)time(NULL) ^ (uint32_t)clock() ^ ((uint32_t)attempt * 2654435761u);
            snprintf(msg.name, sizeof msg.name, "zinc-%ld-%08" PRIx32, (long)getpid(), rnd);
            char *p = path_join(root, msg.name);
            if (!p) {
                st = ZERR(ZINC_ERR_NOMEM, "out of memory");
                break;
            }
            int rc = mkdir(p, 0700), err = errno;
            free(p);
            if (rc == 0) break;
            if (err != EEXIST || attempt >= 16)
                st = ZERR(ZINC_ERR_IO, "cannot create the run directory %s/%s: %s", root, msg.name, strerror(err));
        }
        msg.status = (int32_t)st;
        if (st != ZINC_OK) snprintf(msg.error, sizeof msg.error, "%s", zinc_last_error());
    }
    zinc_status cst = zcomm_bcast(c->comm, &msg, sizeof msg, 0);
    if (cst != ZINC_OK) return cst;
    if (c->comm->rank == 0 && st != ZINC_OK) return st;
    if (msg.status != ZINC_OK)
        return ZERR((zinc_status)msg.status, "NVMe offload: rank 0 could not set up nvme_path %s: %s", root, msg.error);
    memcpy(name, msg.name, sizeof msg.name);
    return ZINC_OK;
}

zinc_status zstate_nvme_run_dir(const zstate_ctx *c, const char *root, char **out) {
    char name[96];
    *out = NULL;
    zinc_status st = make_run_dir(c, root, name);
    if (st != ZINC_OK) return st;
    if (!(*out = path_join(root, name))) return ZERR(ZINC_ERR_NOMEM, "out of memory");
    return ZINC_OK;
}

zinc_status zstate_nvme_make_dirs(const char *path) { return make_dirs(path); }

/* Everything after the run directory exists: this rank's directory, files, buffers, registration. */
static zinc_status setup_local(zstate_nvme *z) {
    zinc_status st = ZINC_OK;
    const zstate_ctx *c = &z->base.ctx;
    const zcfg_offload *o = &c->offload;
    if (c->comm->rank != 0) {
        /* Ranks on other nodes see their own (node-local) nvme_path: make the same run directory there. */
        TRY(make_dirs(o->nvme_path));
        if (mkdir(z->run_dir, 0700) != 0 && errno != EEXIST)
            FAIL(ZINC_ERR_IO, "cannot create the run directory %s: %s", z->run_dir, strerror(errno));
    }
    char name[32];
    snprintf(name, sizeof name, "rank%d", c->comm->rank);
    z->rank_dir = path_join(z->run_dir, name);
    if (!z->rank_dir) FAIL(ZINC_ERR_NOMEM, "out of memory");
    if (mkdir(z->rank_dir, 0700) != 0)
        FAIL(ZINC_ERR_IO, "cannot create %s: %s%s", z->rank_dir, strerror(errno),
             errno == EEXIST ? " (another run uses the same directory: remove it)" : "");
    z->made_rank_dir = true;
    z->sig_rank = zsig_remember(z->rank_dir, true);

    zaio_params p = {.block_size = c->aio.block_size,
                     .queue_depth = c->aio.queue_depth,
                     .intra_op_parallelism = c->aio.intra_op_parallelism,
                     .single_submit = c->aio.single_submit,
                     .overlap_events = c->aio.overlap_events};
    TRY(zaio_create(&p, &z->aio));
    bool buffered_warned = false;
    z->align = 512;
    for (int t = 0; t < z->nt; t++) {
        z->path[t] = path_join(z->rank_dir, file_names[t]);
        if (!z->path[t]) FAIL(ZINC_ERR_NOMEM, "out of memory");
        z->made_files[t] = true; /* unlinked by destroy even if the open below fails half-way */
        TRY(zaio_open(z->aio, z->path[t], c->aio.allow_buffered_io, &z->file[t]));
        const zaio_file *f = zaio_file_info(z->aio, z->file[t]);
        if (f->align > z->align) z->align = f->align;
        if (!f->direct && !buffered_warned) {
            ZLOG_WARN(c->log,
                      "NVMe offload: the file system holding %s refuses O_DIRECT (%s); using buffered IO because "
                      "zinc.allow_buffered_io is set. The page cache will hold a second copy of the optimizer state "
                      "and the numbers will not reflect the disk's speed",
                      z->rank_dir, f->why_buffered);
            buffered_warned = true;
        }
    }
    zstate_nvme_geometry geo = zstate_nvme_geometry_make(z->base.n, z->base.chunk, z->align, o->buffer_count);
    z->stride = geo.stride;
    z->file_bytes = geo.file_bytes;
    TRY_ALLOC(z->voff, (size_t)z->base.nchunks + 1, "the NVMe exp_avg_sq layout");
    zstate_nvme_v_layout(z->base.n, z->base.chunk, z->align, &c->vgaps, z->voff);
    for (int t = 0; t < z->nt; t++) TRY(zaio_preallocate(z->aio, z->file[t], (int64_t)t_file_bytes(z, t)));
    for (int t = 0; t < z->nt; t++) zmem_add(c->mem, ZINC_MEMKIND_NVME, cats[t], t_file_bytes(z, t));
    z->counted_files = true;

    z->nbuf = geo.buffers;
    TRY_ALLOC(z->slot, z->nbuf, "NVMe swap buffers");
    size_t slot_bytes = (size_t)z->nt * (size_t)z->stride;
    size_t mem_align = z->align < 4096 ? 4096 : z->align;
    void **bufs = NULL;
    size_t *lens = NULL;
    for (int i = 0; i < z->nbuf; i++) {
        void *b = NULL;
        if (posix_memalign(&b, mem_align, slot_bytes) != 0 || !b)
            FAIL(ZINC_ERR_NOMEM,
                 "out of host memory allocating NVMe swap buffer %d of %d (%zu bytes = %d x %lld-element chunks). "
                 "Fix: a smaller zero_optimization.sub_group_size or offload_optimizer.buffer_count",
                 i + 1, z->nbuf, slot_bytes, z->nt, (long long)z->base.chunk);
        memset(b, 0, slot_bytes);
        z->slot[i].buf = b;
        z->slot[i].chunk = -1;
    }
    TRY_ALLOC(bufs, (size_t)z->nbuf * (size_t)z->nt, "buffer registration");
    lens = calloc((size_t)z->nbuf * (size_t)z->nt, sizeof *lens);
    if (!lens) {
        free(bufs);
        FAIL(ZINC_ERR_NOMEM, "out of memory registering buffers");
    }
    for (int i = 0; i < z->nbuf; i++)
        for (int t = 0; t < z->nt; t++) {
            bufs[i * z->nt + t] = z->slot[i].buf + (size_t)t * (size_t)z->stride;
            lens[i * z->nt + t] = (size_t)z->stride;
        }
    char why[256];
    st = zaio_register(z->aio, bufs, lens, z->nbuf * z->nt, &z->bufs_registered, why, sizeof why);
    free(bufs);
    free(lens);
    if (st != ZINC_OK) goto fail;
    if (!z->bufs_registered && why[0])
        ZLOG_INFO(c->log,
                  "NVMe offload: io_uring could not register the swap buffers (%s); using unregistered "
                  "buffers (slightly more CPU per IO)",
                  why);
    z->buf_kind = z->bufs_registered ? ZINC_MEMKIND_PINNED : ZINC_MEMKIND_HOST;
    z->buf_bytes = (uint64_t)z->nbuf * slot_bytes;
    zmem_add(c->mem, z->buf_kind, ZINC_MEM_STAGING, z->buf_bytes);
    z->crc = calloc((size_t)(z->base.nchunks > 0 ? z->base.nchunks : 1) * (size_t)z->nt, sizeof *z->crc);
    z->cstate = calloc((size_t)(z->base.nchunks > 0 ? z->base.nchunks : 1), 1);
    if (!z->crc || !z->cstate) FAIL(ZINC_ERR_NOMEM, "out of memory for the chunk checksums");

    const zaio_file *f0 = zaio_file_info(z->aio, z->file[0]);
    ZLOG_INFO(c->log,
              "NVMe optimizer store: %s, %lld chunks of %lld elements, %d files of %.1f MiB, %d swap buffers of "
              "%.1f MiB (%s), %s IO aligned to %u bytes (%s), %s, block %lld, queue depth %d x %d, CRC32C %s",
              z->rank_dir, (long long)z->base.nchunks, (long long)z->base.chunk, z->nt,
              (double)z->file_bytes / 1048576.0, z->nbuf, (double)slot_bytes / 1048576.0,
              z->bufs_registered ? "registered" : "unregistered", f0->direct ? "O_DIRECT" : "buffered", z->align,
              f0->align_source, zaio_backend(z->aio), (long long)c->aio.block_size, c->aio.queue_depth,
              c->aio.intra_op_parallelism, zcrc32c_impl());
    return ZINC_OK;
fail:
    return st;
}

zinc_status zstate_create_nvme(const zstate_ctx *c, int64_t n, zstate **out) {
    zinc_status st = ZINC_OK;
    zstate_nvme *z = NULL;
    int32_t *all = NULL;
    *out = NULL;
    const zcfg_offload *o = &c->offload;
    int64_t chunk = zstate_chunk_elems(c->sub_group_size, n);
    /* Checks every rank makes alike, before any collective. */
    TRY(zstate_check_tensors(c));
    if (o->buffer_count < NV_MIN_BUFFERS)
        return ZERR(ZINC_ERR_CONFIG,
                    "zero_optimization.offload_optimizer.buffer_count is %d, but the NVMe optimizer pipeline needs at "
                    "least %d buffers: one chunk being read, one being updated and one being written back (each "
                    "buffer holds one sub_group_size chunk of the master weights and the optimizer's moments, here "
                    "%lld bytes). Set buffer_count to %d or more (each extra buffer adds a chunk of read-ahead)",
                    o->buffer_count, NV_MIN_BUFFERS, (long long)(c->tensors * chunk * (int64_t)sizeof(float)),
                    NV_MIN_BUFFERS);
    if (!o->nvme_path[0])
        return ZERR(ZINC_ERR_CONFIG, "zero_optimization.offload_optimizer.nvme_path is empty: name the directory "
                                     "for the swap files (on a local NVMe or SSD)");

    TRY_ALLOC(z, 1, "the NVMe optimizer store");
    z->base = (zstate){.ops = &nvme_ops, .ctx = *c, .n = n, .chunk = chunk};
    z->base.nchunks = n > 0 ? (n + chunk - 1) / chunk : 0;
    z->nt = c->tensors;
    z->sig_run = z->sig_rank = -1;
    for (int t = 0; t < NT; t++) z->file[t] = -1;
    char run[96];
    zsig_install(); /* a SIGTERM or SIGINT removes this run's swap files (base/core/signals.h) */
    TRY(make_run_dir(c, o->nvme_path, run));
    z->run_dir = path_join(o->nvme_path, run);
    if (!z->run_dir) FAIL(ZINC_ERR_NOMEM, "out of memory");
    z->sig_run = zsig_remember(z->run_dir, false);
    /* Every rank learns whether every other rank got its files, so none waits in a collective for one that
     * failed. */
    zinc_status local = setup_local(z);
    TRY_ALLOC(all, c->comm->size, "status exchange");
    int32_t mine = (int32_t)local;
    zinc_status cst = zcomm_allgather_bytes(c->comm, &mine, all, sizeof mine);
    if (local != ZINC_OK) {
        st = local;
        goto fail;
    }
    if (cst != ZINC_OK) {
        st = cst;
        goto fail;
    }
    for (int r = 0; r < c->comm->size; r++)
        if (all[r] != ZINC_OK)
            FAIL((zinc_status)all[r],
                 "NVMe offload: rank %d could not set up its optimizer-state files under %s "
                 "(its own error says why)",
                 r, o->nvme_path);
    free(all);
    *out = &z->base;
    return ZINC_OK;
fail:
    free(all);
    if (z) nv_destroy(&z->base);
    return st;
}
