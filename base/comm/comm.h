/* Collective backends. The engine sees one small table; `mpi` serves host buffers (GPU buffers reach it
 * staged through pinned host memory by base/device/comm_staged.c), `single` is the one-rank path that needs no launcher, and
 * `nccl` serves GPU buffers with one rank per GPU.
 *
 * Reductions are sums (or max for flags). Half-precision sums over MPI use a user-defined MPI op that
 * adds in fp32 and rounds once per element. Counts are in elements and may exceed INT_MAX (the MPI
 * backend splits or uses derived datatypes). Results are deterministic for a fixed rank count. */
#ifndef ZINC_RUNTIME_COMM_H
#define ZINC_RUNTIME_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "base/core/error.h"
#include "base/core/log.h"
#include "base/comm/comm_log.h"
#include "base/comm/watchdog.h"
#include "zinc.h"

typedef struct zcomm zcomm;
typedef struct zcomm_req zcomm_req; /* a pending non-blocking collective; finish it with zcomm_wait */

typedef enum { ZCOMM_SUM = 0, ZCOMM_MAX = 1 } zcomm_op;

typedef struct zcomm_ops {
    const char *name;
    /* All-reduce in place over n elements. */
    zinc_status (*allreduce)(zcomm *c, void *buf, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req);
    /* Variable-count reduce-scatter (sum): `send` holds sum(counts) elements laid out rank by rank; rank r
     * receives counts[r] elements into `recv`. Counts may be 0. recv must not alias send. */
    zinc_status (*reduce_scatterv)(zcomm *c, const void *send, void *recv, const size_t *counts, zinc_dtype t,
                                   zcomm_req **req);
    /* In-place variable-count all-gather: `buf` holds sum(counts) elements; rank r's counts[r] elements
     * already sit at offset displs[r]; afterwards every rank holds all of them. */
    zinc_status (*allgatherv_inplace)(zcomm *c, void *buf, const size_t *counts, const size_t *displs, zinc_dtype t,
                                      zcomm_req **req);
    /* Gathers `bytes` from every rank into out (size * bytes), rank order; blocking. */
    zinc_status (*allgather_bytes)(zcomm *c, const void *in, void *out, size_t bytes);
    zinc_status (*bcast)(zcomm *c, void *buf, size_t bytes, int root);
    zinc_status (*barrier)(zcomm *c);
    /* Point to point, blocking: sends nsend elements to rank `dest` while receiving nrecv elements from rank
     * `src` (MPI_Sendrecv). dest or src -1: that side does nothing. NULL in a backend that has none (nccl):
     * zcomm_sendrecv then fails naming the backend. Used by the fixed-tree reduction of
     * zinc.deterministic_reduction (zero/grads_determ.c), whose partners are known on both sides. */
    zinc_status (*sendrecv)(zcomm *c, const void *send, size_t nsend, int dest, void *recv, size_t nrecv, int src,
                            zinc_dtype t);
    /* Variable all-to-all of bytes, blocking (MPI_Alltoallv): rank r's send[sdispls[d], +scounts[d]) goes to
     * rank d, landing in d's recv at rdispls[r], rcounts[r] bytes (each count under 2^31). NULL in a backend
     * that has none (nccl, staged): zcomm_alltoallv_bytes then fails naming the backend. ZeRO++'s qgZ
     * (zero/grads_qgz.c) exchanges its quantized gradient pieces with it. */
    zinc_status (*alltoallv_bytes)(zcomm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                                   const size_t *rcounts, const size_t *rdispls);
    /* Collective over this communicator: a new communicator of the ranks that pass the same color, ranked by
     * key (MPI_Comm_split), with its own local_rank / local_size (the ranks of it that share a node). NULL in
     * a backend that has none (nccl, staged): zcomm_split then fails naming the backend. Used by ZeRO++'s hpZ
     * (zero/zeropp.c) for its secondary groups. */
    zinc_status (*split)(zcomm *c, int color, int key, zcomm **out);
    /* Completes a request returned by a non-blocking call (req pointers passed as non-NULL) and frees it. */
    zinc_status (*wait)(zcomm *c, zcomm_req *req);
    void (*destroy)(zcomm *c);
} zcomm_ops;

