/* The sizing plan: every buffer one rank's engine allocates, laid out from the config, the parameter
 * shapes, the world size, the rank and what the compute device is. It is the one place the sizing rules
 * live: zinc_build takes its layout and buffer sizes from it (runtime/engine/engine.c), and the memory
 * estimator (mem_estimate.h, `zinc mem estimate`, the pre-flight) only sums it, so the two cannot
 * disagree. It uses the rules of zero/partition.h (the flat layout), zero/sizing.h (gradients, buckets,
 * stage-3 persistence) and offload/state.h (state chunks), and knows nothing of the engine's struct.
 *
 * May include: base/core, base/config, base/comm (MPI piece size), base/device (the device's
 * fixed scratch), zero (sizing, partition), offload (state chunk rules). Never runtime/engine. */
#ifndef ZINC_RUNTIME_MEM_PLAN_H
#define ZINC_RUNTIME_MEM_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config/config.h"
#include "zero/partition.h"
#include "zero/sizing.h"
#include "zinc.h"

/* Memory the model declares for the steps (zinc_memory_declare): its activations and working buffers. */
#define ZPLAN_MAX_DECLARED 64
typedef struct zplan_declared {
    zinc_mem_category cat; /* ZINC_MEM_ACTIVATIONS or ZINC_MEM_SCRATCH */
    zinc_mem_kind kind;
    uint64_t bytes;
    char label[48];
} zplan_declared;

/* Parameters in registration (forward) order and the module of each, nondecreasing (what zinc_module_add
 * / zinc_param_add allow); a module number no parameter has is a module without parameters. */
typedef struct zplan_model {
    int nparams;
    const int64_t *numel;
    const int *module;
    int nmodules;  /* 0: the last parameter's module + 1 */
    int ndeclared; /* the model's own memory, exists during the steps (allocated after zinc_build) */
    const zplan_declared *declared;
    const bool *reentered; /* per module (NULL: none): entered twice in one backward (zinc_module_reentered) */
    /* per parameter (NULL: none): the rows of a matrix marked ZINC_PARAM_MUON (its columns: numel / rows),
     * 0 for the others; used only by a whole-matrix optimizer (Muon: plan_muon.c) */
    const int64_t *muon_rows;
    const int64_t *qgz_group; /* per parameter (NULL: none): ZeRO++ qgZ's group (zero/sizing.h zsize_qgz_group) */
} zplan_model;

/* What the plan needs to know about the compute device. */
typedef struct zplan_device {
    zinc_mem_kind compute_kind;  /* where its buffers count: DEVICE (a GPU, or the cpu presented as one), HOST */
    bool host_addressable;       /* the host reads its buffers directly (the cpu device) */
    uint64_t fixed_bytes;        /* its own scratch, allocated when it is created (compute kind, staging) */
    uint64_t comm_staging_bytes; /* host staging of device collectives through MPI (zcomm_staged_bytes) */
    uint32_t nvme_align;         /* the NVMe files' O_DIRECT alignment; 0: ZPLAN_NVME_ALIGN */
    int qgz_ranks_per_node;      /* ZeRO++ qgZ reduces in nodes of this many ranks (0: not in use) */
} zplan_device;

/* The device an estimate assumes for a device kind: ZINC_DEVICE_CUDA a discrete GPU with the cuda
 * device's fixed scratch, anything else the cpu device (host memory). No collective staging. */
zplan_device zplan_device_for(zinc_device_kind kind);

/* The alignment the NVMe files are assumed to have when the file system's is not known yet (it is
 * found when the files are opened, 512 to 4096 bytes in practice): chunks are multiples of 4 KiB, so
 * only the last chunk's padding depends on it, at most 3.5 KiB per file high where it is smaller. */
#define ZPLAN_NVME_ALIGN 4096
/* offload_param nvme: elements of the parameter store's scratch for a state chunk of `chunk` (the step
 * updates a chunk in pieces of it): offload_param.buffer_size rounded up to ZSTATE_CHUNK_ALIGN, at most
 * ZSTATE_POLL_ELEMS, so an in-memory optimizer state's one big chunk does not bring the shard back. */
