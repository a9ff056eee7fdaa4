/* The memory estimator: the bytes one rank's engine allocates, by memory kind and category, at their
 * peak, for a model's parameter sizes (grouped into modules), a resolved ds_config, the world size and
 * the compute device. It has no sizing rule of its own: it sums the sizing plan (plan.h), the same plan
 * zinc_build allocates from. tests/test_mem_estimate.c checks it against the engine's accounting for every
 * stage, offload choice and 1-4 ranks, tests/test_mem_plan.c the plan against what zinc_build allocates.
 *
 * Also here: DeepSpeed's own estimators (for comparison: DeepSpeed 0.19's
 * estimate_zero2_model_states_mem_needs in deepspeed/runtime/zero/stage_1_and_2.py and
 * estimate_zero3_model_states_mem_needs in deepspeed/runtime/zero/stage3.py), and the pre-flight check
 * zinc_build runs before allocating anything (the engine's side is runtime/engine/engine_mem.h). Prefix zest_ (the allocation
 * tracker, base/core/memtrack.h, is zmem_). May include what plan.h may; never runtime/engine. */
#ifndef ZINC_RUNTIME_MEM_ESTIMATE_H
#define ZINC_RUNTIME_MEM_ESTIMATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config/config.h"
#include "runtime/mem/plan.h"
#include "zinc.h"

