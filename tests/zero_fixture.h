/* The part of a zero/ unit test's fixture that test_zero_grads.c, test_zero_gather.c and test_grads_determ.c
 * share: the cpu device, a memory tracker, the collectives of this run and a hand-made module table of known sizes, laid
 * out as the engine lays modules out (one parameter per module, contiguous flat ranges). */
#ifndef ZINC_TESTS_ZERO_FIXTURE_H
#define ZINC_TESTS_ZERO_FIXTURE_H

#include "base/comm/comm.h"
#include "base/device/device.h"
#include "zero/grads.h"
#include "zero/module.h"
#include "zero/partition.h"

/* Elements per module (multiples of 8, one larger than the others so small buckets split it). */
#define ZFX_NMOD 6
extern const int64_t zfx_sizes[ZFX_NMOD];

typedef struct zfx_base {
    zmemtrack mem;
    zlog log;
    zdevice *dev;
    zcomm *world, *dcomm; /* dcomm may be world itself (the cpu device's collectives are the host's) */
    zpartition part;
    zmodule mods[ZFX_NMOD];
    int64_t biggest; /* elements of the largest module */
} zfx_base;

/* Creates the device and its collectives over `world`, fills the module table and partitions it. */
zinc_status zfx_base_init(zfx_base *b, zcomm *world);
void zfx_base_free(zfx_base *b);
/* Bytes the tracker holds now in category c, over every memory kind. */
uint64_t zfx_tracked(const zfx_base *b, zinc_mem_category c);

/* zero/grads.c over that base: the plan and the gradient state test_zero_grads.c and test_grads_determ.c
 * drive. */
typedef struct zfx_grads {
    zfx_base b;
    zgrads_plan plan;
    zgrads g;
} zfx_grads;

typedef struct zfx_grads_opts {
    int stage;
    zinc_dtype dtype; /* gradient and communication dtype */
    int64_t bucket;   /* reduce_bucket_size */
    bool overlap, prescale, deterministic;
    int64_t gas; /* gradient_accumulation_steps (the deterministic reduction's counter) */
} zfx_grads_opts;

zinc_status zfx_grads_init(zfx_grads *f, zcomm *world, const zfx_grads_opts *o);
void zfx_grads_free(zfx_grads *f);

#endif
