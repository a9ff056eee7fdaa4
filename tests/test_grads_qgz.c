/* ZeRO++ qgZ's reduction (zero/grads_qgz.c) on its own, from the zero/ fixture (cpu device, this run's ranks
 * split into nodes of 2 consecutive ranks at 4 ranks, of 1 at 2): every rank's gradients of the flat range,
 * of magnitudes that change from block to block, reduced by zgrads_qgz_reduce_range into the fp32 shard,
 * against the float64 sum over the ranks, element by element. The fixture's six modules are the tensors of a
 * qgZ layout, three quantized (in groups of 100, 74 and 96 from the tensor's start, the last not dividing it)
 * and three raw (DeepSpeed's reduce_scatter fallback). Quantized elements within the two stages' INT4 bound:
 * each rank's contribution is off by at most one step (max / 8) of its group (the tensor's group, cut where a
 * rank's piece begins or ends), each node's partial sum by one step of its own group (at most 9/8 of the sum
 * of its contributions' maxima), plus 2^-10 of the whole for the float roundings; raw elements within 2^-20
 * of the sum of their magnitudes (fp32 sums only). The reduction must see quantization (some element off),
 * repeat bitwise, and send through the all-to-alls the bytes zero/sizing.h's wire layout says. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/sizing.h"
#include "zero_fixture.h"
#include "zt.h"

/* The layout: the fixture's modules as tensors (begin filled from them), three quantized, three raw. */
#define CUT 1500 /* where the second bucket starts: inside the tensor of groups of 96, inside a group */
static int64_t begin[ZFX_NMOD], group[ZFX_NMOD] = {0, 100, 0, 74, 0, 96};

static int tensor_of(int64_t i) {
    int t = ZFX_NMOD - 1;
    while (t > 0 && begin[t] > i) t--;
    return t;
}

/* Magnitudes change from group to group (counted from each tensor's start; the same on every rank, by 2^7
 * or 2^-4 from one group to the next), so a group placed elsewhere mixes two magnitudes and breaks the
 * small one's bound. */
