/* ZeRO++ qgZ: stage 3's gradient reduce-scatter as DeepSpeed 0.19.8's all_to_all_quant_reduce does it
 * (base/comm/coalesced_collectives.py), over zinc's flat buckets. Ranks are n x L + l (node n of N, local
 * index l of L). For a bucket [a, b) whose piece for rank d is P_d (zpart_range_split):
 *   1. inside the node: this rank quantizes every P_d to INT4 (zk_quant_sym, 4 bits, blocks of
 *      ZSIZE_QGZ_BLOCK, two values a byte) and sends to its local peer l' the pieces of the ranks with local
 *      index l' (one per node); an all-to-all over the node's ranks (qgz_intra);
 *   2. it dequantizes the L contributions it received for each rank (n', l) and sums them in fp32, peer by peer
 *      in local-index order: its node's partial sum for that rank;
 *   3. across nodes: it quantizes each partial sum to INT4 again and sends it to rank (n', l); an all-to-all
 *      over the ranks of local index l (qgz_inter), so only 1/L of the bucket, at half a byte an element,
 *      crosses the link per rank;
 *   4. it dequantizes the N partial sums of its own piece, sums them in fp32 in node order and adds the sum
 *      into its fp32 gradient shard.
 * Every sum is in a fixed order, so a run is bitwise reproducible. zinc sums (the gradients arrive pre-scaled,
 * as for its reduce-scatter) where DeepSpeed averages; DeepSpeed sends 1-D tensors and tensors whose size
 * 2 x world does not divide through reduce_scatter, zinc quantizes every piece of a bucket; DeepSpeed's
 * quantization group is a tensor's numel / max(rows, cols, world), zinc's block is ZSIZE_QGZ_BLOCK. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "base/core/error.h"
#include "zero/grads.h"
#include "zero/sizing.h"

static void pack4(const int8_t *q, int64_t n, uint8_t *out) {
    for (int64_t j = 0; 2 * j < n; j++) {
        uint8_t lo = (uint8_t)(q[2 * j] & 0xF), hi = 2 * j + 1 < n ? (uint8_t)(q[2 * j + 1] & 0xF) : 0;
        out[j] = (uint8_t)(lo | (hi << 4));
    }
}

static void unpack4(const uint8_t *in, int64_t n, int8_t *q) {
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = in[i / 2];
        uint8_t v = (uint8_t)((i & 1) ? b >> 4 : b & 0xF);
        q[i] = (int8_t)(v >= 8 ? (int)v - 16 : (int)v); /* the nibble's two's complement */
    }
}

/* One wire piece (zsize_qgz_wire_bytes(n) bytes at w): its scales, then the packed values. */
static size_t put_piece(zgrads *g, const void *src, zinc_dtype t, int64_t n, char *w, int8_t *qtmp) {
    if (n <= 0) return 0;
    int64_t nb = (n + ZSIZE_QGZ_BLOCK - 1) / ZSIZE_QGZ_BLOCK;
    ZDEV_ON_POOL(g->c.dev, zk_quant_sym(src, t, (size_t)n, ZSIZE_QGZ_BLOCK, ZSIZE_QGZ_BITS, qtmp, (float *)w));
    pack4(qtmp, n, (uint8_t *)w + 4 * nb);
    return zsize_qgz_wire_bytes(n);
}

/* Dequantizes one wire piece at w into out (fp32, n elements); returns its bytes. */
static size_t get_piece(zgrads *g, const char *w, int64_t n, int8_t *qtmp, float *out) {
    if (n <= 0) return 0;
    int64_t nb = (n + ZSIZE_QGZ_BLOCK - 1) / ZSIZE_QGZ_BLOCK;
    unpack4((const uint8_t *)w + 4 * nb, n, qtmp);
    ZDEV_ON_POOL(g->c.dev, zk_dequant_sym(qtmp, (const float *)w, (size_t)n, ZSIZE_QGZ_BLOCK, out, ZINC_FP32));
    return zsize_qgz_wire_bytes(n);
}

