/* File IO for the NVMe optimizer-state store: io_uring with registered files and buffers, O_DIRECT at
 * the alignment the file system reports, and a fault-injection point for tests.
 *
 * A request (zaio_req) reads or writes one contiguous range of one file. It is cut into pieces of at
 * most aio.block_size bytes and at least aio.intra_op_parallelism pieces (each a multiple of the file's
 * alignment); at most aio.queue_depth x aio.intra_op_parallelism pieces are in flight per context.
 * Short reads and writes are continued where they stopped, EAGAIN/EINTR are retried (64 times per
 * piece), and any other error ends the request with an error that names the file, the offset and the
 * length of the failing piece. aio.single_submit submits each piece on its own; aio.overlap_events
 * false waits for every piece in flight before submitting more (DeepSpeed's "sequential" mode).
 *
 * Where io_uring cannot be set up (kernel.io_uring_disabled, a container seccomp profile) the context
 * falls back to synchronous pread/pwrite with the same piece, retry and error handling; zaio_backend
 * says which. Single-threaded: one context belongs to one thread. */
#ifndef ZINC_OFFLOAD_AIO_H
#define ZINC_OFFLOAD_AIO_H

#include <stdbool.h>
#include <stdint.h>

#include "zinc.h"

typedef enum { ZAIO_READ = 1, ZAIO_WRITE = 2 } zaio_op;

typedef struct zaio_params {
    int64_t block_size;       /* bytes per piece at most (aio.block_size) */
    int queue_depth;          /* aio.queue_depth */
    int intra_op_parallelism; /* aio.intra_op_parallelism */
    bool single_submit, overlap_events;
} zaio_params;

typedef struct zaio zaio;

typedef struct zaio_file {
    int fd;
    char *path;
    bool direct;              /* opened with O_DIRECT */
    uint32_t align;           /* offsets, lengths and buffer addresses are multiples of this */
    const char *align_source; /* how the alignment was found: "statx STATX_DIOALIGN", "BLKSSZGET", ... */
    char why_buffered[256];   /* when !direct: why O_DIRECT was not used */
} zaio_file;

typedef struct zaio_req {
    /* set by the caller */
    zaio_op op;
    int file;         /* from zaio_open */
    void *buf;        /* aligned to the file's alignment */
    int buf_index;    /* index in the buffers given to zaio_register, or -1 */
    int64_t off, len; /* multiples of the file's alignment on O_DIRECT files */
    char what[96];    /* names the data in messages, e.g. "chunk 3 of exp_avg" */
    /* private to aio.c */
    int64_t carved, done;
    int inflight;
    int err; /* first error: errno, or -1 for an unexpected end of file */
    int64_t err_off, err_len;
    bool busy;
    struct zaio_req *next;
    int64_t trace_t0; /* --trace: when it was submitted (0: not traced), on lane trace_lane */
    int trace_lane;
} zaio_req;

typedef struct zaio_stats {
    uint64_t bytes_read, bytes_written;
    uint64_t pieces;          /* submitted (retries included) */
    uint64_t short_resubmits; /* pieces continued after a short transfer */
    uint64_t again_retries;   /* pieces retried after EAGAIN/EINTR */
} zaio_stats;

zinc_status zaio_create(const zaio_params *p, zaio **out);
void zaio_destroy(zaio *a);
/* "io_uring" or "pread/pwrite (io_uring unavailable: ...)". */
const char *zaio_backend(const zaio *a);

/* Creates (or truncates) `path` with mode 0600 and opens it for reading and writing with O_DIRECT. Where
 * the file system refuses O_DIRECT (tmpfs, overlay, some network file systems) this fails with
 * ZINC_ERR_IO naming the path, unless allow_buffered: then the file is opened without O_DIRECT and
 * zaio_file.why_buffered says why (the caller warns). The alignment is found with statx
 * STATX_DIOALIGN where the kernel reports it, else the device's logical block size (BLKSSZGET or sysfs),
 * else st_blksize; never below 512. *out is the file's number for requests. */
zinc_status zaio_open(zaio *a, const char *path, bool allow_buffered, int *out);
/* Takes a copy (dup) of an open, empty file (one the caller created under its own rules, e.g. the safe
 * writer's temporary file) into the context and turns O_DIRECT on where the file system allows it (probing
 * with one write at offset 0, truncated again); where it does not, the file stays buffered and why_buffered
 * says why. Never fails for a refused O_DIRECT. */
zinc_status zaio_adopt(zaio *a, int fd, const char *path, int *out);
/* Turns O_DIRECT on or off on an open file (e.g. off, to read back unaligned ranges). */
zinc_status zaio_set_direct(zaio *a, int file, bool direct);
const zaio_file *zaio_file_info(const zaio *a, int file);
/* Sets the file's size with fallocate (so a full disk shows at start-up), or ftruncate where the file
 * system cannot preallocate. */
