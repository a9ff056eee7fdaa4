/* The memory estimator: from a model's parameter sizes (grouped into modules), a resolved ds_config, the
 * world size and the compute device, the bytes one rank's engine allocates, by memory kind and category,
 * at their peak. It follows the engine's own rules (zero/partition.h for the flat layout, zero/sizing.h
 * for gradients, buckets and stage-3 persistence, offload/state.h for where the optimizer state lives)
 * and simulates the stage-3 gather schedule for a model that enters its modules in registration order
 * in forward and in reverse order in backward. tests/test_mem_estimate.c checks it against the engine's
 * accounting for every stage, offload choice and 1-4 ranks.
 *
 * Also here: DeepSpeed's own estimators (DeepSpeed 0.19:
 * estimate_zero2_model_states_mem_needs in deepspeed/runtime/zero/stage_1_and_2.py and
 * estimate_zero3_model_states_mem_needs in deepspeed/runtime/zero/stage3.py), for comparison, and the
 * pre-flight check zinc_build runs before allocating anything. */
#ifndef ZINC_RUNTIME_MEM_ESTIMATE_H
#define ZINC_RUNTIME_MEM_ESTIMATE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "zinc.h"

struct zinc_engine;

/* Parameters in registration (forward) order and the module of each: 0 for the first parameter,
 * nondecreasing, no gaps (what zinc_module_add / zinc_param_add allow). */
typedef struct zmem_model {
    int nparams;
    const int64_t *numel;
    const int *module;
} zmem_model;

