/* checkpoint.writer.decoupled (DeepSpeed 0.19.8's decoupled checkpoint engine): zinc_save_checkpoint takes a
 * snapshot of this rank's shard file (checkpoint_save.c) and returns; a writer thread of this process writes
 * it through the safe writer (temporary name, fsync, rename) and checksums it. The thread never calls a
 * collective: MPI stays on the main thread, where each zinc_step asks every rank (one small all-reduce while a
 * save is in flight) whether all writers are done, and the step on which they are publishes the checkpoint
 * (the checksum exchange, the manifest, `latest`: checkpoint_save.c's zckpt_save_publish). A writer's failure
 * (ENOSPC, EIO) fails that step with its message. A kill at any point leaves the previous `latest`, as a
 * synchronous save does: nothing is renamed into place before the publish. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/clock.h"
#include "base/core/crc32c.h"
#include "base/core/error.h"
#include "base/core/safe_file.h"
#include "base/core/trace.h"
#include "runtime/engine/engine_internal.h"

/* The writer thread's whole work: the image to the file in io_buffer_size pieces, its checksums from the
 * image (the bytes written), commit. */
static zinc_status write_image(zckpt_save_job *job) {
    zinc_status st = ZINC_OK;
    char fin[ZCKPT_PATH_MAX];
    zfile_out o = {.fd = -1};
    zckpt_file *f = &job->mine;
    TRY(zckpt_path(fin, sizeof fin, "%s/%s", job->partial, f->name));
    TRY(zfile_out_open(&o, "checkpoint file", fin, 0, NULL));
    for (int64_t off = 0; off < job->image_bytes; off += job->io_buffer) {
        int64_t n = job->image_bytes - off < job->io_buffer ? job->image_bytes - off : job->io_buffer;
        TRY(zckpt_pwrite(&job->w, o.fd, o.tmp, job->image + off, (size_t)n, off));
    }
    TRY_ALLOC(f->block_crc, f->nblocks, "checkpoint checksums");
    f->crc = 0;
    for (int64_t b = 0; b < f->nblocks; b++) {
        int64_t off = b * f->block_bytes, len = f->bytes - off < f->block_bytes ? f->bytes - off : f->block_bytes;
        f->block_crc[b] = zcrc32c(0, job->image + off, (size_t)len);
        f->crc = zcrc32c(f->crc, job->image + off, (size_t)len);
    }
    TRY(zfile_out_commit(&o));
fail:
    if (o.fd >= 0) zfile_out_abort(&o);
    return st;
}

static void *writer_main(void *arg) {
    zckpt_save_job *job = arg;
    ztrace_thread_name("checkpoint writer");
    double t0 = zclock_now_s();
    int64_t tr = ztrace_begin();
    job->wst = write_image(job);
    if (job->wst != ZINC_OK) snprintf(job->wmsg, sizeof job->wmsg, "%s", zinc_last_error());
    job->write_s = zclock_now_s() - t0;
    if (tr) ztrace_span(tr, ZTRACE_CHECKPOINT, "write", 0, "bytes", job->image_bytes, NULL, 0);
    __atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void drop(zinc_engine *e) {
    zckpt_save_job *job = e->ckpt_async;
    if (!job) return;
    e->ckpt_async = NULL;
    if (job->started) pthread_join(job->thread, NULL);
    ZLOG_WARN(&e->log,
              "checkpoint %s of step %lld: the engine was destroyed before its decoupled write was published; "
              "`latest` still names the previous checkpoint (call zinc_checkpoint_wait before zinc_destroy)",
              job->final, (long long)job->step);
    zckpt_save_job_free(e, job);
}

static zinc_status poll_save(zinc_engine *e, bool wait) {
    zinc_status st = ZINC_OK, local = ZINC_OK;
    zckpt_save_job *job = e->ckpt_async;
    if (!job) return ZINC_OK;
    double t0 = zclock_now_s();
    if (!wait) {
        float busy = job->started && !__atomic_load_n(&job->done, __ATOMIC_ACQUIRE) ? 1.0f : 0.0f;
        if (e->world > 1) TRY(zcomm_allreduce(e->comm, &busy, 1, ZINC_FP32, ZCOMM_MAX, NULL));
        if (busy > 0) {
            job->blocked_s += zclock_now_s() - t0;
            return ZINC_OK;
        }
    }
    e->ckpt_async = NULL; /* whatever follows, this save is over */
    if (job->started) pthread_join(job->thread, NULL);
    job->blocked_s += zclock_now_s() - t0;
    if (job->wst != ZINC_OK)
        local = ZERR(job->wst,
                     "checkpoint.writer.decoupled: the checkpoint of step %lld (%s) was not saved; `latest` still "
                     "names the previous one: %s",
                     (long long)job->step, job->final, job->wmsg);
    TRY(zcomm_agree_status(e->comm, local));
    TRY(zckpt_save_publish(e, job));
    if (job->keep_last > 0) { /* zinc_checkpoint_keep_last, asked while this was in flight */
        zckpt_unlock_dir(job->lock_fd);
        job->lock_fd = -1;
        local = job->dir_writer ? zckpt_retain(job->dir, job->keep_last) : ZINC_OK;
        TRY(zcomm_agree_status(e->comm, local));
    }
fail:
    zckpt_save_job_free(e, job);
    return st;
}

zinc_status zckpt_async_start(zinc_engine *e, zckpt_save_job *job) {
    job->io_buffer = e->cfg.checkpoint.writer_io_buffer_size;
    if (job->io_buffer < 4096) job->io_buffer = 4096;
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
    job->wst = ZERR(ZINC_ERR_NOMEM, "checkpoint.writer.decoupled: cannot start the writer thread: %s", strerror(rc));
    snprintf(job->wmsg, sizeof job->wmsg, "%s", zinc_last_error());
    return job->wst;
}

zinc_status zckpt_async_wait(zinc_engine *e) { return e && e->ckpt_async ? poll_save(e, true) : ZINC_OK; }

zinc_status zinc_checkpoint_wait(zinc_engine *e) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_checkpoint_wait: engine is NULL");
    return zckpt_async_wait(e);
}
