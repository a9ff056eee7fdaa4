/* ZeRO++ pieces for stage-3 gathering (zero/zeropp.h). */
#include "zero/zeropp.h"

#include "kernels/cpu_kernels.h"
#include "runtime/core/error.h"
#include "zero/sizing.h"

bool zpp_quantize_gathers(const zcfg_zero *z, int world) { return z->quantized_weights && world > 1; }

size_t zpp_wire_layout(const size_t *counts, int world, size_t *w_counts, size_t *w_displs) {
    size_t units = 0;
    for (int r = 0; r < world; r++) {
        w_counts[r] = zsize_quant_wire_bytes((int64_t)counts[r]) / ZPP_WIRE_UNIT;
        w_displs[r] = units;
        units += w_counts[r];
    }
    return units * ZPP_WIRE_UNIT;
}

/* A wire piece of n elements: its scales, then its values. */
static void piece(int64_t n, int64_t *block, int64_t *nblocks) {
    *block = zsize_quant_block(n);
    *nblocks = *block ? (n + *block - 1) / *block : 0;
}

void zpp_wire_quantize(zdevice *dev, const void *src, int64_t n, zinc_dtype t, void *dst) {
    if (n <= 0) return;
    int64_t b, nb;
    piece(n, &b, &nb);
    float *scales = (float *)dst;
    int8_t *q = (int8_t *)dst + nb * (int64_t)sizeof(float);
    ZDEV_ON_POOL(dev, zk_quant_sym(src, t, (size_t)n, (size_t)b, ZPP_QWZ_BITS, q, scales));
}

void zpp_wire_dequantize(zdevice *dev, const void *wire, const size_t *counts, const size_t *displs,
                         const size_t *w_displs, int world, void *out, zinc_dtype t) {
    size_t es = zinc_dtype_size(t);
    for (int r = 0; r < world; r++) {
        if (!counts[r]) continue;
        int64_t b, nb;
        piece((int64_t)counts[r], &b, &nb);
        const char *w = (const char *)wire + w_displs[r] * ZPP_WIRE_UNIT;
        ZDEV_ON_POOL(dev, zk_dequant_sym((const int8_t *)(w + nb * (int64_t)sizeof(float)), (const float *)w, counts[r],
                                         (size_t)b, (char *)out + displs[r] * es, t));
    }
}

int zpp_hpz_size(const zcfg_zero *z, int world) {
    if (z->stage != 3 || z->hpz_partition_size <= 1) return 1;
    return z->hpz_partition_size < world ? z->hpz_partition_size : world;
}

void zpp_secondary_partition(const zpartition *primary, int G, int rank, zpartition *out) {
    zpart_init(out, primary->numel, G, rank % G);
}

static zinc_status setup(const zcfg_zero *z, zcomm *dcomm, const zdevice *dev, zcomm **hcomm) {
    zinc_status st = ZINC_OK;
    if (zpp_quantize_gathers(z, dcomm->size) && !dev->host_addressable)
        FAIL(ZINC_ERR_UNSUPPORTED,
             "zero_optimization.zero_quantized_weights: qwZ's quantize kernels run on the host in this build, and "
             "the %s device's buffers are not host-addressable; use the cpu device or set zero_quantized_weights "
             "false",
             dev->ops->name);
    int G = zpp_hpz_size(z, dcomm->size);
    if (G <= 1) return ZINC_OK;
    if (dcomm->size % G) /* config_zeropp.c refuses it first, for the world the config was resolved with */
        FAIL(ZINC_ERR_CONFIG,
             "zero_optimization.zero_hpz_partition_size %d does not divide the %d ranks (DeepSpeed 0.19.8: \"%d is "
             "not divisible by %d\")",
             z->hpz_partition_size, dcomm->size, dcomm->size, G);
    st = zcomm_split(dcomm, dcomm->rank / G, dcomm->rank, hcomm);
    if (st != ZINC_OK)
        FAIL(st,
             "zero_optimization.zero_hpz_partition_size %d: hpZ's secondary groups need a backend that splits "
             "into groups of ranks (%s); set it to 1",
             z->hpz_partition_size, zinc_last_error());
    if ((*hcomm)->local_size != G) {
        int first = dcomm->rank / G * G;
        FAIL(ZINC_ERR_CONFIG,
             "zero_optimization.zero_hpz_partition_size %d: the secondary group of ranks %d-%d spans nodes (only %d "
             "of them share rank %d's node, which has %d ranks of this job); hpZ keeps the backward all-gathers "
             "inside a node, so use a size that divides the ranks per node (%d here), with the ranks of a node "
             "numbered consecutively",
             z->hpz_partition_size, first, first + G - 1, (*hcomm)->local_size, dcomm->rank, dcomm->local_size,
             dcomm->local_size);
    }
    return ZINC_OK;
fail:
    return st;
}

zinc_status zpp_setup(const zcfg_zero *z, zcomm *comm, zcomm *dcomm, const zdevice *dev, zcomm **hcomm) {
    *hcomm = NULL;
    if (z->stage != 3 || (!z->quantized_weights && zpp_hpz_size(z, dcomm->size) <= 1)) return ZINC_OK;
    zinc_status st = zcomm_agree_status(comm, setup(z, dcomm, dev, hcomm));
    if (st != ZINC_OK) {
        zcomm_destroy(*hcomm);
        *hcomm = NULL;
    }
    return st;
}
