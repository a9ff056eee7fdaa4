/* The staged collective backend ("mpi-staged"): device buffers through host staging (see comm_staged.h).
 *
 * Rounds: a buffer split among ranks (reduce_scatterv, allgatherv_inplace) is walked by position inside
 * each rank's slice, `q` elements of every slice per round, so one round's pieces of all ranks fit the
 * staging buffer together; every rank computes the same rounds from the same counts (MPI's rule that
 * collectives match). The host collective of each round is blocking. */
#include "base/device/comm_staged.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"
#include "base/core/error.h"

typedef struct staged_impl {
    zcomm *host;
    zdevice *dev;
    char *stage; /* staging_bytes of host memory from dev->ops->alloc_host */
    size_t stage_bytes;
    size_t *kcounts; /* per rank: elements of the current round */
    size_t *kdispls; /* per rank: where its piece sits in the staging buffer */
} staged_impl;

static staged_impl *impl_of(zcomm *c) { return (staged_impl *)c->impl; }

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------- the environment */

zinc_status zdcomm_choice_from_env(zdcomm_choice *out) {
    const char *v = zenv_get(ZENV_DEVICE_COMM);
    *out = ZDCOMM_AUTO;
    if (!v || !v[0] || !strcmp(v, "auto")) return ZINC_OK;
    if (!strcmp(v, "nccl"))
        *out = ZDCOMM_NCCL;
    else if (!strcmp(v, "mpi"))
        *out = ZDCOMM_MPI;
    else if (!strcmp(v, "staged"))
        *out = ZDCOMM_STAGED;
    else
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_DEVICE_COMM=%s: expected auto, nccl, mpi or staged (or unset for "
                    "auto)",
                    v);
    return ZINC_OK;
}

zinc_status zcomm_staging_bytes_from_env(size_t *out) {
    const char *v = zenv_get(ZENV_STAGING_BYTES);
    *out = ZCOMM_STAGING_DEFAULT;
    if (!v || !v[0]) return ZINC_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long b = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || b < 4096 || b > ((unsigned long long)1 << 40))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_STAGING_BYTES=%s: expected a byte count from 4096 to 2^40 (host "
                    "staging memory per rank for collectives on device buffers)",
                    v);
    *out = (size_t)b;
    return ZINC_OK;
}

/* ---------------------------------------------------------------- helpers */

static zinc_status d2h(staged_impl *im, void *host, const void *dev, size_t bytes) {
    return bytes ? im->dev->ops->copy(im->dev, host, dev, bytes, ZDEV_D2H) : ZINC_OK;
}

static zinc_status h2d(staged_impl *im, void *dev, const void *host, size_t bytes) {
    return bytes ? im->dev->ops->copy(im->dev, dev, host, bytes, ZDEV_H2D) : ZINC_OK;
}

static zinc_status check_dtype(const char *what, zinc_dtype t) {
    if (t != ZINC_FP32 && t != ZINC_FP16 && t != ZINC_BF16)
        return ZERR(ZINC_ERR_INVALID_ARG, "mpi-staged: %s: unknown dtype %d", what, (int)t);
    return ZINC_OK;
}

/* Validates per-rank counts (their sum must fit size_t) and returns their sum and largest. */
static zinc_status sum_counts(const zcomm *c, const size_t *counts, const char *what, size_t *total, size_t *maxc) {
    *total = *maxc = 0;
    if (!counts) return ZERR(ZINC_ERR_INVALID_ARG, "mpi-staged: %s: counts is NULL", what);
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > SIZE_MAX - *total)
            return ZERR(ZINC_ERR_INVALID_ARG, "mpi-staged: %s: the counts overflow size_t", what);
        *total += counts[r];
        *maxc = counts[r] > *maxc ? counts[r] : *maxc;
    }
    return ZINC_OK;
}

/* Elements per rank and round when `slots` pieces of that size share the staging buffer. */
static size_t per_round(const staged_impl *im, size_t es, size_t slots) {
    size_t q = im->stage_bytes / es / slots;
    return q ? q : 1;
}

/* ---------------------------------------------------------------- collectives */

static zinc_status st_allreduce(zcomm *c, void *buf, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req) {
    zinc_status st = ZINC_OK;
    staged_impl *im = impl_of(c);
    if (req) *req = NULL;
    TRY(check_dtype("allreduce", t));
    if (n && !buf) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: allreduce: buf is NULL with %zu elements", n);
    const size_t es = zinc_dtype_size(t), q = per_round(im, es, 1);
    for (size_t off = 0; off < n; off += q) {
        size_t k = min_sz(q, n - off);
        char *p = (char *)buf + off * es;
        TRY(d2h(im, im->stage, p, k * es));
        TRY(zcomm_allreduce(im->host, im->stage, k, t, op, NULL));
        TRY(h2d(im, p, im->stage, k * es));
    }
fail:
    return st;
}

