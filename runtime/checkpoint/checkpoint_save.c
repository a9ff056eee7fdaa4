/* zinc_save_checkpoint: every rank writes its shard file under <dir>/.<tag>.partial/ (temporary name,
 * fsync, rename), the ranks exchange the files' checksums, then the directory writer (rank 0, or the first
 * rank of every node with checkpoint.use_node_local_storage) writes manifest.json the same way, puts the
 * directory in place as <dir>/<tag> (atomically exchanging it with an older one of the same tag) and
 * updates <dir>/latest last. A save interrupted at any point leaves the previous checkpoint and `latest`
 * as they were. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/core/trace.h"
#include "base/core/clock.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "offload/param_nvme.h"
#include "base/core/crc32c.h"
#include "runtime/engine/engine_internal.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "base/core/memtrack.h"

/* Per-file facts every rank sends to the directory writers; block checksums follow. */
typedef struct file_rec {
    int32_t has;
    int32_t pad;
    int64_t bytes;
    int64_t nblocks;
    uint32_t crc;
    uint32_t pad2;
} file_rec;

static zinc_status precheck(zinc_engine *e, const char *dir, const char *tag, char *tagbuf, size_t cap) {
    if (!dir || !*dir) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_save_checkpoint: dir is NULL or empty");
    if (strlen(dir) > ZCKPT_PATH_MAX - ZCKPT_TAG_MAX - 64)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_save_checkpoint: dir \"%.64s...\" is too long", dir);
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[0] || e->modules[m].in_phase[1])
            return ZERR(ZINC_ERR_STATE,
                        "zinc_save_checkpoint: module \"%s\" is still entered; save between "
                        "optimizer steps",
                        e->modules[m].name);
    if (e->micro_steps > 0)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_save_checkpoint: %lld micro-step%s of gradients are accumulated and not "
                    "yet stepped (they are not part of a checkpoint); save right after zinc_step",
                    (long long)e->micro_steps, e->micro_steps == 1 ? "" : "s");
    zinc_status st = zckpt_host_little_endian();
    if (st != ZINC_OK) return st;
    if (tag)
        snprintf(tagbuf, cap, "%s", tag);
    else
        snprintf(tagbuf, cap, "step%lld", (long long)e->steps);
    return zckpt_check_tag(tagbuf);
}

/* The range of the file this rank writes, if any: the own range clipped to the parameters. Stage 0 has
 * one file (every rank holds the whole state), written by rank 0 and, with node-local storage, by the
 * first rank of every node. */
bool zckpt_my_file(const zinc_engine *e, zckpt_file *f) {
    int64_t numel = e->part.numel;
    if (e->stage == 0) {
        if (!zckpt_is_dir_writer(e)) return false;
        zckpt_layout(f, 0, 0, numel, false, e->compute_dtype);
        return true;
    }
    int64_t lo = e->own_lo < numel ? e->own_lo : numel, hi = e->own_hi < numel ? e->own_hi : numel;
    zckpt_layout(f, e->rank, lo, hi, e->stage == 3, e->compute_dtype);
    return true;
}

/* exp_avg_sq of [lo, hi) (flat) from chunk v: only the elements that keep one (Muon's matrices keep none,
 * offload/state.h vgaps: their part of the section stays unwritten, zeros as Lion's whole section); each run
 * refused if not finite, as the other sections. */
