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
        ZDEV_ON_POOL(dev, zk_dequant_sym((const int8_t *)(w + nb * (int64_t)sizeof(float)), (const float *)w,
                                         counts[r], (size_t)b, (char *)out + displs[r] * es, t));
    }
}

zinc_status zpp_check(const zcfg_zero *z, const zcomm *c, const zdevice *dev) {
    if (z->stage != 3) return ZINC_OK;
    if (zpp_quantize_gathers(z, c->size) && !dev->host_addressable)
        return ZERR(ZINC_ERR_UNSUPPORTED,
                    "zero_optimization.zero_quantized_weights: qwZ's quantize kernels run on the host in this "
                    "build, and the %s device's buffers are not host-addressable; use the cpu device or set "
                    "zero_quantized_weights false",
                    dev->ops->name);
    return ZINC_OK;
}
