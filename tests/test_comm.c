/* Collective backends (base/comm/comm.h): run without a launcher it tests the "single" backend, under mpirun
 * the "mpi" backend with any rank count.
 *
 * Inputs are pseudo-random from one seed (rank 0's ZT_SEED, broadcast), so every rank generates every
 * rank's input and computes the expected result locally in double. Inputs are first rounded to the dtype
 * under test. Tolerances for sums (S = sum of |inputs| of the element, p = ranks):
 *   p = 1: bit-exact (the input itself);
 *   p = 2: bit-exact against round_t(float(x0) + float(x1)) (one commutative add, rounded once);
 *   p > 2: |got - exact| <= (p-1) * u * S * 1.01 + (p-1) * 2^-24, u = 2^-24 fp32 (but at least 1e-6 as a
 *          relative bound on S), 2^-11 fp16, 2^-8 bf16: each of the p-1 pairwise combinations rounds once.
 * MAX is bit-exact (and a NaN on one rank reaches all ranks for halves). Gathers and broadcasts are
 * bit-exact and must leave gaps between slices untouched. The splitting paths for counts above the MPI
 * limit are exercised by lowering the limit (zcomm_mpi_set_max_count); for p <= 2 split results must equal
 * unsplit ones bit for bit.
 *
 * `--staged BYTES` runs every test through the staged backend (comm_staged.h) over a cpu device with a
 * staging buffer of BYTES, as several ranks sharing one GPU do: small buffers force many rounds, and the
 * same tolerances apply (for p <= 2 the staged sums are bit-exact too). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/comm/comm_mpi.h"
#include "base/device/comm_staged.h"
#include "base/device/device.h"
#include "zt.h"

static zcomm *C;
static int P, R;
static uint64_t SEED;

static const zinc_dtype DTYPES[] = {ZINC_FP32, ZINC_FP16, ZINC_BF16};

/* ---------------------------------------------------------------- values */

static float round_to(zinc_dtype t, float v) {
    switch (t) {
    case ZINC_FP16: return zinc_fp16_to_f32(zinc_f32_to_fp16(v));
    case ZINC_BF16: return zinc_bf16_to_f32(zinc_f32_to_bf16(v));
    default: return v;
    }
}

static void put(void *buf, zinc_dtype t, size_t i, float v) {
    switch (t) {
    case ZINC_FP32: ((float *)buf)[i] = v; break;
    case ZINC_FP16: ((uint16_t *)buf)[i] = zinc_f32_to_fp16(v); break;
    case ZINC_BF16: ((uint16_t *)buf)[i] = zinc_f32_to_bf16(v); break;
    }
}

static float get(const void *buf, zinc_dtype t, size_t i) { return zinc_load_f32(buf, t, i); }

/* Rank q's input element i for test `tag`, already representable in t. */
static float gen(uint64_t tag, int q, size_t i, zinc_dtype t) {
    uint64_t s = SEED ^ (tag * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(q + 1) * 0xc2b2ae3d27d4eb4full) ^
                 ((uint64_t)(i + 1) * 0x165667b19e3779f9ull);
    zt_rand_u64(&s);
    double v = zt_rand_normal(&s);
    if (i % 17 == 3) v *= 40.0; /* some larger magnitudes */
    if (i % 23 == 5) v = 0.0;
    return round_to(t, (float)v);
}

static double unit_roundoff(zinc_dtype t) {
    return t == ZINC_FP32 ? 0x1p-24 : t == ZINC_FP16 ? 0x1p-11 : 0x1p-8;
}

/* Checks `got` against the sum over ranks of gen(tag, q, idx) with the tolerance above. */
static int sum_ok(float got, uint64_t tag, size_t idx, zinc_dtype t) {
    double ex = 0, S = 0;
    for (int q = 0; q < P; q++) {
        double x = gen(tag, q, idx, t);
        ex += x;
        S += fabs(x);
    }
    if (P == 1) return got == (float)ex || (got == 0 && ex == 0);
    if (P == 2) {
        float f = round_to(t, gen(tag, 0, idx, t) + gen(tag, 1, idx, t));
        return got == f;
    }
    double u = unit_roundoff(t);
    double rel = (P - 1) * u * 1.01;
    if (t == ZINC_FP32 && rel < 1e-6) rel = 1e-6;
    return fabs((double)got - ex) <= rel * S + (P - 1) * 0x1p-24;
}