static zinc_status write_v(zinc_engine *e, zckpt_writer *w, int fd, const char *path, const zckpt_file *f,
                           const zstate_view *v, int64_t lo, int64_t hi) {
    const zstate_vgaps *g = &e->state->ctx.vgaps;
    int64_t base = zstate_v_kept(g, v->lo), ra, rb;
    for (int64_t x = lo - e->own_lo; zstate_v_run(g, x, hi - e->own_lo, &ra, &rb); x = rb) {
        const float *src = v->v + (zstate_v_kept(g, ra) - base);
        for (int64_t k = 0; k < rb - ra; k++)
            if (!isfinite(src[k])) {
                const zinc_param *p = zengine_param_at(e, e->own_lo + ra + k);
                return ZERR(ZINC_ERR_NONFINITE,
                            "zinc_save_checkpoint: step %lld: the exp_avg_sq state of parameter \"%s\" element %lld "
                            "is %g: refusing to save a checkpoint with non-finite values (the run went bad; resume "
                            "from an earlier checkpoint)",
                            (long long)e->steps, p ? p->name : "?",
                            (long long)(p ? e->own_lo + ra + k - p->flat_offset : e->own_lo + ra + k), (double)src[k]);
            }
        zinc_status st = zckpt_pwrite(w, fd, path, src, (size_t)(rb - ra) * sizeof(float),
                                      f->sec_offset[2] + (e->own_lo + ra - f->flat_lo) * (int64_t)sizeof(float));
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

zinc_status zckpt_write_sections(zinc_engine *e, zckpt_writer *w, int fd, const char *path, const zckpt_file *f) {
    zinc_status st = ZINC_OK;
    void *host = NULL;
    TRY(zstate_pass_begin(e->state, ZSTATE_READ | ZSTATE_HOST_VIEW));
    for (int64_t i = 0; i < e->state->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, i, &v));
        int64_t a = e->own_lo + v.lo, b = a + v.n;
        int64_t lo = a > f->flat_lo ? a : f->flat_lo, hi = b < f->flat_hi ? b : f->flat_hi;
        if (hi > lo) {
            /* Lion keeps no exp_avg_sq (v is NULL): its section stays unwritten, and the file (new, and
             * sized to its full length by write_shard's ftruncate) reads zeros there, the bytes an Adam-style
             * zero section would hold. The format stays the one every optimizer writes, without the disk
             * blocks or the buffer of zeros. */
            const float *src[3] = {v.master, v.m, v.v};
            /* A checkpoint of a run gone bad would resume into the same NaNs: never saved silently. */
            for (int s = 0; s < 2; s++)
                for (int64_t x = 0; x < hi - lo; x++)
                    if (!isfinite(src[s][lo - a + x])) {
                        const zinc_param *p = zengine_param_at(e, lo + x);
                        FAIL(ZINC_ERR_NONFINITE,
                             "zinc_save_checkpoint: step %lld: the %s state of parameter \"%s\" "
                             "element %lld is %g: refusing to save a checkpoint with non-finite "
                             "values (the run went bad; resume from an earlier checkpoint)",
                             (long long)e->steps, zckpt_section_names[s], p ? p->name : "?",
                             (long long)(p ? lo + x - p->flat_offset : lo + x), (double)src[s][lo - a + x]);
                    }
            for (int s = 0; s < 2; s++)
                TRY(zckpt_pwrite(w, fd, path, src[s] + (lo - a), (size_t)(hi - lo) * sizeof(float),
                                 f->sec_offset[s] + (lo - f->flat_lo) * (int64_t)sizeof(float)));
            if (src[2]) TRY(write_v(e, w, fd, path, f, &v, lo, hi));
        }
        TRY(zstate_release(e->state, i));
    }
    TRY(zstate_pass_end(e->state));
    if (f->sec_offset[ZCKPT_SEC_PARAMS] >= 0 && f->flat_hi > f->flat_lo) {
        size_t csz = zinc_dtype_size(e->compute_dtype), bytes = (size_t)(f->flat_hi - f->flat_lo) * csz;
        const char *src = (const char *)e->params_shard + (size_t)(f->flat_lo - e->own_lo) * csz;
        if (e->pstore) { /* offload_param nvme: swapped in a chunk at a time (the file is not the checkpoint) */
            int64_t cap = zengine_pstore_chunk(e);
            char *buf = zstate_param_scratch(e->pstore);
            for (int64_t a = f->flat_lo; a < f->flat_hi; a += cap) {
                int64_t n = f->flat_hi - a < cap ? f->flat_hi - a : cap;
                TRY(zengine_params_read(e, a - e->own_lo, n, buf));
                TRY(zckpt_pwrite(w, fd, path, buf, (size_t)n * csz,
                                 f->sec_offset[ZCKPT_SEC_PARAMS] + (a - f->flat_lo) * (int64_t)csz));
            }
        } else if (!e->dev->host_addressable) { /* the parameter shard lives on the GPU */
            TRY(e->dev->ops->alloc_host(e->dev, ZINC_MEM_STAGING, bytes, "checkpoint parameter staging", &host));
            TRY(e->dev->ops->copy(e->dev, host, src, bytes, ZDEV_D2H));
            src = host;
        }
        if (!e->pstore) TRY(zckpt_pwrite(w, fd, path, src, bytes, f->sec_offset[ZCKPT_SEC_PARAMS]));
    }
    goto done;
fail:
    zstate_pass_abort(e->state);
done:
    if (host)
        e->dev->ops->free_host(e->dev, ZINC_MEM_STAGING, host,
                               (size_t)(f->flat_hi - f->flat_lo) * zinc_dtype_size(e->compute_dtype));
    return st;
}

