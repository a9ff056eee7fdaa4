/* Statistics of the NVMe optimizer-state store (offload/state_nvme.c), for tests, benchmarks and logs. */
#ifndef ZINC_OFFLOAD_STATE_NVME_H
#define ZINC_OFFLOAD_STATE_NVME_H

#include <stdint.h>

#include "offload/state.h"

typedef struct zstate_nvme_stats {
    uint64_t passes;
    uint64_t chunks_read, chunks_written;
    uint64_t bytes_read, bytes_written; /* file bytes, every tensor */
    int max_reads_ahead;                /* most later chunks being read while a chunk was handed to the caller */
    int max_writes_behind;              /* most earlier chunks still being written at that moment */
    double wait_s;                      /* time acquire/release/pass_end spent blocked on IO */
    int buffers;                        /* swap buffers in use */
    uint32_t align;                     /* the O_DIRECT alignment used */
    int direct;                         /* 1: O_DIRECT, 0: buffered (zinc.allow_buffered_io) */
} zstate_nvme_stats;

/* ZINC_ERR_INVALID_ARG when s is not an NVMe store. */
zinc_status zstate_nvme_stats_get(const zstate *s, zstate_nvme_stats *out);

/* The run directory every NVMe file of a run lives in (collective over c->comm: rank 0 makes
 * <root>/zinc-<pid>-<random> after sweeping the stale ones, every rank gets its malloc'd path in *out), and
 * mkdir -p with mode 0700: shared with the parameter store (offload/param_nvme.c). */
zinc_status zstate_nvme_run_dir(const zstate_ctx *c, const char *root, char **out);
zinc_status zstate_nvme_make_dirs(const char *path);

#endif