static float max_of(uint64_t tag, size_t idx, zinc_dtype t) {
    float m = -INFINITY;
    for (int q = 0; q < P; q++) {
        float x = gen(tag, q, idx, t);
        if (x > m) m = x;
    }
    return m;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* All ranks hold the same bytes? (checked with allgather_bytes of a hash) */
static int same_on_all_ranks(const void *p, size_t n) {
    uint64_t h = fnv(p, n);
    uint64_t *all = xmalloc((size_t)P * sizeof *all);
    int ok = zcomm_allgather_bytes(C, &h, all, sizeof h) == ZINC_OK;
    for (int q = 0; q < P; q++) ok = ok && all[q] == h;
    free(all);
    return ok;
}

/* ---------------------------------------------------------------- allreduce */

/* Starts (req non-NULL) or runs an allreduce of n elements of test `tag`; returns the buffer. */
static void *allreduce_start(uint64_t tag, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req) {
    size_t es = zinc_dtype_size(t);
    void *buf = xmalloc(n * es);
    for (size_t i = 0; i < n; i++) put(buf, t, i, gen(tag, R, i, t));
    /* halves: a NaN at element 1 on the last rank and at element 2 on rank 0 must reach every rank */
    if (op == ZCOMM_MAX && t != ZINC_FP32 && P > 1 && n > 2) {
        if (R == P - 1) put(buf, t, 1, NAN);
        if (R == 0) put(buf, t, 2, NAN);
    }
    ZT_OK(zcomm_allreduce(C, buf, n, t, op, req));
    return buf;
}

static int allreduce_check(const void *buf, uint64_t tag, size_t n, zinc_dtype t, zcomm_op op) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float g = get(buf, t, i);
        int ok;
        if (op == ZCOMM_SUM) ok = sum_ok(g, tag, i, t);
        else if (t != ZINC_FP32 && P > 1 && (i == 1 || i == 2) && n > 2) ok = isnan(g);
        else ok = g == max_of(tag, i, t);
        if (!ok && bad++ < 3)
            ZT_CHECK(0, "allreduce(%s, %s, n=%zu) element %zu: got %.9g", op == ZCOMM_SUM ? "sum" : "max",
                     zinc_dtype_name(t), n, i, g);
    }
    ZT_CHECK(bad == 0, "allreduce(%s, %s, n=%zu): %d bad elements", op == ZCOMM_SUM ? "sum" : "max",
             zinc_dtype_name(t), n, bad);
    return bad == 0;
}

static void test_allreduce(uint64_t tag, size_t n, zinc_dtype t, zcomm_op op, int nb) {
    zcomm_req *req = NULL;
    void *buf = allreduce_start(tag, n, t, op, nb ? &req : NULL);
    if (!nb) ZT_CHECK(req == NULL, "blocking call touched req");
    ZT_OK(zcomm_wait(C, req));
    allreduce_check(buf, tag, n, t, op);
    ZT_CHECK(same_on_all_ranks(buf, n * zinc_dtype_size(t)), "allreduce(%s, n=%zu) differs between ranks",
             zinc_dtype_name(t), n);
    free(buf);
}

/* ---------------------------------------------------------------- reduce-scatter */

enum { CNT_SMALL, CNT_ZEROS, CNT_ALLZERO, CNT_LAST, CNT_BIG, CNT_EQUAL, CNT_NPATTERNS };