/* Reads the written file back (from the page cache, normally) for its block and whole-file checksums. */
zinc_status zckpt_checksum_file(int fd, const char *path, zckpt_file *f) {
    zinc_status st = ZINC_OK;
    uint8_t *buf = NULL;
    TRY_ALLOC(buf, (size_t)f->block_bytes, "checkpoint checksums");
    TRY_ALLOC(f->block_crc, f->nblocks, "checkpoint checksums");
    f->crc = 0;
    for (int64_t b = 0; b < f->nblocks; b++) {
        int64_t off = b * f->block_bytes, len = f->bytes - off < f->block_bytes ? f->bytes - off : f->block_bytes;
        int64_t got = 0;
        while (got < len) {
            ssize_t k = pread(fd, buf + got, (size_t)(len - got), (off_t)(off + got));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0)
                FAIL(ZINC_ERR_IO, "reading back checkpoint file %s at offset %lld failed: %s", path,
                     (long long)(off + got), k < 0 ? strerror(errno) : "unexpected end of file");
            got += k;
        }
        f->block_crc[b] = zcrc32c(0, buf, (size_t)len);
        f->crc = zcrc32c_combine(f->crc, f->block_crc[b], (size_t)len);
    }
fail:
    free(buf);
    return st;
}

static zinc_status write_shard(zinc_engine *e, zckpt_writer *w, const char *partial, const char *uid, zckpt_file *f) {
    zinc_status st = ZINC_OK;
    char fin[ZCKPT_PATH_MAX];
    uint8_t hdr[ZCKPT_HEADER_BYTES];
    zfile_out o = {.fd = -1};
    TRY(zckpt_path(fin, sizeof fin, "%s/%s", partial, f->name));
    TRY(zfile_out_open(&o, "checkpoint file", fin, 0, NULL));
    zckpt_header_encode(f, uid, hdr);
    TRY(zckpt_pwrite(w, o.fd, o.tmp, hdr, sizeof hdr, 0));
    TRY(zckpt_write_sections(e, w, o.fd, o.tmp, f));
    if (ftruncate(o.fd, (off_t)f->bytes) != 0)
        FAIL(ZINC_ERR_IO, "cannot size checkpoint file %s to %lld bytes: %s (check free space)", o.tmp,
             (long long)f->bytes, strerror(errno));
    TRY(zckpt_checksum_file(o.fd, o.tmp, f));
    TRY(zfile_out_commit(&o));
fail:
    if (o.fd >= 0) zfile_out_abort(&o);
    return st;
}

