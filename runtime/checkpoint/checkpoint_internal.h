/* Checkpoints (docs/checkpoints.md): what the save, load, export and inspect files share.
 *
 * A checkpoint is a directory <dir>/<tag>/ holding manifest.json and one shard file per rank that owned
 * optimizer state (one file in stage 0, where every rank holds the same full state). <dir>/latest names
 * the newest complete tag. A shard file covers the flat range [flat_lo, flat_hi) (the rank's own range,
 * clipped to the end of the last parameter) and holds, after a 4 KiB header, the sections master,
 * exp_avg, exp_avg_sq (fp32) and, from stage 3, params (the compute-dtype shard), each starting on a
 * 4 KiB boundary: element x of a section is at offset + (x - flat_lo) * dtype size. Flat offsets do not
 * depend on the world size, so any rank count and stage can read any checkpoint by byte ranges.
 *
 * Integrity: the manifest stores each file's size, a CRC-32C of the whole file and one CRC-32C per
 * 1 MiB block; readers verify every block they read, so a rank that reads a few ranges verifies just
 * those (every byte a load uses is verified). */
#ifndef ZINC_RUNTIME_CHECKPOINT_INTERNAL_H
#define ZINC_RUNTIME_CHECKPOINT_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amp/loss_scaler.h"
#include "base/config/config.h"
#include "zinc.h"

struct zinc_engine;

#define ZCKPT_FORMAT "zinc-checkpoint"
#define ZCKPT_FORMAT_VERSION 2          /* 2: the manifest is sealed by its CRC-32C */
#define ZCKPT_FORMAT_VERSION_UNSEALED 1 /* still read: the same manifest without the seal */
#define ZCKPT_MANIFEST "manifest.json"
#define ZCKPT_LATEST "latest"
#define ZCKPT_SIDECAR_GPT2 "zinc_gpt2.json" /* written beside the tags by zinc train --model gpt2 */
#define ZCKPT_LOCK ".zinc.lock"             /* flock'd by the directory writer for the whole save */
#define ZCKPT_MAGIC "ZINCSHRD"
#define ZCKPT_HEADER_BYTES 4096
#define ZCKPT_SECTION_ALIGN 4096
#define ZCKPT_BLOCK_BYTES ((int64_t)1 << 20)
#define ZCKPT_TAG_MAX 128
#define ZCKPT_PATH_MAX 4096
#define ZCKPT_UID_LEN 16 /* hex characters */
/* Ranges of a manifest's fields (checkpoint_validate.c): beyond them a file is refused before any
 * arithmetic on its numbers. */
#define ZCKPT_MAX_STEPS ((int64_t)1 << 53)
#define ZCKPT_MAX_ELEMS ((int64_t)1 << 50)
#define ZCKPT_MAX_WORLD (1 << 20)
#define ZCKPT_MAX_PARAMS (1 << 24)
#define ZCKPT_MAX_BATCH ((int64_t)1 << 31)

enum { ZCKPT_SEC_MASTER = 0, ZCKPT_SEC_EXP_AVG, ZCKPT_SEC_EXP_AVG_SQ, ZCKPT_SEC_PARAMS, ZCKPT_NSEC };
extern const char *const zckpt_section_names[ZCKPT_NSEC];

typedef struct zckpt_param {
    char *name;
    int ndim;
    int64_t shape[ZINC_MAX_DIMS];
    int64_t numel;
    int64_t flat_offset;
    bool decay;
} zckpt_param;

typedef struct zckpt_file {
    char name[64];
    int rank;                 /* the rank that wrote it */
    int64_t flat_lo, flat_hi; /* elements covered */
    int64_t bytes;            /* file size */
    uint32_t crc;             /* CRC-32C of the whole file */
    int64_t block_bytes;
    int64_t nblocks;
    uint32_t *block_crc;            /* nblocks entries */
    int64_t sec_offset[ZCKPT_NSEC]; /* byte offset of each section, -1 when absent */
    zinc_dtype sec_dtype[ZCKPT_NSEC];
} zckpt_file;