static void make_counts(int pattern, size_t *counts) {
    for (int r = 0; r < P; r++) {
        switch (pattern) {
        case CNT_SMALL: counts[r] = (size_t)r * 3 + 1; break;
        case CNT_ZEROS: counts[r] = r % 2 ? (size_t)r * 5 + 2 : 0; break;
        case CNT_ALLZERO: counts[r] = 0; break;
        case CNT_LAST: counts[r] = r == P - 1 ? 40 : 0; break;
        case CNT_BIG: counts[r] = (size_t)r * 9 + 23; break;
        case CNT_EQUAL: counts[r] = 64; break;
        }
    }
}

typedef struct rs_case {
    uint64_t tag;
    zinc_dtype t;
    size_t counts[64], displ, total;
    void *send, *recv;
} rs_case;

#define CANARY 5

static void rs_start(rs_case *k, uint64_t tag, int pattern, zinc_dtype t, zcomm_req **req) {
    k->tag = tag;
    k->t = t;
    make_counts(pattern, k->counts);
    k->total = k->displ = 0;
    for (int r = 0; r < P; r++) {
        if (r < R) k->displ += k->counts[r];
        k->total += k->counts[r];
    }
    size_t es = zinc_dtype_size(t);
    k->send = xmalloc(k->total * es);
    k->recv = xmalloc((k->counts[R] + CANARY) * es);
    for (size_t i = 0; i < k->total; i++) put(k->send, t, i, gen(tag, R, i, t));
    for (size_t i = 0; i < k->counts[R] + CANARY; i++) put(k->recv, t, i, -777.0f);
    ZT_OK(zcomm_reduce_scatterv(C, k->send, k->recv, k->counts, t, req));
}

static void rs_check(rs_case *k, const char *what) {
    int bad = 0;
    size_t n = k->counts[R];
    for (size_t i = 0; i < n; i++) {
        float g = get(k->recv, k->t, i);
        if (!sum_ok(g, k->tag, k->displ + i, k->t) && bad++ < 3)
            ZT_CHECK(0, "%s reduce_scatterv(%s) element %zu of %zu: got %.9g", what, zinc_dtype_name(k->t), i, n, g);
    }
    for (size_t i = n; i < n + CANARY; i++)
        if (get(k->recv, k->t, i) != round_to(k->t, -777.0f)) bad++;
    /* the send buffer is input only */
    for (size_t i = 0; i < k->total; i++)
        if (get(k->send, k->t, i) != gen(k->tag, R, i, k->t)) {
            bad++;
            break;
        }
    ZT_CHECK(bad == 0, "%s reduce_scatterv(%s, total %zu, mine %zu): %d bad", what, zinc_dtype_name(k->t),
             k->total, n, bad);
    free(k->send);
    free(k->recv);
}

static void test_reduce_scatterv(uint64_t tag, int pattern, zinc_dtype t, int nb) {
    rs_case k;
    zcomm_req *req = NULL;
    rs_start(&k, tag, pattern, t, nb ? &req : NULL);
    ZT_OK(zcomm_wait(C, req));
    rs_check(&k, nb ? "non-blocking" : "blocking");
}

/* ---------------------------------------------------------------- all-gather */

typedef struct ag_case {
    uint64_t tag;
    zinc_dtype t;
    size_t counts[64], displs[64], len;
    void *buf;
} ag_case;

#define SENTINEL -555.0f

/* layout 0: contiguous in rank order; 1: reversed order with gaps of 3; 2: rank order after an offset of
 * `base` elements with gaps of 1 (large displacements, small span) */
static void ag_start(ag_case *k, uint64_t tag, int pattern, int layout, size_t base, zinc_dtype t,
                     zcomm_req **req) {
    k->tag = tag;
    k->t = t;
    make_counts(pattern, k->counts);
    size_t off = layout == 2 ? base : 0;
    if (layout == 1) {
        for (int r = P - 1; r >= 0; r--) {
            k->displs[r] = off;
            off += k->counts[r] + 3;
        }
    } else {
        for (int r = 0; r < P; r++) {
            k->displs[r] = off;
            off += k->counts[r] + (layout == 2 ? 1 : 0);
        }
    }
    k->len = off + 2;
    k->buf = xmalloc(k->len * zinc_dtype_size(t));
    for (size_t i = 0; i < k->len; i++) put(k->buf, t, i, SENTINEL);
    for (size_t i = 0; i < k->counts[R]; i++) put(k->buf, t, k->displs[R] + i, gen(tag, R, i, t));
    ZT_OK(zcomm_allgatherv_inplace(C, k->buf, k->counts, k->displs, t, req));
}