/* Puts the finished staging directory in place as dir/tag, replacing an older one atomically. */
static zinc_status install_dir(const char *dir, const char *tag, const char *partial, const char *final) {
    zinc_status st = ZINC_OK;
    struct stat sb;
    if (lstat(final, &sb) == 0) {
        const char *no_x = zenv_get(ZENV_CKPT_TEST_NO_EXCHANGE); /* tests: the portable path below */
#ifdef RENAME_EXCHANGE
        if (!(no_x && *no_x == '1') && renameat2(AT_FDCWD, partial, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
            TRY(zckpt_fsync_dir(dir));
            TRY(zckpt_rmtree(partial)); /* now the old contents */
            return ZINC_OK;
        }
#endif
        /* No atomic exchange on this file system (NFS, some FUSE): move the old one aside first. A kill
         * between the two renames leaves `latest` naming a missing TAG and the whole old one as .TAG.old:
         * zckpt_resolve loads that, and the next save (zckpt_clean_stale) puts it back. */
        (void)no_x;
        char old[ZCKPT_PATH_MAX];
        TRY(zckpt_path(old, sizeof old, "%s/.%s.old", dir, tag));
        TRY(zckpt_rmtree(old));
        if (rename(final, old) != 0) FAIL(ZINC_ERR_IO, "cannot move %s aside to %s: %s", final, old, strerror(errno));
        TRY(zckpt_fsync_dir(dir));
        const char *kill_between = zenv_get(ZENV_CKPT_TEST_KILL_BETWEEN_RENAMES);
        if (kill_between && *kill_between == '1') raise(SIGKILL);
        if (rename(partial, final) != 0)
            FAIL(ZINC_ERR_IO, "cannot rename %s to %s: %s", partial, final, strerror(errno));
        TRY(zckpt_fsync_dir(dir));
        TRY(zckpt_rmtree(old));
        return ZINC_OK;
    }
    if (rename(partial, final) != 0) FAIL(ZINC_ERR_IO, "cannot rename %s to %s: %s", partial, final, strerror(errno));
    TRY(zckpt_fsync_dir(dir));
fail:
    return st;
}

/* Step 4's files, of a directory writer: the manifest (its text made by zckpt_save_prepare_publish), the
 * directory in place, then `latest`. Reads nothing of the engine: the decoupled save's publisher thread runs
 * it while training goes on. */
zinc_status zckpt_publish_files(zckpt_save_job *job) {
    zinc_status st = ZINC_OK;
    char latest[ZCKPT_TAG_MAX + 2];
    zckpt_writer *w = &job->w; /* ZINC_CKPT_TEST_KILL_AFTER_BYTES counts the manifest and `latest` after the shard */
    const char *d = zenv_get(ZENV_CKPT_TEST_PUBLISH_DELAY_MS); /* tests: a slow disk */
    if (d && atoi(d) > 0) {
        struct timespec ts = {atoi(d) / 1000, (long)(atoi(d) % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    TRY(zckpt_write_small(w, job->partial, ZCKPT_MANIFEST, job->man_text, strlen(job->man_text)));
    TRY(install_dir(job->dir, job->tag, job->partial, job->final));
    int n = snprintf(latest, sizeof latest, "%s\n", job->tag);
    TRY(zckpt_write_small(w, job->dir, ZCKPT_LATEST, latest, (size_t)n));
fail:
    return st;
}

/* The decoupled save's snapshot. Of a store the host addresses in place it is taken by the writer thread,
 * piece by piece, while training goes on (checkpoint_async.c); of any other (GPU memory, NVMe, parameter
 * offload) here: this rank's file as it will be on disk (header, sections, zeros between), made by the same
 * code that writes it (zckpt_pwrite copies into the image), so it is byte for byte the synchronous save's
 * file. Training may change the state as soon as this returns. */
static zinc_status snapshot(zinc_engine *e, zckpt_save_job *job) {
    zinc_status st = ZINC_OK;
    uint8_t hdr[ZCKPT_HEADER_BYTES];
    zckpt_writer w;
    bool live = false;
    int64_t t0 = ztrace_begin();
    TRY(zckpt_async_prepare(e, job, &live));
    if (live) return ZINC_OK;
    zckpt_writer_init(&w);
    job->image_alloc = (size_t)job->mine.bytes + 2 * ZCKPT_SECTION_ALIGN;
    TRY(zmem_host_alloc(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, job->image_alloc,
                        "the decoupled checkpoint's snapshot (checkpoint.writer.decoupled)", (void **)&job->image_mem));
    job->image =
        (uint8_t *)(((uintptr_t)job->image_mem + ZCKPT_SECTION_ALIGN - 1) & ~(uintptr_t)(ZCKPT_SECTION_ALIGN - 1));
    job->image_bytes = job->mine.bytes;
    memset(job->image, 0, (size_t)job->image_bytes); /* the zeros between the sections */
    w.image = job->image;
    w.image_bytes = job->image_bytes;
    zckpt_header_encode(&job->mine, job->uid, hdr);
    TRY(zckpt_pwrite(&w, -1, "the snapshot", hdr, sizeof hdr, 0));
    TRY(zckpt_write_sections(e, &w, -1, "the snapshot", &job->mine));
    if (t0) ztrace_span(t0, ZTRACE_CHECKPOINT, "snapshot", 0, "bytes", job->image_bytes, NULL, 0);
fail:
    return st;
}

/* Exchanges the engine's manifest fields with the job's (twice: back again). */
static void swap_state(zinc_engine *e, zckpt_save_job *job) {
#define SWAP(a, b)                                                                                                     \
    do {                                                                                                               \
        __typeof__(a) t_ = (a);                                                                                        \
        (a) = (b);                                                                                                     \
        (b) = t_;                                                                                                      \
    } while (0)
    SWAP(e->steps, job->step);
    SWAP(e->steps_taken, job->steps_taken);
    SWAP(e->steps_skipped, job->steps_skipped);
    SWAP(e->consecutive_skips, job->consecutive_skips);
    SWAP(e->scaler, job->scaler);
    SWAP(e->nmeta, job->nmeta);
#undef SWAP
    char tmp[sizeof e->meta];
    memcpy(tmp, e->meta, sizeof tmp);
    memcpy(e->meta, job->meta, sizeof tmp);
    memcpy(job->meta, tmp, sizeof tmp);
}

zinc_status zckpt_save_prepare_publish(zinc_engine *e, zckpt_save_job *job) {
    zinc_status st = ZINC_OK, local = ZINC_OK;
    zckpt_file *files = NULL;
    uint8_t *recs = NULL;
    json_t *man = NULL;
    size_t rec_bytes = 0;
    int nfiles = 0;
    int64_t total = 0;

    /* 3. Every file's size and checksums to the directory writers. */
    nfiles = e->stage == 0 ? 1 : e->world;
    zckpt_file biggest;
    zckpt_layout(&biggest, 0, 0, e->stage == 0 ? e->part.numel : e->part.shard, e->stage == 3, e->compute_dtype);
    rec_bytes = sizeof(file_rec) + (size_t)biggest.nblocks * sizeof(uint32_t);
    rec_bytes = (rec_bytes + 7) / 8 * 8;
    recs = calloc((size_t)e->world + 1, rec_bytes);
    TRY(zcomm_agree_status(e->comm,
                           recs ? ZINC_OK : ZERR(ZINC_ERR_NOMEM, "out of memory for the checkpoint file checksums")));
    uint8_t *my = recs + rec_bytes * (size_t)e->world;
    file_rec fr = {.has = job->has, .bytes = job->mine.bytes, .nblocks = job->mine.nblocks, .crc = job->mine.crc};
    memcpy(my, &fr, sizeof fr);
    if (job->has) memcpy(my + sizeof fr, job->mine.block_crc, (size_t)job->mine.nblocks * sizeof(uint32_t));
    if (e->world > 1)
        TRY(zcomm_allgather_bytes(e->comm, my, recs, rec_bytes));
    else
        memcpy(recs, my, rec_bytes);
    TRY_ALLOC(files, nfiles, "the checkpoint file table");
    for (int i = 0; i < nfiles; i++) {
        int64_t numel = e->part.numel, lo = (int64_t)i * e->part.shard, hi = lo + e->part.shard;
        if (e->stage == 0) lo = 0, hi = numel;
        zckpt_layout(&files[i], i, lo < numel ? lo : numel, hi < numel ? hi : numel, e->stage == 3, e->compute_dtype);
        file_rec r;
        memcpy(&r, recs + rec_bytes * (size_t)i, sizeof r);
        if (!r.has || r.bytes != files[i].bytes || r.nblocks != files[i].nblocks)
            FAIL(ZINC_ERR_INTERNAL,
                 "checkpoint: rank %d's file record disagrees with the layout (%lld bytes, "
                 "expected %lld)",
                 i, (long long)r.bytes, (long long)files[i].bytes);
        files[i].crc = r.crc;
        TRY_ALLOC(files[i].block_crc, files[i].nblocks, "checkpoint checksums");
        memcpy(files[i].block_crc, recs + rec_bytes * (size_t)i + sizeof r, (size_t)r.nblocks * sizeof(uint32_t));
        total += files[i].bytes;
    }
    job->nfiles = nfiles;
    job->total_bytes = total;

    /* 4a. The manifest's text, of the engine as it was at the save (its files: zckpt_publish_files). */
    if (job->dir_writer) {
        swap_state(e, job);
        man = zckpt_manifest_build(e, job->tag, job->uid, files, nfiles);
        swap_state(e, job);
        if (!man) local = ZERR(ZINC_ERR_NOMEM, "out of memory building the checkpoint manifest");
        if (local == ZINC_OK && !(job->man_text = zckpt_manifest_seal(man)))
            local = ZERR(ZINC_ERR_NOMEM, "out of memory writing the checkpoint manifest");
    }
    TRY(zcomm_agree_status(e->comm, local));
fail:
    json_decref(man);
    for (int i = 0; files && i < nfiles; i++) free(files[i].block_crc);
    free(files);
    free(recs);
    return st;
}

zinc_status zckpt_save_finish(zinc_engine *e, zckpt_save_job *job, zinc_status local) {
    zinc_status st = ZINC_OK;
    TRY(zcomm_agree_status(e->comm, local));
    ZLOG_INFO(&e->log, "saved checkpoint %s: step %lld, %d shard file%s, %.1f MiB, %.2f s", job->final,
              (long long)job->step, job->nfiles, job->nfiles == 1 ? "" : "s", (double)job->total_bytes / 1048576.0,
              zclock_now_s() - job->t0);
    /* synchronous: training waited for the whole save; decoupled: for the save call, the pieces the optimizer
     * step copied and the polls' main-thread work (checkpoint_async.c) */
    job->blocked_s =
        e->cfg.checkpoint.writer_decoupled ? job->snapshot_s + job->guard_s + job->polls_s : zclock_now_s() - job->t0;
    if (e->cfg.checkpoint.writer_show_statistics) {
        char phases[256] = "";
        if (job->live && !job->stream)
            snprintf(phases, sizeof phases,
                     "; writer thread: CPU %.3f s; copies %.3f s (%s image, checksummed as copied), writes %.3f s, "
                     "checksums of the rest %.3f s",
                     job->cpu_s, job->copy_s, job->reused_image ? "into the kept" : "faulting a new", job->io_s,
                     job->crc_s);
        else if (job->image_mem)
            snprintf(phases, sizeof phases, "; writer thread: CPU %.3f s", job->cpu_s);
        double wr = job->write_s > 0 ? (double)job->image_bytes / job->write_s / 1e9 : 0;
        ZLOG_INFO(&e->log,
                  "checkpoint.writer statistics, rank %d, step %lld: %lld bytes, %s write %.3f s (%.2f GB/s%s%s), "
                  "snapshot %.3f s, training blocked %.3f s (%lld piece%s guarded by the step, %.3f s; polls %.3f s, "
                  "of "
                  "which waiting for the writer %.3f s; publish %.3f s%s)%s",
                  e->rank, (long long)job->step, (long long)job->image_bytes,
                  !job->image_mem ? "synchronous"
                  : job->stream   ? "decoupled streaming"
                  : job->live     ? "decoupled live"
                                  : "decoupled",
                  job->write_s, wr, job->image_mem ? (job->direct ? ", O_DIRECT, " : ", buffered, ") : "",
                  job->image_mem && job->backend ? job->backend : "", job->snapshot_s, job->blocked_s,
                  (long long)job->guard_pieces, job->guard_pieces == 1 ? "" : "s", job->guard_s, job->polls_s,
                  job->wait_s, job->publish_s, e->cfg.checkpoint.writer_decoupled ? " off the training thread" : "",
                  phases);
    }
fail:
    return st;
}

void zckpt_save_job_free(zinc_engine *e, zckpt_save_job *job) {
    if (!job) return;
    if (e->state && e->state->guard_arg == job) { /* a save that failed after its snapshot was prepared */
        e->state->guard = NULL;
        e->state->guard_arg = NULL;
    }
    zckpt_unlock_dir(job->lock_fd);
    if (job->image_mem && job->live && !job->stream && !e->ckpt_image) { /* kept for the next save */
        e->ckpt_image = job->image_mem;
        e->ckpt_image_alloc = job->image_alloc;
        job->image_mem = NULL;
    }
    if (job->image_mem) zmem_host_free(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, job->image_mem, job->image_alloc);
    if (job->sync_init) {
        pthread_mutex_destroy(&job->mu);
        pthread_cond_destroy(&job->cv);
    }
    free(job->pstate);
    free(job->unchecked);
    zckpt_segs_free(&job->segs);
    free(job->man_text);
    free(job->mine.block_crc);
    free(job->meta);
    free(job);
}

static zinc_status checkpoint_save(zinc_engine *e, const char *dir, const char *tag) {
    zinc_status st = ZINC_OK, local = ZINC_OK;
    char mytag[ZCKPT_TAG_MAX + 1] = "";
    zckpt_save_job *job = NULL;
    double t0 = 0;
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_save_checkpoint: engine is NULL");
    zinc_status built = zengine_require_built(e, "zinc_save_checkpoint");
    if (built != ZINC_OK) return built;
    if ((st = zengine_check_usable(e, "zinc_save_checkpoint")) != ZINC_OK) return st;
    /* checkpoint.writer.decoupled: a second save waits for the first (published, or its failure returned), or
     * with zinc.checkpoint_busy "skip" is skipped with a warning while any rank's writer still writes */
    if (e->ckpt_async && e->cfg.checkpoint.writer_busy == ZCFG_CKPT_BUSY_SKIP) {
        bool busy = false;
        TRY(zckpt_async_busy(e, &busy));
        if (busy) {
            zckpt_save_job *prev = e->ckpt_async;
            ZLOG_WARN(&e->log,
                      "zinc_save_checkpoint: step %lld: skipped, the decoupled save of step %lld is still being "
                      "written (zinc.checkpoint_busy \"skip\"; \"wait\" waits for it)",
                      (long long)e->steps, (long long)prev->step);
            return ZINC_OK;
        }
    }
    TRY(zckpt_async_wait(e)); /* its time counted as the previous save's (show_statistics) */
    t0 = zclock_now_s();
    job = calloc(1, sizeof *job);
    TRY(zcomm_agree_status(e->comm, job ? ZINC_OK : ZERR(ZINC_ERR_NOMEM, "out of memory for a checkpoint save")));
    job->lock_fd = -1;
    job->t0 = t0;
    job->step = e->steps;
    job->steps_taken = e->steps_taken;
    job->steps_skipped = e->steps_skipped;
    job->consecutive_skips = e->consecutive_skips;
    job->scaler = e->scaler;
    job->nmeta = e->nmeta;
    job->meta = malloc(sizeof e->meta);
    TRY(zcomm_agree_status(e->comm, job->meta ? ZINC_OK : ZERR(ZINC_ERR_NOMEM, "out of memory for a checkpoint save")));
    memcpy(job->meta, e->meta, sizeof e->meta);
    zckpt_writer_init(&job->w);

    TRY(zcomm_agree_status(e->comm, precheck(e, dir, tag, mytag, sizeof mytag)));
    snprintf(job->dir, sizeof job->dir, "%s", dir);
    TRY(zckpt_agree_string(e, mytag, job->tag, sizeof job->tag, "tag"));
    if (e->rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t h = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        h ^= (uintptr_t)&h; /* address-space randomisation as a little more entropy */
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        snprintf(job->uid, sizeof job->uid, "%016llx", (unsigned long long)(h ^ (h >> 31)));
    }
    TRY(zcomm_bcast(e->comm, job->uid, sizeof job->uid, 0));
    TRY(zckpt_path(job->partial, sizeof job->partial, "%s/.%s.partial", dir, job->tag));
    TRY(zckpt_path(job->final, sizeof job->final, "%s/%s", dir, job->tag));

    /* 1. A fresh staging directory. */
    job->dir_writer = zckpt_is_dir_writer(e);
    if (job->dir_writer) {
        /* The directory is checked (owner, mode) and locked for the whole save; leftovers of interrupted
         * saves are cleaned under the lock, then the staging directory is created fresh. */
        local = zckpt_mkdirs(dir);
        if (local == ZINC_OK) local = zckpt_check_dir(dir, "checkpoint directory");
        if (local == ZINC_OK) local = zckpt_lock_dir(dir, &job->lock_fd);
        if (local == ZINC_OK) local = zckpt_clean_stale(dir);
        if (local == ZINC_OK && mkdir(job->partial, 0755) != 0)
            local = ZERR(ZINC_ERR_IO, "cannot create checkpoint directory %s: %s (check the permissions of %s)",
                         job->partial, strerror(errno), dir);
    }
    TRY(zcomm_agree_status(e->comm, local));

    /* 2. The shard files: written now, or (decoupled) snapshotted and handed to this rank's writer thread. */
    job->has = zckpt_my_file(e, &job->mine);
    if (e->cfg.checkpoint.writer_decoupled) {
        local = job->has ? snapshot(e, job) : ZINC_OK;
        TRY(zcomm_agree_status(e->comm, local));
        job->snapshot_s = zclock_now_s() - t0;
        job->blocked_s = job->snapshot_s;
        local = zckpt_async_start(e, job); /* the engine owns the job from here, whatever it returns */
        job = NULL;
        if ((st = zcomm_agree_status(e->comm, local)) != ZINC_OK) (void)zckpt_async_wait(e); /* fails, frees */
        return st;
    }
    local = job->has ? write_shard(e, &job->w, job->partial, job->uid, &job->mine) : ZINC_OK;
    TRY(zcomm_agree_status(e->comm, local));
    job->write_s = zclock_now_s() - t0;
    job->image_bytes = job->has ? job->mine.bytes : 0;
    int64_t tr = ztrace_begin();
    TRY(zckpt_save_prepare_publish(e, job));
    double tp = zclock_now_s();
    local = job->dir_writer ? zckpt_publish_files(job) : ZINC_OK;
    job->publish_s = zclock_now_s() - tp;
    st = zckpt_save_finish(e, job, local);
    if (tr) ztrace_span(tr, ZTRACE_CHECKPOINT, "publish", 0, "step", job->step, NULL, 0);
    if (st != ZINC_OK) goto fail;
fail:
    zckpt_save_job_free(e, job);
    return st;
}

zinc_status zinc_save_checkpoint(zinc_engine *e, const char *dir, const char *tag) {
    /* --trace: kept whatever the step window (a checkpoint is rare and long) */
    int64_t t0 = ztrace_begin_always();
    zinc_status st = checkpoint_save(e, dir, tag);
    if (t0) ztrace_span(t0, ZTRACE_CHECKPOINT, "save", 0, "ok", st == ZINC_OK, NULL, 0);
    return st;
}
