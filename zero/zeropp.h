/* ZeRO++ (DeepSpeed 0.19.8's zero_quantized_weights, zero_hpz_partition_size, zero_quantized_gradients):
 * the pieces stage 3's gathering (zero/gather.c) calls.
 *
 * qwZ: a stage-3 all-gather sends, from every rank, its piece of the module quantized to INT8 in blocks
 * (zk_quant_sym, 8 bits; the block size is zsize_quant_block's, DeepSpeed's CUDAQuantizer rule) as one wire:
 * per rank, the piece's fp32 scales then its INT8 values, padded to ZPP_WIRE_UNIT bytes. Every rank, this one
 * included, then dequantizes every piece, so all ranks compute with the same gathered parameters, as
 * DeepSpeed's (its own partition comes back through the all-gather too).
 *
 * hpZ: besides its primary shard, each rank keeps a secondary shard of the flat parameters, partitioned over
 * its group of zpp_hpz_size consecutive ranks (inside one node); it is filled from the gathered copies of the
 * first (primary) gather of each module after an optimizer step, and every later gather of the module until
 * the next step (backward, further micro-steps) all-gathers inside the group from it: the same values, so
 * hpZ alone changes no number. With qwZ the secondary holds the dequantized values, and the group's gathers
 * quantize them again in the group's pieces (intra-node), as DeepSpeed 0.19.8's _all_gather_coalesced does
 * with a secondary tensor. */
#ifndef ZINC_ZERO_ZEROPP_H
#define ZINC_ZERO_ZEROPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/device/device.h"
#include "zero/partition.h"
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

/* hpZ: the secondary group's size, min(zero_hpz_partition_size, world) as DeepSpeed's
 * _create_zero_param_parallel_group, or 1 (no hpZ: size 0 or 1, or below stage 3). */
int zpp_hpz_size(const zcfg_zero *z, int world);

/* hpZ's secondary partition of the flat buffer over a group of G ranks, for the rank of global index `rank`
 * (its index in the group is rank % G): the flat elements the primary partition has, split by zero/
 * partition.h's rules over G ranks. */
void zpp_secondary_partition(const zpartition *primary, int G, int rank, zpartition *out);

/* What ZeRO++ needs of the job that the config alone cannot tell (zinc_create calls it once the
 * communicators and the device exist; collective over comm, every rank gets the first failing rank's
 * reason): qwZ's kernels run on the host, so the device's buffers must be host-addressable; hpZ's group of
 * zpp_hpz_size consecutive ranks (DeepSpeed's grouping) becomes *hcomm, split from dcomm, and must lie
 * inside one node (MPI_COMM_TYPE_SHARED), or the backward gathers it serves would cross the link hpZ is
 * there to spare. *hcomm is NULL without hpZ. qgZ with more than one node: *qgz_intra (the node's ranks, by
 * local index) and *qgz_inter (the ranks of this local index, by node), nodes of consecutive ranks of
 * MPI_COMM_TYPE_SHARED's size (ZINC_TEST_RANKS_PER_NODE in tests); NULL on one node, where DeepSpeed
 * reduce-scatters too (logged). */
zinc_status zpp_setup(const zcfg_zero *z, const zlog *log, zcomm *comm, zcomm *dcomm, const zdevice *dev, zcomm **hcomm,
                      zcomm **qgz_intra, zcomm **qgz_inter);

#endif
