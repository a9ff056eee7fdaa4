/* ZeRO++ pieces for stage-3 gathering (zero/zeropp.h). */
#include "zero/zeropp.h"

#include <errno.h>
#include <stdlib.h>

#include "kernels/cpu_kernels.h"
#include "base/core/env.h"
#include "base/core/error.h"
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

/* qgZ: the node groups, when there is more than one node (DeepSpeed's stage3.py reduces with
 * all_to_all_quant_reduce only then, and reduce-scatters on one node). */
static zinc_status setup_qgz(const zcfg_zero *z, const zlog *log, zcomm *dcomm, const zdevice *dev, zcomm **intra,
                             zcomm **inter) {
    zinc_status st = ZINC_OK;
    if (!z->quantized_gradients || dcomm->size == 1) return ZINC_OK;
    if (!dev->host_addressable)
        FAIL(ZINC_ERR_UNSUPPORTED,
             "zero_optimization.zero_quantized_gradients: qgZ's quantize kernels run on the host in this build, "
             "and the %s device's buffers are not host-addressable; use the cpu device or set it false",
             dev->ops->name);
    int L = dcomm->local_size;
    const char *hook = zenv_get(ZENV_TEST_RANKS_PER_NODE);
    if (hook && *hook) {
        char *end = NULL;
        errno = 0;
        long v = strtol(hook, &end, 10);
        if (errno || *end || v < 1 || v > dcomm->size || dcomm->size % v)
            FAIL(ZINC_ERR_INVALID_ARG, "ZINC_TEST_RANKS_PER_NODE=\"%s\": expected a divisor of the %d ranks", hook,
                 dcomm->size);
        L = (int)v;
    }
    if (dcomm->size % L)
        FAIL(ZINC_ERR_CONFIG,
             "zero_optimization.zero_quantized_gradients: nodes of %d ranks do not divide the %d ranks; qgZ needs "
             "the same number of ranks on every node (as DeepSpeed's _get_local_all_to_all_group)",
             L, dcomm->size);
    if (dcomm->size == L) {
        ZLOG_INFO(log,
                  "zero_quantized_gradients: all %d ranks share one node, so gradients are reduce-scattered as "
                  "without it (DeepSpeed 0.19.8 quantizes them only across nodes: stage3.py, num_nodes > 1)",
                  dcomm->size);
        return ZINC_OK;
    }
    st = zcomm_split(dcomm, dcomm->rank / L, dcomm->rank, intra);
    if (st == ZINC_OK) st = zcomm_split(dcomm, dcomm->rank % L, dcomm->rank, inter);
    if (st != ZINC_OK)
        FAIL(st, "zero_optimization.zero_quantized_gradients: qgZ's node groups: %s; set it false", zinc_last_error());
    if (!(hook && *hook) && (*intra)->local_size != L)
        FAIL(ZINC_ERR_CONFIG,
             "zero_optimization.zero_quantized_gradients: ranks %d-%d do not share a node (%d of them share rank "
             "%d's); "
             "qgZ needs the ranks of a node numbered consecutively (mpirun's --map-by node does not)",
             dcomm->rank / L * L, dcomm->rank / L * L + L - 1, (*intra)->local_size, dcomm->rank);
    if (!(*intra)->ops->alltoallv_bytes)
        FAIL(ZINC_ERR_UNSUPPORTED, "zero_optimization.zero_quantized_gradients: the %s backend has no all-to-all",
             (*intra)->ops->name);
    return ZINC_OK;
fail:
    return st;
}

zinc_status zpp_setup(const zcfg_zero *z, const zlog *log, zcomm *comm, zcomm *dcomm, const zdevice *dev, zcomm **hcomm,
                      zcomm **qgz_intra, zcomm **qgz_inter) {
    *hcomm = *qgz_intra = *qgz_inter = NULL;
    if (z->stage != 3 || (!z->quantized_weights && !z->quantized_gradients && zpp_hpz_size(z, dcomm->size) <= 1))
        return ZINC_OK;
    zinc_status st = setup(z, dcomm, dev, hcomm);
    if (st == ZINC_OK) st = setup_qgz(z, log, dcomm, dev, qgz_intra, qgz_inter);
    st = zcomm_agree_status(comm, st);
    if (st != ZINC_OK) {
        zcomm *all[] = {*hcomm, *qgz_intra, *qgz_inter};
        for (int i = 0; i < 3; i++) zcomm_destroy(all[i]);
        *hcomm = *qgz_intra = *qgz_inter = NULL;
    }
    return st;
}