struct zcomm {
    const zcomm_ops *ops;
    int rank, size;
    int local_rank, local_size; /* ranks on this node */
    void *impl;
    zcomm_log *log; /* the communication logger (comm_log.h), set by the engine; NULL: not logging */
};

/* Picks the backend: MPI when started by a launcher (mpirun, srun: OMPI_/PMI_/PMIX_/SLURM_ variables) or
 * when MPI is already initialised, else the single-rank path without touching MPI. MPI is initialised
 * (MPI_THREAD_FUNNELED) if needed and finalised at process exit by zinc_finalize or atexit. */
zinc_status zcomm_create(const zlog *log, zcomm **out);
zinc_status zcomm_create_single(zcomm **out);
zinc_status zcomm_create_mpi(const zlog *log, zcomm **out);

/* Convenience wrappers: a NULL req pointer means blocking. Blocking calls and waits of a communicator
 * with more than one rank run under the collective watchdog (watchdog.h). Each call is the one place where
 * the communication logger (comm_log.h) sees it; the macros of the same names pass the caller's function
 * name, which comms_logger.debug shows (DeepSpeed's "Caller Func"). */
#define ZCOMM_DISPATCH(c, req, opk, bytes, caller, what, call)                                                         \
    do {                                                                                                               \
        bool w_ = !(req) && (c)->size > 1;                                                                             \
        zcomm_log *l_ = (c)->log;                                                                                      \
        double t0_ = 0;                                                                                                \
        bool rec_ = l_ && zcomm_log_begin(l_, (opk), &t0_);                                                            \
        if (w_) zwatch_arm(what);                                                                                      \
        zinc_status s_ = (call);                                                                                       \
        if (w_) zwatch_disarm();                                                                                       \
        if (l_)                                                                                                        \
            zcomm_log_end(l_, rec_, (opk), rec_ ? (bytes) : 0, (caller), t0_,                                          \
                          s_ == ZINC_OK && (req) ? *(zcomm_req **)(req) : NULL, s_);                                   \
        return s_;                                                                                                     \
    } while (0)
