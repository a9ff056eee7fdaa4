/* checkpoint.writer.decoupled (DeepSpeed 0.19.8's decoupled checkpoint engine): zinc_save_checkpoint hands
 * this rank's shard file to a writer thread of this process and returns.
 *
 * The snapshot. Of a store the host addresses in place (offload_optimizer cpu, or none on the cpu device)
 * the writer thread copies the state itself, in pieces of io_buffer_size bytes per section, while the next
 * steps run: their forward and backward never touch the master weights, the moments or (stage 3) the
 * parameter shard, and every pass that changes them (the optimizer step, zinc_set_master, a load) first
 * calls the store's write guard for each chunk (offload/state.h): the guard copies on the training thread
 * every piece of the chunk not yet copied, and waits for a piece the writer is copying, so no piece is ever
 * copied after a change. Stage 0 saves the same state (rank 0's file) under the same guard. A piece is copied
 * into a full image of the file when MemAvailable holds one; otherwise (memory short) the writer streams it
 * through io_buffer_size slots (two with io_buffer_double), writing each before the slot is reused, and
 * the guard waits for the writer there. Other stores (GPU memory, NVMe, parameter offload) are snapshotted
 * on the training thread at the save (checkpoint_save.c).
 *
 * The write: through io_uring (offload/aio.c, the NVMe store's ring) on the safe writer's temporary file
 * (zfile_out: O_EXCL | O_NOFOLLOW, fsync, rename), with O_DIRECT where the file system allows it (the
 * reason logged where not), then the checksums (taken by the writer's copies as they copy: checkpoint_segs.c),
 * then commit.
 *
 * The threads never call a collective: MPI stays on the main thread, where each zinc_step asks every rank (one
 * small non-blocking all-reduce while a save is in flight, answered at the next step) whether all writers are
 * done; the step on which they are
 * exchanges the checksums and makes the manifest's text (checkpoint_save.c's zckpt_save_prepare_publish), and
 * hands the files (the manifest, the directory in place, `latest`: zckpt_publish_files, fsyncs included) to a
 * publisher thread of the directory writer, which a later step's poll (the same all-reduce) finds done. A
 * writer's or the publisher's failure (ENOSPC, EIO, a non-finite state) fails that step with its message. A
 * kill at any point leaves the previous `latest`, as a synchronous save does: nothing is renamed into place
 * before the publish. The snapshot's memory is mapped untouched (zmem_host_alloc_lazy): its page faults are
 * the writer's copies', not the save call's. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/clock.h"
#include "base/core/crc32c.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "base/core/trace.h"
#include "kernels/cpu_kernels.h"
#include "offload/aio.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/mem/mem_estimate.h"

#define ALIGN ((int64_t)ZCKPT_SECTION_ALIGN)
static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* ---------------------------------------------------------------- pieces */

static int64_t nelem(const zckpt_save_job *j) { return j->mine.flat_hi - j->mine.flat_lo; }
static size_t esz(const zckpt_save_job *j, int sec) { return sec == ZCKPT_SEC_PARAMS ? j->psz : sizeof(float); }

/* Section sec of piece p: its source, its file offset and its bytes (src NULL: a section the store lacks). */
static const void *piece_src(const zckpt_save_job *j, int sec, int64_t p, int64_t *off, int64_t *bytes) {
    int64_t a = p * j->piece, n = nelem(j) - a < j->piece ? nelem(j) - a : j->piece;
    *off = j->mine.sec_offset[sec] + a * (int64_t)esz(j, sec);
    *bytes = n * (int64_t)esz(j, sec);
    if (sec == ZCKPT_SEC_PARAMS) return j->src_params + (size_t)a * j->psz;
    return j->src[sec] ? j->src[sec] + a : NULL;
}

static int nsec(const zckpt_save_job *j) { return j->mine.sec_offset[ZCKPT_SEC_PARAMS] >= 0 ? 4 : 3; }

/* A checkpoint of a run gone bad would resume into the same NaNs: the first non-finite value is recorded and
 * fails the save (the message is made on the main thread, which knows the parameters). */
