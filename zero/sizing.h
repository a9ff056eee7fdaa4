/* ZeRO's sizing rules: gradient buffers and reduction buckets per stage, whether gradients need a
 * separate send copy, and stage-3 persistence. zero/grads.c and zero/gather.c size with them, and the
 * sizing plan (runtime/mem/plan.c), which zinc_build allocates from and the estimator sums, holds their
 * results, so a prediction cannot drift from what is allocated. */
#ifndef ZINC_ZERO_SIZING_H
#define ZINC_ZERO_SIZING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zero/partition.h"
#include "zinc.h"

/* What gradients are multiplied by before communication (DeepSpeed's prescale_gradients divides by the
 * world size; otherwise by gradient_predivide_factor), and whether that or a comm dtype different from
 * the grad dtype makes the send path convert into a separate buffer. */
float zsize_pre_scale(bool prescale_gradients, double predivide_factor, int world);
bool zsize_send_needs_copy(zinc_dtype comm_dtype, zinc_dtype grad_dtype, bool prescale_gradients,
                           double predivide_factor, int world);

/* Gradient buffers and reduction buckets of one rank (zero/grads.c allocates exactly these). */
typedef struct zgrads_plan {
    size_t bytes_grads_full;  /* stages 0-1: the full flat gradient buffer, grad dtype */
    size_t bytes_grads_shard; /* stages 1-3: the fp32 gradient shard */
    int nbuckets;             /* 0 when no bucket is needed (stage 0 without a send copy) */
    int64_t bucket_cap;       /* elements per bucket */
    int64_t biggest_module;   /* elements (aligned) */
    size_t bytes_bucket_grads, bytes_bucket_send, bytes_bucket_recv; /* per bucket */
    /* Stages 2-3, when some module is larger than a bucket: one landing buffer of the largest module's
     * size (grad dtype) that such a module's gradients are written into, then reduce-scattered from in
     * bucket-sized chunks. Memory is then largest module + buckets, not buckets of the largest module. */
    size_t bytes_landing;
    /* zinc.deterministic_reduction (zero/grads_determ.c): fp32 shard-sized buffers (this micro-step's sum over
     * the ranks, the log2(gas) partial sums over micro-steps, and at stage 0 the step's sum) and the buffer
     * that receives the partner's piece at each level of the tree over the ranks (0 at one rank). */
    int determ_shards;
    size_t bytes_determ_shard, bytes_determ_recv;
} zgrads_plan;

typedef struct zgrads_plan_in {
    int stage, world;
    const zpartition *part;
    zinc_dtype grad_dtype, comm_dtype;
    bool send_needs_copy;
    int64_t reduce_bucket_size;
    int64_t biggest_module; /* largest flat_end - flat_begin over modules */
    bool overlap_comm;
    bool deterministic;   /* zinc.deterministic_reduction */
    int64_t gas;          /* gradient_accumulation_steps (a power of two when deterministic) */
    bool shard_elsewhere; /* the fp32 gradient shard is kept by the owner (zgrads_ctx.shard_add): none here */
} zgrads_plan_in;

void zgrads_plan_make(const zgrads_plan_in *in, zgrads_plan *out);
/* Bytes of all buckets together, with the landing buffer. */
size_t zgrads_plan_bucket_bytes(const zgrads_plan *p);

/* Stage 3: whether a module of n (aligned) elements stays gathered, given the elements already
 * persistent (*total, updated). Modules are decided in registration order. */
bool zsize_persistent(int64_t n, int64_t *total, int64_t param_threshold, int64_t model_threshold);

/* ZeRO++ qwZ: the elements per quantization block of a piece of n elements, as DeepSpeed 0.19.8's
 * CUDAQuantizer.quantize chooses its group count (runtime/zero/partition_parameters.py): groups starts at
 * ceil(n / 8000) and grows until 8 x groups divides n, then doubles while 16 x groups divides n and the blocks
 * stay above 8000 elements; the block is n / groups (at most 8000, or 16000 after a doubling stops). DeepSpeed
 * asserts n is a multiple of 8; zinc's pieces are (parameters start on ZPART_PARAM_ALIGN boundaries), and a
 * piece that is not gets blocks of 8000 with a shorter last one. 0 for n = 0. */
