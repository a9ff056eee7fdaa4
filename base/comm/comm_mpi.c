/* The MPI collective backend ("mpi"); see comm_mpi.h for how counts are split and how halves are summed.
 *
 * Requests: a non-blocking call (req pointer non-NULL) starts one or more MPI non-blocking collectives
 * (several when the count is split) and returns a zcomm_req holding their MPI_Requests plus the int
 * count/displacement arrays MPI reads until completion; zcomm_wait waits for all of them in issue order
 * and frees the request. A call with nothing to do (zero elements) sets *req to NULL. Several requests may
 * be pending at once; every rank must start collectives in the same order (MPI's rule).
 *
 * GPU buffers: this backend takes host pointers. Device buffers reach it through base/device/comm_staged.c, which
 * copies them through pinned host memory round by round. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/comm/comm_mpi.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/log.h"

static size_t g_max_count = ZCOMM_MPI_PIECE_DEFAULT;

void zcomm_mpi_set_max_count(size_t n) {
    g_max_count = n == 0 ? ZCOMM_MPI_PIECE_DEFAULT : n > (size_t)INT_MAX ? (size_t)INT_MAX : n;
}
size_t zcomm_mpi_max_count(void) { return g_max_count; }

typedef struct mpi_impl {
    MPI_Comm comm;
    MPI_Datatype half; /* 2 contiguous bytes: fp16 and bf16 elements */
    MPI_Op fp16_sum, bf16_sum, fp16_max, bf16_max;
    zlog log;
} mpi_impl;

/* A piece of a split non-blocking collective that starts when the one before it completes (in zcomm_wait),
 * so that MPI holds the temporaries of one piece at a time. */
typedef struct piece {
    int kind; /* PIECE_ALLREDUCE, PIECE_REDUCE, PIECE_BCAST */
    const void *send;
    void *buf;
    int cnt, root;
} piece;
enum { PIECE_ALLREDUCE, PIECE_REDUCE, PIECE_BCAST };

struct zcomm_req {
    MPI_Request *q;
    int n, cap;
    piece *later; /* pieces not started yet, in order */
    int nlater, next, later_cap;
    MPI_Datatype dt;
    MPI_Op op;
    int *ints; /* recvcounts / displs that MPI reads until the collective completes */
    const char *what;
    size_t count;
    int elems; /* count is in elements of dtype t (else bytes) */
    zinc_dtype t;
};

/* ---------------------------------------------------------------- half-precision reduction ops */

static void fp16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = zinc_f32_to_fp16(zinc_fp16_to_f32(a[i]) + zinc_fp16_to_f32(b[i]));
}

static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = zinc_f32_to_bf16(zinc_bf16_to_f32(a[i]) + zinc_bf16_to_f32(b[i]));
}

/* max keeping the bits of the larger input; NaN wins (an overflow flag must not be lost). */
static uint16_t max_bits(uint16_t a, uint16_t b, float fa, float fb) {
    if (fa != fa) return a;
    if (fb != fb) return b;
    return fa > fb ? a : b;
}

static void fp16_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = max_bits(a[i], b[i], zinc_fp16_to_f32(a[i]), zinc_fp16_to_f32(b[i]));
}

static void bf16_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = max_bits(a[i], b[i], zinc_bf16_to_f32(a[i]), zinc_bf16_to_f32(b[i]));
}

/* ---------------------------------------------------------------- helpers */

static mpi_impl *impl_of(zcomm *c) { return (mpi_impl *)c->impl; }

static zinc_status dtype_of(mpi_impl *im, const char *what, zinc_dtype t, MPI_Datatype *out) {
    switch (t) {
    case ZINC_FP32: *out = MPI_FLOAT; return ZINC_OK;
    case ZINC_FP16:
    case ZINC_BF16: *out = im->half; return ZINC_OK;
    }
    return ZERR(ZINC_ERR_INVALID_ARG, "mpi: %s: unknown dtype %d", what, (int)t);
}

static zinc_status op_of(mpi_impl *im, const char *what, zinc_dtype t, zcomm_op op, MPI_Op *out) {
    if (op != ZCOMM_SUM && op != ZCOMM_MAX) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: %s: unknown op %d", what, (int)op);
    switch (t) {
    case ZINC_FP32: *out = op == ZCOMM_SUM ? MPI_SUM : MPI_MAX; return ZINC_OK;
    case ZINC_FP16: *out = op == ZCOMM_SUM ? im->fp16_sum : im->fp16_max; return ZINC_OK;
    case ZINC_BF16: *out = op == ZCOMM_SUM ? im->bf16_sum : im->bf16_max; return ZINC_OK;
    }
    return ZERR(ZINC_ERR_INVALID_ARG, "mpi: %s: unknown dtype %d", what, (int)t);
}