zinc_status zaio_preallocate(zaio *a, int file, int64_t bytes);

/* Registers the open files and `n` buffers with the ring. Registration that the kernel refuses
 * (RLIMIT_MEMLOCK, old kernels) is not an error: *bufs_registered says whether requests may use
 * buf_index, and *why (if not NULL) explains a refusal. Call once, after opening the files. */
zinc_status zaio_register(zaio *a, void *const *bufs, const size_t *lens, int n, bool *bufs_registered, char *why,
                          size_t why_cap);

/* Queues a request and submits what fits. The request must stay alive and untouched until it is
 * complete (zaio_req_done) or waited for. */
zinc_status zaio_submit(zaio *a, zaio_req *r);
/* Submits and reaps until r is complete; returns its outcome (ZINC_ERR_IO naming file, offset and
 * length on failure). */
zinc_status zaio_wait(zaio *a, zaio_req *r);
/* Submits and reaps until r is complete, without judging its outcome (fails only if the ring fails). */
zinc_status zaio_complete(zaio *a, zaio_req *r);
/* The outcome of a complete request, without recording an error message (true: it succeeded). */
bool zaio_req_ok(const zaio_req *r);
/* Records the message for a failed, complete request and returns ZINC_ERR_IO. */
zinc_status zaio_req_error(const zaio *a, const zaio_req *r);
bool zaio_req_done(const zaio_req *r);
/* Submits and reaps what is ready without blocking. */
zinc_status zaio_poll(zaio *a);
/* Completes everything queued or in flight (outcomes stay in their requests). */
void zaio_drain(zaio *a);
void zaio_stats_get(const zaio *a, zaio_stats *out);

/* ---------------------------------------------------------------- fault injection (tests)
 * A process-wide fault that matching pieces hit instead of their real IO. Set it with zaio_fault_set
 * or, for a whole program, with the environment variable ZINC_AIO_FAULT read by zaio_create when no
 * fault was set through the API, e.g.
 *   ZINC_AIO_FAULT=write:EIO:skip=3:count=1     the 4th written piece fails with EIO
 *   ZINC_AIO_FAULT=read:short                   every read comes back short (and is continued)
 *   ZINC_AIO_FAULT=any:ENOSPC:path=exp_avg      IO on files whose path contains "exp_avg" fails
 *   ZINC_AIO_FAULT=read:EIO:what=prefetch       reads described "... (prefetch)" fail (the stores' prefetches)
 *   ZINC_AIO_FAULT=refuse_direct                open() refuses O_DIRECT with EINVAL
 *   ZINC_AIO_FAULT=no_uring                     io_uring set-up fails (the pread/pwrite fallback)
 * Tokens: read|write|any, an errno name (EIO, ENOSPC, EAGAIN, EINTR, EINVAL, EBADF, EFBIG, EROFS,
 * EDQUOT, ENOMEM, ENXIO, EFAULT) or number, short, refuse_direct, no_uring, skip=N, count=N,
 * offset=N (pieces containing that byte offset), path=SUBSTRING, what=SUBSTRING (requests whose zaio_req.what,
 * the description their error message gives, contains it); separated by ':' or ','. */
typedef struct zaio_fault {
    int op;             /* ZAIO_READ, ZAIO_WRITE, or 0 for both */
    int err;            /* errno the piece completes with instead of doing its IO (0: none) */
    bool short_io;      /* the piece transfers about half its bytes (and is continued) */
    bool refuse_direct; /* zaio_open: O_DIRECT opens fail with EINVAL */
    bool no_uring;      /* zaio_create: io_uring set-up fails with ENOSYS */
    int64_t skip;       /* matching pieces let through before the first fault */
    int64_t count;      /* faults injected at most (0: no limit) */
    int64_t offset;     /* only pieces whose range contains this file offset (-1: any) */
    char path[128];     /* only files whose path contains this ("": any) */
    char what[64];      /* only requests whose what contains this ("": any) */
} zaio_fault;

/* A fault that matches nothing yet (offset -1); fill in what to inject. */
zaio_fault zaio_fault_none(void);
/* Sets the fault (NULL clears it and the counters). Not thread-safe: tests call it between passes. */
void zaio_fault_set(const zaio_fault *f);
/* Parses a ZINC_AIO_FAULT string. */
zinc_status zaio_fault_parse(const char *spec, zaio_fault *out);
/* Faults injected since the last zaio_fault_set. */
int64_t zaio_fault_hits(void);
/* Pieces that matched the fault (op, path, what, offset) since the last zaio_fault_set, injected or let
 * through by skip: a test counts the pieces of a pass with skip=huge, then hits the last with skip=that-1. */
int64_t zaio_fault_seen(void);

#endif
