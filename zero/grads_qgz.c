/* ZeRO++ qgZ: stage 3's gradient reduce-scatter as DeepSpeed 0.19.8's all_to_all_quant_reduce does it
 * (runtime/comm/coalesced_collectives.py), over zinc's flat buckets. Ranks are n x L + l (node n of N, local
 * index l of L). For a bucket [a, b) whose piece for rank d is P_d (zpart_range_split):
 *   1. inside the node: this rank quantizes every P_d to INT4 (zk_quant_sym, 4 bits, two values a byte) in
 *      each tensor's groups (zsize_qgz_group: numel / max(rows, cols, world), from the tensor's start) and sends
 *      to its local peer l' the pieces of the ranks with local index l' (one per node); an all-to-all over the
 *      node's ranks (qgz_intra);
 *   2. it dequantizes the L contributions it received for each rank (n', l) and sums them in fp32, peer by peer
 *      in local-index order: its node's partial sum for that rank;
 *   3. across nodes: it quantizes each partial sum to INT4 again, in the same groups (DeepSpeed's
 *      inter_quant_group: intra_quant_group / L groups of a 1 / L share), and sends it to rank (n', l); an
 *      all-to-all over the ranks of local index l (qgz_inter), so only 1/L of the bucket, at half a byte an
 *      element, crosses the link per rank;
 *   4. it dequantizes the N partial sums of its own piece, sums them in fp32 in node order and adds the sum
 *      into its fp32 gradient shard.
 * The tensors DeepSpeed reduce-scatters instead (1-D ones: biases, norms; numel not a multiple of 2 x world)
 * travel raw in the same all-to-alls (stage 1 in the bucket's dtype, stage 2 the fp32 partial sums), so they
 * are summed exactly as a reduce-scatter would. Every sum is in a fixed order, so a run is bitwise
 * reproducible. Where zinc differs from DeepSpeed, and why:
 *   - zinc sums (the gradients arrive pre-scaled, as for its reduce-scatter) where DeepSpeed averages;
 *   - DeepSpeed's kernels read fp16 and sum the node's contributions in fp16 (swizzled_quantize.cu,
 *     quant_reduce.cu: a bf16 or fp32 gradient would be reinterpreted), zinc quantizes the bucket's dtype
 *     and sums in fp32;
 *   - DeepSpeed partitions each tensor into world equal parts, zinc the flat buffer, so a piece boundary may
 *     cut a group: each side is quantized as a group of its own. */
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

/* Quantizes n values of dtype t in groups of `group` whose first is `head` long (0: a whole one): scales at
 * sc, values at q. */
static void quant_groups(zgrads *g, const char *src, zinc_dtype t, int64_t n, int64_t group, int64_t head, int8_t *q,
                         float *sc) {
    size_t es = zinc_dtype_size(t);
    if (head) ZDEV_ON_POOL(g->c.dev, zk_quant_sym(src, t, (size_t)head, (size_t)head, ZSIZE_QGZ_BITS, q, sc));
    if (n > head)
        ZDEV_ON_POOL(g->c.dev, zk_quant_sym(src + (size_t)head * es, t, (size_t)(n - head), (size_t)group,
                                            ZSIZE_QGZ_BITS, q + head, sc + (head ? 1 : 0)));
}

/* The wire of flat range [lo, hi) (zsize_qgz_wire_bytes(lo, hi, size of t) bytes at w) from its values (dtype
 * t) at src: per tensor segment its scales and packed values, or its raw values; returns its bytes. */
static size_t put_range(zgrads *g, const void *src, zinc_dtype t, int64_t lo, int64_t hi, char *w, int8_t *qtmp) {
    size_t off = 0, es = zinc_dtype_size(t);
    int idx = 0;
    for (int64_t x = lo; x < hi;) {
        zsize_qgz_seg sg = zsize_qgz_next(&g->qgz_layout, &idx, x, hi);
        int64_t n = sg.e - sg.s;
        const char *p = (const char *)src + (size_t)(sg.s - lo) * es;
        size_t used, bytes = zsize_qgz_seg_bytes(&sg, es);
        if (!sg.group) {
            used = (size_t)n * es;
            memcpy(w + off, p, used);
        } else {
            int64_t nb = (sg.head ? 1 : 0) + (n - sg.head + sg.group - 1) / sg.group;
            quant_groups(g, p, t, n, sg.group, sg.head, qtmp, (float *)(w + off));
            pack4(qtmp, n, (uint8_t *)w + off + 4 * nb);
            used = (size_t)(4 * nb + (n + 1) / 2);
        }
        memset(w + off + used, 0, bytes - used); /* the padding: no stale bytes on the wire */
        off += bytes;
        x = sg.e;
    }
    return off;
}

/* Reads the wire of flat range [lo, hi) at w (raw values of dtype rt) into out (fp32, hi - lo elements);
 * returns its bytes. */