typedef struct zmem_estimate {
    /* Peak bytes per (memory kind, category). Only the gather buffers come and go during a step, so the
     * peak of each kind's total is the sum of its row. */
    uint64_t bytes[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t total[ZINC_MEMKIND_COUNT];

    /* What it was computed from, for reports. */
    int stage, world, rank;
    zinc_device_kind device;
    zcfg_offload_device offload;      /* offload_optimizer.device */
    zinc_dtype compute_dtype, grad_dtype, comm_dtype;
    int64_t numel;                    /* parameters (no padding) */
    int64_t flat_numel;               /* the flat buffer before shard padding */
    int64_t shard, padded;            /* elements per rank; world * shard */
    int64_t own;                      /* elements of optimizer state on this rank */
    int nmodules;
    int64_t largest_module;           /* parameters of the largest module (no padding): DeepSpeed's L */
    int64_t largest_module_flat;      /* its flat (aligned) elements */
    int64_t largest_param;
    int npersistent;                  /* stage 3: modules that stay gathered */
    int64_t persistent_numel;
    int nbuckets;
    int64_t bucket_cap;
    uint64_t bytes_landing;           /* stages 2-3: the landing buffer for modules larger than a bucket (0: none) */
    int64_t gather_peak_numel;        /* stage 3: non-persistent elements gathered at once, at most */
    int64_t state_chunk;              /* elements per optimizer-state chunk (sub_group_size) */
    int nvme_swap_buffers;            /* NVMe store: swap buffers, each one chunk of master, m and v */
    uint64_t offload_staging;         /* GPU with offload: the step's pinned gradient and parameter staging */

    /* Transients the engine's counters do not hold but the process's resident memory does (host bytes):
     * the build's fp32 initialisation scratch (freed before zinc_build returns) and MPI's temporaries
     * inside one collective piece (comm_mpi.h), at most `comm_pending` pieces at once. */
    uint64_t init_scratch;            /* as the engine builds (zmem_estimate_compute: zinc_build_ranged) */
    uint64_t init_scratch_whole;      /* zinc_build with a whole-tensor init_fn */
    int64_t comm_piece;               /* elements per MPI call at most (zcomm_mpi_max_count) */
    int comm_pending;                 /* pieces in flight at once (reduce buckets with overlap_comm) */
    uint64_t comm_temp;               /* bound on MPI's temporaries, bytes */
    uint64_t before_build;            /* host bytes in the totals allocated by zinc_create (collective staging) */
    int64_t nvme_chunk;               /* elements per chunk with NVMe offload (sub_group_size, capped) */
    int nvme_buffers;                 /* swap buffers NVMe offload would use (buffer_count, capped) */
    int cheaper_stage;                /* set by the pre-flight: the higher stage needing the least memory of the
                                       * kind that is short at this rank count, -1: none is cheaper */
    uint64_t cheaper_bytes;           /* its bytes of that kind */
} zmem_estimate;

/* The process's resident-memory growth this estimate predicts from before zinc_build to its peak:
 * memory in host RAM (host, pinned, and the device's bytes when the device is host memory) at the
 * larger of the build (model state without gather buffers, plus the init scratch) and the steps
 * (everything, plus MPI's temporaries). `device_in_host`: the device allocates host memory (the cpu
 * device, also when presented as discrete). */
uint64_t zmem_estimate_rss(const zmem_estimate *est, bool device_in_host);

/* The multiple of a piece's bytes Open MPI allocates as temporaries inside one collective call, at most
 * (reduce-scatter and allreduce in Open MPI's tuned and libnbc components; docs/mem.md). */
#define ZMEM_MPI_TEMP_FACTOR 2

/* Computes the estimate for rank `rank` of `world`. cfg must be resolved (zcfg_load_*). device is the
 * compute device: ZINC_DEVICE_CPU places everything in host memory (what the engine does today),
 * ZINC_DEVICE_CUDA places the same plan in device memory (pinned host for offload with pin_memory).
 * Fails with ZINC_ERR_INVALID_ARG for an empty or malformed model. */
zinc_status zmem_estimate_compute(const zmem_model *m, const zinc_config *cfg, int world, int rank,
                                  zinc_device_kind device, zmem_estimate *out);

/* The model-state categories (parameters, gradients, master, moments, bookkeeping), which the estimate
 * predicts exactly, as opposed to the buffers (buckets, gather, staging). */
bool zmem_is_model_state(zinc_mem_category c);

/* ---------------------------------------------------------------- DeepSpeed's estimators */

typedef struct zmem_ds_estimate {
    bool available;         /* DeepSpeed has a formula for this stage/offload combination */
    const char *function;   /* e.g. "estimate_zero3_model_states_mem_needs" */
    uint64_t gpu_bytes;     /* per GPU */
    uint64_t cpu_bytes;     /* per node; ZeRO-3: with zero_init */
    uint64_t cpu_bytes_no_zero_init; /* ZeRO-3 without zero_init (ZeRO-2: same as cpu_bytes) */
} zmem_ds_estimate;

/* DeepSpeed's estimate_zero2/zero3_model_states_mem_needs (reference section 6) for P parameters,
 * largest layer L, nodes x gpus_per_node GPUs and additional_buffer_factor abf (DeepSpeed: 1.5). Stage 0
 * has none; stage 1 uses the ZeRO-2 formula (DeepSpeed has one estimator for stage_1_and_2.py); NVMe
 * offload has none. */
void zmem_deepspeed_estimate(int stage, zcfg_offload_device offload_optimizer, bool offload_param, int64_t P,
                             int64_t L, int nodes, int gpus_per_node, double abf, zmem_ds_estimate *out);

/* ---------------------------------------------------------------- pre-flight */

/* What this machine offers a rank. Each amount can be faked for tests with an environment variable
 * holding bytes: ZINC_FAKE_MEM_AVAILABLE, ZINC_FAKE_MEMLOCK, ZINC_FAKE_NVME_FREE. */
typedef struct zmem_available {
    bool have_mem;
    uint64_t mem_available;   /* MemAvailable in /proc/meminfo */
    bool have_memlock;        /* false: unlimited or unknown */
    uint64_t memlock;         /* RLIMIT_MEMLOCK soft limit */
    bool have_nvme;
    uint64_t nvme_free;       /* statvfs f_bavail * f_frsize under nvme_path */
    bool have_device;
    uint64_t device_free;     /* the GPU's free memory (cudaMemGetInfo), when the engine runs on one */
    int ranks_per_device;     /* ranks of this node sharing that GPU */
    bool have_cgroup;
    uint64_t cgroup_free;     /* memory cgroup: the least of limit - usage over this process's cgroup and
                               * its ancestors (v2 memory.max - memory.current, v1 memory.limit_in_bytes -
                               * memory.usage_in_bytes); ZINC_FAKE_CGROUP_FREE */
    uint64_t cgroup_limit;
    char cgroup_file[256];    /* the limit file that binds */
    bool have_as;
    uint64_t as_free;         /* RLIMIT_AS soft limit less VmSize; ZINC_FAKE_AS_FREE */
    uint64_t as_limit;
    unsigned headroom_pct;    /* the share kept free: ZINC_MEM_HEADROOM (percent, default 10) */
} zmem_available;

void zmem_available_read(const char *nvme_path, zmem_available *out);

/* ZINC_MEM_HEADROOM: the percentage of each limit the pre-flight keeps free (0-90, default 10). */
#define ZMEM_HEADROOM_DEFAULT 10
zinc_status zmem_headroom_read(unsigned *pct);

/* Checks an estimate against what is available when `local_ranks` ranks share the node (and the NVMe
 * path): device bytes of the ranks sharing a GPU against its free memory, host + pinned bytes against
 * MemAvailable, pinned bytes per process against RLIMIT_MEMLOCK, NVMe bytes against the free space. Returns ZINC_ERR_NOMEM with the numbers and what to change. */
zinc_status zmem_preflight_check(const zmem_estimate *est, int local_ranks, const zmem_available *avail,
                                 const char *nvme_path);

/* The estimate for an engine that exists (its model, config, ranks and device), plus what depends on
 * how it was set up: the staging buffer of device collectives through MPI (ranks sharing a GPU). */
zinc_status zmem_estimate_engine(struct zinc_engine *e, zmem_estimate *out);
/* The same for another config of this engine (the pre-flight's alternatives). */
zinc_status zmem_estimate_engine_cfg(struct zinc_engine *e, const zinc_config *cfg, zmem_estimate *out);

/* zinc_build's pre-flight (after the layout, before any allocation): estimates this engine and checks
 * it. ZINC_PREFLIGHT=0 in the environment turns it off. */
zinc_status zmem_preflight(struct zinc_engine *e);

/* Collective: every rank's memory report, in rank order (all holds world entries), on every rank. */
zinc_status zmem_allgather_reports(struct zinc_engine *e, zinc_memory_report *all);

/* Collective: n values from every rank, in rank order (all holds world x n). */
zinc_status zmem_allgather_u64(struct zinc_engine *e, const uint64_t *mine, int n, uint64_t *all);

#endif
