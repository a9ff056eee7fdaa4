/* The NVMe parameter store (offload/param_nvme.h).
 *
 * File: <nvme_path>/zinc-<pid of rank 0>-<random>/rank<r>/params.swp (the run directory is made as the
 * optimizer store's, offload/state_nvme.c, and swept the same way after a run that did not exit cleanly;
 * a signal removes it). Blocks of `block` bytes, each with a CRC32C set when its write completed and
 * checked after every read; a block never written reads as zeros without IO.
 *
 * A range that does not cover its first or last block whole is read-modify-written: those blocks are read
 * (and checked) into the swap buffer first. A failed write marks its blocks lost: reading them is an error
 * (the run ends; the checkpoint on disk is untouched, since the files here are never the checkpoint).
 *
 * The resident part (offload_param.max_in_cpu): the shard's first elements in a host array, the file
 * holding the rest from its offset 0. The public calls split each range there; everything below them
 * (blocks, prefetch slots, the write-behind) works in the file's own element coordinates. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offload/param_nvme.h"

#include "base/core/clock.h"
#include "base/core/crc32c.h"
#include "base/core/error.h"
#include "base/core/signals.h"
#include "base/core/trace.h"
#include "offload/aio.h"
#include "offload/state_nvme.h"

enum { BLK_UNWRITTEN = 0, BLK_VALID, BLK_LOST };

/* A prefetch buffer: one piece (at most swap_bytes) of a prefetched range, read in flight or done. */
typedef struct pf_slot {
    zaio_req req;
    char *buf;
    int64_t lo, n; /* the prefetched range (elements) it is a piece of */
    int part;      /* its place among the range's pieces */
    int64_t k, m;  /* its blocks */
    bool busy, io; /* io: a read was issued (else the blocks were never written: zeros) */
    int64_t t0;    /* --trace: when it was issued */
} pf_slot;

struct zstate_param {
    zstate_ctx ctx;
    int64_t n;     /* elements in the file */
    int64_t shard; /* elements of the store: resident + n */
    int64_t res;   /* the resident part's elements, in resbuf */
    char *resbuf;
    size_t esz;
    zstate_param_geometry geo;
    zaio *aio;
    int file;
    char *run_dir, *rank_dir, *path;
    bool made_rank_dir, made_file, counted;
    int sig_run, sig_rank;
    char *swap, *scratch;
    char *pfbuf; /* geo.prefetch_buffers buffers of geo.swap_bytes */
    pf_slot *pf;
    /* write-behind: the last write of the swap buffer, in flight until the store's next call (wflush) */
    zaio_req wreq;
    bool wpending;
    int64_t wk, wm, wt0;
    uint32_t *crc;
    uint8_t *bstate;
    zstate_param_stats stats;
    const char *file_name, *what; /* "params.swp", "parameter"; the gradient store's "grads.swp", "gradient" */
    zinc_mem_category cat;        /* what the tracker counts the file as */
};

static int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