static void check_finite(zckpt_save_job *j, int sec, int64_t p, const float *x, int64_t n) {
    zgrad_stats st; /* the gradient checks' own scan for the first non-finite element (on this thread) */
    zgrad_stats_ref(x, ZINC_FP32, (size_t)n, &st);
    if (!st.nonfinite) return;
    pthread_mutex_lock(&j->mu);
    if (j->sst == ZINC_OK) {
        j->sst = ZINC_ERR_NONFINITE;
        j->nf_flat = j->mine.flat_lo + p * j->piece + (int64_t)st.first_nonfinite;
        j->nf_sec = sec;
        j->nf_val = (double)x[st.first_nonfinite];
    }
    pthread_mutex_unlock(&j->mu);
}

/* Piece p's non-finite check, on its copy in the image. */
static void check_piece(zckpt_save_job *j, int64_t p) {
    for (int s = 0; s < nsec(j) && s < ZCKPT_SEC_PARAMS; s++) {
        int64_t off, bytes;
        if (piece_src(j, s, p, &off, &bytes)) check_finite(j, s, p, (const float *)(j->image + off), bytes / 4);
    }
}

/* Piece p into the full image, every section; checked and checksummed now (the writer) or later by the writer
 * (the guard: the training thread only copies, its check is not the step's time). */
static void copy_piece(zckpt_save_job *j, int64_t p, bool check) {
    for (int s = 0; s < nsec(j); s++) {
        int64_t off, bytes;
        const void *src = piece_src(j, s, p, &off, &bytes);
        if (!src) continue; /* Lion's exp_avg_sq: the zeros of the image */
        /* streaming stores, checked as copied (one pass; the element looked for only if one is non-finite) */
        bool f32 = check && s < ZCKPT_SEC_PARAMS;
        int bad = check ? zckpt_segs_copy(&j->segs, p, s, j->image, src, off, bytes, f32)
                        : zk_copy_stream(j->image + off, src, (size_t)bytes, f32);
        if (bad && f32) check_finite(j, s, p, (const float *)(j->image + off), bytes / 4);
    }
}