#define ZSIZE_QUANT_TARGET_GROUP 8000
int64_t zsize_quant_block(int64_t n);
/* Bytes a piece of n elements takes on the wire: its fp32 scales, then its INT8 values, padded to 4 bytes
 * (the wire is all-gathered as 4-byte units). */
size_t zsize_quant_wire_bytes(int64_t n);
/* The wire bytes of a module's flat range [a, b) gathered over the partition: its pieces' sum. */
size_t zsize_quant_range_bytes(const zpartition *p, int64_t a, int64_t b);

/* ZeRO++ qgZ (zero/grads_qgz.c): gradients travel as INT4 (DeepSpeed's all_to_all_quant_reduce quantizes
 * with 4 bits in both stages), two values a byte, in quantization groups per tensor as DeepSpeed 0.19.8 picks
 * them (runtime/comm/coalesced_collectives.py): zsize_qgz_group. A tensor DeepSpeed sends through its
 * reduce_scatter fallback instead (1-D tensors, and those whose numel 2 x world does not divide) travels
 * unquantized ("raw": its values in the wire's dtype) and is summed exactly in fp32. */
#define ZSIZE_QGZ_BITS 4
/* The elements of one quantization group of a tensor of ndim dimensions: numel / max(shape[0], shape[1],
 * world) (DeepSpeed's intra_quant_group is that many groups; its inter-node groups, intra_quant_group /
 * local_world_size of a 1 / local_world_size share, are as long); 0: the tensor travels raw. */
int64_t zsize_qgz_group(int ndim, const int64_t *shape, int64_t numel, int world);
/* qgZ's view of the flat layout: n tensors in flat order, tensor i covering [begin[i], begin[i + 1]) (the last
 * to total: a tensor's alignment padding travels with it), group[i] its zsize_qgz_group. Its groups start at
 * begin[i] (DeepSpeed's start at the tensor's start); where a rank's piece cuts a group, each side is a group
 * of its own (DeepSpeed partitions every tensor, zinc the flat buffer). Elements before begin[0] travel raw. */
typedef struct zsize_qgz_layout {
    int n;
    const int64_t *begin, *group;
    int64_t total;
} zsize_qgz_layout;
/* One tensor's share of flat range [lo, hi) (zsize_qgz_next): [s, e), its group (0: raw), and head, the
 * elements before its first group boundary inside [s, e) (0: it starts on one). */
typedef struct zsize_qgz_seg {
    int64_t s, e, group, head;
} zsize_qgz_seg;
/* The segment of [lo, hi) that starts at lo (lo < hi); *idx (start at 0) speeds the walk from lo upwards. */
zsize_qgz_seg zsize_qgz_next(const zsize_qgz_layout *L, int *idx, int64_t lo, int64_t hi);
/* Bytes one segment takes on the wire, raw values of raw_size bytes: quantized, its fp32 scales (one a group
 * piece) then ceil(n / 2) bytes of values; raw, its values; either padded to 4. */
size_t zsize_qgz_seg_bytes(const zsize_qgz_seg *g, size_t raw_size);
/* The wire bytes of flat range [lo, hi): its segments' sum. */
size_t zsize_qgz_wire_bytes(const zsize_qgz_layout *L, int64_t lo, int64_t hi, size_t raw_size);
/* The scratch one qgZ reduction of at most cap elements needs (zgrads allocates it once, the sizing plan
 * holds it): the regions' upper bounds for pieces of at most min(cap, shard) elements, world ranks in nodes
 * of `local` consecutive ranks, over layout L (raw values counted at 4 bytes). */
typedef struct zsize_qgz {
    size_t s1_send, s1_recv, partial, s2_send, s2_recv, sum, qtmp, total;
} zsize_qgz;
void zsize_qgz_scratch(int64_t cap, int64_t shard, int world, int local, const zsize_qgz_layout *L, zsize_qgz *out);

#endif
