/* The store of this rank's fp32 optimizer state: master weights, exp_avg and exp_avg_sq over the rank's
 * own flat range [own_lo, own_hi), in memory (device, host or pinned host) or on NVMe. Every user (the
 * step, initialisation, zinc_gather_master, checkpoints) visits it the same way: a pass over chunks in
 * increasing order, so an NVMe store can read chunk i+1 and write chunk i-1 while chunk i is in use.
 *
 *   zstate_pass_begin(s, ZSTATE_READ_WRITE);
 *   for (int64_t i = 0; i < s->nchunks; i++) {
 *       zstate_view v;  TRY(zstate_acquire(s, i, &v));   ... use v.master/v.m/v.v[0..v.n) ...
 *       TRY(zstate_release(s, i));
 *   }
 *   TRY(zstate_pass_end(s));
 *
 * A failed pass leaves the stored state as it was before the failing chunk (chunks are written whole,
 * after their update); zstate_pass_abort drops what is in flight. */
#ifndef ZINC_OFFLOAD_STATE_H
#define ZINC_OFFLOAD_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "zinc.h"

struct zinc_engine;

typedef enum {
    ZSTATE_READ = 1,        /* chunks are read, not changed */
    ZSTATE_WRITE = 2,       /* chunks are overwritten entirely (initialisation, checkpoint load) */
    ZSTATE_READ_WRITE = 3,  /* chunks are read and updated (the optimizer step) */
    ZSTATE_HOST_VIEW = 4    /* or'ed in: the views must be host memory (checkpoints, zinc_gather_master); a
                               device-resident store stages each chunk through host memory */
} zstate_mode;

typedef struct zstate_view {
    int64_t lo;             /* first element of the chunk, relative to own_lo; a multiple of 1024 */
    int64_t n;              /* elements in the chunk */
    float *master, *m, *v;  /* n floats each, valid until zstate_release */
} zstate_view;

typedef struct zstate zstate;

typedef struct zstate_ops {
    const char *name;
    zinc_status (*pass_begin)(zstate *s, zstate_mode mode);
    zinc_status (*acquire)(zstate *s, int64_t chunk, zstate_view *out);
    zinc_status (*release)(zstate *s, int64_t chunk);
    zinc_status (*pass_end)(zstate *s);
    void (*pass_abort)(zstate *s);
    void (*destroy)(zstate *s);
    /* Optional (NULL: nothing to do): moves queued IO along without blocking. Users call it now and then
     * while they work on an acquired chunk, so reads ahead and writes behind keep the disk busy. */
    zinc_status (*poll)(zstate *s);
} zstate_ops;

struct zstate {
    const zstate_ops *ops;
    struct zinc_engine *e;
    int64_t n;              /* elements stored (the own range) */
    int64_t chunk;          /* elements per chunk (the last may be shorter) */
    int64_t nchunks;
    bool device_resident;   /* views are compute-device memory that the host cannot address (cuda, no
                               offload): only the device operations may touch them, or a ZSTATE_HOST_VIEW pass */
    zstate_mode mode;       /* of the current pass without ZSTATE_HOST_VIEW; 0 outside a pass */
    bool host_view;         /* the current pass asked for ZSTATE_HOST_VIEW */
    int64_t next;           /* the chunk the pass expects next (order is checked) */
};

/* Creates the store the config asks for: zero_optimization.offload_optimizer.device none (the compute
 * device's memory), cpu (host memory, pinned with pin_memory) or nvme (files under nvme_path). */
zinc_status zstate_create(struct zinc_engine *e, int64_t n, zstate **out);
/* kind == the compute device's kind: the arrays are allocated by the engine's device (device_resident
 * when the host cannot address them); any other kind: host memory counted under that kind. */
zinc_status zstate_create_memory(struct zinc_engine *e, int64_t n, zinc_mem_kind kind, int64_t chunk, zstate **out);
zinc_status zstate_create_nvme(struct zinc_engine *e, int64_t n, zstate **out);
void zstate_destroy(zstate *s);

zinc_status zstate_pass_begin(zstate *s, zstate_mode mode);
zinc_status zstate_acquire(zstate *s, int64_t chunk, zstate_view *out);
zinc_status zstate_release(zstate *s, int64_t chunk);
zinc_status zstate_pass_end(zstate *s);
void zstate_pass_abort(zstate *s);
static inline zinc_status zstate_poll(zstate *s) { return s->ops->poll ? s->ops->poll(s) : ZINC_OK; }
/* Elements of a chunk a user works on between zstate_poll calls (a multiple of every kernel's group). */
#define ZSTATE_POLL_ELEMS ((int64_t)1 << 22)

/* Elements per chunk for a requested sub_group_size: rounded up to a multiple of ZSTATE_CHUNK_ALIGN
 * (4 KiB of floats, so chunks start on O_DIRECT and SIMD boundaries), at most n. */
#define ZSTATE_CHUNK_ALIGN 1024
int64_t zstate_chunk_elems(int64_t sub_group_size, int64_t n);
/* Elements per chunk of a state store in GPU memory (64 MiB per array). */
#define ZSTATE_DEVICE_CHUNK ((int64_t)1 << 24)

#endif