typedef struct zest_estimate {
    /* Peak bytes per (memory kind, category) and per kind over the build and the steps, as the engine's
     * tracker (zinc_memory_get's peak) counts them. Two moments: zinc_build initialising (the buffers the
     * build allocates, the model's declared memory, and the initialisation scratch, counted as host
     * staging) and the steps (everything but that scratch; only the gather buffers come and go during a
     * step). Each figure is the larger of the two, so a kind's total is not always the sum of its row:
     * step_total is the steps' sum. */
    uint64_t bytes[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t total[ZINC_MEMKIND_COUNT];
    uint64_t step_total[ZINC_MEMKIND_COUNT];

    /* What it was computed from, for reports. */
    int stage, world, rank;
    zinc_device_kind device;
    zcfg_offload_device offload; /* offload_optimizer.device */
    zinc_dtype compute_dtype, grad_dtype, comm_dtype;
    int64_t numel;         /* parameters (no padding) */
    int64_t flat_numel;    /* the flat buffer before shard padding */
    int64_t shard, padded; /* elements per rank; world * shard */
    int64_t own;           /* elements of optimizer state on this rank */
    int nmodules;
    int64_t largest_module;      /* parameters of the largest module (no padding): DeepSpeed's L */
    int64_t largest_module_flat; /* its flat (aligned) elements */
    int64_t largest_param;
    int npersistent; /* stage 3: modules that stay gathered */
    int64_t persistent_numel;
    int nbuckets;
    int64_t bucket_cap;
    uint64_t bytes_landing;    /* stages 2-3: the landing buffer for modules larger than a bucket (0: none) */
    int64_t gather_peak_numel; /* stage 3: non-persistent elements gathered at once, at most */
    int64_t state_chunk;       /* elements per optimizer-state chunk (sub_group_size) */
    int state_tensors;         /* optimizer-state arrays: 3 (master, m, v), 2 for Lion (master, m) */
    int nvme_swap_buffers;     /* NVMe store: swap buffers, each one chunk of every state tensor */
    uint64_t nvme_swap_each;   /* bytes of each (state_tensors chunks at the files' stride) */
    uint64_t offload_staging;  /* GPU with offload: the step's pinned gradient and parameter staging */

    /* Transients: the build's fp32 initialisation scratch (host staging while zinc_build initialises,
     * unmapped before it returns; in the peaks above) and MPI's temporaries inside one collective piece
     * (comm_mpi.h), at most `comm_pending` pieces at once, which only the process's resident memory
     * holds (zest_rss). */
    uint64_t init_scratch;       /* as the engine builds (zest_compute: zinc_build_ranged) */
    uint64_t init_scratch_whole; /* zinc_build with a whole-tensor init_fn */
    int64_t comm_piece;          /* elements per MPI call at most (zcomm_mpi_max_count) */
    int comm_pending;            /* pieces in flight at once (reduce buckets with overlap_comm) */
    uint64_t comm_temp;          /* bound on MPI's temporaries, bytes */
    uint64_t before_build;       /* host bytes in the totals allocated by zinc_create (collective staging) */
    int64_t nvme_chunk;          /* elements per chunk with NVMe offload (sub_group_size, capped) */
    int nvme_buffers;            /* swap buffers NVMe offload would use (buffer_count, capped) */
    int cheaper_stage;           /* set by the pre-flight: the higher stage needing the least memory of the
                                       * kind that is short at this rank count, -1: none is cheaper */
    uint64_t cheaper_bytes;      /* its bytes of that kind */
    bool infinity_fits_more;     /* set by the pre-flight: stage 3 with the optimizer state and the parameters on
                                  * NVMe (ZeRO-Infinity) needs less host memory than this config */
    uint64_t infinity_bytes;     /* its host peak per rank (zest_rss) */
    uint64_t infinity_io;        /* its disk traffic per optimizer step (zest_disk_io) */
    int64_t infinity_buffer_size, infinity_sub_group_size; /* the swap buffers it was estimated with */
    int64_t param_resident;        /* offload_param nvme: elements of the shard kept in memory (max_in_cpu) */
    uint64_t param_resident_bytes; /* their host bytes, part of bytes[HOST][PARAMS] */
    uint64_t resident_floor_bytes; /* set by the pre-flight: the host peak (zest_rss) with max_in_cpu 0, which
                                    * grows by an element's bytes per element kept up to the whole shard
                                    * (0: not estimated) */

    /* The model's own memory (zinc_memory_declare), part of bytes[][ACTIVATIONS / SCRATCH] and the
     * totals: it exists during the steps only (allocated after zinc_build). */
    uint64_t declared[ZINC_MEMKIND_COUNT];
    /* Virtual address space the process maps beyond its resident growth during the steps (libraries'
     * reserved buffers, thread arenas): only RLIMIT_AS sees it. Declared by the model as part of its
     * scratch is the resident part; this the rest (zest_as_extra). */
    uint64_t as_extra;
} zest_estimate;

/* The process's resident bytes before the engine: the executable and its libraries mapped, the C and MPI
 * runtimes initialised; measured for `zinc train` (bench/mem/whole_process.sh), for a build with and
 * without the CUDA backend (whose libraries map about 165 MiB at start), one rank and several (MPI's
 * shared-memory transport). The pre-flight inside a run does not use it: the limits it reads are
 * measured with the process as it is. */
uint64_t zest_baseline_bytes(int world, bool cuda_build);

/* Address space a process with `threads` compute threads maps during the steps beyond its resident
 * bytes (each thread's malloc arena reservation and stack, OpenBLAS's per-thread buffer reservation),
 * measured (VmPeak less VmSize at zinc_build, bench/mem/whole_process.sh): what RLIMIT_AS must leave
 * besides the resident estimate, so that a run the pre-flight passes does not fail (or spin in
 * OpenBLAS's allocation retries) on an address-space limit. */
uint64_t zest_as_extra(int threads);

/* The whole process's resident peak for `zinc mem estimate`: the baseline and zest_rss's growth (the
 * engine, the build's scratch, MPI's temporaries, the model's declared memory). */
uint64_t zest_whole_process(const zest_estimate *est, bool device_in_host, bool cuda_build);

/* The build's part of zest_rss (model state without gather buffers and the model's declared memory, plus
 * the init scratch): the resident growth over zinc_build alone. */
uint64_t zest_rss_build(const zest_estimate *est, bool device_in_host);
/* The process's resident-memory growth this estimate predicts from before zinc_build to its peak:
 * memory in host RAM (host, pinned, and the device's bytes when the device is host memory) at the
 * larger of the build (model state without gather buffers and the model's declared memory, plus the
 * init scratch) and the steps (everything with the declared memory, plus MPI's temporaries). `device_in_host`: the device allocates host memory (the cpu
 * device, also when presented as discrete). */
uint64_t zest_rss(const zest_estimate *est, bool device_in_host);

/* The disk traffic of one optimizer step, modelled from the NVMe bytes (not measured): the optimizer
 * state's files are read and written once; the parameter file is read by every micro-step's forward and
 * backward gathers and written once by the step; the gradient file (offload_param nvme) is written by every
 * micro-step, read back by all but the first and twice by the step (its statistics, its update): 2 gas + 1
 * times as well. `zinc mem plan`'s cheapest choice and the pre-flight's advice both rank by it. */
uint64_t zest_disk_io(const zest_estimate *est, int64_t gradient_accumulation_steps);
/* The largest offload_param.max_in_cpu (elements per rank kept in memory) whose peak fits `room` bytes, the
 * one rule `zinc mem plan` and the pre-flight's advice size it by: the peak with none kept (`floor`) grows
 * by `esz` per element kept, and stays below `resident`, the shard whole (which has no swap or prefetch
 * buffers, so its peak is not on that line). -1 where not even none kept fits. Callers settle the
 * estimate's rounding from there. */
int64_t zest_resident_fit(double floor, double esz, int64_t resident, double room);

/* Computes the estimate for rank `rank` of `world`. cfg must be resolved (zcfg_load_*). device is the
 * compute device: ZINC_DEVICE_CPU places everything in host memory, ZINC_DEVICE_CUDA places the same
 * plan in device memory (pinned host for offload with pin_memory); zplan_device_for says what else
 * each assumes. Fails with ZINC_ERR_INVALID_ARG for an empty or malformed model. */
zinc_status zest_compute(const zplan_model *m, const zinc_config *cfg, int world, int rank, zinc_device_kind device,
                         zest_estimate *out);

/* How zinc_build initialises, for the scratch: a whole-tensor init_fn (zinc_build), a ranged one
 * (zinc_build_ranged), or none (zinc_build with a NULL init_fn: no scratch). */
typedef enum zest_init { ZEST_INIT_WHOLE = 0, ZEST_INIT_RANGED = 1, ZEST_INIT_NONE = 2 } zest_init;

/* The estimate of a plan: the peaks of its buffers at the build (zplan_sum, ZPLAN_AT_BUILD, with the
 * initialisation scratch of `init`) and at the steps (ZPLAN_IN_STEP). */
void zest_from_plan(const zplan *p, zest_init init, zest_estimate *out);

/* The model-state categories (parameters, gradients, master, moments, bookkeeping), which the estimate
 * predicts exactly, as opposed to the buffers (buckets, gather, staging). */
bool zest_is_model_state(zinc_mem_category c);

/* ---------------------------------------------------------------- DeepSpeed's estimators */

typedef struct zest_ds_estimate {
    bool available;                  /* DeepSpeed has a formula for this stage/offload combination */
    const char *function;            /* e.g. "estimate_zero3_model_states_mem_needs" */
    uint64_t gpu_bytes;              /* per GPU */
    uint64_t cpu_bytes;              /* per node; ZeRO-3: with zero_init */
    uint64_t cpu_bytes_no_zero_init; /* ZeRO-3 without zero_init (ZeRO-2: same as cpu_bytes) */
} zest_ds_estimate;

/* DeepSpeed's estimate_zero2/zero3_model_states_mem_needs (reference section 6) for P parameters,
 * largest layer L, nodes x gpus_per_node GPUs and additional_buffer_factor abf (DeepSpeed: 1.5). Stage 0
 * has none; stage 1 uses the ZeRO-2 formula (DeepSpeed has one estimator for stage_1_and_2.py); NVMe
 * offload has none. */
void zest_deepspeed(int stage, zcfg_offload_device offload_optimizer, bool offload_param, int64_t P, int64_t L,
                    int nodes, int gpus_per_node, double abf, zest_ds_estimate *out);

/* ---------------------------------------------------------------- pre-flight */

/* What this machine offers a rank. Each amount can be faked for tests with an environment variable
 * holding bytes: ZINC_FAKE_MEM_AVAILABLE, ZINC_FAKE_MEMLOCK, ZINC_FAKE_NVME_FREE. */
typedef struct zest_available {
    bool have_mem;
    uint64_t mem_available; /* MemAvailable in /proc/meminfo */
    bool have_memlock;      /* false: unlimited or unknown */
    uint64_t memlock;       /* RLIMIT_MEMLOCK soft limit */
    bool have_nvme;
    uint64_t nvme_free; /* statvfs f_bavail * f_frsize under nvme_path */
    bool have_device;
    uint64_t device_free; /* the GPU's free memory (cudaMemGetInfo), when the engine runs on one */
    int ranks_per_device; /* ranks of this node sharing that GPU */
    bool have_cgroup;
    uint64_t cgroup_free; /* memory cgroup: the least of limit - usage over this process's cgroup and
                               * its ancestors (v2 memory.max - memory.current, v1 memory.limit_in_bytes -
                               * memory.usage_in_bytes); ZINC_FAKE_CGROUP_FREE */
    uint64_t cgroup_limit;
    char cgroup_file[256]; /* the limit file that binds */
    bool have_as;
    uint64_t as_free; /* RLIMIT_AS soft limit less VmSize; ZINC_FAKE_AS_FREE */
    uint64_t as_limit;
    unsigned headroom_pct; /* the share kept free: ZINC_MEM_HEADROOM (percent, default 10) */
} zest_available;

void zest_available_read(const char *nvme_path, zest_available *out);

/* ZINC_MEM_HEADROOM: the percentage of each limit the pre-flight keeps free (0-90, default 10). */
#define ZEST_HEADROOM_DEFAULT 10
zinc_status zest_headroom_read(unsigned *pct);

/* Checks an estimate against what is available when `local_ranks` ranks share the node (and the NVMe
 * path): device bytes of the ranks sharing a GPU against its free memory, host + pinned bytes against
 * MemAvailable, pinned bytes per process against RLIMIT_MEMLOCK, NVMe bytes against the free space. Returns ZINC_ERR_NOMEM with the numbers and what to change. */
zinc_status zest_preflight_check(const zest_estimate *est, int local_ranks, const zest_available *avail,
                                 const char *nvme_path);

/* For the pre-flight on a device: its free memory (cudaMemGetInfo's total less used, or
 * ZINC_FAKE_DEVICE_FREE in bytes) and the ranks of this node sharing it. */
void zest_available_device(zest_available *a, uint64_t used, uint64_t total, int ranks_per_device);

#endif