/* One collective call in progress: what it is (for messages) and where its requests go. */
typedef struct call {
    zcomm *c;
    MPI_Comm comm;
    zcomm_req *r; /* non-blocking: MPI requests are collected here; NULL: blocking */
    const char *what;
    size_t count;
    int elems;
    zinc_dtype t;
} call;

static zinc_status mpi_fail(const call *k, int rc, const char *fn) {
    char msg[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error code %d", rc);
    if (k->elems)
        return ZERR(ZINC_ERR_COMM, "mpi: %s failed in %s of %zu %s elements (rank %d of %d): %s", fn, k->what, k->count,
                    zinc_dtype_name(k->t), k->c->rank, k->c->size, msg);
    return ZERR(ZINC_ERR_COMM, "mpi: %s failed in %s of %zu bytes (rank %d of %d): %s", fn, k->what, k->count,
                k->c->rank, k->c->size, msg);
}

#define MPI_CHECK(k, fn, expr)                                                                                         \
    do {                                                                                                               \
        int rc_ = (expr);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            st = mpi_fail((k), rc_, (fn));                                                                             \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

static void req_free(zcomm_req *r) {
    if (!r) return;
    free(r->q);
    free(r->later);
    free(r->ints);
    free(r);
}

static zinc_status push(call *k, MPI_Request q);

/* Starts (non-blocking) or runs (blocking) one piece. */
static zinc_status start_piece(call *k, const piece *pc, MPI_Datatype dt, MPI_Op op) {
    zinc_status st = ZINC_OK;
    if (k->r) {
        MPI_Request q;
        if (pc->kind == PIECE_ALLREDUCE)
            MPI_CHECK(k, "MPI_Iallreduce", MPI_Iallreduce(MPI_IN_PLACE, pc->buf, pc->cnt, dt, op, k->comm, &q));
        else if (pc->kind == PIECE_REDUCE)
            MPI_CHECK(k, "MPI_Ireduce", MPI_Ireduce(pc->send, pc->buf, pc->cnt, dt, op, pc->root, k->comm, &q));
        else
            MPI_CHECK(k, "MPI_Ibcast", MPI_Ibcast(pc->buf, pc->cnt, dt, pc->root, k->comm, &q));
        TRY(push(k, q));
    } else {
        if (pc->kind == PIECE_ALLREDUCE)
            MPI_CHECK(k, "MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, pc->buf, pc->cnt, dt, op, k->comm));
        else if (pc->kind == PIECE_REDUCE)
            MPI_CHECK(k, "MPI_Reduce", MPI_Reduce(pc->send, pc->buf, pc->cnt, dt, op, pc->root, k->comm));
        else
            MPI_CHECK(k, "MPI_Bcast", MPI_Bcast(pc->buf, pc->cnt, dt, pc->root, k->comm));
    }
fail:
    return st;
}

/* One piece of a split collective: blocking calls run it now; a non-blocking call starts its first piece
 * now and queues the rest for zcomm_wait (every rank waits in the same order, so every rank starts the
 * pieces in the same order, as MPI requires). */
static zinc_status add_piece(call *k, piece pc, MPI_Datatype dt, MPI_Op op) {
    zcomm_req *r = k->r;
    if (!r || r->n == 0) {
        if (r) {
            r->dt = dt;
            r->op = op;
        }
        return start_piece(k, &pc, dt, op);
    }
    if (r->nlater == r->later_cap) {
        int cap = r->later_cap ? 2 * r->later_cap : 8;
        piece *nl = realloc(r->later, (size_t)cap * sizeof *nl);
        if (!nl) return ZERR(ZINC_ERR_NOMEM, "mpi: %s: out of memory for %d pieces", k->what, cap);
        r->later = nl;
        r->later_cap = cap;
    }
    r->later[r->nlater++] = pc;
    return ZINC_OK;
}

static zinc_status push(call *k, MPI_Request q) {
    zcomm_req *r = k->r;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 4;
        MPI_Request *nq = realloc(r->q, (size_t)cap * sizeof *nq);
        if (!nq) return ZERR(ZINC_ERR_NOMEM, "mpi: %s: out of memory for %d requests", k->what, cap);
        r->q = nq;
        r->cap = cap;
    }
    r->q[r->n++] = q;
    return ZINC_OK;
}

static char g_dummy[16]; /* a valid address for zero-length receive buffers */

/* Starts a call: for a non-blocking one allocates the request. */
static zinc_status begin(call *k, zcomm *c, zcomm_req **req, const char *what, size_t count, int elems, zinc_dtype t) {
    k->c = c;
    k->comm = impl_of(c)->comm;
    k->r = NULL;
    k->what = what;
    k->count = count;
    k->elems = elems;
    k->t = t;
    if (!req) return ZINC_OK;
    k->r = calloc(1, sizeof *k->r);
    if (!k->r) return ZERR(ZINC_ERR_NOMEM, "mpi: %s: out of memory for a request", what);
    k->r->what = what;
    k->r->count = count;
    k->r->elems = elems;
    k->r->t = t;
    return ZINC_OK;
}

/* Finishes starting a call: hands the request out (or NULL when nothing was started). On failure the MPI
 * requests already started are abandoned (MPI forbids freeing non-blocking collective requests). */
static zinc_status end(call *k, zinc_status st, zcomm_req **req) {
    if (!k->r) return st;
    if (st != ZINC_OK || k->r->n == 0) {
        req_free(k->r);
        k->r = NULL;
        return st;
    }
    *req = k->r;
    k->r = NULL;
    return ZINC_OK;
}

/* int copies of counts/displs that stay alive until completion (owned by the request when non-blocking). */
static zinc_status int_array(call *k, size_t n, int **out) {
    *out = malloc((n ? n : 1) * sizeof **out);
    if (!*out) return ZERR(ZINC_ERR_NOMEM, "mpi: %s: out of memory for %zu ints", k->what, n);
    if (k->r) k->r->ints = *out;
    return ZINC_OK;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------- collectives */

static zinc_status m_allreduce(zcomm *c, void *buf, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req) {
    zinc_status st = ZINC_OK;
    mpi_impl *im = impl_of(c);
    call k = {0};
    if (req) *req = NULL;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    if ((st = dtype_of(im, "allreduce", t, &dt)) != ZINC_OK) return st;
    if ((st = op_of(im, "allreduce", t, op, &mop)) != ZINC_OK) return st;
    if (n && !buf) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: allreduce: buf is NULL with %zu elements", n);
    if (n == 0) return ZINC_OK;
    if ((st = begin(&k, c, req, op == ZCOMM_SUM ? "allreduce(sum)" : "allreduce(max)", n, 1, t)) != ZINC_OK) return st;
    const size_t es = zinc_dtype_size(t), L = g_max_count;
    for (size_t off = 0; off < n; off += L) {
        int cnt = (int)min_sz(L, n - off);
        TRY(add_piece(&k, (piece){PIECE_ALLREDUCE, NULL, (char *)buf + off * es, cnt, 0}, dt, mop));
    }
fail:
    return end(&k, st, req);
}

static zinc_status m_reduce_scatterv(zcomm *c, const void *send, void *recv, const size_t *counts, zinc_dtype t,
                                     zcomm_req **req) {
    zinc_status st = ZINC_OK;
    mpi_impl *im = impl_of(c);
    call k = {0};
    int *ints = NULL;
    if (req) *req = NULL;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    if ((st = dtype_of(im, "reduce_scatterv", t, &dt)) != ZINC_OK) return st;
    if ((st = op_of(im, "reduce_scatterv", t, ZCOMM_SUM, &mop)) != ZINC_OK) return st;
    if (!counts) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: reduce_scatterv: counts is NULL");
    const int p = c->size;
    size_t total = 0, maxc = 0;
    for (int r = 0; r < p; r++) {
        if (counts[r] > SIZE_MAX - total)
            return ZERR(ZINC_ERR_INVALID_ARG, "mpi: reduce_scatterv: the counts overflow size_t");
        total += counts[r];
        if (counts[r] > maxc) maxc = counts[r];
    }
    if (total == 0) return ZINC_OK;
    if (!send) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: reduce_scatterv: send is NULL with %zu elements", total);
    if (counts[c->rank] && !recv)
        return ZERR(ZINC_ERR_INVALID_ARG, "mpi: reduce_scatterv: recv is NULL with %zu elements", counts[c->rank]);
    if ((st = begin(&k, c, req, "reduce_scatterv", total, 1, t)) != ZINC_OK) return st;
    const size_t es = zinc_dtype_size(t), L = g_max_count;
    void *rbuf = counts[c->rank] ? recv : (void *)g_dummy;
    if (total <= L) { /* every count fits too */
        TRY(int_array(&k, (size_t)p, &ints));
        for (int r = 0; r < p; r++) ints[r] = (int)counts[r];
        if (k.r) {
            MPI_Request q;
            MPI_CHECK(&k, "MPI_Ireduce_scatter", MPI_Ireduce_scatter(send, rbuf, ints, dt, mop, k.comm, &q));
            TRY(push(&k, q));
        } else {
            MPI_CHECK(&k, "MPI_Reduce_scatter", MPI_Reduce_scatter(send, rbuf, ints, dt, mop, k.comm));
        }
    } else { /* one reduce per owner rank and chunk of its slice */
        size_t displ = 0;
        for (int r = 0; r < p; r++) {
            for (size_t off = 0; off < counts[r]; off += L) {
                int cnt = (int)min_sz(L, counts[r] - off);
                const char *sp = (const char *)send + (displ + off) * es;
                void *rp = r == c->rank ? (char *)recv + off * es : NULL;
                TRY(add_piece(&k, (piece){PIECE_REDUCE, sp, rp, cnt, r}, dt, mop));
            }
            displ += counts[r];
        }
    }
fail:
    if (!k.r) free(ints);
    return end(&k, st, req);
}

static zinc_status m_allgatherv_inplace(zcomm *c, void *buf, const size_t *counts, const size_t *displs, zinc_dtype t,
                                        zcomm_req **req) {
    zinc_status st = ZINC_OK;
    mpi_impl *im = impl_of(c);
    call k = {0};
    int *ints = NULL;
    if (req) *req = NULL;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    if ((st = dtype_of(im, "allgatherv_inplace", t, &dt)) != ZINC_OK) return st;
    if (!counts || !displs) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: allgatherv_inplace: counts or displs is NULL");
    const int p = c->size;
    size_t total = 0, base = SIZE_MAX, span = 0;
    for (int r = 0; r < p; r++) {
        if (!counts[r]) continue;
        if (counts[r] > SIZE_MAX - total || displs[r] > SIZE_MAX - counts[r])
            return ZERR(ZINC_ERR_INVALID_ARG, "mpi: allgatherv_inplace: the counts overflow size_t");
        total += counts[r];
        if (displs[r] < base) base = displs[r];
    }
    if (total == 0) return ZINC_OK;
    if (!buf) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: allgatherv_inplace: buf is NULL with %zu elements", total);
    for (int r = 0; r < p; r++)
        if (counts[r] && displs[r] + counts[r] - base > span) span = displs[r] + counts[r] - base;
    if ((st = begin(&k, c, req, "allgatherv_inplace", total, 1, t)) != ZINC_OK) return st;
    const size_t es = zinc_dtype_size(t), L = g_max_count;
    if (total <= L && span <= L) { /* one call, displacements relative to the lowest slice */
        TRY(int_array(&k, 2 * (size_t)p, &ints));
        for (int r = 0; r < p; r++) {
            ints[r] = (int)counts[r];
            ints[p + r] = counts[r] ? (int)(displs[r] - base) : 0;
        }
        char *b = (char *)buf + base * es;
        if (k.r) {
            MPI_Request q;
            MPI_CHECK(&k, "MPI_Iallgatherv",
                      MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, ints, ints + p, dt, k.comm, &q));
            TRY(push(&k, q));
        } else {
            MPI_CHECK(&k, "MPI_Allgatherv",
                      MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, ints, ints + p, dt, k.comm));
        }
    } else { /* one broadcast per owner rank and chunk of its slice */
        for (int r = 0; r < p; r++) {
            for (size_t off = 0; off < counts[r]; off += L) {
                int cnt = (int)min_sz(L, counts[r] - off);
                char *bp = (char *)buf + (displs[r] + off) * es;
                TRY(add_piece(&k, (piece){PIECE_BCAST, NULL, bp, cnt, r}, dt, MPI_OP_NULL));
            }
        }
    }
fail:
    if (!k.r) free(ints);
    return end(&k, st, req);
}

static zinc_status m_allgather_bytes(zcomm *c, const void *in, void *out, size_t bytes) {
    zinc_status st = ZINC_OK;
    call k = {0};
    if (bytes == 0) return ZINC_OK;
    if (!in || !out) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: allgather_bytes: NULL buffer (%zu bytes)", bytes);
    if ((st = begin(&k, c, NULL, "allgather_bytes", bytes, 0, ZINC_FP32)) != ZINC_OK) return st;
    const size_t L = g_max_count, p = (size_t)c->size;
    char *mine = (char *)out + (size_t)c->rank * bytes;
    if (bytes <= L / p) {
        const void *sp = in == (const void *)mine ? MPI_IN_PLACE : in;
        MPI_CHECK(&k, "MPI_Allgather", MPI_Allgather(sp, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, k.comm));
    } else {
        if (in != (const void *)mine) memmove(mine, in, bytes);
        for (int r = 0; r < c->size; r++)
            for (size_t off = 0; off < bytes; off += L)
                MPI_CHECK(&k, "MPI_Bcast",
                          MPI_Bcast((char *)out + (size_t)r * bytes + off, (int)min_sz(L, bytes - off), MPI_BYTE, r,
                                    k.comm));
    }
fail:
    return st;
}

static zinc_status m_alltoallv_bytes(zcomm *c, const void *send, const size_t *scounts, const size_t *sdispls,
                                     void *recv, const size_t *rcounts, const size_t *rdispls) {
    zinc_status st = ZINC_OK;
    call k = {0};
    int *ints = NULL;
    size_t p = (size_t)c->size;
    for (size_t r = 0; r < p; r++)
        if (scounts[r] > (size_t)INT_MAX || rcounts[r] > (size_t)INT_MAX || sdispls[r] > (size_t)INT_MAX ||
            rdispls[r] > (size_t)INT_MAX)
            return ZERR(ZINC_ERR_INVALID_ARG, "mpi: all-to-all: a count or offset of rank %zu is above 2^31-1 bytes",
                        r);
    if ((st = begin(&k, c, NULL, "alltoallv", 0, 0, ZINC_FP32)) != ZINC_OK) return st;
    TRY_ALLOC(ints, 4 * p, "the all-to-all counts");
    for (size_t r = 0; r < p; r++) {
        ints[r] = (int)scounts[r];
        ints[p + r] = (int)sdispls[r];
        ints[2 * p + r] = (int)rcounts[r];
        ints[3 * p + r] = (int)rdispls[r];
    }
    MPI_CHECK(&k, "MPI_Alltoallv",
              MPI_Alltoallv(send ? send : g_dummy, ints, ints + p, MPI_BYTE, recv ? recv : g_dummy, ints + 2 * p,
                            ints + 3 * p, MPI_BYTE, k.comm));
fail:
    free(ints);
    return st;
}

static zinc_status m_bcast(zcomm *c, void *buf, size_t bytes, int root) {
    zinc_status st = ZINC_OK;
    call k = {0};
    if (root < 0 || root >= c->size)
        return ZERR(ZINC_ERR_INVALID_ARG, "mpi: bcast: root %d is not a rank (world size %d)", root, c->size);
    if (bytes == 0) return ZINC_OK;
    if (!buf) return ZERR(ZINC_ERR_INVALID_ARG, "mpi: bcast: buf is NULL (%zu bytes)", bytes);
    if ((st = begin(&k, c, NULL, "bcast", bytes, 0, ZINC_FP32)) != ZINC_OK) return st;
    const size_t L = g_max_count;
    for (size_t off = 0; off < bytes; off += L)
        MPI_CHECK(&k, "MPI_Bcast", MPI_Bcast((char *)buf + off, (int)min_sz(L, bytes - off), MPI_BYTE, root, k.comm));
fail:
    return st;
}

static zinc_status m_barrier(zcomm *c) {
    zinc_status st = ZINC_OK;
    call k = {0};
    if ((st = begin(&k, c, NULL, "barrier", 0, 0, ZINC_FP32)) != ZINC_OK) return st;
    MPI_CHECK(&k, "MPI_Barrier", MPI_Barrier(k.comm));
fail:
    return st;
}

/* Sends and receives in pieces of at most the MPI piece count; both sides split the same counts alike, and a
 * side whose count runs out first sends (or receives) nothing in the remaining rounds. */
static zinc_status m_sendrecv(zcomm *c, const void *send, size_t nsend, int dest, void *recv, size_t nrecv, int src,
                              zinc_dtype t) {
    zinc_status st = ZINC_OK;
    call k = {0};
    MPI_Datatype dt = MPI_BYTE;
    if (dest < -1 || dest >= c->size || src < -1 || src >= c->size)
        return ZERR(ZINC_ERR_INVALID_ARG, "mpi: sendrecv: peer %d / %d is not a rank (world size %d)", dest, src,
                    c->size);
    if (dest < 0) nsend = 0;
    if (src < 0) nrecv = 0;
    if ((nsend && !send) || (nrecv && !recv))
        return ZERR(ZINC_ERR_INVALID_ARG, "mpi: sendrecv: NULL buffer (%zu sent, %zu received)", nsend, nrecv);
    if ((st = dtype_of(impl_of(c), "sendrecv", t, &dt)) != ZINC_OK) return st;
    if ((st = begin(&k, c, NULL, "sendrecv", nsend + nrecv, 1, t)) != ZINC_OK) return st;
    const size_t L = g_max_count, es = zinc_dtype_size(t);
    int to = dest < 0 ? MPI_PROC_NULL : dest, from = src < 0 ? MPI_PROC_NULL : src;
    for (size_t off = 0; off < nsend || off < nrecv; off += L) {
        int ns = off < nsend ? (int)min_sz(L, nsend - off) : 0, nr = off < nrecv ? (int)min_sz(L, nrecv - off) : 0;
        MPI_CHECK(&k, "MPI_Sendrecv",
                  MPI_Sendrecv(ns ? (const char *)send + off * es : NULL, ns, dt, ns ? to : MPI_PROC_NULL, 77,
                               nr ? (char *)recv + off * es : NULL, nr, dt, nr ? from : MPI_PROC_NULL, 77, k.comm,
                               MPI_STATUS_IGNORE));
    }
fail:
    return st;
}

static zinc_status m_wait(zcomm *c, zcomm_req *r) {
    zinc_status st = ZINC_OK;
    if (!r) return ZINC_OK;
    call k = {.c = c, .comm = impl_of(c)->comm, .what = r->what, .count = r->count, .elems = r->elems, .t = r->t};
    k.r = r;
    for (int i = 0; i < r->n; i++) {
        int rc = MPI_Wait(&r->q[i], MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS && st == ZINC_OK) st = mpi_fail(&k, rc, "MPI_Wait");
        /* The next queued piece starts once this one is done; after an error the rest are abandoned. */
        if (i == r->n - 1 && r->next < r->nlater && st == ZINC_OK) {
            zinc_status s2 = start_piece(&k, &r->later[r->next++], r->dt, r->op);
            if (s2 != ZINC_OK) st = s2;
        }
    }
    req_free(r);
    return st;
}

static void m_destroy(zcomm *c) {
    if (!c) return;
    mpi_impl *im = impl_of(c);
    if (im) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) { /* after MPI_Finalize the handles are gone with MPI */
            MPI_Op *ops[] = {&im->fp16_sum, &im->bf16_sum, &im->fp16_max, &im->bf16_max};
            for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
                if (*ops[i] != MPI_OP_NULL) MPI_Op_free(ops[i]);
            if (im->half != MPI_DATATYPE_NULL) MPI_Type_free(&im->half);
            if (im->comm != MPI_COMM_NULL) MPI_Comm_free(&im->comm);
        }
        free(im);
    }
    free(c);
}

