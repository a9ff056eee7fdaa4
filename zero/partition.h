/* Flat-buffer partitioning. Parameters of the one dtype group are laid out in registration order in a
 * flat buffer, each starting on a ZPART_PARAM_ALIGN-element boundary (so layouts do not depend on the
 * world size, and the decay mask can work in groups of 8). The buffer is padded so every rank's shard
 * has the same length S, a multiple of ZPART_SHARD_ALIGN elements (256 bytes of fp32, 128 of fp16):
 * rank r owns [r*S, (r+1)*S). Parameters may straddle shard edges. */
#ifndef ZINC_ZERO_PARTITION_H
#define ZINC_ZERO_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#define ZPART_PARAM_ALIGN 8
#define ZPART_SHARD_ALIGN 64

typedef struct zpartition {
    int world, rank;
    int64_t numel;  /* end of the last parameter (aligned), before shard padding */
    int64_t shard;  /* S: elements per rank */
    int64_t padded; /* world * S */
} zpartition;

static inline int64_t zpart_align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* Fills the partition for a flat buffer holding `numel` elements. */
void zpart_init(zpartition *p, int64_t numel, int world, int rank);

/* The intersection of [a, b) with rank r's shard, as [*lo, *hi) (empty when *lo == *hi). */
void zpart_intersect(const zpartition *p, int r, int64_t a, int64_t b, int64_t *lo, int64_t *hi);

/* For the flat range [a, b): per-rank counts of its intersection with each shard, and displacements of
 * those pieces relative to a (both arrays of length world). Returns the count on `rank`. */
size_t zpart_range_split(const zpartition *p, int64_t a, int64_t b, size_t *counts, size_t *displs);

#endif