int64_t zplan_param_scratch_elems(int64_t chunk, int64_t buffer_size);
/* offload_param nvme: whether the stage-3 fp32 gradient shard lives in a file of the parameter store's
 * kind (offload/param_nvme.h ZSTATE_GRAD_FILE) between the reduce-scatter and the optimizer instead of in
 * memory: stage 3 with offload_param.device "nvme", except with zinc.deterministic_reduction, ZeRO++ qgZ
 * or a whole-matrix optimizer (Muon), whose sums read the shard in memory. And the elements of that
 * store's scratch: the parameter scratch rounded up to whole statistics blocks (ZSTATS_BLOCK), so the
 * step's norm, streamed piece by piece, adds the same block sums in the same order as in memory. */
bool zplan_grads_on_nvme(const zinc_config *cfg, int stage);
int64_t zplan_grad_scratch_elems(int64_t chunk, int64_t buffer_size);
/* Its statistics blocks (ZSTATS_BLOCK) over a shard of `shard` elements, and the host bytes of the sums kept
 * for them as the gradient lands (a double and a flag each; runtime/engine/engine_gstore.c). */
int64_t zplan_grad_stat_blocks(int64_t shard);
uint64_t zplan_grad_stat_bytes(int64_t shard);

/* The multiple of a piece's bytes Open MPI allocates as temporaries inside one collective call, at most
 * (reduce-scatter and allreduce in Open MPI's tuned and libnbc components; docs/mem.md). */
#define ZPLAN_MPI_TEMP_FACTOR 2

/* When a buffer exists. */
typedef enum zplan_when {
    ZPLAN_AT_CREATE = 0, /* allocated by zinc_create (the device, collective staging) */
    ZPLAN_AT_BUILD,      /* allocated by zinc_build and kept for the run */
    ZPLAN_IN_STEP,       /* allocated during the training steps; the figure is the most at once */
    ZPLAN_IN_CHECKPOINT, /* allocated during a checkpoint save or load only */
    ZPLAN_WHEN_COUNT
} zplan_when;

/* Every buffer, by what it is for. */
typedef enum zplan_buf {
    ZPLAN_DEVICE_SCRATCH = 0, /* the device's own scratch (conversions, gradient statistics) */
    ZPLAN_COMM_STAGING,       /* device collectives staged through host memory */
    ZPLAN_PARAMS,             /* compute dtype: the full flat buffer (stages 0-2) or the shard (stage 3) */
    ZPLAN_PARAMS_PERSISTENT,  /* stage 3: gathered copies of the modules that stay gathered */
    ZPLAN_MASTER,             /* fp32 master weights over the own range (memory, or an NVMe file) */
    ZPLAN_EXP_AVG,
    ZPLAN_EXP_AVG_SQ,
    ZPLAN_NVME_SWAP,             /* the NVMe store's swap buffers, each one chunk of every state tensor */
    ZPLAN_DECAY_MASK,            /* one byte per ZPART_PARAM_ALIGN own elements, built on the host */
    ZPLAN_DECAY_MASK_DEVICE,     /* its copy on a device the host cannot address */
    ZPLAN_GRADS_FULL,            /* stages 0-1: the full gradient buffer, grad dtype */
    ZPLAN_GRADS_SHARD,           /* stages 1-3: the fp32 gradient shard */
    ZPLAN_BUCKET_GRADS,          /* per bucket: gradients (stages 2-3) */
    ZPLAN_BUCKET_SEND,           /* per bucket: the comm-dtype send copy */
    ZPLAN_BUCKET_RECV,           /* per bucket: this rank's reduced piece */
    ZPLAN_LANDING,               /* stages 2-3: gradients of a module larger than a bucket */
    ZPLAN_OFFLOAD_GRAD_STAGING,  /* offload from a discrete device: two fp32 gradient chunks */
    ZPLAN_OFFLOAD_PARAM_STAGING, /* and two compute-dtype parameter chunks */
    ZPLAN_GATHER,                /* stage 3: non-persistent gathered modules, at most at once (simulated) */
    ZPLAN_HOST_VIEW_STAGING,     /* state in device memory read through the host (checkpoints): 3 chunks */
    ZPLAN_TENSOR_SUMS,           /* a per-tensor optimizer (LAMB) on a discrete device: its sums + workspace */
    ZPLAN_HELD,                  /* stages 2-3: the own gradient buffers of modules entered twice in backward */
    ZPLAN_DETERM_SHARDS,         /* zinc.deterministic_reduction: fp32 partial sums, a shard each */
    ZPLAN_DETERM_RECV,           /* and the partner's piece at each level of its tree over the ranks */
    ZPLAN_HPZ_SECONDARY,         /* ZeRO++ hpZ: the secondary parameter shard over the group (zero/zeropp.h) */
    ZPLAN_QGZ_SCRATCH,           /* ZeRO++ qgZ: the quantized all-to-alls' buffers (zero/sizing.h zsize_qgz) */
    ZPLAN_MUON_UPDATE,           /* Muon: fp32 over the own range, the assembled whole-matrix update */
    ZPLAN_MUON_SCRATCH,          /* Muon, in the step: the owner's assembled matrices, the all-to-all buffers and
                                    the Newton-Schulz workspace (runtime/engine/engine_muon.c) */
    ZPLAN_PARAM_SWAP,            /* offload_param nvme: the parameter store's swap buffer and step scratch */
    ZPLAN_PARAMS_RESIDENT,       /* offload_param nvme: the shard's first max_in_cpu elements, in memory */
    ZPLAN_GRAD_SWAP,             /* offload_param nvme: the gradient store's swap buffer and scratch */
    ZPLAN_CKPT_SNAPSHOT,         /* checkpoint.writer.decoupled: the image of this rank's shard file, held while
                                    training goes on until the save is published */
    ZPLAN_BUF_COUNT
} zplan_buf;