static double value(int r, int64_t i) {
    int t = tensor_of(i);
    int64_t k = group[t] ? (i - begin[t]) / group[t] + 13 * t : i / 64;
    double mag = ldexp(1.0, (int)(k * 7 % 11) - 5);
    uint64_t s = (uint64_t)(r * 1000003 + i) * 0x9E3779B97F4A7C15ull;
    return mag * ((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
}

int main(void) {
    zt_name = "zero_grads_qgz";
    zlog wlog = {.level = ZINC_LOG_WARN};
    zcomm *world = NULL;
    if (zcomm_create(&wlog, &world) != ZINC_OK) return zt_skip(zinc_last_error());
    if (world->size < 2) {
        zcomm_destroy(world);
        return zt_skip("qgZ reduces over 2 ranks or more (run under mpirun)");
    }
    const int W = world->size, L = W >= 4 && W % 2 == 0 ? 2 : 1, N = W / L;
    zcomm *intra = NULL, *inter = NULL;
    ZT_OK(zcomm_split(world, world->rank / L, world->rank, &intra));
    ZT_OK(zcomm_split(world, world->rank % L, world->rank, &inter));
    zfx_grads f;
    ZT_OK(zfx_grads_init(&f, world, &(zfx_grads_opts){.stage = 3, .dtype = ZINC_FP32, .bucket = 1 << 20, .gas = 1}));
    f.g.c.qgz_intra = intra;
    f.g.c.qgz_inter = inter;
    const zpartition *p = &f.b.part;
    for (int i = 0; i < ZFX_NMOD; i++) begin[i] = f.b.mods[i].flat_begin;
    zsize_qgz_layout lay = {ZFX_NMOD, begin, group, p->padded};
    f.g.c.qgz_layout = &lay;
    ZT_OK(zgrads_alloc(&f.g));
    int64_t n = p->numel, lo = (int64_t)world->rank * p->shard;
    float *src = calloc((size_t)n, sizeof *src);
    for (int64_t i = 0; i < n; i++) src[i] = (float)value(world->rank, i);
    float *first = calloc((size_t)p->shard, sizeof *first);
    for (int rep = 0; rep < 2; rep++) {
        memset(f.g.shard, 0, (size_t)p->shard * sizeof(float));
        int64_t sent0 = f.g.stat_qgz_bytes;
        /* two buckets, the second starting inside a tensor and a group (as the engine's do) */
        ZT_OK(zgrads_qgz_reduce_range(&f.g, src, ZINC_FP32, 0, CUT));
        ZT_OK(zgrads_qgz_reduce_range(&f.g, src + CUT, ZINC_FP32, CUT, n));
        if (rep == 0) {
            memcpy(first, f.g.shard, (size_t)p->shard * sizeof(float));
            /* what the wire layout says this rank sends: every piece once, then its node's sums once */
            size_t *cnt = calloc((size_t)W, sizeof *cnt), *dsp = calloc((size_t)W, sizeof *dsp);
            int64_t want = 0, ra[3] = {0, CUT, n};
            for (int k = 0; k < 2; k++) {
                zpart_range_split(p, ra[k], ra[k + 1], cnt, dsp);
                for (int d = 0; d < W; d++) {
                    int64_t a = ra[k] + (int64_t)dsp[d], b = a + (int64_t)cnt[d];
                    want += (int64_t)zsize_qgz_wire_bytes(&lay, a, b, sizeof(float));
                    if (d % L == intra->rank) want += (int64_t)zsize_qgz_wire_bytes(&lay, a, b, sizeof(float));
                }
            }
            ZT_CHECK(f.g.stat_qgz_bytes - sent0 == want, "sent %lld bytes, the layout says %lld",
                     (long long)(f.g.stat_qgz_bytes - sent0), (long long)want);
            free(cnt), free(dsp);
        } else {
            ZT_CHECK(!memcmp(first, f.g.shard, (size_t)p->shard * sizeof(float)), "a second reduction differs");
        }
    }
    /* the bound, element by element, with each tensor's groups from its start, cut at this rank's piece */
    int64_t hi = lo + p->shard < n ? lo + p->shard : n, off = 0, bad = 0;
    double worst = 0;
    for (int64_t i = lo; i < hi; i++) {
        int t = tensor_of(i);
        int64_t end = t + 1 < ZFX_NMOD ? begin[t + 1] : p->padded, gq = group[t];
        int64_t b0 = i, b1 = i + 1;
        if (gq) {
            b0 = begin[t] + (i - begin[t]) / gq * gq, b1 = b0 + gq;
            int64_t c0 = i < CUT ? lo : (lo > CUT ? lo : CUT), c1 = i < CUT && hi > CUT ? CUT : hi;
            b0 = b0 > c0 ? b0 : c0;
            b1 = b1 < c1 ? b1 : c1;
            b1 = b1 < end ? b1 : end;
            b1 = b1 < hi ? b1 : hi;
        }
        double exact = 0, bound = 0, whole = 0;
        for (int nd = 0; nd < N; nd++) {
            double node_max = 0;
            for (int l = 0; l < L; l++) {
                int r = nd * L + l;
                double m = 0;
                for (int64_t k = b0; k < b1; k++) m = fmax(m, fabs((double)(float)value(r, k)));
                exact += (double)(float)value(r, i);
                whole += m;
                bound += gq ? m / 8 : 0;
                node_max += m;
            }
            bound += gq ? node_max * 9 / 8 / 8 : 0;
        }
        bound += whole * ldexp(1.0, gq ? -10 : -20);
        double err = fabs((double)f.g.shard[i - lo] - exact);
        if (err > 0 && gq) off++;
        if (err > bound && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "element %lld (group %lld): %.9g, exact %.9g: off by %.3g, bound %.3g",
                       (long long)i, (long long)gq, f.g.shard[i - lo], exact, err, bound);
        worst = fmax(worst, err / bound);
    }
    if (!bad) zt_passed++;
    ZT_CHECK(hi <= lo || off > 0, "no element was off: nothing was quantized");
    if (world->rank == 0)
        printf("qgZ, %d ranks in nodes of %d: largest error %.3f of the bound over %lld elements\n", W, L, worst,
               (long long)(hi - lo));
    free(src), free(first);
    zfx_grads_free(&f);
    zcomm_destroy(intra);
    zcomm_destroy(inter);
    zcomm_destroy(world);
    return zt_finish();
}