typedef struct zckpt_manifest {
    char dir[ZCKPT_PATH_MAX]; /* the tag directory */
    char tag[ZCKPT_TAG_MAX + 1];
    char uid[ZCKPT_UID_LEN + 1];
    char zinc_version[32];
    int format_version; /* 1: saved before manifests were sealed (read, validated, not checksummed) */
    int world_size, stage;
    zinc_dtype compute_dtype;
    bool fp16_enabled;
    int64_t train_batch_size, micro_batch, grad_accum;
    int64_t steps, steps_taken, steps_skipped, consecutive_skips;
    zloss_scaler scaler;
    int64_t flat_numel; /* end of the last parameter, aligned */
    int64_t flat_shard; /* the saving run's shard size */
    int nparams;
    zckpt_param *params;
    int nfiles;
    zckpt_file *files;
    json_t *root; /* the parsed manifest (config, lr_schedule, ...) */
} zckpt_manifest;

/* ---------------------------------------------------------------- checkpoint_io.c */

/* Tags are 1..128 characters of [A-Za-z0-9._+-], not starting with '.', and none of the names zinc writes in
 * the checkpoint directory (latest, manifest.json, zinc_gpt2.json, *.tmp). */
zinc_status zckpt_check_tag(const char *tag);
/* PATH is a tag directory (has manifest.json) or a checkpoint directory (has `latest`): the tag
 * directory and its tag. */