static zinc_status m_split(zcomm *c, int color, int key, zcomm **out);

static const zcomm_ops mpi_ops = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .reduce_scatterv = m_reduce_scatterv,
    .allgatherv_inplace = m_allgatherv_inplace,
    .allgather_bytes = m_allgather_bytes,
    .bcast = m_bcast,
    .barrier = m_barrier,
    .sendrecv = m_sendrecv,
    .alltoallv_bytes = m_alltoallv_bytes,
    .split = m_split,
    .wait = m_wait,
    .destroy = m_destroy,
};

/* ZINC_MPI_PIECE_ELEMENTS: the largest count of one MPI call (see comm_mpi.h). */
static zinc_status read_piece_env(void) {
    const char *s = zenv_get(ZENV_MPI_PIECE_ELEMENTS);
    if (!s || !*s) return ZINC_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < 64 || v > (unsigned long long)INT_MAX)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_MPI_PIECE_ELEMENTS=\"%s\": expected a whole number of elements from 64 to %d (default "
                    "%d): the largest count one MPI call gets, which bounds MPI's temporary buffers",
                    s, INT_MAX, (int)ZCOMM_MPI_PIECE_DEFAULT);
    g_max_count = (size_t)v;
    return ZINC_OK;
}

static zinc_status make(const zlog *log, MPI_Comm parent, bool split, int color, int key, zcomm **out);