zstate_param_geometry zstate_param_geometry_make(int64_t n, size_t esz, int64_t align, int64_t buffer_size,
                                                 int64_t scratch_elems, int buffer_count, int64_t resident) {
    zstate_param_geometry g = {.block = align > 4096 ? align : 4096};
    g.resident = resident < 0 ? 0 : resident < n ? resident : n;
    g.resident_bytes = (uint64_t)(g.resident * (int64_t)esz);
    n -= g.resident; /* the file's elements */
    int64_t bytes = n * (int64_t)esz;
    g.nblocks = (bytes + g.block - 1) / g.block;
    g.file_bytes = (uint64_t)(g.nblocks * g.block);
    int64_t want = (buffer_size < n ? buffer_size : n) * (int64_t)esz;
    int64_t blocks = (want + g.block - 1) / g.block;
    if (blocks < 1) blocks = 1;
    if (blocks > g.nblocks && g.nblocks > 0) blocks = g.nblocks;
    g.swap_bytes = (uint64_t)(blocks * g.block);
    g.scratch_bytes = (uint64_t)round_up(scratch_elems * (int64_t)esz, 4096);
    g.prefetch_buffers = buffer_count > 0 && n > 0 ? buffer_count : 0;
    g.prefetch_bytes = (uint64_t)g.prefetch_buffers * g.swap_bytes;
    return g;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static zinc_status setup_local(zstate_param *p) {
    zinc_status st = ZINC_OK;
    const zstate_ctx *c = &p->ctx;
    if (c->comm->rank != 0) { /* node-local nvme_path on other nodes: the same run directory there */
        TRY(zstate_nvme_make_dirs(c->offload.nvme_path));
        if (mkdir(p->run_dir, 0700) != 0 && errno != EEXIST)
            FAIL(ZINC_ERR_IO, "cannot create the run directory %s: %s", p->run_dir, strerror(errno));
    }
    char name[32];
    snprintf(name, sizeof name, "rank%d", c->comm->rank);
    if (!(p->rank_dir = join(p->run_dir, name))) FAIL(ZINC_ERR_NOMEM, "out of memory");
    if (mkdir(p->rank_dir, 0700) != 0) FAIL(ZINC_ERR_IO, "cannot create %s: %s", p->rank_dir, strerror(errno));
    p->made_rank_dir = true;
    p->sig_rank = zsig_remember(p->rank_dir, true);
    /* The ring is deep enough for every prefetch buffer's read and the swap buffer's to be in flight at
     * once: io_uring moves the submitted pieces with no thread of ours, so a prefetch issued at a module's
     * entry arrives while the model computes (at aio.queue_depth alone, only that many pieces would move
     * until the next call into the store). The geometry is known before the file's alignment: whole
     * swap buffers of at least 4096-byte blocks. */
    zstate_param_geometry g0 =
        zstate_param_geometry_make(p->n, p->esz, 4096, c->offload.buffer_size, 0,
                                   p->cat == ZINC_MEM_GRADS ? ZSTATE_GRAD_PREFETCH_BUFFERS : c->offload.buffer_count,
                                   0);
    int64_t bs = c->aio.block_size > 4096 ? c->aio.block_size : 4096;
    int64_t pieces = (int64_t)(g0.prefetch_buffers + 1) * (((int64_t)g0.swap_bytes + bs - 1) / bs);
    int intra = c->aio.intra_op_parallelism > 0 ? c->aio.intra_op_parallelism : 1;
    int64_t qd = (pieces + intra - 1) / intra;
    if (qd < c->aio.queue_depth) qd = c->aio.queue_depth;
    if (qd > 4096) qd = 4096;
    zaio_params ap = {.block_size = c->aio.block_size,
                      .queue_depth = (int)qd,
                      .intra_op_parallelism = c->aio.intra_op_parallelism,
                      .single_submit = c->aio.single_submit,
                      .overlap_events = c->aio.overlap_events};
    TRY(zaio_create(&ap, &p->aio));
    if (!(p->path = join(p->rank_dir, p->file_name))) FAIL(ZINC_ERR_NOMEM, "out of memory");
    p->made_file = true;
    TRY(zaio_open(p->aio, p->path, c->aio.allow_buffered_io, &p->file));
    const zaio_file *f = zaio_file_info(p->aio, p->file);
    if (!f->direct)
        ZLOG_WARN(c->log, "NVMe %s offload: the file system holding %s refuses O_DIRECT (%s); buffered IO", p->what,
                  p->rank_dir, f->why_buffered);
    int64_t scratch_elems = (int64_t)p->geo.scratch_bytes / (int64_t)p->esz;
    p->geo =
        zstate_param_geometry_make(p->shard, p->esz, f->align, c->offload.buffer_size, scratch_elems,
                                   p->cat == ZINC_MEM_GRADS ? ZSTATE_GRAD_PREFETCH_BUFFERS : c->offload.buffer_count,
                                   p->res);
    TRY(zaio_preallocate(p->aio, p->file, (int64_t)p->geo.file_bytes));
    size_t ma = (size_t)p->geo.block;
    if (posix_memalign((void **)&p->swap, ma, p->geo.swap_bytes) != 0) p->swap = NULL;
    if (p->geo.scratch_bytes && posix_memalign((void **)&p->scratch, ma, p->geo.scratch_bytes) != 0) p->scratch = NULL;
    if (p->geo.prefetch_bytes) {
        if (posix_memalign((void **)&p->pfbuf, ma, p->geo.prefetch_bytes) != 0) p->pfbuf = NULL;
        p->pf = calloc((size_t)p->geo.prefetch_buffers, sizeof *p->pf);
        if (!p->pfbuf || !p->pf)
            FAIL(ZINC_ERR_NOMEM,
                 "out of host memory for the NVMe %s prefetch buffers (%d of %llu bytes). Fix: a smaller "
                 "zero_optimization.offload_param.buffer_count or buffer_size",
                 p->what, p->geo.prefetch_buffers, (unsigned long long)p->geo.swap_bytes);
        for (int i = 0; i < p->geo.prefetch_buffers; i++) p->pf[i].buf = p->pfbuf + (size_t)i * p->geo.swap_bytes;
    }
    if (!p->swap || (p->geo.scratch_bytes && !p->scratch))
        FAIL(ZINC_ERR_NOMEM,
             "out of host memory for the NVMe %s swap buffer (%llu bytes) and step scratch (%llu bytes). "
             "Fix: a smaller zero_optimization.offload_param.buffer_size or sub_group_size",
             p->what, (unsigned long long)p->geo.swap_bytes, (unsigned long long)p->geo.scratch_bytes);
    if (p->res && !(p->resbuf = calloc((size_t)p->res, p->esz)))
        FAIL(ZINC_ERR_NOMEM,
             "out of host memory for the %s elements kept in memory (%lld elements, %llu bytes). Fix: a smaller "
             "zero_optimization.offload_param.max_in_cpu (0 keeps every %s on NVMe)",
             p->what, (long long)p->res, (unsigned long long)p->geo.resident_bytes, p->what);
    zmem_add(c->mem, ZINC_MEMKIND_NVME, p->cat, p->geo.file_bytes);
    zmem_add(c->mem, ZINC_MEMKIND_HOST, p->cat, p->geo.resident_bytes);
    zmem_add(c->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING,
             p->geo.swap_bytes + p->geo.scratch_bytes + p->geo.prefetch_bytes);
    p->counted = true;
    size_t nb = (size_t)(p->geo.nblocks > 0 ? p->geo.nblocks : 1);
    p->crc = calloc(nb, sizeof *p->crc);
    p->bstate = calloc(nb, 1);
    if (!p->crc || !p->bstate) FAIL(ZINC_ERR_NOMEM, "out of memory for the %s block checksums", p->what);
    ZLOG_INFO(c->log,
              "NVMe %s store: %s, %.1f MiB in %lld blocks of %lld bytes, swap buffer %.1f MiB, %d prefetch "
              "buffers, %s, %s; %lld of %lld elements (%.1f MiB) kept in memory",
              p->what, p->path, (double)p->geo.file_bytes / 1048576.0, (long long)p->geo.nblocks,
              (long long)p->geo.block, (double)p->geo.swap_bytes / 1048576.0, p->geo.prefetch_buffers,
              f->direct ? "O_DIRECT" : "buffered", zaio_backend(p->aio), (long long)p->res, (long long)p->shard,
              (double)p->geo.resident_bytes / 1048576.0);
    return ZINC_OK;
fail:
    return st;
}

void zstate_param_destroy(zstate_param *p) {
    if (!p) return;
    if (p->aio) zaio_drain(p->aio);
    zaio_destroy(p->aio);
    zsig_forget(p->sig_rank);
    zsig_forget(p->sig_run);
    if (p->made_file) unlink(p->path);
    if (p->made_rank_dir) rmdir(p->rank_dir);
    if (p->run_dir) rmdir(p->run_dir); /* the last rank's succeeds */
    if (p->counted) {
        zmem_sub(p->ctx.mem, ZINC_MEMKIND_NVME, p->cat, p->geo.file_bytes);
        zmem_sub(p->ctx.mem, ZINC_MEMKIND_HOST, p->cat, p->geo.resident_bytes);
        zmem_sub(p->ctx.mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING,
                 p->geo.swap_bytes + p->geo.scratch_bytes + p->geo.prefetch_bytes);
    }
    free(p->swap);
    free(p->resbuf);
    free(p->pfbuf);
    free(p->pf);
    free(p->scratch);
    free(p->crc);
    free(p->bstate);
    free(p->path);
    free(p->rank_dir);
    free(p->run_dir);
    free(p);
}

zinc_status zstate_param_create(const zstate_ctx *c, int64_t n, zinc_dtype dt, int64_t scratch_elems, int64_t resident,
                                zstate_param **out) {
    return zstate_param_create_as(c, ZSTATE_PARAM_FILE, n, dt, scratch_elems, resident, out);
}

zinc_status zstate_param_create_as(const zstate_ctx *c, const char *file_name, int64_t n, zinc_dtype dt,
                                   int64_t scratch_elems, int64_t resident, zstate_param **out) {
    zinc_status st = ZINC_OK;
    zstate_param *p = NULL;
    int32_t *all = NULL;
    *out = NULL;
    if (!c->offload.nvme_path[0])
        return ZERR(ZINC_ERR_CONFIG, "zero_optimization.offload_param.nvme_path is empty: name the directory for "
                                     "the parameter swap file (on a local NVMe or SSD)");
    TRY_ALLOC(p, 1, "the NVMe parameter store");
    p->ctx = *c;
    bool grads = !strcmp(file_name, ZSTATE_GRAD_FILE);
    p->file_name = grads ? ZSTATE_GRAD_FILE : ZSTATE_PARAM_FILE;
    p->what = grads ? "gradient" : "parameter";
    p->cat = grads ? ZINC_MEM_GRADS : ZINC_MEM_PARAMS;
    p->shard = n;
    p->res = resident < 0 ? 0 : resident < n ? resident : n;
    p->n = n - p->res;
    p->esz = zinc_dtype_size(dt);
    p->file = -1;
    p->sig_run = p->sig_rank = -1;
    p->geo.scratch_bytes = (uint64_t)(scratch_elems * (int64_t)p->esz); /* re-rounded by setup_local */
    zsig_install();
    TRY(zstate_nvme_run_dir(c, c->offload.nvme_path, &p->run_dir));
    p->sig_run = zsig_remember(p->run_dir, false);
    zinc_status local = setup_local(p);
    TRY_ALLOC(all, c->comm->size, "status exchange");
    int32_t mine = (int32_t)local;
    zinc_status cst = zcomm_allgather_bytes(c->comm, &mine, all, sizeof mine);
    if (local != ZINC_OK) FAIL(local, "%s", zinc_last_error());
    if (cst != ZINC_OK) FAIL(cst, "%s", zinc_last_error());
    for (int r = 0; r < c->comm->size; r++)
        if (all[r] != ZINC_OK)
            FAIL((zinc_status)all[r],
                 "NVMe %s offload: rank %d could not set up its %s file under %s (its own error says why)", p->what, r,
                 p->what, c->offload.nvme_path);
    free(all);
    *out = p;
    return ZINC_OK;
fail:
    free(all);
    zstate_param_destroy(p);
    return st;
}

static zinc_status block_io_run(zstate_param *p, zaio_op op, int64_t k, int64_t m, char *buf);
static zinc_status check_blocks(zstate_param *p, int64_t k, int64_t m, char *buf);

/* Blocks [k, k + m) between the file and buf (in the swap buffer); a read checks each block. A read asks
 * the file only for the runs of blocks that were written: the others are zeros without IO (the gradient
 * store's pieces, whose edge blocks a neighbouring piece wrote earlier in the step). */
static zinc_status block_io(zstate_param *p, zaio_op op, int64_t k, int64_t m, char *buf) {
    if (op == ZAIO_WRITE) return block_io_run(p, op, k, m, buf);
    int64_t B = p->geo.block;
    for (int64_t i = 0; i < m;) {
        int64_t j = i;
        bool written = p->bstate[k + i] != BLK_UNWRITTEN;
        while (j < m && (p->bstate[k + j] != BLK_UNWRITTEN) == written) j++;
        if (written) {
            zinc_status st = block_io_run(p, op, k + i, j - i, buf + i * B);
            if (st != ZINC_OK) return st;
        } else {
            memset(buf + i * B, 0, (size_t)((j - i) * B));
        }
        i = j;
    }
    return ZINC_OK;
}

/* Blocks [k, k + m), every one written before (a read) */
static zinc_status block_io_run(zstate_param *p, zaio_op op, int64_t k, int64_t m, char *buf) {
    zinc_status st = ZINC_OK;
    int64_t B = p->geo.block;
    if (op == ZAIO_WRITE)
        for (int64_t i = 0; i < m; i++) p->crc[k + i] = zcrc32c(0, buf + i * B, (size_t)B);
    zaio_req r;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.file = p->file;
    r.buf = buf;
    r.buf_index = -1;
    r.off = k * B;
    r.len = m * B;
    /* a write's error is reported by the call that completes it: the message says so */
    snprintf(r.what, sizeof r.what, "%s blocks %lld..%lld of %lld%s", p->what, (long long)k, (long long)(k + m - 1),
             (long long)p->geo.nblocks, op == ZAIO_WRITE ? " (written behind)" : "");
    int64_t t0 = ztrace_begin();
    double w0 = zclock_now_s();
    if (op == ZAIO_WRITE) { /* behind: completed by the store's next call (wflush) */
        p->wreq = r;
        p->wk = k, p->wm = m, p->wt0 = t0;
        st = zaio_submit(p->aio, &p->wreq);
        if (st == ZINC_OK) {
            p->wpending = true;
            p->stats.wait_s += zclock_now_s() - w0;
            return ZINC_OK;
        }
        zaio_drain(p->aio);
        for (int64_t i = 0; i < m; i++) p->bstate[k + i] = BLK_LOST;
        return st;
    }
    st = zaio_submit(p->aio, &r);
    if (st == ZINC_OK)
        st = zaio_wait(p->aio, &r);
    else
        zaio_drain(p->aio);
    p->stats.wait_s += zclock_now_s() - w0;
    if (t0)
        ztrace_span(t0, ZTRACE_NVME,
                    op == ZAIO_READ ? (p->cat == ZINC_MEM_GRADS ? "grad swap in" : "param swap in")
                                    : (p->cat == ZINC_MEM_GRADS ? "grad swap out" : "param swap out"),
                    0, "bytes", m * B, "block", k);
    if (op == ZAIO_WRITE) {
        for (int64_t i = 0; i < m; i++) p->bstate[k + i] = st == ZINC_OK ? BLK_VALID : BLK_LOST;
        if (st != ZINC_OK) return st;
        p->stats.writes++;
        p->stats.bytes_written += (uint64_t)(m * B);
        return ZINC_OK;
    }
    if (st != ZINC_OK) return st;
    p->stats.reads++;
    p->stats.bytes_read += (uint64_t)(m * B);
    return check_blocks(p, k, m, buf);
}

/* Completes the write in flight (its blocks valid, or lost when it failed: its error is returned). */
static zinc_status wflush(zstate_param *p) {
    if (!p->wpending) return ZINC_OK;
    p->wpending = false;
    double w0 = zclock_now_s();
    int64_t t0 = zaio_req_done(&p->wreq) ? 0 : ztrace_begin(); /* --trace: a wait only when it waits */
    zinc_status st = zaio_wait(p->aio, &p->wreq);
    p->stats.wait_s += zclock_now_s() - w0;
    if (t0)
        ztrace_span(t0, ZTRACE_WAIT, p->cat == ZINC_MEM_GRADS ? "grad swap out wait" : "param swap out wait", 0,
                    "bytes", p->wm * p->geo.block, NULL, 0);
    if (p->wt0)
        ztrace_span(p->wt0, ZTRACE_NVME, p->cat == ZINC_MEM_GRADS ? "grad swap out" : "param swap out", 0, "bytes",
                    p->wm * p->geo.block, "block", p->wk);
    for (int64_t i = 0; i < p->wm; i++) p->bstate[p->wk + i] = st == ZINC_OK ? BLK_VALID : BLK_LOST;
    if (st != ZINC_OK) return st;
    p->stats.writes++;
    p->stats.bytes_written += (uint64_t)(p->wm * p->geo.block);
    return ZINC_OK;
}

zinc_status zstate_param_flush(zstate_param *p) { return p ? wflush(p) : ZINC_OK; }

/* Blocks [k, k + m) just read into buf: lost ones are an error, never-written ones zeros, the others must
 * match their checksums. */
static zinc_status check_blocks(zstate_param *p, int64_t k, int64_t m, char *buf) {
    int64_t B = p->geo.block;
    for (int64_t i = 0; i < m; i++) {
        int64_t b = k + i;
        if (p->bstate[b] == BLK_LOST)
            return ZERR(ZINC_ERR_IO,
                        "%s: %s block %lld (offset %lld) was lost when its write failed; the run cannot "
                        "continue: resume from the last checkpoint",
                        p->path, p->what, (long long)b, (long long)(b * B));
        if (p->bstate[b] == BLK_UNWRITTEN)
            memset(buf + i * B, 0, (size_t)B);
        else if (zcrc32c(0, buf + i * B, (size_t)B) != p->crc[b])
            return ZERR(ZINC_ERR_CORRUPT,
                        "%s: %s block %lld (offset %lld, %lld bytes) does not match its checksum: the disk "
                        "returned damaged data; resume from the last checkpoint (check the disk)",
                        p->path, p->what, (long long)b, (long long)(b * B), (long long)B);
    }
    return ZINC_OK;
}

static zinc_status check_range(const zstate_param *p, int64_t lo, int64_t n, const char *fn) {
    if (lo < 0 || n < 0 || lo + n > p->shard)
        return ZERR(ZINC_ERR_INTERNAL, "%s: elements [%lld, %lld) outside the shard of %lld; please report this", fn,
                    (long long)lo, (long long)(lo + n), (long long)p->shard);
    return ZINC_OK;
}

/* Elements [lo, lo + n) of the store: the part in the file, in the file's elements (*fn 0: none), and
 * the bytes of the part in memory (counted). */
static void file_part(const zstate_param *p, int64_t lo, int64_t n, int64_t *flo, int64_t *fn) {
    int64_t a = lo > p->res ? lo : p->res;
    *flo = a - p->res;
    *fn = lo + n > a ? lo + n - a : 0;
}

static size_t resident_part(zstate_param *p, int64_t lo, int64_t n) {
    if (lo >= p->res || n <= 0) return 0;
    size_t k = (size_t)(lo + n < p->res ? n : p->res - lo) * p->esz;
    p->stats.bytes_in_memory += k;
    return k;
}

/* ---------------------------------------------------------------- prefetch */

/* The pieces (swap-buffer loads) that elements [lo, lo + n) take, and their first block. */
static int64_t pf_pieces(const zstate_param *p, int64_t lo, int64_t n, int64_t *k0) {
    int64_t B = p->geo.block, cap = (int64_t)p->geo.swap_bytes / B;
    int64_t a = lo * (int64_t)p->esz, b = (lo + n) * (int64_t)p->esz;
    *k0 = a / B;
    int64_t blocks = (b + B - 1) / B - *k0;
    return (blocks + cap - 1) / cap;
}

static int pf_free(const zstate_param *p) {
    int f = 0;
    for (int i = 0; i < p->geo.prefetch_buffers; i++) f += !p->pf[i].busy;
    return f;
}

static int pf_count(const zstate_param *p, int64_t lo, int64_t n) {
    int c = 0;
    for (int i = 0; i < p->geo.prefetch_buffers; i++) c += p->pf[i].busy && p->pf[i].lo == lo && p->pf[i].n == n;
    return c;
}

/* Drops the prefetch of [lo, lo + n): its reads are completed (the ring must not write into a buffer
 * given to another range) and their data discarded. */
static void pf_drop(zstate_param *p, int64_t lo, int64_t n) {
    for (int i = 0; i < p->geo.prefetch_buffers; i++) {
        pf_slot *s = &p->pf[i];
        if (!s->busy || s->lo != lo || s->n != n) continue;
        if (s->io) (void)zaio_complete(p->aio, &s->req);
        s->busy = false;
    }
}

/* Drops every prefetch with a piece among blocks [k, k + m) (all of them: m < 0). */
static void pf_drop_blocks(zstate_param *p, int64_t k, int64_t m) {
    for (int i = 0; p->pf && i < p->geo.prefetch_buffers; i++) {
        pf_slot *s = &p->pf[i];
        if (s->busy && (m < 0 || (s->k < k + m && k < s->k + s->m))) pf_drop(p, s->lo, s->n);
    }
}

static bool file_can_prefetch(const zstate_param *p, int64_t lo, int64_t n) {
    if (!p->pf || n <= 0 || lo < 0 || lo + n > p->n) return false;
    int64_t k0;
    return pf_pieces(p, lo, n, &k0) <= pf_free(p) && pf_count(p, lo, n) == 0;
}

bool zstate_param_can_prefetch(const zstate_param *p, int64_t lo, int64_t n) {
    if (n <= 0 || lo < 0 || lo + n > p->shard) return false;
    int64_t flo, fn;
    file_part(p, lo, n, &flo, &fn);
    return fn == 0 || file_can_prefetch(p, flo, fn);
}

bool zstate_param_prefetching(const zstate_param *p, int64_t lo, int64_t n) {
    int64_t flo, fn;
    file_part(p, lo, n, &flo, &fn);
    return n > 0 && (fn == 0 || (p->pf && pf_count(p, flo, fn) > 0));
}

static zinc_status file_prefetch(zstate_param *p, int64_t lo, int64_t n) {
    zinc_status st = ZINC_OK;
    if (!file_can_prefetch(p, lo, n)) return ZINC_OK;
    TRY(wflush(p)); /* its blocks' state is final before they are read */
    int64_t B = p->geo.block, cap = (int64_t)p->geo.swap_bytes / B, k0;
    int64_t pieces = pf_pieces(p, lo, n, &k0), end = ((lo + n) * (int64_t)p->esz + B - 1) / B;
    for (int64_t j = 0; j < pieces; j++) {
        pf_slot *s = NULL;
        for (int i = 0; i < p->geo.prefetch_buffers && !s; i++)
            if (!p->pf[i].busy) s = &p->pf[i];
        s->busy = true;
        s->lo = lo, s->n = n, s->part = (int)j;
        s->k = k0 + j * cap;
        s->m = end - s->k < cap ? end - s->k : cap;
        s->io = false;
        for (int64_t i = 0; i < s->m && !s->io; i++) s->io = p->bstate[s->k + i] != BLK_UNWRITTEN;
        s->t0 = ztrace_begin();
        if (!s->io) continue; /* never written: zeros at use */
        memset(&s->req, 0, sizeof s->req);
        s->req.op = ZAIO_READ;
        s->req.file = p->file;
        s->req.buf = s->buf;
        s->req.buf_index = -1;
        s->req.off = s->k * B;
        s->req.len = s->m * B;
        snprintf(s->req.what, sizeof s->req.what, "%s blocks %lld..%lld of %lld (prefetch)", p->what, (long long)s->k,
                 (long long)(s->k + s->m - 1), (long long)p->geo.nblocks);
        st = zaio_submit(p->aio, &s->req);
        if (st != ZINC_OK) {
            s->io = false; /* not queued */
            pf_drop(p, lo, n);
            return st;
        }
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zstate_param_prefetch(zstate_param *p, int64_t lo, int64_t n) {
    if (n <= 0 || lo < 0 || lo + n > p->shard) return ZINC_OK;
    int64_t flo, fn;
    file_part(p, lo, n, &flo, &fn);
    return fn ? file_prefetch(p, flo, fn) : ZINC_OK;
}

zinc_status zstate_param_poll(zstate_param *p) { return p->pf ? zaio_poll(p->aio) : ZINC_OK; }

/* The read of [lo, lo + n) from its prefetch (*served false: there is none, read it yourself). */
static zinc_status pf_take(zstate_param *p, int64_t lo, int64_t n, void *dst, bool *served) {
    zinc_status st = ZINC_OK;
    *served = false;
    if (!p->pf) return ZINC_OK;
    int64_t k0, pieces = pf_pieces(p, lo, n, &k0);
    int have = pf_count(p, lo, n);
    if (have != pieces) {
        if (have) pf_drop(p, lo, n);
        return ZINC_OK;
    }
    int64_t B = p->geo.block, a = lo * (int64_t)p->esz, b = (lo + n) * (int64_t)p->esz;
    for (int64_t j = 0; j < pieces && st == ZINC_OK; j++) {
        pf_slot *s = NULL;
        for (int i = 0; i < p->geo.prefetch_buffers && !s; i++)
            if (p->pf[i].busy && p->pf[i].lo == lo && p->pf[i].n == n && p->pf[i].part == j) s = &p->pf[i];
        if (s->io) {
            int64_t w0 = ztrace_begin();
            double c0 = zclock_now_s();
            st = zaio_wait(p->aio, &s->req);
            p->stats.wait_s += zclock_now_s() - c0;
            bool gr = p->cat == ZINC_MEM_GRADS;
            if (w0)
                ztrace_span(w0, ZTRACE_WAIT, gr ? "grad prefetch wait" : "param prefetch wait", 0, "bytes", s->m * B,
                            "block", s->k);
            if (s->t0)
                ztrace_span(s->t0, ZTRACE_NVME, gr ? "grad prefetch" : "param prefetch", 0, "bytes", s->m * B, "block",
                            s->k);
            if (st == ZINC_OK) {
                p->stats.reads++;
                p->stats.bytes_read += (uint64_t)(s->m * B);
                st = check_blocks(p, s->k, s->m, s->buf);
            }
        } else {
            memset(s->buf, 0, (size_t)(s->m * B));
        }
        if (st == ZINC_OK) {
            int64_t from = a > s->k * B ? a : s->k * B, to = b < (s->k + s->m) * B ? b : (s->k + s->m) * B;
            memcpy((char *)dst + (from - a), s->buf + (from - s->k * B), (size_t)(to - from));
        }
        s->io = false; /* complete (or failed): nothing left in flight */
        s->busy = false;
    }
    if (st != ZINC_OK) {
        pf_drop(p, lo, n);
        return st;
    }
    p->stats.prefetched++;
    *served = true;
    return ZINC_OK;
}

static zinc_status file_read(zstate_param *p, int64_t lo, int64_t n, void *dst);
static zinc_status file_write(zstate_param *p, int64_t lo, int64_t n, const void *src);

zinc_status zstate_param_read(zstate_param *p, int64_t lo, int64_t n, void *dst) {
    zinc_status st = ZINC_OK;
    TRY(check_range(p, lo, n, "zstate_param_read"));
    size_t rb = resident_part(p, lo, n);
    if (rb) memcpy(dst, p->resbuf + (size_t)lo * p->esz, rb);
    int64_t flo, fn;
    file_part(p, lo, n, &flo, &fn);
    if (fn) TRY(file_read(p, flo, fn, (char *)dst + (size_t)(flo + p->res - lo) * p->esz));
fail:
    return st;
}

zinc_status zstate_param_write(zstate_param *p, int64_t lo, int64_t n, const void *src) {
    zinc_status st = ZINC_OK;
    TRY(check_range(p, lo, n, "zstate_param_write"));
    size_t rb = resident_part(p, lo, n);
    if (rb) memcpy(p->resbuf + (size_t)lo * p->esz, src, rb);
    int64_t flo, fn;
    file_part(p, lo, n, &flo, &fn);
    if (fn) TRY(file_write(p, flo, fn, (const char *)src + (size_t)(flo + p->res - lo) * p->esz));
fail:
    return st;
}

static zinc_status file_read(zstate_param *p, int64_t lo, int64_t n, void *dst) {
    zinc_status st = ZINC_OK;
    TRY(wflush(p));
    bool served;
    TRY(pf_take(p, lo, n, dst, &served));
    if (served) return ZINC_OK;
    int64_t B = p->geo.block, cap = (int64_t)p->geo.swap_bytes / B;
    int64_t a = lo * (int64_t)p->esz, b = (lo + n) * (int64_t)p->esz;
    for (int64_t k = a / B; k * B < b; k += cap) {
        int64_t end = (b + B - 1) / B, m = end - k < cap ? end - k : cap;
        TRY(block_io(p, ZAIO_READ, k, m, p->swap));
        int64_t s = a > k * B ? a : k * B, e = b < (k + m) * B ? b : (k + m) * B;
        memcpy((char *)dst + (s - a), p->swap + (s - k * B), (size_t)(e - s));
    }
    return ZINC_OK;
fail:
    return st;
}

static zinc_status file_write(zstate_param *p, int64_t lo, int64_t n, const void *src) {
    zinc_status st = ZINC_OK;

    int64_t B = p->geo.block, cap = (int64_t)p->geo.swap_bytes / B;
    int64_t a = lo * (int64_t)p->esz, b = (lo + n) * (int64_t)p->esz;
    pf_drop_blocks(p, a / B, (b + B - 1) / B - a / B); /* a prefetch of these blocks would be stale */
    for (int64_t k = a / B; k * B < b; k += cap) {
        TRY(wflush(p)); /* the swap buffer's last write is complete: it is free again */
        int64_t end = (b + B - 1) / B, m = end - k < cap ? end - k : cap;
        int64_t s = a > k * B ? a : k * B, e = b < (k + m) * B ? b : (k + m) * B;
        /* the edge blocks' other bytes come from the file; past the shard's end they are zeros */
        int64_t fend = p->n * (int64_t)p->esz;
        if (s > k * B) TRY(block_io(p, ZAIO_READ, k, 1, p->swap));
        if (e < (k + m) * B && e < fend && (m > 1 || s == k * B))
            TRY(block_io(p, ZAIO_READ, k + m - 1, 1, p->swap + (m - 1) * B));
        if (e >= fend && e < (k + m) * B) memset(p->swap + (e - k * B), 0, (size_t)((k + m) * B - e));
        memcpy(p->swap + (s - k * B), (const char *)src + (s - a), (size_t)(e - s));
        TRY(block_io(p, ZAIO_WRITE, k, m, p->swap));
    }
    return ZINC_OK;
fail:
    return st;
}

void zstate_param_forget(zstate_param *p) {
    if (p) (void)wflush(p); /* its outcome no longer matters: the blocks read as zeros */
    if (p) pf_drop_blocks(p, 0, -1);
    if (p && p->bstate) memset(p->bstate, BLK_UNWRITTEN, (size_t)(p->geo.nblocks > 0 ? p->geo.nblocks : 1));
    if (p && p->resbuf) memset(p->resbuf, 0, (size_t)p->res * p->esz);
}

void *zstate_param_scratch(zstate_param *p) { return p->scratch; }
void zstate_param_stats_get(const zstate_param *p, zstate_param_stats *out) { *out = p->stats; }
const char *zstate_param_path(const zstate_param *p) { return p->path; }