static void ag_check(ag_case *k, const char *what) {
    int bad = 0;
    float *want = xmalloc(k->len * sizeof *want);
    for (size_t i = 0; i < k->len; i++) want[i] = round_to(k->t, SENTINEL);
    for (int q = 0; q < P; q++)
        for (size_t i = 0; i < k->counts[q]; i++) want[k->displs[q] + i] = gen(k->tag, q, i, k->t);
    for (size_t i = 0; i < k->len; i++) {
        float g = get(k->buf, k->t, i);
        if (g != want[i] && bad++ < 3)
            ZT_CHECK(0, "%s allgatherv(%s) element %zu: got %.9g want %.9g", what, zinc_dtype_name(k->t), i, g,
                     want[i]);
    }
    ZT_CHECK(bad == 0, "%s allgatherv_inplace(%s, len %zu): %d bad", what, zinc_dtype_name(k->t), k->len, bad);
    free(want);
    free(k->buf);
}

static void test_allgatherv(uint64_t tag, int pattern, int layout, size_t base, zinc_dtype t, int nb) {
    ag_case k;
    zcomm_req *req = NULL;
    ag_start(&k, tag, pattern, layout, base, t, nb ? &req : NULL);
    ZT_OK(zcomm_wait(C, req));
    ag_check(&k, nb ? "non-blocking" : "blocking");
}

/* ---------------------------------------------------------------- bytes, bcast */

static void test_allgather_bytes(size_t bytes, int inplace) {
    unsigned char *in = xmalloc(bytes), *out = xmalloc(bytes * (size_t)P);
    memset(out, 0xee, bytes * (size_t)P);
    unsigned char *src = inplace ? out + (size_t)R * bytes : in;
    for (size_t j = 0; j < bytes; j++) src[j] = (unsigned char)(R * 31 + j * 7 + 1);
    ZT_OK(zcomm_allgather_bytes(C, src, out, bytes));
    int bad = 0;
    for (int q = 0; q < P; q++)
        for (size_t j = 0; j < bytes; j++)
            if (out[(size_t)q * bytes + j] != (unsigned char)(q * 31 + j * 7 + 1)) bad++;
    ZT_CHECK(bad == 0, "allgather_bytes(%zu bytes%s): %d bad bytes", bytes, inplace ? ", in place" : "", bad);
    free(in);
    free(out);
}

static void test_bcast(size_t bytes, int root) {
    unsigned char *buf = xmalloc(bytes + 3);
    memset(buf, 0x5a, bytes + 3);
    if (R == root)
        for (size_t j = 0; j < bytes; j++) buf[j] = (unsigned char)(j * 13 + (size_t)root + 3);
    ZT_OK(zcomm_bcast(C, buf, bytes, root));
    int bad = 0;
    for (size_t j = 0; j < bytes; j++)
        if (buf[j] != (unsigned char)(j * 13 + (size_t)root + 3)) bad++;
    for (size_t j = bytes; j < bytes + 3; j++)
        if (buf[j] != 0x5a) bad++;
    ZT_CHECK(bad == 0, "bcast(%zu bytes, root %d): %d bad bytes", bytes, root, bad);
    free(buf);
}

/* ---------------------------------------------------------------- point to point */

/* A ring (send to the right, receive from the left) with a different count from every rank, then a chain
 * (rank 0 sends only, the last rank receives only). Values are small integers, exact in every dtype. A
 * backend without point-to-point messages (the staged one) refuses naming itself. */
