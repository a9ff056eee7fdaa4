/* ZeRO++ (DeepSpeed 0.19.8's zero_quantized_weights, zero_hpz_partition_size, zero_quantized_gradients):
 * the pieces stage 3's gathering (zero/gather.c) calls.
 *
 * qwZ: a stage-3 all-gather sends, from every rank, its piece of the module quantized to INT8 in blocks
 * (zk_quant_sym, 8 bits; the block size is zsize_quant_block's, DeepSpeed's CUDAQuantizer rule) as one wire:
 * per rank, the piece's fp32 scales then its INT8 values, padded to ZPP_WIRE_UNIT bytes. Every rank, this one
 * included, then dequantizes every piece, so all ranks compute with the same gathered parameters, as
 * DeepSpeed's (its own partition comes back through the all-gather too). */
#ifndef ZINC_ZERO_ZEROPP_H
#define ZINC_ZERO_ZEROPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm.h"
#include "runtime/config/config.h"
#include "runtime/device/device.h"
#include "zinc.h"

#define ZPP_WIRE_UNIT 4 /* bytes per element of the wire's all-gather */
#define ZPP_QWZ_BITS 8  /* DeepSpeed's CUDAQuantizer: quantize(param, groups, 8, Symmetric) */

/* Whether stage-3 gathers are quantized: qwZ on and more than one rank (one rank gathers nothing). */
bool zpp_quantize_gathers(const zcfg_zero *z, int world);
/* The wire of pieces counts[r] (elements): w_counts / w_displs in ZPP_WIRE_UNIT units; returns its bytes. */
size_t zpp_wire_layout(const size_t *counts, int world, size_t *w_counts, size_t *w_displs);
/* Quantizes n elements of src (dtype t, host-addressable) into one rank's wire piece at dst. */
void zpp_wire_quantize(zdevice *dev, const void *src, int64_t n, zinc_dtype t, void *dst);
/* Dequantizes every rank's piece of the wire into out (counts / displs in elements of dtype t). */
void zpp_wire_dequantize(zdevice *dev, const void *wire, const size_t *counts, const size_t *displs,
                         const size_t *w_displs, int world, void *out, zinc_dtype t);

/* What ZeRO++ needs of the job that the config alone cannot tell (zinc_create calls it once the
 * communicator and the device exist): qwZ's kernels run on the host, so the device's buffers must be
 * host-addressable. */
zinc_status zpp_check(const zcfg_zero *z, const zcomm *c, const zdevice *dev);

#endif
