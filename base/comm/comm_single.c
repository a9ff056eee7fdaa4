/* The one-rank collective backend ("single"): no MPI. Reductions over one rank are the identity, so
 * allreduce, allgatherv_inplace and bcast do nothing, reduce_scatterv and allgather_bytes copy. Every
 * call completes at once: a non-NULL req pointer receives NULL (zcomm_wait accepts it). */
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/core/error.h"

static zinc_status check_dtype(const char *what, zinc_dtype t) {
    if (t != ZINC_FP32 && t != ZINC_FP16 && t != ZINC_BF16)
        return ZERR(ZINC_ERR_INVALID_ARG, "single: %s: unknown dtype %d", what, (int)t);
    return ZINC_OK;
}

static zinc_status s_allreduce(zcomm *c, void *buf, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req) {
    (void)c;
    if (req) *req = NULL;
    zinc_status st = check_dtype("allreduce", t);
    if (st != ZINC_OK) return st;
    if (op != ZCOMM_SUM && op != ZCOMM_MAX)
        return ZERR(ZINC_ERR_INVALID_ARG, "single: allreduce: unknown op %d", (int)op);
    if (n && !buf) return ZERR(ZINC_ERR_INVALID_ARG, "single: allreduce: buf is NULL with %zu elements", n);
    return ZINC_OK;
}

static zinc_status s_reduce_scatterv(zcomm *c, const void *send, void *recv, const size_t *counts, zinc_dtype t,
                                     zcomm_req **req) {
    (void)c;
    if (req) *req = NULL;
    zinc_status st = check_dtype("reduce_scatterv", t);
    if (st != ZINC_OK) return st;
    if (!counts) return ZERR(ZINC_ERR_INVALID_ARG, "single: reduce_scatterv: counts is NULL");
    size_t bytes = counts[0] * zinc_dtype_size(t);
    if (!bytes) return ZINC_OK;
    if (!send || !recv)
        return ZERR(ZINC_ERR_INVALID_ARG, "single: reduce_scatterv: NULL buffer with %zu elements", counts[0]);
    if (send != recv) memmove(recv, send, bytes);
    return ZINC_OK;
}

static zinc_status s_allgatherv_inplace(zcomm *c, void *buf, const size_t *counts, const size_t *displs, zinc_dtype t,
                                        zcomm_req **req) {
    (void)c;
    if (req) *req = NULL;
    zinc_status st = check_dtype("allgatherv_inplace", t);
    if (st != ZINC_OK) return st;
    if (!counts || !displs) return ZERR(ZINC_ERR_INVALID_ARG, "single: allgatherv_inplace: counts or displs is NULL");
    if (counts[0] && !buf) return ZERR(ZINC_ERR_INVALID_ARG, "single: allgatherv_inplace: buf is NULL");
    return ZINC_OK;
}

static zinc_status s_allgather_bytes(zcomm *c, const void *in, void *out, size_t bytes) {
    (void)c;
    if (!bytes) return ZINC_OK;
    if (!in || !out) return ZERR(ZINC_ERR_INVALID_ARG, "single: allgather_bytes: NULL buffer (%zu bytes)", bytes);
    if (in != out) memmove(out, in, bytes);
    return ZINC_OK;
}

static zinc_status s_bcast(zcomm *c, void *buf, size_t bytes, int root) {
    (void)c;
    if (root != 0) return ZERR(ZINC_ERR_INVALID_ARG, "single: bcast: root %d is not a rank (world size 1)", root);
    if (bytes && !buf) return ZERR(ZINC_ERR_INVALID_ARG, "single: bcast: buf is NULL (%zu bytes)", bytes);
    return ZINC_OK;
}

static zinc_status s_barrier(zcomm *c) {
    (void)c;
    return ZINC_OK;
}

static zinc_status s_wait(zcomm *c, zcomm_req *req) {
    (void)c;
    (void)req; /* never handed out: every call completes at once */
    return ZINC_OK;
}

static void s_destroy(zcomm *c) { free(c); }

/* The only peer is this rank: its piece is copied. */
static zinc_status s_alltoallv_bytes(zcomm *c, const void *send, const size_t *scounts, const size_t *sdispls,
                                     void *recv, const size_t *rcounts, const size_t *rdispls) {
    (void)c;
    if (scounts[0] != rcounts[0])
        return ZERR(ZINC_ERR_INVALID_ARG, "single: all-to-all: %zu bytes sent to rank 0, %zu received", scounts[0],
                    rcounts[0]);
    if (scounts[0]) memmove((char *)recv + rdispls[0], (const char *)send + sdispls[0], scounts[0]);
    return ZINC_OK;
}

/* The only peer is this rank: a send to itself is the receive. */
static zinc_status s_sendrecv(zcomm *c, const void *send, size_t nsend, int dest, void *recv, size_t nrecv, int src,
                              zinc_dtype t) {
    (void)c;
    if (dest < -1 || dest > 0 || src < -1 || src > 0)
        return ZERR(ZINC_ERR_INVALID_ARG, "single: sendrecv: peer %d / %d is not a rank (world size 1)", dest, src);
    if ((dest == 0) != (src == 0) || (dest == 0 && nsend != nrecv))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "single: sendrecv: a send to rank 0 needs the matching receive (%zu sent, %zu received)",
                    dest == 0 ? nsend : 0, src == 0 ? nrecv : 0);
    if (dest < 0 || !nsend) return ZINC_OK;
    if (!send || !recv) return ZERR(ZINC_ERR_INVALID_ARG, "single: sendrecv: NULL buffer (%zu elements)", nsend);
    if (send != recv) memmove(recv, send, nsend * zinc_dtype_size(t));
    return ZINC_OK;
}

static const zcomm_ops single_ops = {
    .name = "single",
    .allreduce = s_allreduce,
    .reduce_scatterv = s_reduce_scatterv,
    .allgatherv_inplace = s_allgatherv_inplace,
    .allgather_bytes = s_allgather_bytes,
    .bcast = s_bcast,
    .barrier = s_barrier,
    .sendrecv = s_sendrecv,
    .alltoallv_bytes = s_alltoallv_bytes,
    .wait = s_wait,
    .destroy = s_destroy,
};

zinc_status zcomm_create_single(zcomm **out) {
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create_single: out is NULL");
    *out = NULL;
    zcomm *c = calloc(1, sizeof *c);
    if (!c) return ZERR(ZINC_ERR_NOMEM, "out of memory allocating %zu bytes for the single communicator", sizeof *c);
    c->ops = &single_ops;
    c->rank = 0;
    c->size = 1;
    c->local_rank = 0;
    c->local_size = 1;
    c->impl = NULL;
    *out = c;
    return ZINC_OK;
}