typedef struct zplan_entry {
    const char *what;
    zinc_mem_category cat;
    zinc_mem_kind kind;
    zplan_when when;
    int count;      /* buffers (0: none) */
    uint64_t each;  /* bytes of each buffer (persistent modules and gathers: of all together) */
    uint64_t bytes; /* of all of them */
} zplan_entry;

typedef struct zplan {
    zplan_entry buf[ZPLAN_BUF_COUNT];

    /* what it was laid out from */
    int stage, world, rank;
    zplan_device device;
    zcfg_offload_device offload; /* offload_optimizer.device */
    zinc_dtype compute_dtype, grad_dtype, comm_dtype;

    /* the flat layout (zero/partition.h) */
    int nparams, nmodules;
    int64_t *flat_offset;               /* per parameter */
    int64_t *module_begin, *module_end; /* per module, [begin, end) in the flat buffer */
    int64_t *qgz_group;                 /* per parameter, the model's (NULL: none) */
    zsize_qgz_layout qgz_layout;        /* qgZ's groups over the flat layout (zero/grads_qgz.c) */
    zpartition part;
    int64_t own_lo, own_hi;      /* the range this rank's optimizer updates (all of it at stage 0) */
    int64_t numel;               /* parameters (no padding) */
    int64_t largest_module;      /* parameters of the largest module (no padding): DeepSpeed's L */
    int64_t largest_module_flat; /* its flat (aligned) elements */
    int64_t largest_param;

    /* stage 3 */
    bool *persistent; /* per module */
    int npersistent;
    int64_t persistent_numel;
    int64_t gather_peak_numel; /* non-persistent elements gathered at once, at most */

    /* gradients and buckets (zero/sizing.h) */
    zgrads_plan grads;
    bool send_needs_copy;

    /* optimizer state (offload/state.h) */
    zinc_mem_kind state_kind; /* where master, exp_avg and exp_avg_sq live */
    int state_tensors;        /* 3: master, exp_avg, exp_avg_sq; 2 (Lion, Adagrad): the descriptor's */
    int64_t state_chunk;      /* elements per chunk the store is visited in */
    int64_t nvme_chunk;       /* elements per chunk with NVMe offload (sub_group_size, capped) */
    int nvme_buffers;         /* swap buffers NVMe offload uses (buffer_count, capped) */
    int64_t nvme_stride;      /* bytes per chunk in each NVMe file */
    uint64_t nvme_file_bytes; /* per file (state_tensors files) */

    /* a whole-matrix optimizer (Muon; plan_muon.c): the own range's elements that keep no exp_avg_sq
     * (offload/state.h zstate_vgaps: nvgaps own-relative [lo, hi) pairs, each matrix's aligned range) and
     * the rank that assembles and orthogonalises each matrix (per parameter, -1: not a Muon matrix) */
    int nvgaps;
    int64_t *vgaps;
    int *muon_owner;
    int nmuon;

    /* Transients the engine's counters do not hold but the process's resident memory does (host bytes). */
    bool init_in_place;          /* zinc_build's whole-tensor init_fn writes into the parameter buffer */
    int64_t init_scratch_ranged; /* fp32 elements of initialisation scratch: zinc_build_ranged */
    int64_t init_scratch_whole;  /* zinc_build with a whole-tensor init_fn */
    int64_t comm_piece;          /* elements per MPI call at most (zcomm_mpi_max_count) */
    int comm_pending;            /* pieces in flight at once (reduce buckets with overlap_comm) */
    uint64_t comm_temp;          /* bound on MPI's temporaries, bytes */

    /* The model's own memory (zinc_memory_declare), counted with the steps (zplan_sum at IN_STEP and
     * IN_CHECKPOINT); the tracker never holds it. */
    int ndeclared;
    zplan_declared declared[ZPLAN_MAX_DECLARED];
} zplan;