/* A round of a split buffer: kcounts[r] = the part of [off, off + q) inside counts[r]; returns their sum. */
static size_t round_counts(staged_impl *im, int p, const size_t *counts, size_t off, size_t q) {
    size_t pos = 0;
    for (int r = 0; r < p; r++) {
        im->kcounts[r] = counts[r] > off ? min_sz(q, counts[r] - off) : 0;
        im->kdispls[r] = pos;
        pos += im->kcounts[r];
    }
    return pos;
}

static zinc_status st_reduce_scatterv(zcomm *c, const void *send, void *recv, const size_t *counts, zinc_dtype t,
                                      zcomm_req **req) {
    zinc_status st = ZINC_OK;
    staged_impl *im = impl_of(c);
    if (req) *req = NULL;
    TRY(check_dtype("reduce_scatterv", t));
    const int p = c->size, me = c->rank;
    size_t total, maxc;
    TRY(sum_counts(c, counts, "reduce_scatterv", &total, &maxc));
    if (total == 0) return ZINC_OK;
    if (!send) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: reduce_scatterv: send is NULL with %zu elements", total);
    if (counts[me] && !recv)
        FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: reduce_scatterv: recv is NULL with %zu elements", counts[me]);
    /* p send pieces and this rank's received piece share the staging buffer. */
    const size_t es = zinc_dtype_size(t), q = per_round(im, es, (size_t)p + 1);
    for (size_t off = 0; off < maxc; off += q) {
        size_t used = round_counts(im, p, counts, off, q), displ = 0;
        for (int r = 0; r < p; r++) {
            TRY(d2h(im, im->stage + im->kdispls[r] * es, (const char *)send + (displ + off) * es, im->kcounts[r] * es));
            displ += counts[r];
        }
        char *rstage = im->stage + used * es;
        TRY(zcomm_reduce_scatterv(im->host, im->stage, rstage, im->kcounts, t, NULL));
        TRY(h2d(im, (char *)recv + off * es, rstage, im->kcounts[me] * es));
    }
fail:
    return st;
}

static zinc_status st_allgatherv_inplace(zcomm *c, void *buf, const size_t *counts, const size_t *displs, zinc_dtype t,
                                         zcomm_req **req) {
    zinc_status st = ZINC_OK;
    staged_impl *im = impl_of(c);
    if (req) *req = NULL;
    TRY(check_dtype("allgatherv_inplace", t));
    if (!displs) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: allgatherv_inplace: displs is NULL");
    const int p = c->size, me = c->rank;
    size_t total, maxc;
    TRY(sum_counts(c, counts, "allgatherv_inplace", &total, &maxc));
    if (total == 0) return ZINC_OK;
    if (!buf) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: allgatherv_inplace: buf is NULL with %zu elements", total);
    const size_t es = zinc_dtype_size(t), q = per_round(im, es, (size_t)p);
    for (size_t off = 0; off < maxc; off += q) {
        round_counts(im, p, counts, off, q);
        TRY(d2h(im, im->stage + im->kdispls[me] * es, (const char *)buf + (displs[me] + off) * es,
                im->kcounts[me] * es));
        TRY(zcomm_allgatherv_inplace(im->host, im->stage, im->kcounts, im->kdispls, t, NULL));
        for (int r = 0; r < p; r++)
            if (r != me)
                TRY(h2d(im, (char *)buf + (displs[r] + off) * es, im->stage + im->kdispls[r] * es,
                        im->kcounts[r] * es));
    }
fail:
    return st;
}

static zinc_status st_allgather_bytes(zcomm *c, const void *in, void *out, size_t bytes) {
    zinc_status st = ZINC_OK;
    staged_impl *im = impl_of(c);
    const int p = c->size;
    if (bytes && (!in || !out)) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: allgather_bytes: NULL buffer");
    /* One rank's input piece and every rank's output piece share the staging buffer. */
    const size_t q = per_round(im, 1, (size_t)p + 1);
    for (size_t off = 0; off < bytes; off += q) {
        size_t k = min_sz(q, bytes - off);
        char *all = im->stage + k;
        TRY(d2h(im, im->stage, (const char *)in + off, k));
        TRY(zcomm_allgather_bytes(im->host, im->stage, all, k));
        for (int r = 0; r < p; r++) TRY(h2d(im, (char *)out + (size_t)r * bytes + off, all + (size_t)r * k, k));
    }
fail:
    return st;
}