static void test_sendrecv(size_t n, zinc_dtype t) {
    int right = (R + 1) % P, left = (R + P - 1) % P;
    size_t ns = n + (size_t)R, nr = n + (size_t)left, es = zinc_dtype_size(t);
    void *send = xmalloc((ns + 1) * es), *recv = xmalloc((nr + 1) * es);
    for (size_t i = 0; i < ns; i++) put(send, t, i, (float)((R * 37 + (int)i) % 200));
    put(recv, t, nr, -3.0f);
    if (!C->ops->sendrecv) {
        ZT_ERR(zcomm_sendrecv(C, send, ns, right, recv, nr, left, t), ZINC_ERR_UNSUPPORTED, C->ops->name);
        free(send);
        free(recv);
        return;
    }
    ZT_OK(zcomm_sendrecv(C, send, ns, right, recv, nr, left, t));
    int bad = 0;
    for (size_t i = 0; i < nr; i++)
        if (get(recv, t, i) != (float)((left * 37 + (int)i) % 200)) bad++;
    if (get(recv, t, nr) != -3.0f) bad++;
    ZT_CHECK(bad == 0, "sendrecv ring (%zu, %s): %d bad elements", n, zinc_dtype_name(t), bad);
    put(recv, t, 0, -1.0f);
    ZT_OK(zcomm_sendrecv(C, send, ns, R + 1 < P ? R + 1 : -1, recv, R > 0 ? n + (size_t)R - 1 : 0, R - 1, t));
    if (R > 0 && n + (size_t)R > 1)
        ZT_CHECK(get(recv, t, 0) == (float)(((R - 1) * 37) % 200), "sendrecv chain received");
    if (R == 0) ZT_CHECK(get(recv, t, 0) == -1.0f, "sendrecv chain: rank 0 received nothing");
    ZT_ERR(zcomm_sendrecv(C, send, 1, P, recv, 1, -1, t), ZINC_ERR_INVALID_ARG, "not a rank");
    free(send);
    free(recv);
}

/* ---------------------------------------------------------------- groups of tests */

static void test_all_collectives(uint64_t tagbase, size_t n) {
    for (size_t d = 0; d < 3; d++) {
        zinc_dtype t = DTYPES[d];
        for (int nb = 0; nb < 2; nb++) {
            uint64_t tag = tagbase + d * 100 + (uint64_t)nb * 10;
            test_allreduce(tag + 1, n, t, ZCOMM_SUM, nb);
            test_allreduce(tag + 2, n, t, ZCOMM_MAX, nb);
            test_allreduce(tag + 3, 1, t, ZCOMM_SUM, nb);
            for (int pat = 0; pat < CNT_NPATTERNS; pat++) test_reduce_scatterv(tag + 4 + (uint64_t)pat, pat, t, nb);
            for (int pat = 0; pat < CNT_NPATTERNS; pat++)
                for (int layout = 0; layout < 3; layout++)
                    test_allgatherv(tag + 4 + (uint64_t)pat, pat, layout, 100, t, nb);
        }
    }
}

/* Two (three) requests in flight at once, completed in the reverse order. */
static void test_overlap(void) {
    zcomm_req *ra = NULL, *rb = NULL, *rc = NULL, *rd = NULL;
    void *a = allreduce_start(9001, 777, ZINC_FP16, ZCOMM_SUM, &ra);
    rs_case b;
    rs_start(&b, 9002, CNT_SMALL, ZINC_BF16, &rb);
    ag_case c;
    ag_start(&c, 9003, CNT_ZEROS, 1, 0, ZINC_FP32, &rc);
    void *d = allreduce_start(9004, 300, ZINC_FP32, ZCOMM_MAX, &rd);
    if (P > 1 && strcmp(C->ops->name, "mpi") == 0) ZT_CHECK(ra && rb && rc && rd, "non-blocking calls gave requests");
    ZT_OK(zcomm_wait(C, rd));
    ZT_OK(zcomm_wait(C, rc));
    ZT_OK(zcomm_wait(C, rb));
    ZT_OK(zcomm_wait(C, ra));
    allreduce_check(a, 9001, 777, ZINC_FP16, ZCOMM_SUM);
    allreduce_check(d, 9004, 300, ZINC_FP32, ZCOMM_MAX);
    rs_check(&b, "overlapped");
    ag_check(&c, "overlapped");
    free(a);
    free(d);
}

