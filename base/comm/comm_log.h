/* The communication logger (DeepSpeed's "comms_logger"): per collective and message size, the count, the
 * latency from issue to completion, and the algorithmic and bus bandwidth as nccl-tests defines them
 * (doc/PERFORMANCE.md). The collective wrappers of comm.h are its only callers, so every backend (MPI,
 * single, NCCL, staged) is counted in one place; a communicator without a logger (zcomm.log NULL, the
 * default) pays one pointer test per call.
 *
 * Message size S, per op, as nccl-tests counts it (bytes): all_reduce the buffer; reduce_scatter and
 * all_gather the whole array (the sum of every rank's piece); all_gather_object the gathered output
 * (bytes x ranks); broadcast the buffer; barrier 0. algbw = S / t; busbw = algbw x 2(n-1)/n (all_reduce),
 * (n-1)/n (reduce_scatter, all_gather, all_gather_object), 1 (broadcast), 0 (barrier).
 *
 * Non-blocking collectives are timed from issue to their zcomm_wait (on NCCL, to the host's synchronisation
 * with the collective's event, which logging adds, as DeepSpeed's logger synchronises every logged op).
 * A collective issued inside another (the staged backend's rounds on the host communicator) is part of the
 * outer one and not counted again. Called only from the thread that issues collectives (MPI_THREAD_FUNNELED). */
#ifndef ZINC_RUNTIME_COMM_LOG_H
#define ZINC_RUNTIME_COMM_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/core/log.h"
#include "zinc.h"

typedef enum {
    ZCOMM_OP_ALL_REDUCE = 0,
    ZCOMM_OP_REDUCE_SCATTER,
    ZCOMM_OP_ALL_GATHER,
    ZCOMM_OP_ALL_GATHER_OBJECT, /* zcomm_allgather_bytes: the ranks' small records (statistics, agreement) */
    ZCOMM_OP_BROADCAST,
    ZCOMM_OP_BARRIER,
    ZCOMM_OP_SEND_RECV,  /* zcomm_sendrecv: both directions counted (zinc.deterministic_reduction's tree) */
    ZCOMM_OP_ALL_TO_ALL, /* zcomm_alltoallv_bytes: the bytes this rank sends (ZeRO++ qgZ), DeepSpeed's name */
    ZCOMM_OP_COUNT
} zcomm_op_kind;

/* DeepSpeed's name of the op ("all_reduce", ...). */
const char *zcomm_op_name(zcomm_op_kind op);
/* The op of a name (exact), or -1. */
int zcomm_op_from_name(const char *name);
/* nccl-tests' bandwidths in GB/s (1e9 bytes/s) of one op moving `bytes` (S above) in `seconds` over
 * `world` ranks; both 0 when seconds <= 0. */
void zcomm_op_bandwidth(zcomm_op_kind op, double bytes, double seconds, int world, double *algbw, double *busbw);

typedef struct zcomm_log_settings {
    bool verbose;      /* one INFO line per completed op (DeepSpeed's verbose) */
    bool prof_all;     /* count every op; else only those in prof_ops */
    bool debug;        /* the caller's function name joins the op name: "all_gather | [Caller Func: f]" */
    unsigned prof_ops; /* (1 << zcomm_op_kind) of the ops counted when !prof_all */
} zcomm_log_settings;

typedef struct zcomm_log zcomm_log;
typedef struct zcomm_req zcomm_req;

zinc_status zcomm_log_create(const zcomm_log_settings *s, const zlog *log, int world, zcomm_log **out);
void zcomm_log_destroy(zcomm_log *l);

/* The wrappers' hooks (comm.h). begin: before the backend call; returns whether this call is recorded
 * (outermost and selected), and its start time. end: after it, always paired with begin; a recorded
 * non-blocking call (req non-NULL) is completed by zcomm_log_waited, any other now. */
bool zcomm_log_begin(zcomm_log *l, zcomm_op_kind op, double *t0);
void zcomm_log_end(zcomm_log *l, bool recorded, zcomm_op_kind op, size_t bytes, const char *caller, double t0,
                   const zcomm_req *req, zinc_status st);
/* A wait on req begins (taking req's record, if it has one, into *p: the backend frees req) and ended
 * (recording *p). The staged backend's inner collectives run inside it and are not counted. */
typedef struct zcomm_log_pending {
    const zcomm_req *req; /* NULL: nothing to record */
    zcomm_op_kind op;
    const char *caller;
    size_t bytes;
    double t0;
} zcomm_log_pending;
void zcomm_log_wait_begin(zcomm_log *l, const zcomm_req *req, zcomm_log_pending *p);
void zcomm_log_wait_end(zcomm_log *l, const zcomm_log_pending *p, zinc_status st);
/* Completes a recorded non-blocking call outside zcomm_wait (NCCL's zcomm_nccl_wait_stream). */
void zcomm_log_waited(zcomm_log *l, const zcomm_req *req);

/* One row of the summary: an op (with its caller under debug) and message size. */
typedef struct zcomm_log_row {
    char name[96];
    zcomm_op_kind op;
    uint64_t msg_bytes, count;
    double total_s, min_s, max_s;
    double algbw, busbw; /* GB/s over the row: msg_bytes * count / total_s, times the op's factor */
} zcomm_log_row;

/* The rows recorded so far, by name then size; fills up to max, returns how many there are. */
size_t zcomm_log_rows(const zcomm_log *l, zcomm_log_row *out, size_t max);
/* The summary table through the log (INFO), DeepSpeed's log_summary columns; `when` heads it. */
void zcomm_log_print(const zcomm_log *l, const char *when);
bool zcomm_log_verbose(const zcomm_log *l);

#endif