static zinc_status st_bcast(zcomm *c, void *buf, size_t bytes, int root) {
    zinc_status st = ZINC_OK;
    staged_impl *im = impl_of(c);
    if (root < 0 || root >= c->size)
        FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: bcast: root %d is not a rank of %d", root, c->size);
    if (bytes && !buf) FAIL(ZINC_ERR_INVALID_ARG, "mpi-staged: bcast: buf is NULL with %zu bytes", bytes);
    for (size_t off = 0; off < bytes; off += im->stage_bytes) {
        size_t k = min_sz(im->stage_bytes, bytes - off);
        if (c->rank == root) TRY(d2h(im, im->stage, (char *)buf + off, k));
        TRY(zcomm_bcast(im->host, im->stage, k, root));
        if (c->rank != root) TRY(h2d(im, (char *)buf + off, im->stage, k));
    }
fail:
    return st;
}

static zinc_status st_barrier(zcomm *c) { return zcomm_barrier(impl_of(c)->host); }

static zinc_status st_wait(zcomm *c, zcomm_req *req) {
    (void)c;
    /* Every call completes before it returns and hands out NULL requests. */
    if (req) return ZERR(ZINC_ERR_INTERNAL, "mpi-staged: wait: this backend issues no requests");
    return ZINC_OK;
}

static void st_destroy(zcomm *c) {
    if (!c) return;
    staged_impl *im = impl_of(c);
    if (im) {
        if (im->stage) im->dev->ops->free_host(im->dev, ZINC_MEM_STAGING, im->stage, im->stage_bytes);
        free(im->kcounts);
        free(im->kdispls);
        free(im);
    }
    free(c);
}

static const zcomm_ops staged_ops = {
    .name = "mpi-staged",
    .allreduce = st_allreduce,
    .reduce_scatterv = st_reduce_scatterv,
    .allgatherv_inplace = st_allgatherv_inplace,
    .allgather_bytes = st_allgather_bytes,
    .bcast = st_bcast,
    .barrier = st_barrier,
    .wait = st_wait,
    .destroy = st_destroy,
};

size_t zcomm_staged_bytes(const zcomm *c) {
    return c && c->ops == &staged_ops ? ((const staged_impl *)c->impl)->stage_bytes : 0;
}

zinc_status zcomm_create_staged(zcomm *host, zdevice *dev, size_t staging_bytes, const zlog *log, zcomm **out) {
    zinc_status st = ZINC_OK;
    zcomm *c = NULL;
    staged_impl *im = NULL;
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create_staged: out is NULL");
    *out = NULL;
    if (!host || !dev) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create_staged: host or dev is NULL");
    /* A round needs one element of up to 4 bytes for each of size + 1 slots. */
    size_t need = 4 * ((size_t)host->size + 1) > 64 ? 4 * ((size_t)host->size + 1) : 64;
    if (staging_bytes < need)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zcomm_create_staged: %zu staging bytes for %d ranks; at least %zu are "
                    "needed",
                    staging_bytes, host->size, need);
    TRY_ALLOC(c, 1, "the staged communicator");
    TRY_ALLOC(im, 1, "the staged communicator");
    c->impl = im;
    c->ops = &staged_ops;
    c->rank = host->rank;
    c->size = host->size;
    c->local_rank = host->local_rank;
    c->local_size = host->local_size;
    im->host = host;
    im->dev = dev;
    TRY_ALLOC(im->kcounts, host->size, "the staged communicator's counts");
    TRY_ALLOC(im->kdispls, host->size, "the staged communicator's counts");
    TRY(dev->ops->alloc_host(dev, ZINC_MEM_STAGING, staging_bytes, "collective staging", (void **)&im->stage));
    im->stage_bytes = staging_bytes;
    ZLOG_DEBUG(log, "comm: %s collectives on %s buffers staged through %zu bytes of host memory per rank",
               host->ops->name, dev->ops->name, staging_bytes);
    *out = c;
    return ZINC_OK;
fail:
    st_destroy(c);
    return st;
}

zinc_status zcomm_create_staged_env(zcomm *host, zdevice *dev, const zlog *log, zcomm **out) {
    size_t staging = 0;
    if (out) *out = NULL;
    zinc_status st = zcomm_staging_bytes_from_env(&staging);
    return st != ZINC_OK ? st : zcomm_create_staged(host, dev, staging, log, out);
}