/* Results with a tiny MPI count limit (the splitting paths). */
static void test_split(size_t limit) {
    zcomm_mpi_set_max_count(limit);
    ZT_CHECK(zcomm_mpi_max_count() == limit, "max_count set to %zu", limit);
    test_all_collectives(20000 + limit * 1000, 100);
    test_overlap();
    test_allgather_bytes(20, 0);
    test_allgather_bytes(20, 1);
    test_bcast(50, P - 1);
    test_bcast(3, 0);
    test_sendrecv(20, ZINC_FP32);
    zcomm_mpi_set_max_count(0);
    ZT_CHECK(zcomm_mpi_max_count() == ZCOMM_MPI_PIECE_DEFAULT, "max_count reset to the default piece");
}

/* Split and unsplit sums agree bit for bit when one add per element happens (p <= 2), and repeated runs
 * agree bit for bit for any p. */
static void test_determinism(void) {
    for (size_t d = 0; d < 3; d++) {
        zinc_dtype t = DTYPES[d];
        size_t n = 1000, bytes = n * zinc_dtype_size(t);
        void *a = allreduce_start(7001 + d, n, t, ZCOMM_SUM, NULL);
        void *b = allreduce_start(7001 + d, n, t, ZCOMM_SUM, NULL);
        ZT_CHECK(memcmp(a, b, bytes) == 0, "repeated allreduce(%s) differs", zinc_dtype_name(t));
        zcomm_req *r1 = NULL, *r2 = NULL;
        void *c1 = allreduce_start(7001 + d, n, t, ZCOMM_SUM, &r1);
        void *c2 = allreduce_start(7001 + d, n, t, ZCOMM_SUM, &r2);
        ZT_OK(zcomm_wait(C, r1));
        ZT_OK(zcomm_wait(C, r2));
        ZT_CHECK(memcmp(c1, c2, bytes) == 0, "repeated non-blocking allreduce(%s) differs", zinc_dtype_name(t));
        ZT_CHECK(same_on_all_ranks(a, bytes), "allreduce(%s) differs between ranks", zinc_dtype_name(t));
        zcomm_mpi_set_max_count(64);
        void *s = allreduce_start(7001 + d, n, t, ZCOMM_SUM, NULL);
        zcomm_mpi_set_max_count(0);
        if (P <= 2) {
            ZT_CHECK(memcmp(a, s, bytes) == 0, "split allreduce(%s) differs from unsplit", zinc_dtype_name(t));
            ZT_CHECK(memcmp(a, c1, bytes) == 0, "non-blocking allreduce(%s) differs from blocking",
                     zinc_dtype_name(t));
        }
        free(a);
        free(b);
        free(c1);
        free(c2);
        free(s);
    }
}

static void test_errors(void) {
    float x[4] = {0};
    zcomm_req *req = (zcomm_req *)x; /* must be overwritten */
    ZT_ERR(zcomm_allreduce(C, x, 4, (zinc_dtype)7, ZCOMM_SUM, NULL), ZINC_ERR_INVALID_ARG, "dtype");
    ZT_ERR(zcomm_allreduce(C, x, 4, ZINC_FP32, (zcomm_op)9, NULL), ZINC_ERR_INVALID_ARG, "op");
    ZT_ERR(zcomm_allreduce(C, NULL, 4, ZINC_FP32, ZCOMM_SUM, NULL), ZINC_ERR_INVALID_ARG, "NULL");
    ZT_ERR(zcomm_bcast(C, x, sizeof x, P), ZINC_ERR_INVALID_ARG, "root");
    ZT_ERR(zcomm_bcast(C, x, sizeof x, -1), ZINC_ERR_INVALID_ARG, "root");
    ZT_OK(zcomm_allreduce(C, x, 0, ZINC_FP32, ZCOMM_SUM, &req));
    ZT_CHECK(req == NULL, "zero-element non-blocking call returns a NULL request");
    ZT_OK(zcomm_wait(C, req));
    ZT_OK(zcomm_allgather_bytes(C, x, x, 0));
    ZT_OK(zcomm_bcast(C, NULL, 0, 0));
}