static bool claim(zckpt_save_job *j, int64_t p) {
    int want = 0;
    return __atomic_compare_exchange_n(&j->pstate[p], &want, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static void finish(zckpt_save_job *j, int64_t p) {
    pthread_mutex_lock(&j->mu);
    __atomic_store_n(&j->pstate[p], 2, __ATOMIC_RELEASE);
    j->ncopied++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void abandon(zckpt_save_job *j) {
    pthread_mutex_lock(&j->mu);
    j->abandoned = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Until pieces [p0, p1) are copied (or the writer gave up: the save fails anyway). */
static void wait_pieces(zckpt_save_job *j, int64_t p0, int64_t p1) {
    pthread_mutex_lock(&j->mu);
    for (int64_t p = p0; p < p1; p++)
        while (__atomic_load_n(&j->pstate[p], __ATOMIC_ACQUIRE) != 2 && !j->abandoned)
            pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
}

/* The store's write guard (training thread): before elements [lo, lo + n) of the own range change. */
static zinc_status guard(void *arg, int64_t lo, int64_t n) {
    zckpt_save_job *j = arg;
    int64_t a = lo - j->d0, b = a + n;
    if (a < 0) a = 0;
    if (b > nelem(j)) b = nelem(j);
    if (b <= a) return ZINC_OK;
    int64_t p0 = a / j->piece, p1 = (b + j->piece - 1) / j->piece;
    double t0 = zclock_now_s();
    int64_t tr = ztrace_begin();
    for (int64_t p = p0; p < p1; p++) {
        if (__atomic_load_n(&j->pstate[p], __ATOMIC_ACQUIRE) == 2) continue;
        j->guard_pieces++;
        if (!j->stream && claim(j, p)) { /* not yet copied: copied here, before the pass changes it */
            copy_piece(j, p, false);
            j->unchecked[p] = 1; /* published to the writer by finish's release */
            finish(j, p);
        }
    }
    wait_pieces(j, p0, p1); /* the writer's pieces in progress (streaming: every piece of the range) */
    j->guard_s += zclock_now_s() - t0;
    if (tr) ztrace_span(tr, ZTRACE_WAIT, "checkpoint snapshot", 0, "elements", b - a, NULL, 0);
    return ZINC_OK;
}

static void unguard(zinc_engine *e, zckpt_save_job *j) {
    if (e->state && e->state->guard_arg == j) {
        e->state->guard = NULL;
        e->state->guard_arg = NULL;
    }
}

/* ---------------------------------------------------------------- the snapshot's set-up (training thread) */

/* A full image when this node's ranks' images fit in MemAvailable less the pre-flight's headroom. */
static bool memory_short(const zinc_engine *e, int64_t bytes) {
    zest_available av;
    unsigned hr = ZEST_HEADROOM_DEFAULT;
    zest_available_read(NULL, &av);
    if (zest_headroom_read(&hr) != ZINC_OK) zinc__error_clear();
    int local = e->comm && e->comm->local_size > 0 ? e->comm->local_size : 1;
    /* the image the previous save left is this save's to reuse: its resident pages count as available */
    uint64_t avail = av.mem_available + (uint64_t)(e->ckpt_image ? e->ckpt_image_alloc : 0) * (uint64_t)local;
    return av.have_mem && (uint64_t)bytes * (uint64_t)local > avail / 100 * (100 - hr);
}

/* The zeros of the image: between the sections, a section the store lacks, and up to the last 4 KiB. */
static void zero_gaps(zckpt_save_job *j) {
    int ns = nsec(j);
    for (int s = 0; s < ns; s++) {
        int64_t start = j->mine.sec_offset[s], end = start + nelem(j) * (int64_t)esz(j, s);
        int64_t next = s + 1 < ns ? j->mine.sec_offset[s + 1] : round_up(j->mine.bytes, ALIGN);
        if (s < ZCKPT_SEC_PARAMS && !j->src[s]) end = start;
        memset(j->image + end, 0, (size_t)(next - end));
    }
}

/* The full image's allocation for a file of `bytes` (one 4 KiB more: aligned inside it). */
static size_t image_alloc_bytes(int64_t bytes) { return (size_t)(round_up(bytes, ALIGN) + ALIGN); }

static zinc_status alloc_snapshot(zinc_engine *e, zckpt_save_job *j) {
    zinc_status st = ZINC_OK;
    int64_t slot = round_up(j->piece * (int64_t)sizeof(float), ALIGN);
    j->image_alloc = j->stream ? (size_t)(2 * ALIGN + j->nslots * slot) : image_alloc_bytes(j->mine.bytes);
    zengine_settle_ckpt_image(e);
    if (e->ckpt_image && !j->stream && e->ckpt_image_alloc == j->image_alloc) {
        /* the previous save's image, its pages already resident: the copies pay no page faults (a fresh
         * image's first writes cost about as much as the copies themselves) */
        j->image_mem = e->ckpt_image;
        e->ckpt_image = NULL;
        j->reused_image = true;
    } else {
        zengine_drop_ckpt_image(e); /* another size (the shard changed), or streaming: not kept beside it */
        /* not touched here: the writer thread's copies fault its pages in, not the training thread */
        TRY(zmem_host_alloc_lazy(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, j->image_alloc,
                                 j->stream ? "the decoupled checkpoint's write slots (checkpoint.writer.io_buffer_size)"
                                           : "the decoupled checkpoint's snapshot (checkpoint.writer.decoupled)",
                                 (void **)&j->image_mem));
    }
    j->image = (uint8_t *)(((uintptr_t)j->image_mem + (uintptr_t)ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    j->image_bytes = j->mine.bytes;
    zckpt_header_encode(&j->mine, j->uid, j->image); /* streaming: the header's own 4 KiB before the slots */
fail:
    return st;
}

/* Whether the writer thread can copy this engine's state itself: a store the host addresses in place. */
static bool live_store(const zinc_engine *e, bool with_params, float *arr[3]) {
    return zstate_host_arrays(e->state, &arr[0], &arr[1], &arr[2]) && !e->pstore &&
           (!with_params || e->dev->host_addressable);
}

zinc_status zckpt_async_prepare(zinc_engine *e, zckpt_save_job *j, bool *live) {
    zinc_status st = ZINC_OK;
    float *arr[3];
    *live = false;
    j->io_buffer = e->cfg.checkpoint.writer_io_buffer_size / ALIGN * ALIGN;
    if (j->io_buffer < ALIGN) j->io_buffer = ALIGN;
    j->nslots = e->cfg.checkpoint.writer_io_buffer_double ? 2 : 1;
    j->aio = e->cfg.aio;
    if (!live_store(e, j->mine.sec_offset[ZCKPT_SEC_PARAMS] >= 0, arr)) return ZINC_OK;
    j->d0 = j->mine.flat_lo - e->own_lo;
    for (int k = 0; k < 3; k++) j->src[k] = arr[k] ? arr[k] + j->d0 : NULL;
    if (j->mine.sec_offset[ZCKPT_SEC_PARAMS] >= 0) {
        j->psz = zinc_dtype_size(e->compute_dtype);
        j->src_params = (const char *)e->params_shard + (size_t)j->d0 * j->psz;
    }
    j->piece = j->io_buffer / (int64_t)sizeof(float) / ZSTATE_CHUNK_ALIGN * ZSTATE_CHUNK_ALIGN;
    if (j->piece < ZSTATE_CHUNK_ALIGN) j->piece = ZSTATE_CHUNK_ALIGN;
    j->npieces = (nelem(j) + j->piece - 1) / j->piece;
    j->stream = memory_short(e, j->mine.bytes);
    TRY_ALLOC(j->pstate, j->npieces > 0 ? j->npieces : 1, "the decoupled checkpoint's pieces");
    TRY_ALLOC(j->unchecked, j->npieces > 0 ? j->npieces : 1, "the decoupled checkpoint's pieces");
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->sync_init = true;
    if (!j->stream) {
        bool have[4];
        size_t sz[4];
        for (int s = 0; s < 4; s++) {
            have[s] = s == ZCKPT_SEC_PARAMS || j->src[s];
            sz[s] = esz(j, s);
        }
        TRY(zckpt_segs_build(&j->segs, &j->mine, nsec(j), have, nelem(j), j->piece, sz));
    }
    TRY(alloc_snapshot(e, j));
    const char *d = zenv_get(ZENV_CKPT_TEST_SNAPSHOT_DELAY_MS);
    j->delay_ms = d && *d ? atoi(d) : 0;
    if (j->stream)
        ZLOG_INFO(&e->log,
                  "checkpoint.writer: step %lld: MemAvailable does not hold this rank's %.1f MiB snapshot; streaming "
                  "it through %d slot%s of io_buffer_size %lld bytes (the next optimizer step waits for the writer)",
                  (long long)j->step, (double)j->mine.bytes / 1048576.0, j->nslots, j->nslots == 1 ? "" : "s",
                  (long long)j->io_buffer);
    e->state->guard = guard;
    e->state->guard_arg = j;
    j->live = *live = true;
fail:
    return st;
}

/* zinc_checkpoint_reserve's thread: the image's pages faulted in, its contents untouched (MADV_POPULATE_WRITE;
 * a kernel before 5.14 refuses it, and then each page is written: the image is not in use until joined). */
static void *fault_in_main(void *arg) {
    zinc_engine *e = arg;
    uint8_t *p = e->ckpt_image;
    size_t n = e->ckpt_image_alloc;
    ztrace_thread_name("checkpoint image");
    int64_t tr = ztrace_begin();
    if (madvise(p, n, MADV_POPULATE_WRITE) != 0)
        for (size_t i = 0; i < n; i += 4096) p[i] = 0;
    if (tr) ztrace_span(tr, ZTRACE_CHECKPOINT, "snapshot image fault-in", 0, "bytes", (int64_t)n, NULL, 0);
    return NULL;
}

zinc_status zinc_checkpoint_reserve(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    float *arr[3];
    zckpt_file f;
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_reserve: engine is NULL");
    TRY(zengine_require_built(e, "zinc_checkpoint_reserve"));
    TRY(zengine_check_usable(e, "zinc_checkpoint_reserve"));
    if (!e->cfg.checkpoint.writer_decoupled || e->ckpt_image || e->ckpt_async || !zckpt_my_file(e, &f) ||
        !live_store(e, f.sec_offset[ZCKPT_SEC_PARAMS] >= 0, arr) || memory_short(e, f.bytes))
        return ZINC_OK; /* nothing a save would keep: synchronous, streamed, or snapshotted at the save */
    size_t n = image_alloc_bytes(f.bytes);
    TRY(zmem_host_alloc_lazy(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, n,
                             "the decoupled checkpoint's snapshot (checkpoint.writer.decoupled)", &e->ckpt_image));
    e->ckpt_image_alloc = n;
    /* no thread: the first save's copies fault the pages in, as without this call */
    e->ckpt_image_faulting = pthread_create(&e->ckpt_image_thread, NULL, fault_in_main, e) == 0;
fail:
    return st;
}

/* ---------------------------------------------------------------- the write (writer thread) */

typedef struct wio {
    zaio *a;
    int file, fd;
    const char *path;
    zckpt_writer *w;
    zaio_req req[2];
    bool busy[2];
} wio;

static zinc_status wio_open(zckpt_save_job *j, wio *io, int fd, const char *path) {
    zinc_status st = ZINC_OK;
    zaio_params p = {.block_size = j->aio.block_size,
                     .queue_depth = j->aio.queue_depth,
                     .intra_op_parallelism = j->aio.intra_op_parallelism,
                     .single_submit = j->aio.single_submit,
                     .overlap_events = j->aio.overlap_events};
    io->fd = fd;
    io->path = path;
    io->w = &j->w;
    TRY(zaio_create(&p, &io->a));
    TRY(zaio_adopt(io->a, fd, path, &io->file));
    const zaio_file *f = zaio_file_info(io->a, io->file);
    j->direct = f->direct;
    snprintf(j->why_buffered, sizeof j->why_buffered, "%s", f->why_buffered);
    snprintf(j->backend, sizeof j->backend, "%s", zaio_backend(io->a));
fail:
    return st;
}

static zinc_status wio_wait(wio *io, int k) {
    if (!io->busy[k]) return ZINC_OK;
    io->busy[k] = false;
    return zaio_wait(io->a, &io->req[k]);
}

static zinc_status wio_drain(wio *io) {
    zinc_status st = ZINC_OK;
    for (int k = 0; k < 2; k++) TRY(wio_wait(io, k));
fail:
    return st;
}

/* Writes len bytes (a multiple of 4 KiB, of which `real` are the file's) at off through request slot k. The
 * test hooks (a failing errno, a kill after N bytes) take the plain writer's path. */
static zinc_status wio_put(wio *io, int k, const void *buf, int64_t off, int64_t len, int64_t real) {
    zinc_status st = ZINC_OK;
    zckpt_writer *w = io->w;
    TRY(wio_wait(io, k));
    if (w->fail_errno || (w->kill_after >= 0 && w->written + real >= w->kill_after)) {
        TRY(wio_drain(io));
        TRY(zaio_set_direct(io->a, io->file, false));
        return zckpt_pwrite(w, io->fd, io->path, buf, (size_t)real, off);
    }
    zaio_req *r = &io->req[k];
    memset(r, 0, sizeof *r);
    *r = (zaio_req){.op = ZAIO_WRITE, .file = io->file, .buf = (void *)buf, .buf_index = -1, .off = off, .len = len};
    snprintf(r->what, sizeof r->what, "checkpoint bytes %lld..%lld", (long long)off, (long long)(off + len));
    TRY(zaio_submit(io->a, r));
    io->busy[k] = true;
    w->written += real;
fail:
    return st;
}

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The full image: the pieces copied (those the guard has not taken), then written in io_buffer_size
 * requests, checksummed from the image. */
static zinc_status write_full(zckpt_save_job *j, wio *io) {
    zinc_status st = ZINC_OK;
    zckpt_file *f = &j->mine;
    double t0 = zclock_now_s();
    if (j->live) {
        zero_gaps(j);
        for (int64_t p = 0; p < j->npieces; p++)
            if (claim(j, p)) {
                if (j->delay_ms) pause_ms(j->delay_ms);
                copy_piece(j, p, true);
                finish(j, p);
            }
        wait_pieces(j, 0, j->npieces);
        for (int64_t p = 0; p < j->npieces; p++)
            if (j->unchecked[p]) check_piece(j, p); /* the guard's copies */
        if (j->sst != ZINC_OK) return j->sst;
    }
    double t1 = zclock_now_s();
    j->copy_s = t1 - t0;
    for (int64_t off = 0, k = 0; off < f->bytes; off += j->io_buffer, k = (k + 1) % j->nslots) {
        int64_t n = f->bytes - off < j->io_buffer ? f->bytes - off : j->io_buffer;
        TRY(wio_put(io, (int)k, j->image + off, off, round_up(n, ALIGN), n));
    }
    TRY(wio_drain(io));
    double t2 = zclock_now_s();
    j->io_s = t2 - t1;
    TRY_ALLOC(f->block_crc, f->nblocks, "checkpoint checksums");
    zckpt_segs_finish(&j->segs, j->image, f); /* the copies' checksums; the image read only where none */
    j->crc_s = zclock_now_s() - t2;
fail:
    return st;
}

/* Memory short: the header, then each piece's sections through the slots, each written before its slot is
 * reused; the checksums read back from the file. */
static zinc_status write_stream(zckpt_save_job *j, wio *io) {
    zinc_status st = ZINC_OK;
    int64_t slot = round_up(j->piece * (int64_t)sizeof(float), ALIGN), k = 0;
    TRY(wio_put(io, 0, j->image, 0, ALIGN, ALIGN));
    TRY(wio_wait(io, 0));
    for (int64_t p = 0; p < j->npieces; p++) {
        if (!claim(j, p)) FAIL(ZINC_ERR_INTERNAL, "checkpoint.writer: piece %lld taken twice", (long long)p);
        if (j->delay_ms) pause_ms(j->delay_ms);
        for (int s = 0; s < nsec(j); s++) {
            int64_t off, bytes;
            const void *src = piece_src(j, s, p, &off, &bytes);
            if (!src) continue; /* a hole: zeros */
            uint8_t *buf = j->image + ALIGN + k * slot;
            TRY(wio_wait(io, (int)k));
            bool f32 = s < ZCKPT_SEC_PARAMS;
            if (zk_copy_stream(buf, src, (size_t)bytes, f32) && f32)
                check_finite(j, s, p, (const float *)buf, bytes / 4);
            memset(buf + bytes, 0, (size_t)(round_up(bytes, ALIGN) - bytes));
            if (j->sst != ZINC_OK) return j->sst;
            TRY(wio_put(io, (int)k, buf, off, round_up(bytes, ALIGN), bytes));
            k = (k + 1) % j->nslots;
        }
        finish(j, p);
    }
    TRY(wio_drain(io));
    TRY(zaio_set_direct(io->a, io->file, false));
    if (ftruncate(io->fd, (off_t)j->mine.bytes) != 0)
        FAIL(ZINC_ERR_IO, "cannot size checkpoint file %s to %lld bytes: %s (check free space)", io->path,
             (long long)j->mine.bytes, strerror(errno));
    TRY(zckpt_checksum_file(io->fd, io->path, &j->mine));
fail:
    return st;
}

static zinc_status write_file(zckpt_save_job *j) {
    zinc_status st = ZINC_OK;
    char fin[ZCKPT_PATH_MAX];
    zfile_out o = {.fd = -1};
    wio io = {0};
    TRY(zckpt_path(fin, sizeof fin, "%s/%s", j->partial, j->mine.name));
    TRY(zfile_out_open(&o, "checkpoint file", fin, 0, NULL));
    TRY(wio_open(j, &io, o.fd, o.tmp));
    TRY(j->stream ? write_stream(j, &io) : write_full(j, &io));
    if (ftruncate(o.fd, (off_t)j->mine.bytes) != 0) /* the last request's rounding to 4 KiB */
        FAIL(ZINC_ERR_IO, "cannot size checkpoint file %s to %lld bytes: %s (check free space)", o.tmp,
             (long long)j->mine.bytes, strerror(errno));
    TRY(zfile_out_commit(&o));
fail:
    if (io.a) {
        zaio_drain(io.a);
        zaio_destroy(io.a);
    }
    if (o.fd >= 0) zfile_out_abort(&o);
    return st;
}

static void *writer_main(void *arg) {
    zckpt_save_job *job = arg;
    ztrace_thread_name("checkpoint writer");
    double t0 = zclock_now_s(), cpu0 = zclock_thread_cpu_s();
    int64_t tr = ztrace_begin();
    job->wst = write_file(job);
    if (job->wst != ZINC_OK) snprintf(job->wmsg, sizeof job->wmsg, "%s", zinc_last_error());
    if (job->live) abandon(job); /* a guard waiting for a piece never copied stops waiting */
    job->write_s = zclock_now_s() - t0;
    job->cpu_s = zclock_thread_cpu_s() - cpu0;
    if (tr) ztrace_span(tr, ZTRACE_CHECKPOINT, "write", 0, "bytes", job->image_bytes, NULL, 0);
    __atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---------------------------------------------------------------- polls (main thread) */

/* The all-reduce of the last poll, if one is pending, finished (before a blocking collective or the job's end). */
static zinc_status finish_poll(zinc_engine *e, zckpt_save_job *job) {
    zcomm_req *r = job->preq;
    job->preq = NULL;
    return r ? zcomm_wait(e->comm, r) : ZINC_OK;
}

/* The threads of a job, joined (the writer's guard unregistered). */
static void join_threads(zinc_engine *e, zckpt_save_job *job) {
    if (job->started) pthread_join(job->thread, NULL);
    job->started = false;
    unguard(e, job);
    if (job->pstarted) pthread_join(job->pthread, NULL);
    job->pstarted = false;
}

static void drop(zinc_engine *e) {
    zckpt_save_job *job = e->ckpt_async;
    if (!job) return;
    e->ckpt_async = NULL;
    (void)finish_poll(e, job);
    join_threads(e, job);
    ZLOG_WARN(&e->log,
              "checkpoint %s of step %lld: the engine was destroyed before its decoupled write was published; "
              "`latest` may still name the previous checkpoint (call zinc_checkpoint_wait before zinc_destroy)",
              job->final, (long long)job->step);
    zckpt_save_job_free(e, job);
}

/* The writer's outcome on this rank: its IO error, or the snapshot's non-finite value. */
static zinc_status writer_status(zinc_engine *e, zckpt_save_job *job) {
    if (job->live && job->sst == ZINC_ERR_NONFINITE) {
        const zinc_param *p = zengine_param_at(e, job->nf_flat);
        return ZERR(ZINC_ERR_NONFINITE,
                    "zinc_save_checkpoint: step %lld: the %s state of parameter \"%s\" element %lld is %g: refusing to "
                    "save a checkpoint with non-finite values (the run went bad; resume from an earlier checkpoint)",
                    (long long)job->step, zckpt_section_names[job->nf_sec], p ? p->name : "?",
                    (long long)(p ? job->nf_flat - p->flat_offset : job->nf_flat), job->nf_val);
    }
    if (job->wst != ZINC_OK)
        return ZERR(job->wst,
                    "checkpoint.writer.decoupled: the checkpoint of step %lld (%s) was not saved; `latest` still "
                    "names the previous one: %s",
                    (long long)job->step, job->final, job->wmsg);
    if (!job->direct && job->has && job->why_buffered[0])
        ZLOG_INFO(&e->log, "checkpoint.writer: %s was written without O_DIRECT: %s", job->final, job->why_buffered);
    return ZINC_OK;
}

/* The publish of a directory writer (step 4: the manifest, the directory in place, `latest`; fsyncs) on its
 * own thread, so that the step that finds the writers done does not wait for the disk either. */
static void *publisher_main(void *arg) {
    zckpt_save_job *job = arg;
    ztrace_thread_name("checkpoint publisher");
    double t0 = zclock_now_s();
    int64_t tr = ztrace_begin();
    job->pst = zckpt_publish_files(job);
    if (job->pst != ZINC_OK) snprintf(job->pmsg, sizeof job->pmsg, "%s", zinc_last_error());
    /* zinc_checkpoint_keep_last, asked before this started: the old checkpoints removed here too, under the
     * save's lock (removing a 1.4 GiB tree takes the file system tens of milliseconds) */
    int keep = __atomic_load_n(&job->keep_last, __ATOMIC_ACQUIRE);
    if (job->pst == ZINC_OK && keep > 0) {
        job->rst = zckpt_retain_locked(job->dir, keep);
        if (job->rst != ZINC_OK) snprintf(job->rmsg, sizeof job->rmsg, "%s", zinc_last_error());
        job->retained = keep;
    }
    job->publish_s = zclock_now_s() - t0;
    if (tr) ztrace_span(tr, ZTRACE_CHECKPOINT, "publish", 0, "step", job->step, NULL, 0);
    __atomic_store_n(&job->pdone, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Collective, one poll behind: whether any rank's thread (the writer, or the publisher) was still at work at
 * the previous poll, from the 4-byte all-reduce that poll started (every rank has been through that step's
 * own collectives since, so it is normally complete: the poll does not wait for the slowest rank), and a new
 * one started with this rank's answer now. *busy until an answer says no rank was. One rank: now. */
static zinc_status any_busy(zinc_engine *e, zckpt_save_job *job, bool started, int *done, bool *busy) {
    zinc_status st = ZINC_OK;
    bool mine = started && !__atomic_load_n(done, __ATOMIC_ACQUIRE);
    *busy = true;
    if (e->world == 1) {
        *busy = mine;
        return ZINC_OK;
    }
    if (job->preq) {
        zcomm_req *r = job->preq;
        job->preq = NULL;
        TRY(zcomm_wait(e->comm, r));
        if (job->pflag == 0) {
            *busy = false;
            return ZINC_OK;
        }
    }
    job->pflag = mine ? 1.0f : 0.0f;
    TRY(zcomm_allreduce(e->comm, &job->pflag, 1, ZINC_FP32, ZCOMM_MAX, &job->preq));
fail:
    return st;
}

/* A save in flight, in two stages, each finished by the first poll that finds every rank's thread done (wait:
 * by waiting for them): the writers' (then the checksums' exchange and the manifest's text, on this thread),
 * and the directory writers' publish. Only then is the save over: its outcome agreed, `latest` its. */
static zinc_status poll_save(zinc_engine *e, bool wait) {
    zinc_status st = ZINC_OK, local = ZINC_OK;
    zckpt_save_job *job = e->ckpt_async;
    if (!job) return ZINC_OK;
    double t0 = zclock_now_s();
    bool busy = false;
    if (!job->publishing) {
        if (!wait) {
            TRY(any_busy(e, job, job->started, &job->done, &busy));
            if (busy) goto out;
        }
        TRY(finish_poll(e, job)); /* wait: one still pending */
        join_threads(e, job);
        local = writer_status(e, job);
        TRY(zcomm_agree_status(e->comm, local));
        TRY(zckpt_save_prepare_publish(e, job));
        job->publishing = true;
        if (job->dir_writer) {
            if (pthread_create(&job->pthread, NULL, publisher_main, job) == 0)
                job->pstarted = true;
            else
                publisher_main(job); /* no thread: here */
        }
        if (!wait) goto out; /* the next step's poll (almost always) finds it done */
    }
    if (!wait) {
        TRY(any_busy(e, job, job->pstarted, &job->pdone, &busy));
        if (busy) goto out;
    }
    TRY(finish_poll(e, job));
    join_threads(e, job);
    e->ckpt_async = NULL; /* whatever follows, this save is over */
    local = job->pst == ZINC_OK ? ZINC_OK
                                : ZERR(job->pst,
                                       "checkpoint.writer.decoupled: the checkpoint of step %lld (%s) was not "
                                       "published; `latest` still names the previous one: %s",
                                       (long long)job->step, job->final, job->pmsg);
    job->polls_s += zclock_now_s() - t0;
    if (wait) job->wait_s += zclock_now_s() - t0;
    TRY(zckpt_save_finish(e, job, local));
    int keep = __atomic_load_n(&job->keep_last, __ATOMIC_ACQUIRE);
    if (keep > 0) { /* zinc_checkpoint_keep_last, asked while this was in flight */
        zckpt_unlock_dir(job->lock_fd);
        job->lock_fd = -1;
        if (job->retained == keep) /* by the publisher thread (joined) */
            local = job->rst == ZINC_OK ? ZINC_OK : ZERR(job->rst, "%s", job->rmsg);
        else /* asked after the publisher had started, or this rank writes no directory */
            local = job->dir_writer ? zckpt_retain(job->dir, keep) : ZINC_OK;
        TRY(zcomm_agree_status(e->comm, local));
    }
    zckpt_save_job_free(e, job);
    return ZINC_OK;
out:
    job->polls_s += zclock_now_s() - t0;
    return ZINC_OK;
fail:
    e->ckpt_async = NULL;
    (void)finish_poll(e, job); /* its buffer is the job's */
    join_threads(e, job);
    zckpt_save_job_free(e, job);
    return st;
}

zinc_status zckpt_async_start(zinc_engine *e, zckpt_save_job *job) {
    /* Registered on every rank whatever happens, so that every rank's next poll is the same collective. */
    e->ckpt_async = job;
    e->ckpt_async_poll = poll_save;
    e->ckpt_async_drop = drop;
    if (!job->has) return ZINC_OK;
    int rc = pthread_create(&job->thread, NULL, writer_main, job);
    if (rc == 0) {
        job->started = true;
        return ZINC_OK;
    }
    unguard(e, job);
    job->wst = ZERR(ZINC_ERR_NOMEM, "checkpoint.writer.decoupled: cannot start the writer thread: %s", strerror(rc));
    snprintf(job->wmsg, sizeof job->wmsg, "%s", zinc_last_error());
    return job->wst;
}

zinc_status zckpt_async_wait(zinc_engine *e) { return e && e->ckpt_async ? poll_save(e, true) : ZINC_OK; }

zinc_status zckpt_async_busy(zinc_engine *e, bool *busy) {
    zinc_status st = e->ckpt_async ? poll_save(e, false) : ZINC_OK;
    *busy = e->ckpt_async != NULL;
    return st;
}

zinc_status zinc_checkpoint_wait(zinc_engine *e) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_wait: engine is NULL");
    return zckpt_async_wait(e);
}
