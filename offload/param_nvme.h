/* The NVMe parameter store (zero_optimization.offload_param.device "nvme", stage 3): this rank's
 * compute-dtype parameter shard in one file under nvme_path, read and written by element range (the
 * stage-3 gather reads a module's piece, the optimizer pass writes each chunk it updated). Random access,
 * unlike the optimizer-state store's ordered passes (offload/state.h), so it is a store of its own on the
 * same IO layer (offload/aio.c: io_uring, O_DIRECT, fault injection) and the same run directory. */
#ifndef ZINC_OFFLOAD_PARAM_NVME_H
#define ZINC_OFFLOAD_PARAM_NVME_H

#include <stdint.h>

#include "offload/state.h"

/* The file and buffers, stated once for the store and the sizing plan (runtime/mem/plan.c): the shard's
 * first `resident` elements in host memory (offload_param.max_in_cpu: DeepSpeed keeps that many elements
 * of each rank's parameter partition in CPU memory for good and swaps only the rest), the others' bytes in
 * blocks of `block` (each with a CRC32C), a swap buffer of at most buffer_size elements (whole blocks, at
 * least one), and a scratch of `scratch_elems` elements that the optimizer pass updates a chunk in before
 * it is written. */
typedef struct zstate_param_geometry {
    int64_t resident;        /* elements kept in memory: min(the resident asked for, n) */
    uint64_t resident_bytes; /* their host bytes */
    int64_t block;           /* bytes: the O_DIRECT alignment, at least 4096 */
    int64_t nblocks;         /* of the file */
    uint64_t file_bytes;
    uint64_t swap_bytes;    /* the IO buffer */
    uint64_t scratch_bytes; /* the step's chunk */
    int prefetch_buffers;   /* swap buffers of swap_bytes for reads in flight (offload_param.buffer_count) */
    uint64_t prefetch_bytes;
} zstate_param_geometry;
/* buffer_count: the prefetch's swap buffers (0: none, the gradient store); resident: elements kept in memory
 * (0: all in the file) */
zstate_param_geometry zstate_param_geometry_make(int64_t n, size_t esz, int64_t align, int64_t buffer_size,
                                                 int64_t scratch_elems, int buffer_count, int64_t resident);

typedef struct zstate_param_stats {
    uint64_t reads, writes;             /* requests */
    uint64_t bytes_read, bytes_written; /* file bytes (prefetched ones included) */
    uint64_t prefetched;                /* reads served by a prefetch */
    uint64_t bytes_in_memory;           /* bytes read and written in the resident part (no IO) */
    double wait_s;                      /* time spent in IO (waiting for a prefetch included) */
} zstate_param_stats;

typedef struct zstate_param zstate_param;

/* Collective over ctx->comm (every rank fails when one does). ctx->offload is offload_param. The store
 * holds n elements of dt, zeros until written: the first `resident` of them (at most n) in host memory
 * (counted as parameters, reads and writes of them a copy), the rest in the file. */
zinc_status zstate_param_create(const zstate_ctx *ctx, int64_t n, zinc_dtype dt, int64_t scratch_elems,
                                int64_t resident, zstate_param **out);
/* The same store under another file name of the rank's directory: ZSTATE_PARAM_FILE (what
 * zstate_param_create makes) or ZSTATE_GRAD_FILE, the stage-3 fp32 gradient shard between the reduce-
 * scatter and the optimizer (offload_param nvme; counted as ZINC_MEM_GRADS, its messages say "gradient"). */
#define ZSTATE_PARAM_FILE "params.swp"
/* The gradient store's prefetch buffers (its passes read piece i + 1 while piece i is used) */
#define ZSTATE_GRAD_PREFETCH_BUFFERS 2
#define ZSTATE_GRAD_FILE "grads.swp"
zinc_status zstate_param_create_as(const zstate_ctx *ctx, const char *file_name, int64_t n, zinc_dtype dt,
                                   int64_t scratch_elems, int64_t resident, zstate_param **out);
/* Every element reads as zero again, without IO (the blocks become never-written; the file keeps its
 * bytes). The gradient store's zeroing at each step. */
void zstate_param_forget(zstate_param *p);
void zstate_param_destroy(zstate_param *p);
/* Elements [lo, lo + n) of the shard into / from host memory. A block whose checksum does not match is
 * ZINC_ERR_CORRUPT, an IO error ZINC_ERR_IO (both naming the file and offset); a block whose write failed
 * stays unreadable until it is written whole again. */
zinc_status zstate_param_read(zstate_param *p, int64_t lo, int64_t n, void *dst);
/* Swap-in ahead of use: reads of elements [lo, lo + n) issued now on io_uring into free prefetch buffers
 * (geometry.prefetch_buffers, each swap_bytes), completed by the zstate_param_read of the same range,
 * which waits for them and checks them as it would its own reads. zstate_param_can_prefetch says whether
 * enough buffers are free (a range that needs more than there are never is); zstate_param_prefetch issues
 * nothing when they are not. A write or forget over a prefetched range drops the prefetch (its read is
 * completed and discarded), so a read never returns what the file held before a write. */
bool zstate_param_can_prefetch(const zstate_param *p, int64_t lo, int64_t n);
/* (A range wholly in the resident part needs no swap-in: it can always be "prefetched", is always
 * "prefetching", and its prefetch issues nothing.) */
zinc_status zstate_param_prefetch(zstate_param *p, int64_t lo, int64_t n);
/* Whether a prefetch of exactly [lo, lo + n) is held (in flight or arrived, not yet read). */
bool zstate_param_prefetching(const zstate_param *p, int64_t lo, int64_t n);
/* Submits what the ring has room for of the prefetches in flight, without waiting. */
zinc_status zstate_param_poll(zstate_param *p);
/* A write returns once it is submitted: its last piece is written behind, completed by the store's next
 * call or zstate_param_flush, whichever comes first, which returns its error (a read of the blocks never
 * sees them before the write completed). */
zinc_status zstate_param_write(zstate_param *p, int64_t lo, int64_t n, const void *src);
zinc_status zstate_param_flush(zstate_param *p);
/* The scratch (scratch_elems elements, host memory). */
void *zstate_param_scratch(zstate_param *p);
void zstate_param_stats_get(const zstate_param *p, zstate_param_stats *out);
const char *zstate_param_path(const zstate_param *p);

#endif