/* The size of a checkpoint shard file over n elements (runtime/checkpoint/checkpoint_manifest.c's
 * zckpt_layout: a 4 KiB header, master, exp_avg, exp_avg_sq in fp32 and, with params, the compute-dtype
 * shard, each on a 4 KiB boundary). */
uint64_t zplan_ckpt_file_bytes(int64_t n, bool with_params, zinc_dtype param_dtype);

/* Lays out rank `rank` of `world`. cfg must be resolved (zcfg_load_*). Fails with ZINC_ERR_INVALID_ARG
 * for an empty or malformed model. The plan owns arrays: zplan_free releases them. */
zinc_status zplan_make(const zplan_model *m, const zinc_config *cfg, int world, int rank, const zplan_device *dev,
                       zplan *out);
void zplan_free(zplan *p);

/* Adds the bytes of every buffer that exists at `when` to out[kind][category]: AT_CREATE counts what
 * zinc_create allocates, AT_BUILD that and what zinc_build keeps (what the tracker holds when zinc_build
 * returns), IN_STEP all of it at the steps' peak, with the model's declared memory. Checkpoint-only
 * buffers are added only for IN_CHECKPOINT (with the AT_BUILD ones and the declared memory). */
void zplan_sum(const zplan *p, zplan_when when, uint64_t out[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT]);

/* The first (kind, category) where the tracker's table `got` differs from the plan's buffers at `when`
 * (*want: the plan's bytes there), the NVMe swap buffers taken as pinned or host memory, whichever the
 * store used. False when none differs. */
bool zplan_differs(const zplan *p, zplan_when when, const uint64_t got[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT],
                   zinc_mem_kind *kind, zinc_mem_category *cat, uint64_t *want);

/* Muon (plan_muon.c, called by zplan_make after the state is planned): the matrices' owners, balanced by
 * Newton-Schulz FLOPs (the largest first, each to the least loaded rank; every rank computes the same),
 * the exp_avg_sq the matrices do not keep and the step's assembly buffers. */
zinc_status zplan_muon(zplan *p, const zplan_model *m, const zinc_config *cfg);
/* Floats of Muon's step scratch on this rank: the assembly (stages 1-3, several ranks: what this rank
 * sends, receives, its matrices whole and the largest one's workspace) or the workspace alone. */
uint64_t zplan_muon_scratch_floats(const zplan *p, const zplan_model *m);

/* Sets buffer b (count 0 or each 0: none); for the plan's own files (plan_muon.c). */
void zplan_put(zplan *p, zplan_buf b, const char *what, zinc_mem_category cat, zinc_mem_kind kind, zplan_when when,
               int count, uint64_t each);

/* "create", "build", "step", "checkpoint". */
const char *zplan_when_name(zplan_when w);

#endif