static zinc_status m_split(zcomm *c, int color, int key, zcomm **out) {
    mpi_impl *im = impl_of(c);
    return make(&im->log, im->comm, true, color, key, out);
}

zinc_status zcomm_create_mpi(const zlog *log, zcomm **out) {
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create_mpi: out is NULL");
    *out = NULL;
    zinc_status st = zcomm_mpi_ensure_init(log);
    if (st == ZINC_OK) st = read_piece_env();
    if (st == ZINC_OK) st = make(log, MPI_COMM_WORLD, false, 0, 0, out);
    return st;
}

/* A communicator over a duplicate of parent, or (split) over parent's ranks of one color. */
static zinc_status make(const zlog *log, MPI_Comm parent, bool split, int color, int key, zcomm **out) {
    zinc_status st = ZINC_OK;
    zcomm *c = NULL;
    mpi_impl *im = NULL;
    MPI_Comm node = MPI_COMM_NULL;
    call k = {.what = split ? "communicator split" : "communicator creation"};
    *out = NULL;
    TRY_ALLOC(c, 1, "the MPI communicator");
    TRY_ALLOC(im, 1, "the MPI communicator");
    c->ops = &mpi_ops;
    c->impl = im;
    im->comm = MPI_COMM_NULL;
    im->half = MPI_DATATYPE_NULL;
    im->fp16_sum = im->bf16_sum = im->fp16_max = im->bf16_max = MPI_OP_NULL;
    if (log) im->log = *log;
    k.c = c;
    if (split)
        MPI_CHECK(&k, "MPI_Comm_split", MPI_Comm_split(parent, color, key, &im->comm));
    else
        MPI_CHECK(&k, "MPI_Comm_dup", MPI_Comm_dup(parent, &im->comm));
    MPI_CHECK(&k, "MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(im->comm, MPI_ERRORS_RETURN));
    MPI_CHECK(&k, "MPI_Comm_rank", MPI_Comm_rank(im->comm, &c->rank));
    MPI_CHECK(&k, "MPI_Comm_size", MPI_Comm_size(im->comm, &c->size));
    MPI_CHECK(&k, "MPI_Comm_split_type",
              MPI_Comm_split_type(im->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    MPI_CHECK(&k, "MPI_Comm_rank(node)", MPI_Comm_rank(node, &c->local_rank));
    MPI_CHECK(&k, "MPI_Comm_size(node)", MPI_Comm_size(node, &c->local_size));
    MPI_CHECK(&k, "MPI_Comm_free(node)", MPI_Comm_free(&node));
    MPI_CHECK(&k, "MPI_Type_contiguous", MPI_Type_contiguous(2, MPI_BYTE, &im->half));
    MPI_CHECK(&k, "MPI_Type_commit", MPI_Type_commit(&im->half));
    MPI_CHECK(&k, "MPI_Op_create(fp16 sum)", MPI_Op_create(fp16_sum_fn, 1, &im->fp16_sum));
    MPI_CHECK(&k, "MPI_Op_create(bf16 sum)", MPI_Op_create(bf16_sum_fn, 1, &im->bf16_sum));
    MPI_CHECK(&k, "MPI_Op_create(fp16 max)", MPI_Op_create(fp16_max_fn, 1, &im->fp16_max));
    MPI_CHECK(&k, "MPI_Op_create(bf16 max)", MPI_Op_create(bf16_max_fn, 1, &im->bf16_max));
    im->log.rank = c->rank;
    ZLOG_DEBUG(&im->log, "comm: mpi backend, rank %d of %d, local rank %d of %d", c->rank, c->size, c->local_rank,
               c->local_size);
    *out = c;
    return ZINC_OK;
fail:
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    if (c && !c->impl)
        free(c);
    else
        m_destroy(c);
    return st;
}