zinc_status zckpt_resolve(const char *path, char *tagdir, size_t cap, char *tag, size_t tag_cap);
/* snprintf into a path buffer; an error when it does not fit. */
zinc_status zckpt_path(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
zinc_status zckpt_mkdirs(const char *path);
zinc_status zckpt_fsync_dir(const char *path);
/* Removes a directory tree (no symlinks followed); a missing path is not an error. */
zinc_status zckpt_rmtree(const char *path);
zinc_status zckpt_host_little_endian(void);

/* Writing with the test hook ZINC_CKPT_TEST_KILL_AFTER_BYTES=N: the process raises SIGKILL once it has
 * written N bytes of checkpoint data in this save (to test that an interrupted save is harmless). */
typedef struct zckpt_writer {
    int64_t written;
    int64_t kill_after; /* -1: off */
    int fail_errno;     /* ZINC_CKPT_TEST_WRITE_ERRNO: every shard write fails with it (0: off) */
    /* Non-NULL: the decoupled save's snapshot. zckpt_pwrite copies into it at the file offset instead of
     * writing (no kill hook: nothing reaches the disk), so the snapshot is the file's image byte for byte. */
    uint8_t *image;
    int64_t image_bytes;
} zckpt_writer;
void zckpt_writer_init(zckpt_writer *w);
zinc_status zckpt_pwrite(zckpt_writer *w, int fd, const char *path, const void *buf, size_t n, int64_t off);
/* Writes a small file atomically: dir/name.tmp, fsync, rename to dir/name, fsync dir. */
zinc_status zckpt_write_small(zckpt_writer *w, const char *dir, const char *name, const void *data, size_t n);
/* Opens a file for reading that must be a regular file (a FIFO or device is refused without blocking). */
zinc_status zckpt_open_regular(const char *path, int *fd);
/* Reads a whole small file (NUL-terminated, malloc'd). */
zinc_status zckpt_read_small(const char *path, char **out, size_t *n);
/* The step of the tag `latest` names in the checkpoint directory dir when zinc named it itself
 * ("step<N>", checkpoint_retain.c), else -1 (no `latest`, unreadable, or a user's tag); never an error. For
 * zinc launch, which restarts from it. */
int64_t zckpt_latest_step(const char *dir);

/* A reader of one shard file that verifies every 1 MiB block it reads against the manifest. */
typedef struct zckpt_reader {
    const zckpt_manifest *m;
    const zckpt_file *f;
    char path[ZCKPT_PATH_MAX];
    int fd;
    uint8_t *cache[ZCKPT_NSEC + 1]; /* one verified block per stream (header + sections) */
    int64_t cache_block[ZCKPT_NSEC + 1];
} zckpt_reader;
/* Opens file `i` of the manifest, checks its size and (through block 0) its header. */
zinc_status zckpt_reader_open(zckpt_reader *r, const zckpt_manifest *m, int i);
/* Reads elements [x, x + n) of section `sec` (flat indices within the file's range) into dst. */
zinc_status zckpt_reader_read(zckpt_reader *r, int sec, int64_t x, int64_t n, void *dst);
void zckpt_reader_close(zckpt_reader *r);
/* Reads all of file `i` and checks its size, whole-file checksum and every block. */
zinc_status zckpt_verify_file(const zckpt_manifest *m, int i);

/* ---------------------------------------------------------------- checkpoint_save.c, checkpoint_async.c */

/* checkpoint_segs.c: a decoupled save's checksums taken as its writer copies. The file cut into segments
 * inside one block and one region each (the header and the zeros between sections: filler; a piece of a
 * section), in file order. */
typedef struct zckpt_seg {
    int64_t off, len;
    uint32_t crc;
    bool have; /* checksummed by a copy (else read from the image at the end) */
} zckpt_seg;
typedef struct zckpt_segs {
    zckpt_seg *seg;
    int64_t n, block;
    int64_t *first; /* per piece and section (p * ZCKPT_NSEC + sec): its first segment */
} zckpt_segs;
/* The segments of file f whose nsec sections hold nelem elements of esz[sec] bytes each, in pieces of `piece`
 * elements; a section without have[sec] is filler (zeros). */
zinc_status zckpt_segs_build(zckpt_segs *s, const zckpt_file *f, int nsec, const bool have[4], int64_t nelem,
                             int64_t piece, const size_t esz[4]);
void zckpt_segs_free(zckpt_segs *s);
/* Piece p of section sec (bytes at file offset off, from src) into the image, each segment checksummed from
 * src chunk by chunk before its copy (zk_copy_stream's streaming stores). Returns whether an element is
 * non-finite (f32). */
int zckpt_segs_copy(zckpt_segs *s, int64_t p, int sec, uint8_t *image, const void *src, int64_t off, int64_t bytes,
                    int f32);
/* Once every piece is in the image: the segments no copy checksummed read from it, then f's block CRCs and
 * whole-file CRC (f->block_crc allocated). With no segments (s->seg NULL: an image made on the training
 * thread), every block is read from the image. */
void zckpt_segs_finish(zckpt_segs *s, const uint8_t *image, zckpt_file *f);

/* One save from its staging directory to `latest`: made by zinc_save_checkpoint, finished there (synchronous)
 * or by the poll of checkpoint.writer.decoupled (checkpoint_async.c). */
typedef struct zckpt_save_job {
    char dir[ZCKPT_PATH_MAX], tag[ZCKPT_PATH_MAX], uid[ZCKPT_UID_LEN + 1];
    char partial[ZCKPT_PATH_MAX], final[ZCKPT_PATH_MAX];
    int lock_fd;          /* the directory's lock, held until published or dropped (-1: not this rank's) */
    bool dir_writer, has; /* whether this rank writes the directory; whether it has a shard file */
    zckpt_file mine;      /* this rank's file (checksums filled in by whoever wrote it) */
    int64_t step;
    double t0;
    /* decoupled: the snapshot (the file's image, or two io_buffer_size slots when streaming) and its writer
     * thread (checkpoint_async.c) */
    uint8_t *image, *image_mem; /* image: 4 KiB aligned, inside image_mem (image_alloc bytes, tracked) */
    size_t image_alloc;
    int64_t image_bytes, io_buffer;
    bool live;                  /* copied piece by piece by the writer thread while training goes on (a host store) */
    bool stream;                /* memory short: through the slots instead of a full image */
    bool reused_image;          /* the image the engine kept (a previous save's, or reserved), not a new one */
    double copy_s, io_s, crc_s; /* the writer thread's phases: its copies (and checks), the writes, checksums */
    double cpu_s;               /* the writer thread's CPU time (what it takes from training where no core is free) */
    int nslots;                 /* 2 with io_buffer_double, else 1 */
    const float *src[3];        /* the store's master, exp_avg, exp_avg_sq (NULL: none) from the file's first element */
    const char *src_params;     /* stage 3: the compute-dtype shard, likewise */
    size_t psz;                 /* its element size */
    int64_t piece, npieces;     /* elements per piece, pieces over the file's range */
    int *pstate;                /* per piece: 0 to copy, 1 being copied, 2 copied (__atomic, under mu for waits) */
    int64_t ncopied;            /* pieces copied (under mu) */
    char *unchecked; /* per piece: copied by the guard, not yet checked for non-finite values (the writer's) */
    zckpt_segs segs; /* full image: the checksums the writer's copies take (checkpoint_segs.c) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_init;
    zinc_status sst; /* the snapshot's failure (non-finite state), under mu */
    char smsg[1024];
    int delay_ms;    /* tests: ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS, the writer's pause inside each piece */
    bool abandoned;  /* the writer stopped before copying every piece (under mu): guards stop waiting */
    int64_t d0;      /* the file's first element in the store (its own range) */
    int64_t nf_flat; /* the first non-finite element found (flat index), its section and value */
    int nf_sec;
    double nf_val;
    int64_t guard_pieces; /* pieces the training thread copied (or waited for) before changing them */
    double guard_s;       /* and the time it took */
    zcfg_aio aio;
    bool direct; /* the shard file was written with O_DIRECT */
    char why_buffered[256];
    char backend[160]; /* io_uring, or the fallback */
    zckpt_writer w;
    pthread_t thread;
    bool started;
    int done;        /* set by the writer thread last (__atomic) */
    zinc_status wst; /* the writer's status and message (its errors are its thread's) */
    char wmsg[1024];
    double snapshot_s, write_s, blocked_s; /* show_statistics */
    double polls_s;   /* decoupled: the main thread's time in the polls (the all-reduces, checksums, manifest) */
    double wait_s;    /* of which in zinc_checkpoint_wait or a next save's wait (the end of a run, a busy writer) */
    double publish_s; /* the manifest, the directory in place and `latest` (decoupled: the publisher thread) */
    /* decoupled, once every writer is done: the publish of a directory writer on its own thread */
    bool publishing; /* the shard files are written and their checksums exchanged */
    char *man_text;  /* the sealed manifest (directory writers) */
    int nfiles;      /* the checkpoint's files and their bytes, for the log line */
    int64_t total_bytes;
    pthread_t pthread;
    bool pstarted;
    int pdone;       /* set by the publisher thread last (__atomic) */
    zinc_status pst; /* its status and message */
    char pmsg[1024];
    struct zcomm_req *preq; /* the polls' all-reduce, started at one poll and answered at the next */
    float pflag;            /* its buffer: whether this rank's thread was at work */
    int keep_last;          /* zinc_checkpoint_keep_last while in flight: applied after the publish (__atomic) */
    int retained;           /* the keep_last the publisher thread applied (0: none; the poll applies it) */
    zinc_status rst;        /* its status and message */
    char rmsg[1024];
    /* The engine's fields the manifest records, as they were at the save (the steps go on before a decoupled
     * save is published): swapped into the engine while its manifest is built. */
    int64_t steps_taken, steps_skipped, consecutive_skips;
    zloss_scaler scaler;
    void *meta; /* a copy of zinc_engine.meta */
    int nmeta;
} zckpt_save_job;

/* Step 3 of a save (collective): every file's checksums to the directory writers, and their manifest's text
 * (job->man_text) of the engine as it was at the save. */
zinc_status zckpt_save_prepare_publish(struct zinc_engine *e, zckpt_save_job *job);
/* Step 4 on a directory writer: the manifest, the directory in place, `latest` (no engine state: any thread). */
zinc_status zckpt_publish_files(zckpt_save_job *job);
/* After step 4 (collective): every rank's outcome (local) agreed, the log line, show_statistics. */
zinc_status zckpt_save_finish(struct zinc_engine *e, zckpt_save_job *job, zinc_status local);
/* Releases the lock, the snapshot and the job. */
void zckpt_save_job_free(struct zinc_engine *e, zckpt_save_job *job);
/* checkpoint_async.c: starts the writer thread of a job with its snapshot taken (this rank's file), and
 * makes the engine poll it. */
zinc_status zckpt_async_start(struct zinc_engine *e, zckpt_save_job *job);
/* Collective: waits for the save in flight, if any, and publishes it (its status). */
zinc_status zckpt_async_wait(struct zinc_engine *e);
/* Collective: publishes the save in flight if every rank's writer is done; *busy when one still writes. */
zinc_status zckpt_async_busy(struct zinc_engine *e, bool *busy);
/* checkpoint_async.c: prepares the live snapshot of job's file (a store the host addresses in place, no
 * parameter offload): false when the state cannot be read off the training thread (the caller snapshots it
 * there). Chooses a full image or, where MemAvailable does not hold one, streaming through the slots. */
zinc_status zckpt_async_prepare(struct zinc_engine *e, zckpt_save_job *job, bool *live);
/* checkpoint_save.c: the layout of the file this rank writes (false: it writes none). */
bool zckpt_my_file(const struct zinc_engine *e, zckpt_file *f);
/* checkpoint_save.c: the header, the sections and the zeros between them through writer w (the synchronous
 * save, and the snapshot of a store the writer thread cannot read). */
zinc_status zckpt_write_sections(struct zinc_engine *e, zckpt_writer *w, int fd, const char *path, const zckpt_file *f);
/* Reads a written file back for its block and whole-file checksums. */
zinc_status zckpt_checksum_file(int fd, const char *path, zckpt_file *f);

/* checkpoint_retain.c: under the directory's lock, keeps the newest `keep` step<N> checkpoints of dir. */
zinc_status zckpt_retain(const char *dir, int keep);
/* The same, with the directory's lock already held (the decoupled save's publisher thread). */
zinc_status zckpt_retain_locked(const char *dir, int keep);

/* ---------------------------------------------------------------- checkpoint_manifest.c */

/* The layout of a shard file over [lo, hi), with the params section when with_params. */
void zckpt_layout(zckpt_file *f, int rank, int64_t lo, int64_t hi, bool with_params, zinc_dtype param_dtype);
/* The 4 KiB header of a shard file. */
void zckpt_header_encode(const zckpt_file *f, const char *uid, uint8_t *hdr);
zinc_status zckpt_header_check(const zckpt_manifest *m, const zckpt_file *f, const char *path, const uint8_t *hdr);
/* The manifest of engine e's checkpoint `tag` with the given files (checksums filled in). */
json_t *zckpt_manifest_build(const struct zinc_engine *e, const char *tag, const char *uid, const zckpt_file *files,
                             int nfiles);
/* Reads and validates tagdir/manifest.json: its seal, every field's type and range, and the consistency
 * of the fields with each other (checkpoint_validate.c). */
zinc_status zckpt_manifest_read(const char *tagdir, zckpt_manifest *m);
/* The same on a manifest's text; `path` names it in messages. */
zinc_status zckpt_manifest_parse(const char *path, const char *text, size_t len, zckpt_manifest *m);

/* ---------------------------------------------------------------- checkpoint_safe.c */

/* A directory zinc writes into: exists, owned by this user or root, not writable by every user unless
 * sticky, writable by us. `what` names it in the message. */
zinc_status zckpt_check_dir(const char *path, const char *what);
/* Creates path exclusively (O_EXCL | O_NOFOLLOW), first removing a stale file or link of that name. */
zinc_status zckpt_create_excl(const char *path, int flags, int *fd);
/* Takes dir's lock file (flock, non-blocking): a second saver fails with a message naming the first. */
zinc_status zckpt_lock_dir(const char *dir, int *fd);
void zckpt_unlock_dir(int fd);
/* Under the lock: restores a `.TAG.old` whose TAG is missing, removes stale `.TAG.partial`, `.TAG.removing`
 * and `*.tmp`. */
zinc_status zckpt_clean_stale(const char *dir);

/* ---------------------------------------------------------------- checkpoint_validate.c */

/* The manifest's text: a first line `{"manifest_crc32c": "XXXXXXXX",` holding the CRC-32C of everything
 * after it, then the JSON object's members (malloc'd; NULL when out of memory). */
char *zckpt_manifest_seal(const json_t *root);
zinc_status zckpt_manifest_check_seal(const char *path, const char *text, size_t len);
/* Every field in range and consistent with the others (the layout zinc's save would write). */
zinc_status zckpt_manifest_validate(const char *path, const zckpt_manifest *m);
void zckpt_manifest_free(zckpt_manifest *m);
/* Whether the manifest's parameter table is this engine's; the error names the first difference. */
zinc_status zckpt_manifest_match(const zckpt_manifest *m, const struct zinc_engine *e);

/* ---------------------------------------------------------------- checkpoint_meta.c */

/* The manifest's optional "meta" object: at most ZINC_META_MAX valid keys with integer values. */
zinc_status zckpt_meta_validate(const char *path, const json_t *root);

/* ---------------------------------------------------------------- checkpoint_agree.c */

/* Collective: makes every rank use rank 0's string (a tag or path, at most ZCKPT_PATH_MAX - 1 bytes),
 * applying checkpoint.tag_validation (Warn, Ignore, Fail) when they differ. `what` names it in messages. */
zinc_status zckpt_agree_string(struct zinc_engine *e, const char *mine, char *out, size_t cap, const char *what);
/* Whether this rank creates directories and writes the manifest and `latest`: rank 0, or the first rank
 * of every node with checkpoint.use_node_local_storage. */
bool zckpt_is_dir_writer(const struct zinc_engine *e);

#endif