static inline size_t zcomm_sum_counts_(const zcomm *c, const size_t *counts) {
    size_t n = 0;
    for (int r = 0; r < c->size; r++) n += counts[r];
    return n;
}
static inline zinc_status zcomm_allreduce_from(zcomm *c, const char *caller, void *buf, size_t n, zinc_dtype t,
                                               zcomm_op op, zcomm_req **req) {
    ZCOMM_DISPATCH(c, req, ZCOMM_OP_ALL_REDUCE, n * zinc_dtype_size(t), caller, "allreduce",
                   c->ops->allreduce(c, buf, n, t, op, req));
}
static inline zinc_status zcomm_reduce_scatterv_from(zcomm *c, const char *caller, const void *send, void *recv,
                                                     const size_t *counts, zinc_dtype t, zcomm_req **req) {
    ZCOMM_DISPATCH(c, req, ZCOMM_OP_REDUCE_SCATTER, zcomm_sum_counts_(c, counts) * zinc_dtype_size(t), caller,
                   "reduce-scatter", c->ops->reduce_scatterv(c, send, recv, counts, t, req));
}
static inline zinc_status zcomm_allgatherv_inplace_from(zcomm *c, const char *caller, void *buf, const size_t *counts,
                                                        const size_t *displs, zinc_dtype t, zcomm_req **req) {
    ZCOMM_DISPATCH(c, req, ZCOMM_OP_ALL_GATHER, zcomm_sum_counts_(c, counts) * zinc_dtype_size(t), caller, "all-gather",
                   c->ops->allgatherv_inplace(c, buf, counts, displs, t, req));
}
static inline zinc_status zcomm_allgather_bytes_from(zcomm *c, const char *caller, const void *in, void *out,
                                                     size_t bytes) {
    zcomm_req **none = NULL;
    ZCOMM_DISPATCH(c, none, ZCOMM_OP_ALL_GATHER_OBJECT, bytes * (size_t)c->size, caller, "all-gather (bytes)",
                   c->ops->allgather_bytes(c, in, out, bytes));
}
static inline zinc_status zcomm_bcast_from(zcomm *c, const char *caller, void *buf, size_t bytes, int root) {
    zcomm_req **none = NULL;
    ZCOMM_DISPATCH(c, none, ZCOMM_OP_BROADCAST, bytes, caller, "broadcast", c->ops->bcast(c, buf, bytes, root));
}
static inline zinc_status zcomm_barrier_from(zcomm *c, const char *caller) {
    zcomm_req **none = NULL;
    ZCOMM_DISPATCH(c, none, ZCOMM_OP_BARRIER, 0, caller, "barrier", c->ops->barrier(c));
}
static inline zinc_status zcomm_sendrecv_from(zcomm *c, const char *caller, const void *send, size_t nsend, int dest,
                                              void *recv, size_t nrecv, int src, zinc_dtype t) {
    zcomm_req **none = NULL;
    if (!c->ops->sendrecv)
        return ZERR(ZINC_ERR_UNSUPPORTED, "the %s collective backend has no point-to-point send/receive", c->ops->name);
    ZCOMM_DISPATCH(c, none, ZCOMM_OP_SEND_RECV, (nsend + nrecv) * zinc_dtype_size(t), caller, "send/receive",
                   c->ops->sendrecv(c, send, nsend, dest, recv, nrecv, src, t));
}
/* Splits c (see zcomm_ops.split); the new communicator logs to c's logger. */
static inline zinc_status zcomm_split(zcomm *c, int color, int key, zcomm **out) {
    if (!c->ops->split)
        return ZERR(ZINC_ERR_UNSUPPORTED, "the %s collective backend cannot split into groups of ranks", c->ops->name);
    zinc_status st = c->ops->split(c, color, key, out);
    if (st == ZINC_OK) (*out)->log = c->log;
    return st;
}
static inline zinc_status zcomm_alltoallv_bytes_from(zcomm *c, const char *caller, const void *send,
                                                     const size_t *scounts, const size_t *sdispls, void *recv,
                                                     const size_t *rcounts, const size_t *rdispls) {
    zcomm_req **none = NULL;
    if (!c->ops->alltoallv_bytes)
        return ZERR(ZINC_ERR_UNSUPPORTED, "the %s collective backend has no all-to-all", c->ops->name);
    ZCOMM_DISPATCH(c, none, ZCOMM_OP_ALL_TO_ALL, zcomm_sum_counts_(c, scounts), caller, "all-to-all",
                   c->ops->alltoallv_bytes(c, send, scounts, sdispls, recv, rcounts, rdispls));
}
#define zcomm_alltoallv_bytes(c, ...) zcomm_alltoallv_bytes_from((c), __func__, __VA_ARGS__)
#define zcomm_allreduce(c, ...) zcomm_allreduce_from((c), __func__, __VA_ARGS__)
#define zcomm_reduce_scatterv(c, ...) zcomm_reduce_scatterv_from((c), __func__, __VA_ARGS__)
#define zcomm_allgatherv_inplace(c, ...) zcomm_allgatherv_inplace_from((c), __func__, __VA_ARGS__)
#define zcomm_allgather_bytes(c, ...) zcomm_allgather_bytes_from((c), __func__, __VA_ARGS__)
#define zcomm_bcast(c, ...) zcomm_bcast_from((c), __func__, __VA_ARGS__)
#define zcomm_barrier(c) zcomm_barrier_from((c), __func__)
#define zcomm_sendrecv(c, ...) zcomm_sendrecv_from((c), __func__, __VA_ARGS__)
static inline zinc_status zcomm_wait(zcomm *c, zcomm_req *req) {
    if (!req) return ZINC_OK;
    bool w_ = c->size > 1;
    zcomm_log_pending p_;
    if (c->log) zcomm_log_wait_begin(c->log, req, &p_);
    if (w_) zwatch_arm("wait");
    zinc_status s_ = c->ops->wait(c, req);
    if (w_) zwatch_disarm();
    if (c->log) zcomm_log_wait_end(c->log, &p_, s_);
    return s_;
}
static inline void zcomm_destroy(zcomm *c) {
    if (c) c->ops->destroy(c);
}

/* comm_agree.c. Collective: combines every rank's status. When some rank failed, every rank returns the
 * lowest failing rank's status and message (a rank that failed itself keeps its own message). */
zinc_status zcomm_agree_status(zcomm *c, zinc_status mine);

#endif