static void add(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

zinc_status zgrads_qgz_alloc(zgrads *g) {
    zinc_status st = ZINC_OK;
    zsize_qgz q;
    zsize_qgz_scratch(g->bucket_cap, g->c.part->shard, g->c.world, g->c.qgz_intra->size, &q);
    g->bytes_qgz = q.total;
    TRY(g->c.dev->ops->alloc(g->c.dev, ZINC_MEM_BUCKETS, q.total, "the qgZ all-to-all buffers", &g->qgz));
    TRY_ALLOC(g->qgz_ints, 6 * (size_t)g->c.world, "the qgZ counts");
    return ZINC_OK;
fail:
    return st;
}

void zgrads_qgz_free(zgrads *g) {
    if (g->qgz) g->c.dev->ops->free(g->c.dev, ZINC_MEM_BUCKETS, g->qgz, g->bytes_qgz);
    g->qgz = NULL;
    free(g->qgz_ints);
    g->qgz_ints = NULL;
}

zinc_status zgrads_qgz_reduce_range(zgrads *g, const void *src, zinc_dtype t, int64_t a, int64_t b) {
    zinc_status st = ZINC_OK;
    zcomm *intra = g->c.qgz_intra, *inter = g->c.qgz_inter;
    const int W = g->c.world, L = intra->size, N = inter->size, l = intra->rank, n = inter->rank;
    if (b - a > g->bucket_cap)
        return ZERR(ZINC_ERR_INTERNAL, "qgZ: a range of %lld elements is above the bucket's %lld", (long long)(b - a),
                    (long long)g->bucket_cap);
    zsize_qgz q;
    zsize_qgz_scratch(g->bucket_cap, g->c.part->shard, W, L, &q);
    char *s1s = g->qgz, *s1r = s1s + q.s1_send, *s2s = s1r + q.s1_recv + q.partial, *s2r = s2s + q.s2_send;
    float *partial = (float *)(s1r + q.s1_recv), *sum = (float *)(s2r + q.s2_recv);
    int8_t *qtmp = (int8_t *)((char *)sum + q.sum);
    size_t *cnt = g->qgz_ints, *dsp = cnt + W, *sc = dsp + W, *sd = sc + W, *rc = sd + W, *rd = rc + W;
    size_t es = zinc_dtype_size(t);
    zpart_range_split(g->c.part, a, b, cnt, dsp);

    /* 1. to local peer lp: the pieces of ranks (n', lp) for every node n' */
    size_t off = 0, roff = 0;
    for (int lp = 0; lp < L; lp++) {
        sd[lp] = off;
        for (int np = 0; np < N; np++) {
            int d = np * L + lp;
            off += put_piece(g, (const char *)src + dsp[d] * es, t, (int64_t)cnt[d], s1s + off, qtmp);
        }
        sc[lp] = off - sd[lp];
    }
    size_t mine = 0; /* the wire bytes of the pieces for ranks (n', l), from each peer */
    for (int np = 0; np < N; np++) mine += zsize_qgz_wire_bytes((int64_t)cnt[np * L + l]);
    for (int lp = 0; lp < L; lp++, roff += mine) rc[lp] = mine, rd[lp] = roff;
    TRY(zcomm_alltoallv_bytes(intra, s1s, sc, sd, s1r, rc, rd));
    g->stat_qgz_bytes += (int64_t)off;

    /* 2. the node's partial sums for ranks (n', l), peer by peer */
    size_t pn = 0;
    for (int np = 0; np < N; np++) pn += cnt[np * L + l];
    memset(partial, 0, pn * sizeof(float));
    for (int lp = 0; lp < L; lp++) {
        const char *w = s1r + rd[lp];
        float *p = partial;
        for (int np = 0; np < N; np++) {
            int64_t c = (int64_t)cnt[np * L + l];
            w += get_piece(g, w, c, qtmp, sum);
            add(p, sum, c);
            p += c;
        }
    }

    /* 3. each partial sum to its rank (n', l), across the nodes */
    off = 0;
    const float *p = partial;
    for (int np = 0; np < N; np++) {
        int64_t c = (int64_t)cnt[np * L + l];
        sd[np] = off;
        off += put_piece(g, p, ZINC_FP32, c, s2s + off, qtmp);
        sc[np] = off - sd[np];
        p += c;
    }
    int me = n * L + l;
    size_t w1 = zsize_qgz_wire_bytes((int64_t)cnt[me]);
    for (int np = 0; np < N; np++) rc[np] = w1, rd[np] = (size_t)np * w1;
    TRY(zcomm_alltoallv_bytes(inter, s2s, sc, sd, s2r, rc, rd));
    g->stat_qgz_bytes += (int64_t)off;

    /* 4. the nodes' sums of this rank's piece, in node order, into the shard */
    if (cnt[me]) {
        float *total = partial; /* free again: its values were sent */
        memset(total, 0, cnt[me] * sizeof(float));
        for (int np = 0; np < N; np++) {
            get_piece(g, s2r + rd[np], (int64_t)cnt[me], qtmp, sum);
            add(total, sum, (int64_t)cnt[me]);
        }
        int64_t lo, hi;
        zpart_intersect(g->c.part, g->c.rank, a, b, &lo, &hi);
        float *dst = g->shard + (lo - (int64_t)g->c.rank * g->c.part->shard);
        add(dst, total, hi - lo);
    }
    g->stat_qgz_reductions++;
    return ZINC_OK;
fail:
    return st;
}