static void test_launcher_detection(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                                 "PMIX_RANK", "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS"};
    char *saved[8];
    for (int i = 0; i < 8; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    ZT_CHECK(!zcomm_launcher_detected(), "no launcher variables");
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_PROCID", "0", 1);
    ZT_CHECK(!zcomm_launcher_detected(), "salloc shell (SLURM_NTASKS, SLURM_PROCID, no step) is no launcher");
    setenv("SLURM_STEP_ID", "0", 1);
    ZT_CHECK(zcomm_launcher_detected(), "srun step");
    unsetenv("SLURM_STEP_ID");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    setenv("PMI_SIZE", "2", 1);
    ZT_CHECK(!zcomm_launcher_detected(), "PMI_SIZE alone is not enough");
    const char *one[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};
    for (int i = 0; i < 4; i++) {
        setenv(one[i], "0", 1);
        ZT_CHECK(zcomm_launcher_detected(), "%s", one[i]);
        unsetenv(one[i]);
    }
    for (int i = 0; i < 8; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
    /* the ZINC_COMM override */
    zcomm *c = NULL;
    setenv("ZINC_COMM", "bogus", 1);
    ZT_ERR(zcomm_create(NULL, &c), ZINC_ERR_INVALID_ARG, "ZINC_COMM");
    setenv("ZINC_COMM", "single", 1);
    ZT_OK(zcomm_create(NULL, &c));
    ZT_CHECK(c && strcmp(c->ops->name, "single") == 0, "ZINC_COMM=single");
    zcomm_destroy(c);
    unsetenv("ZINC_COMM");
}

/* Errors of the staged backend's creation and of the environment that chooses it. */
static void test_staged_errors(zcomm *host, zdevice *dev) {
    zcomm *c = NULL;
    ZT_ERR(zcomm_create_staged(host, dev, 8, NULL, &c), ZINC_ERR_INVALID_ARG, "staging bytes");
    ZT_CHECK(c == NULL, "failed creation leaves out NULL");
    ZT_ERR(zcomm_create_staged(NULL, dev, 4096, NULL, &c), ZINC_ERR_INVALID_ARG, "NULL");
    zdcomm_choice ch;
    size_t b = 0;
    setenv("ZINC_DEVICE_COMM", "infiniband", 1);
    ZT_ERR(zdcomm_choice_from_env(&ch), ZINC_ERR_INVALID_ARG, "auto, nccl, mpi or staged");
    ZT_ERR(dev->ops->comm_create(dev, host, NULL, &c), ZINC_ERR_INVALID_ARG, "ZINC_DEVICE_COMM=infiniband");
    setenv("ZINC_DEVICE_COMM", "nccl", 1);
    ZT_ERR(dev->ops->comm_create(dev, host, NULL, &c), ZINC_ERR_UNSUPPORTED, "NCCL needs device cuda");
    setenv("ZINC_DEVICE_COMM", "mpi", 1);
    ZT_OK(dev->ops->comm_create(dev, host, NULL, &c));
    ZT_CHECK(c == host, "cpu device with ZINC_DEVICE_COMM=mpi uses the host backend itself");
    setenv("ZINC_DEVICE_COMM", "staged", 1);
    setenv("ZINC_STAGING_BYTES", "100", 1);
    ZT_ERR(dev->ops->comm_create(dev, host, NULL, &c), ZINC_ERR_INVALID_ARG, "ZINC_STAGING_BYTES=100");
    setenv("ZINC_STAGING_BYTES", "12k", 1);
    ZT_ERR(zcomm_staging_bytes_from_env(&b), ZINC_ERR_INVALID_ARG, "from 4096");
    setenv("ZINC_STAGING_BYTES", "8192", 1);
    ZT_OK(zcomm_staging_bytes_from_env(&b));
    ZT_CHECK(b == 8192, "ZINC_STAGING_BYTES=8192 gives %zu", b);
    ZT_OK(dev->ops->comm_create(dev, host, NULL, &c));
    ZT_CHECK(c && c != host && !strcmp(c->ops->name, "mpi-staged"), "ZINC_DEVICE_COMM=staged wraps the host backend");
    if (c && c != host) zcomm_destroy(c);
    unsetenv("ZINC_DEVICE_COMM");
    unsetenv("ZINC_STAGING_BYTES");
    ZT_OK(zcomm_staging_bytes_from_env(&b));
    ZT_CHECK(b == ZCOMM_STAGING_DEFAULT, "default staging bytes");
}

int main(int argc, char **argv) {
    static char name[64];
    size_t staged = argc > 2 && !strcmp(argv[1], "--staged") ? (size_t)strtoull(argv[2], NULL, 10) : 0;
    const char *launched_env = getenv("OMPI_COMM_WORLD_SIZE");
    int launched = launched_env != NULL;
    if (!launched) test_launcher_detection();

    ZT_OK(zcomm_create(NULL, &C));
    if (!C) return zt_finish();
    zcomm *host = C;
    zmemtrack mem;
    zdevice *dev = NULL;
    if (staged) {
        memset(&mem, 0, sizeof mem);
        ZT_OK(zdev_create_cpu(&mem, &dev));
        test_staged_errors(host, dev);
        ZT_OK(zcomm_create_staged(host, dev, staged, NULL, &C));
        if (!C) return zt_finish();
        ZT_CHECK(mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] == staged, "staging counted: %llu bytes",
                 (unsigned long long)mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING]);
    }
    P = C->size;
    R = C->rank;
    snprintf(name, sizeof name, "test_comm[%s %d/%d]", C->ops->name, R, P);
    zt_name = name;
    if (P > 64) return zt_skip("at most 64 ranks");

    ZT_CHECK(strcmp(host->ops->name, launched ? "mpi" : "single") == 0, "backend %s (launcher: %d)",
             host->ops->name, launched);
    if (launched) {
        ZT_CHECK(P == atoi(launched_env), "size %d vs OMPI_COMM_WORLD_SIZE %s", P, launched_env);
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        ZT_CHECK(r && R == atoi(r), "rank %d vs OMPI_COMM_WORLD_RANK", R);
        ZT_CHECK(C->local_size == P, "one node: local size %d == size %d", C->local_size, P);
        ZT_CHECK(C->local_rank == R, "one node: local rank %d == rank %d", C->local_rank, R);
    } else {
        ZT_CHECK(P == 1 && R == 0 && C->local_rank == 0 && C->local_size == 1, "single: rank 0 of 1");
    }

    SEED = R == 0 ? zt_seed() : 0; /* rank 0 prints it; the others receive it */
    ZT_OK(zcomm_bcast(C, &SEED, sizeof SEED, 0));
    ZT_OK(zcomm_barrier(C));

    test_errors();
    test_all_collectives(1000, 1000);
    test_overlap();
    test_allgather_bytes(13, 0);
    test_allgather_bytes(13, 1);
    test_allgather_bytes(1, 0);
    test_bcast(37, P - 1);
    test_bcast(37, 0);
    test_bcast(100000, P / 2);
    for (size_t d = 0; d < 3; d++) test_sendrecv(1000, DTYPES[d]);
    test_sendrecv(0, ZINC_FP32);
    test_determinism();
    test_split(7);
    test_split(1);
    test_split(200); /* reduce-scatter/allgatherv in one call with relative displacements; allreduce split */
    ZT_OK(zcomm_barrier(C));

    if (staged) {
        zcomm_destroy(C);
        ZT_CHECK(mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] == 0, "staging freed");
        zdev_destroy(dev);
    }
    zcomm_destroy(host);
    int rc = zt_finish();
    zinc_finalize();
    zinc_finalize(); /* idempotent */
    return rc;
}