static size_t get_range(zgrads *g, const char *w, zinc_dtype rt, int64_t lo, int64_t hi, int8_t *qtmp, float *out) {
    size_t off = 0, es = zinc_dtype_size(rt);
    int idx = 0;
    for (int64_t x = lo; x < hi;) {
        zsize_qgz_seg sg = zsize_qgz_next(&g->qgz_layout, &idx, x, hi);
        int64_t n = sg.e - sg.s, h = sg.head;
        float *o = out + (sg.s - lo);
        if (!sg.group) {
            zcast_to_f32(o, w + off, rt, (size_t)n);
        } else {
            int64_t nb = (h ? 1 : 0) + (n - h + sg.group - 1) / sg.group;
            const float *sc = (const float *)(w + off);
            unpack4((const uint8_t *)w + off + 4 * nb, n, qtmp);
            if (h) ZDEV_ON_POOL(g->c.dev, zk_dequant_sym(qtmp, sc, (size_t)h, (size_t)h, o, ZINC_FP32));
            if (n > h)
                ZDEV_ON_POOL(g->c.dev, zk_dequant_sym(qtmp + h, sc + (h ? 1 : 0), (size_t)(n - h), (size_t)sg.group,
                                                      o + h, ZINC_FP32));
        }
        off += zsize_qgz_seg_bytes(&sg, es);
        x = sg.e;
    }
    return off;
}

static void add(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

zinc_status zgrads_qgz_alloc(zgrads *g) {
    zinc_status st = ZINC_OK;
    const zsize_qgz_layout *cl = g->c.qgz_layout;
    g->qgz_layout = (zsize_qgz_layout){.total = g->c.part->padded};
    if (cl && cl->n > 0) {
        TRY_ALLOC(g->qgz_lay, 2 * (size_t)cl->n, "the qgZ layout");
        memcpy(g->qgz_lay, cl->begin, (size_t)cl->n * sizeof(int64_t));
        memcpy(g->qgz_lay + cl->n, cl->group, (size_t)cl->n * sizeof(int64_t));
        g->qgz_layout = (zsize_qgz_layout){cl->n, g->qgz_lay, g->qgz_lay + cl->n, cl->total};
    }
    zsize_qgz q;
    zsize_qgz_scratch(g->bucket_cap, g->c.part->shard, g->c.world, g->c.qgz_intra->size, &g->qgz_layout, &q);
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
    free(g->qgz_lay);
    g->qgz_lay = NULL;
    g->qgz_layout = (zsize_qgz_layout){0};
}

zinc_status zgrads_qgz_reduce_range(zgrads *g, const void *src, zinc_dtype t, int64_t a, int64_t b) {
    zinc_status st = ZINC_OK;
    zcomm *intra = g->c.qgz_intra, *inter = g->c.qgz_inter;
    const int W = g->c.world, L = intra->size, N = inter->size, l = intra->rank, n = inter->rank;
    if (b - a > g->bucket_cap)
        return ZERR(ZINC_ERR_INTERNAL, "qgZ: a range of %lld elements is above the bucket's %lld", (long long)(b - a),
                    (long long)g->bucket_cap);
    zsize_qgz q;
    zsize_qgz_scratch(g->bucket_cap, g->c.part->shard, W, L, &g->qgz_layout, &q);
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
            off += put_range(g, (const char *)src + dsp[d] * es, t, a + (int64_t)dsp[d], a + (int64_t)(dsp[d] + cnt[d]),
                             s1s + off, qtmp);
        }
        sc[lp] = off - sd[lp];
    }
    size_t mine = 0; /* the wire bytes of the pieces for ranks (n', l), from each peer */
    for (int np = 0; np < N; np++) {
        int d = np * L + l;
        mine += zsize_qgz_wire_bytes(&g->qgz_layout, a + (int64_t)dsp[d], a + (int64_t)(dsp[d] + cnt[d]), es);
    }
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
            int d = np * L + l;
            int64_t c = (int64_t)cnt[d], lo = a + (int64_t)dsp[d];
            w += get_range(g, w, t, lo, lo + c, qtmp, sum);
            add(p, sum, c);
            p += c;
        }
    }

    /* 3. each partial sum to its rank (n', l), across the nodes */
    off = 0;
    const float *p = partial;
    for (int np = 0; np < N; np++) {
        int d = np * L + l;
        int64_t c = (int64_t)cnt[d], lo = a + (int64_t)dsp[d];
        sd[np] = off;
        off += put_range(g, p, ZINC_FP32, lo, lo + c, s2s + off, qtmp);
        sc[np] = off - sd[np];
        p += c;
    }
    int me = n * L + l;
    int64_t me_lo = a + (int64_t)dsp[me], me_hi = me_lo + (int64_t)cnt[me];
    size_t w1 = zsize_qgz_wire_bytes(&g->qgz_layout, me_lo, me_hi, sizeof(float));
    for (int np = 0; np < N; np++) rc[np] = w1, rd[np] = (size_t)np * w1;
    TRY(zcomm_alltoallv_bytes(inter, s2s, sc, sd, s2r, rc, rd));
    g->stat_qgz_bytes += (int64_t)off;

    /* 4. the nodes' sums of this rank's piece, in node order, into the shard */
    if (cnt[me]) {
        float *total = partial; /* free again: its values were sent */
        memset(total, 0, cnt[me] * sizeof(float));
        for (int np = 0; np < N; np++) {
            get_range(g, s2r + rd[np], ZINC_FP32, me_lo, me_hi, qtmp, sum);
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
