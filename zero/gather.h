/* Stage-3 parameter gathering (zero/gather.c). The engine owns a zgather, fills in its context at
 * zinc_build and calls these functions; zero/ never sees the engine. */
#ifndef ZINC_ZERO_GATHER_H
#define ZINC_ZERO_GATHER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/core/log.h"
#include "base/device/device.h"
#include "zero/module.h"
#include "zero/partition.h"
#include "zinc.h"

typedef struct zgather_trace_entry {
    int module;
    int phase;
} zgather_trace_entry;

/* What gathering needs from its owner; the pointed-to objects outlive the zgather. */
typedef struct zgather_ctx {
    zdevice *dev; /* gathered copies live on it */
    zcomm *dcomm; /* collectives on device buffers */
    const zlog *log;
    const zpartition *part;
    int rank, world;
    zinc_dtype compute_dtype;
    const void *params_shard; /* this rank's compute-dtype parameter shard, starting at flat element own_lo */
    /* When params_shard is NULL (offload_param nvme): reads shard elements [lo, lo + n) (relative to own_lo)
     * into dst, at the module's gather (a prefetch reads it when the prefetch is issued) */
    zinc_status (*read_own)(void *ud, int64_t lo, int64_t n, void *dst);
    /* With read_own, optionally: a prefetch issues the read of its piece now (prefetch_own, when
     * can_prefetch_own says the swap buffers have room) and its all-gather when the module is used; the
     * read_own there completes it (offload_param.buffer_count swap buffers in flight, io_uring) */
    bool (*can_prefetch_own)(void *ud, int64_t lo, int64_t n);
    zinc_status (*prefetch_own)(void *ud, int64_t lo, int64_t n);
    void *read_ud;
    int64_t own_lo;
    const zcfg_zero *cfg;   /* zero_optimization: the stage3_* thresholds */
    const zmodule *modules; /* the owner's, registration order, fixed once built; read only here */
    int nmodules;
    /* ZeRO++ hpZ (zero/zeropp.h): the secondary group (NULL: no hpZ) and the secondary partition over it */
    zcomm *hcomm;
    zpartition hpart;
} zgather_ctx;

/* What gathering keeps per module (zgather.mods, registration order): owned by zero/gather.c alone. */
typedef struct zgather_module {
    bool persistent;             /* small enough to stay gathered (stage3_param_persistence_threshold) */
    void *gathered;              /* compute-dtype copy of the module's flat range while live */
    zcomm_req *gather_req;       /* pending (prefetch) all-gather into `gathered` */
    size_t *g_counts, *g_displs; /* per-rank pieces of the gather; live as long as the request */
    /* qwZ (zero_quantized_weights): the pending gather's wire, each rank's piece as fp32 scales then INT8
     * values (zero/sizing.h), in 4-byte units; dequantized into `gathered` and freed when it completes */
    void *wire;
    size_t wire_bytes;
    size_t *w_counts, *w_displs;
    bool from_secondary; /* hpZ: the pending (or last) gather came from the secondary shards */
    bool own_pending;    /* prefetch_own: the piece's read is in flight, the all-gather not issued yet */
    int64_t trace_t0;    /* --trace: when the pending all-gather was issued, on lane trace_lane */
    int trace_lane;
    bool trace_prefetch;
} zgather_module;

typedef struct zgather {
    zgather_ctx c;
    zgather_module *mods; /* c.nmodules, made at the first zgather_after_step (zinc_build) */
    int64_t live_numel;   /* gathered elements of non-persistent modules */
    zgather_trace_entry *trace;
    int trace_len, trace_cap, trace_pos;
    bool trace_started, trace_recording, trace_valid;
    bool trace_lost; /* an entry the trace does not have: re-record at the next step */
    int64_t stat_prefetch, stat_gather_blocking, stat_trace_resync; /* since the owner last reset them */
    int64_t stat_wire_bytes; /* qwZ: bytes all-gathered as quantized wire (all ranks' pieces), since build */
    int64_t stat_secondary;  /* hpZ: gathers served inside the secondary group, since build */
    /* hpZ: this rank's secondary shard (hpart.shard compute-dtype elements, made at the first
     * zgather_after_step) and, per module, whether it holds the module's values of the current step */
    void *secondary;
    bool *sec_valid;
    /* --trace: all-gathers in flight at once each take a free lane (a track), so each track's spans nest */
#define ZGATHER_TRACE_LANES 8
    int trace_lane_track[ZGATHER_TRACE_LANES];
    bool trace_lane_busy[ZGATHER_TRACE_LANES];
} zgather;

/* Takes the context (nothing is allocated before the first zgather_after_step). */
void zgather_init(zgather *g, const zgather_ctx *ctx);
/* new_micro_step: a forward after a completed backward (no module open in backward). */
zinc_status zgather_module_enter(zgather *g, int module, int phase, bool new_micro_step);
zinc_status zgather_module_exit(zgather *g, int module, int phase);
/* After the optimizer step (and at build): drop stale gathered copies and refresh persistent modules. */
zinc_status zgather_after_step(zgather *g);
/* A fresh engine has recorded no module trace yet: the next zgather_after_step starts recording anew
 * rather than ending an empty recording (a checkpoint load before any training). */
void zgather_forget_empty_trace(zgather *g);
/* The module's gathered compute-dtype copy of its flat range, or NULL when it is not gathered. */
const void *zgather_module_data(const zgather *g, int module);
/* Whether the module stays gathered between steps (decided at the first zgather_after_step). */
bool zgather_module_persistent(const zgather *g, int module);
/* Frees the gathered copies, the module records and the trace (also for a zeroed zgather). */
void zgather_free(zgather *g);

#endif
