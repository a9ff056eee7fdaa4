/* The memory estimator, DeepSpeed's estimators for comparison, and zinc_build's pre-flight check. */
#include "runtime/mem/mem_estimate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "runtime/comm/comm_mpi.h"
#include "runtime/device/comm_staged.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/core/env.h"
#include "runtime/core/error.h"
#include "offload/state.h"
#include "zero/partition.h"
#include "zero/sizing.h"

/* The NVMe optimizer-state store (offload/state_nvme.c) counts its three files (master, exp_avg,
 * exp_avg_sq) under ZINC_MEMKIND_NVME as MASTER / EXP_AVG / EXP_AVG_SQ: chunk c at c x stride, stride =
 * the chunk's bytes rounded up to the O_DIRECT alignment, the last chunk padded to the alignment. Its
 * swap buffers, min(offload_optimizer.buffer_count, chunks) of them, each one chunk of all three tensors
 * (3 x stride), count under STAGING: pinned when io_uring registers them, host memory when the kernel
 * refuses (RLIMIT_MEMLOCK). The alignment is the file system's (found when the files are opened, 512 to
 * 4096 bytes in practice); the estimate assumes ZMEM_NVME_ALIGN. Chunks are multiples of 4 KiB, so only
 * the last chunk's padding depends on it: the file estimate is at most 3.5 KiB per file above the real
 * one where the alignment is smaller, and exact otherwise. */
#define ZMEM_NVME_ALIGN 4096

bool zmem_is_model_state(zinc_mem_category c) {
    return c == ZINC_MEM_PARAMS || c == ZINC_MEM_GRADS || c == ZINC_MEM_MASTER || c == ZINC_MEM_EXP_AVG ||
           c == ZINC_MEM_EXP_AVG_SQ || c == ZINC_MEM_OTHER;
}

/* ---------------------------------------------------------------- stage-3 gather schedule */

/* Mirrors zero/gather.c's policy (trace recording on the first micro-step, prefetch within
 * stage3_prefetch_bucket_size and stage3_max_live_parameters, release unless reused within
 * stage3_max_reuse_distance, persistent modules kept) for modules entered 0..N-1 in forward and N-1..0
 * in backward, and returns the most non-persistent elements gathered at once. Every micro-step after
 * the recorded one is the same, so two micro-steps give the peak of any run. */
typedef struct gsim {
    const int64_t *n;      /* elements per module */
    const bool *persistent;
    bool *gathered, *pending;
    int *trace;            /* module per trace entry; the phase follows from the position */
    int len, pos;
    bool valid, recording;
    int64_t live, peak;
    const zcfg_zero *z;
} gsim;

static bool gsim_reused_soon(const gsim *s, int module) {
    if (!s->valid) return false;
    int64_t dist = 0;
    for (int j = s->pos; j < s->len; j++) {
        int mj = s->trace[j];
        if (mj == module) return dist <= s->z->max_reuse_distance;
        dist += s->n[mj];
        if (dist > s->z->max_reuse_distance) return false;
    }
    return false;
}

static void gsim_gather(gsim *s, int m, bool blocking) {
    if (!s->gathered[m]) {
        s->gathered[m] = true;
        if (!s->persistent[m]) s->live += s->n[m];
        if (s->live > s->peak) s->peak = s->live;
    }
    s->pending[m] = !blocking;
}

static void gsim_prefetch(gsim *s) {
    int64_t inflight = 0;
    for (int j = s->pos; j < s->len; j++) {
        int m = s->trace[j];
        if (s->persistent[m] || s->gathered[m]) {
            if (s->pending[m]) inflight += s->n[m];
            continue;
        }
        if (inflight + s->n[m] > s->z->prefetch_bucket_size) break;
        if (s->live + s->n[m] > s->z->max_live_parameters) break;
        gsim_gather(s, m, false);
        inflight += s->n[m];
    }
}

static void gsim_enter(gsim *s, int m, int phase, int entry) {
    if (s->recording) {
        s->trace[s->len++] = m;
    } else if (s->valid) {
        if (s->pos < s->len && s->pos == entry) s->pos++; /* sequential: the trace always matches */
        else s->valid = false;
    }
    if (!s->gathered[m]) gsim_gather(s, m, true);
    else s->pending[m] = false;
    if (s->valid) gsim_prefetch(s);
    (void)phase;
}

static void gsim_exit(gsim *s, int m) {
    if (gsim_reused_soon(s, m)) return;
    if (s->persistent[m] || !s->gathered[m]) return;
    s->gathered[m] = false;
    s->pending[m] = false;
    s->live -= s->n[m];
}

static zinc_status gather_peak(const int64_t *n, const bool *persistent, int nm, const zcfg_zero *z,
                               int64_t *peak) {
    zinc_status st = ZINC_OK;
    gsim s = {.n = n, .persistent = persistent, .z = z, .recording = true};
    bool *flags = NULL;
    TRY_ALLOC(flags, 2 * (size_t)nm, "the gather simulation");
    TRY_ALLOC(s.trace, 2 * (size_t)nm, "the gather simulation");
    s.gathered = flags;
    s.pending = flags + nm;
    for (int i = 0; i < nm; i++) s.gathered[i] = persistent[i];
    for (int micro = 0; micro < 2; micro++) {
        if (micro > 0) { /* a forward after a backward: the recording ends, the trace restarts */
            s.recording = false;
            s.valid = s.len > 0;
            s.pos = 0;
        }
        int entry = 0;
        for (int m = 0; m < nm; m++, entry++) {
            gsim_enter(&s, m, ZINC_FORWARD, entry);
            gsim_exit(&s, m);
        }
        for (int m = nm - 1; m >= 0; m--, entry++) {
            gsim_enter(&s, m, ZINC_BACKWARD, entry);
            gsim_exit(&s, m);
        }
    }
    *peak = s.peak;
fail:
    free(flags);
    free(s.trace);
    return st;
}

/* ---------------------------------------------------------------- the estimate */

zinc_status zmem_estimate_compute(const zmem_model *m, const zinc_config *cfg, int world, int rank,
                                  zinc_device_kind device, zmem_estimate *out) {
    zinc_status st = ZINC_OK;
    int64_t *mod_flat = NULL, *mod_numel = NULL;
    bool *persistent = NULL;
    if (!m || !cfg || !out || m->nparams < 1 || !m->numel || !m->module)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: a model with at least one parameter is required");
    if (world < 1 || rank < 0 || rank >= world)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: rank %d of world %d is out of range", rank, world);
    if (m->module[0] != 0)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: the first parameter must belong to module 0");
    for (int i = 0; i < m->nparams; i++) {
        if (m->numel[i] < 1)
            return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: parameter %d has %" PRId64 " elements", i,
                        m->numel[i]);
        if (i > 0 && m->module[i] != m->module[i - 1] && m->module[i] != m->module[i - 1] + 1)
            return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: parameter %d: modules must be numbered in order "
                                              "without gaps (module %d after %d)",
                        i, m->module[i], m->module[i - 1]);
    }
    memset(out, 0, sizeof *out);
    int nm = m->module[m->nparams - 1] + 1;
    TRY_ALLOC(mod_flat, nm, "the memory estimate");
    TRY_ALLOC(mod_numel, nm, "the memory estimate");
    TRY_ALLOC(persistent, nm, "the memory estimate");

    /* The flat layout as runtime/engine/engine.c lays it out: each parameter on a ZPART_PARAM_ALIGN boundary. */
    int64_t off = 0;
    for (int i = 0; i < m->nparams; i++) {
        int64_t begin = off;
        off = zpart_align_up(off + m->numel[i], ZPART_PARAM_ALIGN);
        mod_flat[m->module[i]] += off - begin;
        mod_numel[m->module[i]] += m->numel[i];
        out->numel += m->numel[i];
        if (m->numel[i] > out->largest_param) out->largest_param = m->numel[i];
    }
    zpartition part;
    zpart_init(&part, off, world, rank);

    out->stage = cfg->zero.stage;
    out->world = world;
    out->rank = rank;
    out->device = device == ZINC_DEVICE_CUDA ? ZINC_DEVICE_CUDA : ZINC_DEVICE_CPU;
    out->offload = cfg->zero.offload_optimizer.device;
    out->compute_dtype = cfg->compute_dtype;
    out->comm_dtype = cfg->comm_dtype;
    /* As zinc_create: stages 0-1 accumulate in grad_accum_dtype, stages 2-3 hand out compute-dtype slots. */
    out->grad_dtype = out->stage <= 1 ? cfg->grad_accum_dtype : cfg->compute_dtype;
    out->flat_numel = part.numel;
    out->shard = part.shard;
    out->padded = part.padded;
    out->own = out->stage == 0 ? part.padded : part.shard;
    out->nmodules = nm;
    for (int i = 0; i < nm; i++) {
        if (mod_numel[i] > out->largest_module) out->largest_module = mod_numel[i];
        if (mod_flat[i] > out->largest_module_flat) out->largest_module_flat = mod_flat[i];
    }

    zinc_mem_kind ck = out->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    uint64_t csz = zinc_dtype_size(out->compute_dtype);
    uint64_t(*b)[ZINC_MEM_CATEGORY_COUNT] = out->bytes;

    /* Parameters: the full flat buffer (stages 0-2) or the shard plus the persistent modules (stage 3). */
    if (out->stage <= 2) {
        b[ck][ZINC_MEM_PARAMS] = (uint64_t)part.padded * csz;
    } else {
        int64_t total = 0;
        for (int i = 0; i < nm; i++) {
            persistent[i] = zsize_persistent(mod_flat[i], &total, cfg->zero.param_persistence_threshold,
                                             cfg->zero.model_persistence_threshold);
            if (persistent[i]) out->npersistent++;
        }
        out->persistent_numel = total;
        b[ck][ZINC_MEM_PARAMS] = ((uint64_t)part.shard + (uint64_t)total) * csz;
    }

    /* Optimizer state: fp32 master, exp_avg, exp_avg_sq over the own range (offload/state.c). */
    uint64_t sbytes = (uint64_t)out->own * sizeof(float);
    const zcfg_offload *oo = &cfg->zero.offload_optimizer;
    zinc_mem_kind host_kind =
        oo->pin_memory && out->device != ZINC_DEVICE_CPU ? ZINC_MEMKIND_PINNED : ZINC_MEMKIND_HOST;
    zinc_mem_kind sk = ck;
    out->state_chunk = out->own;
    if (oo->device == ZOFFLOAD_CPU || oo->device == ZOFFLOAD_NVME) {
        sk = oo->device == ZOFFLOAD_NVME ? ZINC_MEMKIND_NVME : host_kind;
        out->state_chunk = zstate_chunk_elems(cfg->zero.sub_group_size, out->own);
    }
    out->cheaper_stage = -1;
    out->nvme_chunk = zstate_chunk_elems(cfg->zero.sub_group_size, out->own);
    {
        int64_t nch = out->nvme_chunk > 0 ? (out->own + out->nvme_chunk - 1) / out->nvme_chunk : 1;
        out->nvme_buffers = (int)(oo->buffer_count < nch ? oo->buffer_count : nch);
        if (out->nvme_buffers < 1) out->nvme_buffers = 1;
    }
    b[sk][ZINC_MEM_MASTER] = sbytes;
    b[sk][ZINC_MEM_EXP_AVG] = sbytes;
    b[sk][ZINC_MEM_EXP_AVG_SQ] = sbytes;
    if (oo->device == ZOFFLOAD_NVME) {
        int64_t chunk = out->state_chunk, nchunks = (out->own + chunk - 1) / chunk;
        int64_t stride = zpart_align_up(chunk * (int64_t)sizeof(float), ZMEM_NVME_ALIGN);
        int64_t last = out->own - (nchunks - 1) * chunk;
        uint64_t file = (uint64_t)((nchunks - 1) * stride +
                                   zpart_align_up(last * (int64_t)sizeof(float), ZMEM_NVME_ALIGN));
        b[ZINC_MEMKIND_NVME][ZINC_MEM_MASTER] = file;
        b[ZINC_MEMKIND_NVME][ZINC_MEM_EXP_AVG] = file;
        b[ZINC_MEMKIND_NVME][ZINC_MEM_EXP_AVG_SQ] = file;
        int64_t nbuf = oo->buffer_count < nchunks ? oo->buffer_count : nchunks;
        out->nvme_swap_buffers = (int)(nbuf > 0 ? nbuf : 1);
        b[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] = (uint64_t)out->nvme_swap_buffers * 3 * (uint64_t)stride;
    }
    /* Offloaded from a GPU, the step stages two chunks of the fp32 gradient shard and two of the updated
     * compute-dtype parameters in pinned memory (engine_step.c's pipeline). */
    if (out->device == ZINC_DEVICE_CUDA && (oo->device == ZOFFLOAD_CPU || oo->device == ZOFFLOAD_NVME)) {
        out->offload_staging = 2 * (uint64_t)out->state_chunk * (sizeof(float) + csz);
        b[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] += out->offload_staging;
    }
    /* The cuda device's own scratch (conversions, gradient statistics), allocated when it is created. */
    if (out->device == ZINC_DEVICE_CUDA) b[ZINC_MEMKIND_DEVICE][ZINC_MEM_STAGING] += zdev_cuda_fixed_bytes();
    /* The weight-decay mask: one byte per ZPART_PARAM_ALIGN elements of the own range, built on the host
     * (and copied to a GPU, where the kernels read it). */
    b[ck][ZINC_MEM_OTHER] = (uint64_t)(out->own / ZPART_PARAM_ALIGN);
    if (ck != ZINC_MEMKIND_HOST) b[ZINC_MEMKIND_HOST][ZINC_MEM_OTHER] = (uint64_t)(out->own / ZPART_PARAM_ALIGN);

    /* Gradients and reduction buckets (zero/sizing.c, as zero/grads.c allocates them). */
    zgrads_plan gp;
    zgrads_plan_make(&(zgrads_plan_in){.stage = out->stage, .world = world, .part = &part,
                                       .grad_dtype = out->grad_dtype, .comm_dtype = out->comm_dtype,
                                       .send_needs_copy = zsize_send_needs_copy(
                                           out->comm_dtype, out->grad_dtype, cfg->prescale_gradients,
                                           cfg->gradient_predivide_factor, world),
                                       .reduce_bucket_size = cfg->zero.reduce_bucket_size,
                                       .biggest_module = out->largest_module_flat,
                                       .overlap_comm = cfg->zero.overlap_comm},
                     &gp);
    b[ck][ZINC_MEM_GRADS] = (uint64_t)gp.bytes_grads_full + (uint64_t)gp.bytes_grads_shard;
    b[ck][ZINC_MEM_BUCKETS] = (uint64_t)zgrads_plan_bucket_bytes(&gp);
    out->nbuckets = gp.nbuckets;
    out->bucket_cap = gp.bucket_cap;
    out->bytes_landing = gp.bytes_landing;

    /* Stage 3: gathered copies of the non-persistent modules, at their most. */
    if (out->stage == 3) {
        TRY(gather_peak(mod_flat, persistent, nm, &cfg->zero, &out->gather_peak_numel));
        b[ck][ZINC_MEM_GATHER] = (uint64_t)out->gather_peak_numel * csz;
    }

    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) out->total[k] += b[k][c];

    /* Initialisation scratch (engine.c init_params): pieces of at most ZINC_INIT_PIECE elements of what
     * this rank initialises (whole tensors at stages 0-2, the own shard at 3); a whole-tensor init_fn
     * needs the largest such tensor, except in place (fp32 parameters in host memory, stages 0-2). */
    int64_t own_lo = (int64_t)rank * part.shard, own_hi = own_lo + part.shard, most = 0, most_whole = 0;
    off = 0;
    for (int i = 0; i < m->nparams; i++) {
        int64_t lo = off, hi = off + m->numel[i];
        off = zpart_align_up(hi, ZPART_PARAM_ALIGN);
        if (out->stage == 3) {
            lo = lo > own_lo ? lo : own_lo;
            hi = hi < own_hi ? hi : own_hi;
            if (hi <= lo) continue;
        }
        if (hi - lo > most) most = hi - lo;
        if (m->numel[i] > most_whole) most_whole = m->numel[i];
    }
    out->init_scratch = (uint64_t)(most < ZINC_INIT_PIECE ? most : ZINC_INIT_PIECE) * sizeof(float);
    bool in_place = out->stage <= 2 && out->compute_dtype == ZINC_FP32 && out->device == ZINC_DEVICE_CPU;
    out->init_scratch_whole = in_place ? 0 : (uint64_t)most_whole * sizeof(float);

    /* MPI's temporaries: the largest message (stage 0's gradient all-reduce, the reduce buckets, the
     * parameter all-gathers) is cut into pieces of comm_piece elements (comm_mpi.c); with overlap_comm
     * one piece per pending bucket is in flight. A single rank calls no reducing collective. */
    out->comm_piece = (int64_t)zcomm_mpi_max_count();
    out->comm_pending = out->nbuckets > 1 ? out->nbuckets : 1;
    if (world > 1) {
        int64_t msg = out->stage <= 2 ? part.padded : (out->bucket_cap > out->largest_module_flat
                                                              ? out->bucket_cap : out->largest_module_flat);
        if (msg > out->comm_piece) msg = out->comm_piece;
        size_t es = zinc_dtype_size(out->comm_dtype);
        if (zinc_dtype_size(out->grad_dtype) > es) es = zinc_dtype_size(out->grad_dtype);
        if (zinc_dtype_size(out->compute_dtype) > es) es = zinc_dtype_size(out->compute_dtype);
        out->comm_temp = (uint64_t)out->comm_pending * ZMEM_MPI_TEMP_FACTOR * (uint64_t)msg * es;
    }
fail:
    free(mod_flat);
    free(mod_numel);
    free(persistent);
    return st;
}

uint64_t zmem_estimate_rss(const zmem_estimate *est, bool device_in_host) {
    uint64_t all = 0, gather = 0;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        if (k == ZINC_MEMKIND_NVME || (k == ZINC_MEMKIND_DEVICE && !device_in_host)) continue;
        all += est->total[k];
        gather += est->bytes[k][ZINC_MEM_GATHER];
    }
    all -= all > est->before_build ? est->before_build : all;
    uint64_t build = all - gather + est->init_scratch, steps = all + est->comm_temp;
    return build > steps ? build : steps;
}

/* ---------------------------------------------------------------- DeepSpeed's estimators */

static uint64_t floor_u64(double x) { return x <= 0 ? 0 : (uint64_t)x; }

void zmem_deepspeed_estimate(int stage, zcfg_offload_device offload_optimizer, bool offload_param, int64_t P,
                             int64_t L, int nodes, int gpus_per_node, double abf, zmem_ds_estimate *out) {
    memset(out, 0, sizeof *out);
    double p = (double)P, l = (double)L, gpn = (double)gpus_per_node;
    double G = (double)nodes * gpn;
    if (stage == 0 || offload_optimizer == ZOFFLOAD_NVME) return;
    bool off = offload_optimizer == ZOFFLOAD_CPU;
    out->available = true;
    if (stage <= 2) {
        out->function = "estimate_zero2_model_states_mem_needs";
        if (off) {
            out->gpu_bytes = (uint64_t)(2 * P);
            double f = 4 * G > 16 ? 4 * G : 16;
            out->cpu_bytes = floor_u64(p * f * abf);
        } else {
            out->gpu_bytes = (uint64_t)(2 * P) + floor_u64(18.0 * p / G);
            out->cpu_bytes = floor_u64(p * 4 * gpn * abf);
        }
        out->cpu_bytes_no_zero_init = out->cpu_bytes;
        return;
    }
    out->function = "estimate_zero3_model_states_mem_needs";
    double gf = 1.0 / (double)nodes;
    uint64_t llm = (uint64_t)(4 * L);
    if (off && offload_param) {
        out->gpu_bytes = llm;
        out->cpu_bytes = floor_u64(p * 18 * gf * abf);
        double f = 4 * gpn > 18 * gf ? 4 * gpn : 18 * gf;
        out->cpu_bytes_no_zero_init = floor_u64(p * f * abf);
    } else if (off) {
        out->gpu_bytes = llm + floor_u64(2.0 * p / G);
        out->cpu_bytes = floor_u64(p * 16 * gf * abf);
        double f = 4 * gpn > 16 * gf ? 4 * gpn : 16 * gf;
        out->cpu_bytes_no_zero_init = floor_u64(p * f * abf);
    } else {
        out->gpu_bytes = llm + floor_u64(18.0 * p / G);
        out->cpu_bytes = floor_u64(l * 4 * gpn * abf);
        out->cpu_bytes_no_zero_init = floor_u64(p * 4 * gpn * abf);
    }
}

/* ---------------------------------------------------------------- pre-flight */

static bool env_bytes(zenv_id id, uint64_t *out) {
    const char *v = zenv_get(id);
    if (!v || !*v) return false;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) return false;
    *out = (uint64_t)x;
    return true;
}

/* A number from a cgroup file; false for "max" (no limit) or an unreadable file. */
static bool read_u64_file(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long v;
    bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok) *out = (uint64_t)v;
    return ok;
}

/* The tightest memory-cgroup limit over this process's cgroup and its ancestors, v2 or v1. */
static void read_cgroup(zmem_available *out) {
    if (env_bytes(ZENV_FAKE_CGROUP_FREE, &out->cgroup_free)) {
        out->have_cgroup = true;
        out->cgroup_limit = out->cgroup_free;
        snprintf(out->cgroup_file, sizeof out->cgroup_file, "ZINC_FAKE_CGROUP_FREE");
        return;
    }
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return;
    char line[1024], rel[768] = "";
    const char *root = NULL, *limit_name = NULL, *usage_name = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1;
        if (!strcmp(line, "0") && !*ctrl && !root) { /* v2 unified */
            root = "/sys/fs/cgroup", limit_name = "memory.max", usage_name = "memory.current";
            snprintf(rel, sizeof rel, "%s", c2 + 1);
        } else if (strstr(ctrl, "memory")) { /* v1 memory controller, in a list like "memory" or "cpu,memory" */
            root = "/sys/fs/cgroup/memory", limit_name = "memory.limit_in_bytes", usage_name = "memory.usage_in_bytes";
            snprintf(rel, sizeof rel, "%s", c2 + 1);
            break;
        }
    }
    fclose(f);
    if (!root) return;
    /* From the process's cgroup up to the root; inside a container the path may not exist (its own
     * cgroup is mounted at the root), so missing levels are skipped. */
    for (;;) {
        char lim_path[1100], use_path[1100];
        snprintf(lim_path, sizeof lim_path, "%s%s/%s", root, rel, limit_name);
        snprintf(use_path, sizeof use_path, "%s%s/%s", root, rel, usage_name);
        uint64_t lim = 0, use = 0;
        /* v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages) */
        if (read_u64_file(lim_path, &lim) && lim < ((uint64_t)1 << 60) && read_u64_file(use_path, &use)) {
            uint64_t fr = lim > use ? lim - use : 0;
            if (!out->have_cgroup || fr < out->cgroup_free) {
                out->have_cgroup = true;
                out->cgroup_free = fr;
                out->cgroup_limit = lim;
                size_t n = strlen(lim_path);
                if (n >= sizeof out->cgroup_file) n = sizeof out->cgroup_file - 1;
                memcpy(out->cgroup_file, lim_path, n);
                out->cgroup_file[n] = 0;
            }
        }
        char *slash = strrchr(rel, '/');
        if (!slash || !rel[0]) break;
        if (slash == rel && !rel[1]) break; /* "/" done */
        if (slash == rel) rel[1] = 0;
        else *slash = 0;
        if (!strcmp(rel, "/")) rel[0] = 0; /* the root level: root + "" */
    }
}

zinc_status zmem_headroom_read(unsigned *pct) {
    const char *v = zenv_get(ZENV_MEM_HEADROOM);
    *pct = ZMEM_HEADROOM_DEFAULT;
    if (!v || !*v) return ZINC_OK;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end == '%') end++;
    if (*end || x < 0 || x > 90)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_MEM_HEADROOM=\"%s\": expected a percentage from 0 to 90 (default %d): the share of "
                    "each memory limit the pre-flight keeps free",
                    v, ZMEM_HEADROOM_DEFAULT);
    *pct = (unsigned)x;
    return ZINC_OK;
}

void zmem_available_read(const char *nvme_path, zmem_available *out) {
    memset(out, 0, sizeof *out);
    if (env_bytes(ZENV_FAKE_MEM_AVAILABLE, &out->mem_available)) {
        out->have_mem = true;
    } else {
        FILE *f = fopen("/proc/meminfo", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                out->mem_available = (uint64_t)kb * 1024;
                out->have_mem = true;
                break;
            }
        }
        if (f) fclose(f);
    }
    if (env_bytes(ZENV_FAKE_MEMLOCK, &out->memlock)) {
        out->have_memlock = true;
    } else {
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            out->memlock = (uint64_t)rl.rlim_cur;
            out->have_memlock = true;
        }
    }
    read_cgroup(out);
    if (env_bytes(ZENV_FAKE_AS_FREE, &out->as_free)) {
        out->have_as = true;
    } else {
        struct rlimit rl;
        uint64_t rss = 0, hwm = 0, vsize = 0;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            FILE *f = fopen("/proc/self/status", "r");
            char line[256];
            unsigned long long kb;
            while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "VmSize: %llu kB", &kb) == 1) vsize = (uint64_t)kb * 1024;
            if (f) fclose(f);
            (void)rss, (void)hwm;
            out->as_limit = (uint64_t)rl.rlim_cur;
            out->as_free = out->as_limit > vsize ? out->as_limit - vsize : 0;
            out->have_as = true;
        }
    }
    out->headroom_pct = ZMEM_HEADROOM_DEFAULT;
    if (env_bytes(ZENV_FAKE_NVME_FREE, &out->nvme_free)) {
        out->have_nvme = true;
    } else if (nvme_path && *nvme_path) {
        struct statvfs sv;
        if (statvfs(nvme_path, &sv) == 0) {
            out->nvme_free = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
            out->have_nvme = true;
        }
    }
}

static void fmt_bytes(char *buf, size_t cap, uint64_t b) {
    double x = (double)b;
    if (b >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", x / 1073741824.0);
    else if (b >= (1ull << 20)) snprintf(buf, cap, "%.1f MiB", x / 1048576.0);
    else if (b >= 1024) snprintf(buf, cap, "%.1f KiB", x / 1024.0);
    else snprintf(buf, cap, "%" PRIu64 " B", b);
}

/* "params 1.2 GiB, grads ..." for the non-zero categories of the given kinds. */
static void breakdown(const zmem_estimate *est, const zinc_mem_kind *kinds, int nk, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
        uint64_t v = 0;
        for (int k = 0; k < nk; k++) v += est->bytes[kinds[k]][c];
        if (!v || len + 64 >= cap) continue;
        char s[32];
        fmt_bytes(s, sizeof s, v);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s %s", len ? ", " : "",
                                zinc_mem_category_name((zinc_mem_category)c), s);
    }
}

/* What would shrink the footprint in memory kind k (host or device), biggest first where it matters. */
static void fit_advice(const zmem_estimate *est, zinc_mem_kind k, char *buf, size_t cap) {
    size_t len = 0;
    const uint64_t *h = est->bytes[k];
    uint64_t state = h[ZINC_MEM_MASTER] + h[ZINC_MEM_EXP_AVG] + h[ZINC_MEM_EXP_AVG_SQ];
    char s[32];
#define ADVICE(...)                                                                                        \
    do {                                                                                                   \
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__);                         \
    } while (0)
    /* A higher stage only where it costs less at this rank count (the pre-flight computes it; an estimate
     * without that check offers one only with ranks to shard across). */
    if (est->stage < 3 && est->world > 1 && est->cheaper_stage > est->stage) {
        fmt_bytes(s, sizeof s, est->cheaper_bytes);
        ADVICE("; raise zero_optimization.stage to %d (now %d): %s per rank at this rank count (stage 1 shards the "
               "optimizer state across ranks, 2 also the gradients, 3 also the parameters)",
               est->cheaper_stage, est->stage, s);
    }
    /* Offload needs stage 1 or more (the config refuses stage 0 with offload). NVMe offload only saves
     * host memory when its swap buffers (buffer_count x 3 chunks of sub_group_size) are smaller than the
     * state: name a sub_group_size that leaves a quarter of it. */
    const char *need_stage = est->stage == 0 ? " with zero_optimization.stage 1 or more" : "";
    int64_t sg = est->own / 4 / (est->nvme_buffers > 0 ? est->nvme_buffers : 1);
    sg = sg < 1 ? 1 : sg;
    bool nvme_saves = (int64_t)est->nvme_buffers * est->nvme_chunk < est->own;
    char sgtext[160] = "";
    if (!nvme_saves)
        snprintf(sgtext, sizeof sgtext, " and zero_optimization.sub_group_size %" PRId64
                 " (now %" PRId64 ": its swap buffers would hold the whole state)", sg, est->nvme_chunk);
    if (state && k == ZINC_MEMKIND_DEVICE) {
        fmt_bytes(s, sizeof s, state);
        ADVICE("; zero_optimization.offload_optimizer.device \"cpu\" (or \"nvme\")%s moves the optimizer state (%s) "
               "off the GPU", need_stage, s);
    } else if (state && est->offload != ZOFFLOAD_NVME) {
        fmt_bytes(s, sizeof s, state);
        ADVICE("; zero_optimization.offload_optimizer.device \"nvme\"%s%s moves the optimizer state (%s) to files",
               need_stage, sgtext, s);
    } else if (est->offload == ZOFFLOAD_NVME && h[ZINC_MEM_STAGING] && est->nvme_buffers > 1 && sg < est->nvme_chunk) {
        fmt_bytes(s, sizeof s, h[ZINC_MEM_STAGING]);
        ADVICE("; a smaller zero_optimization.sub_group_size (%" PRId64 ", now %" PRId64
               ") shrinks the NVMe swap buffers (%s)", sg, est->nvme_chunk, s);
    } else if (est->offload == ZOFFLOAD_NVME && h[ZINC_MEM_STAGING] && sg < est->nvme_chunk) {
        fmt_bytes(s, sizeof s, h[ZINC_MEM_STAGING]);
        ADVICE("; zero_optimization.sub_group_size %" PRId64 " (now %" PRId64
               ") shrinks the NVMe swap buffers (%s)", sg, est->nvme_chunk, s);
    }
    if (h[ZINC_MEM_BUCKETS] > state / 4 && h[ZINC_MEM_BUCKETS]) {
        fmt_bytes(s, sizeof s, h[ZINC_MEM_BUCKETS]);
        ADVICE("; a smaller zero_optimization.reduce_bucket_size shrinks the buckets (%s, %d x %" PRId64
               " elements)",
               s, est->nbuckets, est->bucket_cap);
    }
    if (h[ZINC_MEM_GATHER]) {
        fmt_bytes(s, sizeof s, h[ZINC_MEM_GATHER]);
        ADVICE("; smaller stage3_max_reuse_distance / stage3_max_live_parameters / stage3_prefetch_bucket_size "
               "shrink the gathered parameters (%s)",
               s);
    }
    if (est->stage > 0 || k == ZINC_MEMKIND_DEVICE)
        ADVICE(k == ZINC_MEMKIND_DEVICE ? "; more GPUs (one rank each) divide the sharded states further"
                                        : "; more ranks (nodes) divide the sharded states further");
#undef ADVICE
    if (buf[0] == ';') memmove(buf, buf + 2, strlen(buf + 2) + 1); /* drop the leading "; " */
}

zinc_status zmem_preflight_check(const zmem_estimate *est, int local_ranks, const zmem_available *a,
                                 const char *nvme_path) {
    char need[32], have[32], node[32], parts[512], advice[1024];
    uint64_t L = local_ranks > 0 ? (uint64_t)local_ranks : 1;
    /* The device's own scratch is allocated when the engine is created: already out of device_free. */
    uint64_t dev = est->total[ZINC_MEMKIND_DEVICE];
    if (est->device == ZINC_DEVICE_CUDA) dev -= dev < zdev_cuda_fixed_bytes() ? dev : zdev_cuda_fixed_bytes();
    uint64_t R = a->ranks_per_device > 0 ? (uint64_t)a->ranks_per_device : 1;
    if (a->have_device && dev * R > a->device_free) {
        static const zinc_mem_kind dk[] = {ZINC_MEMKIND_DEVICE};
        fmt_bytes(need, sizeof need, dev);
        fmt_bytes(node, sizeof node, dev * R);
        fmt_bytes(have, sizeof have, a->device_free);
        breakdown(est, dk, 1, parts, sizeof parts);
        fit_advice(est, ZINC_MEMKIND_DEVICE, advice, sizeof advice);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough GPU memory. Each rank needs %s of GPU memory (%" PRIu64
                    " bytes: %s); %" PRIu64 " rank%s on this GPU need%s %s (%" PRIu64
                    " bytes), but the GPU has %s (%" PRIu64 " bytes) free. To fit: %s. (ZeRO stage %d, %d rank%s; "
                    "`zinc mem estimate --device cuda` shows the breakdown; ZINC_PREFLIGHT=0 skips this check)",
                    need, dev, parts, R, R == 1 ? "" : "s", R == 1 ? "s" : "", node, dev * R, have, a->device_free,
                    advice, est->stage, est->world, est->world == 1 ? "" : "s");
    }
    /* Host memory: the process's predicted growth (the rows plus the build's scratch or MPI's
     * temporaries) with the headroom, against every limit that applies: MemAvailable and the memory
     * cgroup for all ranks of this node (mpirun starts them in its own cgroup), RLIMIT_AS per process. */
    uint64_t host = zmem_estimate_rss(est, false);
    uint64_t hr = a->headroom_pct <= 90 ? a->headroom_pct : 90;
    uint64_t host_hr = host + host / 100 * hr;
    struct {
        bool have;
        uint64_t free, mult;
        char what[512];
    } lim[3] = {{a->have_mem, a->mem_available, L, "MemAvailable (/proc/meminfo)"},
                {a->have_cgroup, a->cgroup_free, L, ""},
                {a->have_as, a->as_free, 1, ""}};
    char cl[32], al[32];
    fmt_bytes(cl, sizeof cl, a->cgroup_limit);
    fmt_bytes(al, sizeof al, a->as_limit);
    snprintf(lim[1].what, sizeof lim[1].what, "what the memory cgroup leaves free (%s of limit %s, less usage)",
             a->cgroup_file, cl);
    snprintf(lim[2].what, sizeof lim[2].what, "the address space RLIMIT_AS (%s) leaves this process", al);
    for (int i = 0; i < 3; i++) {
        if (!lim[i].have || host_hr * lim[i].mult <= lim[i].free) continue;
        static const zinc_mem_kind hk[] = {ZINC_MEMKIND_HOST, ZINC_MEMKIND_PINNED};
        char extra[160] = "";
        fmt_bytes(need, sizeof need, host);
        fmt_bytes(node, sizeof node, host_hr * lim[i].mult);
        fmt_bytes(have, sizeof have, lim[i].free);
        breakdown(est, hk, 2, parts, sizeof parts);
        fit_advice(est, ZINC_MEMKIND_HOST, advice, sizeof advice);
        if (est->init_scratch || est->comm_temp) {
            char s1[32], s2[32];
            fmt_bytes(s1, sizeof s1, est->init_scratch);
            fmt_bytes(s2, sizeof s2, est->comm_temp);
            snprintf(extra, sizeof extra, ", init scratch %s at build, MPI temporaries %s", s1, s2);
        }
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough host memory. Each rank needs %s of host memory at its peak (%" PRIu64
                    " bytes: %s%s); with %" PRIu64 "%% headroom (ZINC_MEM_HEADROOM) %" PRIu64
                    " process%s need%s %s (%" PRIu64 " bytes), but %s is %s (%" PRIu64
                    " bytes). To fit: %s. (ZeRO stage %d, %d rank%s; `zinc mem estimate` shows the breakdown; "
                    "ZINC_PREFLIGHT=0 skips this check)",
                    need, host, parts, extra, hr, lim[i].mult, lim[i].mult == 1 ? "" : "es",
                    lim[i].mult == 1 ? "s" : "", node, host_hr * lim[i].mult, lim[i].what, have, lim[i].free,
                    advice, est->stage, est->world, est->world == 1 ? "" : "s");
    }
    /* The NVMe store's swap buffers fall back to ordinary host memory when they cannot be pinned. */
    uint64_t pinned = est->total[ZINC_MEMKIND_PINNED] - est->bytes[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING];
    if (pinned && a->have_memlock && pinned > a->memlock) {
        static const zinc_mem_kind pk[] = {ZINC_MEMKIND_PINNED};
        fmt_bytes(need, sizeof need, pinned);
        fmt_bytes(have, sizeof have, a->memlock);
        breakdown(est, pk, 1, parts, sizeof parts);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: each rank needs %s (%" PRIu64 " bytes) of pinned host memory (%s), but the "
                    "pinned-memory limit RLIMIT_MEMLOCK is %s (%" PRIu64
                    " bytes). Raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf or the "
                    "container's --ulimit memlock=-1), or set zero_optimization.offload_optimizer.pin_memory "
                    "false (ZINC_PREFLIGHT=0 skips this check)",
                    need, pinned, parts, have, a->memlock);
    }
    uint64_t nvme = est->total[ZINC_MEMKIND_NVME];
    if (nvme && a->have_nvme && nvme * L > a->nvme_free) {
        static const zinc_mem_kind nk[] = {ZINC_MEMKIND_NVME};
        fmt_bytes(need, sizeof need, nvme);
        fmt_bytes(node, sizeof node, nvme * L);
        fmt_bytes(have, sizeof have, a->nvme_free);
        breakdown(est, nk, 1, parts, sizeof parts);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough free space under nvme_path \"%s\": each rank writes %s (%" PRIu64
                    " bytes: %s); %" PRIu64 " rank%s on this node write%s %s (%" PRIu64
                    " bytes), but %s (%" PRIu64 " bytes) are free. Free space there, point "
                    "zero_optimization.offload_optimizer.nvme_path at a bigger file system, use more nodes, or "
                    "offload to \"cpu\" (ZINC_PREFLIGHT=0 skips this check)",
                    nvme_path ? nvme_path : "", need, nvme, parts, L, L == 1 ? "" : "s", L == 1 ? "s" : "", node,
                    nvme * L, have,
                    a->nvme_free);
    }
    return ZINC_OK;
}

zinc_status zmem_estimate_engine(zinc_engine *e, zmem_estimate *out) {
    return zmem_estimate_engine_cfg(e, &e->cfg, out);
}

zinc_status zmem_estimate_engine_cfg(zinc_engine *e, const zinc_config *cfg, zmem_estimate *out) {
    zinc_status st = ZINC_OK;
    int64_t *numel = NULL;
    int *module = NULL;
    TRY_ALLOC(numel, e->nparams, "the engine's memory estimate");
    TRY_ALLOC(module, e->nparams, "the engine's memory estimate");
    for (int i = 0; i < e->nparams; i++) {
        numel[i] = e->params[i]->numel;
        module[i] = e->params[i]->module;
    }
    /* A cpu device presented as discrete (ZINC_CPU_DISCRETE=1) allocates as the cuda device does. */
    zinc_device_kind kind = e->dev->mem_kind == ZINC_MEMKIND_DEVICE ? ZINC_DEVICE_CUDA : e->device;
    TRY(zmem_estimate_compute(&(zmem_model){e->nparams, numel, module}, cfg, e->world, e->rank, kind, out));
    out->init_scratch = (uint64_t)zengine_init_scratch_numel(e, e->init_ranged) * sizeof(float);
    /* Device collectives through MPI stage in host memory of the device's staging kind (pinned on a GPU). */
    uint64_t staged = zcomm_staged_bytes(e->dcomm);
    if (staged) {
        zinc_mem_kind k = e->dev->mem_kind == ZINC_MEMKIND_DEVICE ? ZINC_MEMKIND_PINNED : ZINC_MEMKIND_HOST;
        out->bytes[k][ZINC_MEM_STAGING] += staged;
        out->total[k] += staged;
        out->before_build = staged;
    }
fail:
    free(numel);
    free(module);
    return st;
}

zinc_status zmem_preflight(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    const char *off = zenv_get(ZENV_PREFLIGHT);
    if (off && !strcmp(off, "0")) return ZINC_OK;
    zmem_estimate est;
    TRY(zmem_estimate_engine(e, &est));
    if (est.padded != e->part.padded)
        ZLOG_WARN(&e->log, "pre-flight: the memory estimator's layout (%" PRId64 " elements) differs from the "
                           "engine's (%" PRId64 "); please report this",
                  est.padded, e->part.padded);
    const char *nvme_path = e->cfg.zero.offload_optimizer.nvme_path;
    zmem_available avail;
    zmem_available_read(nvme_path, &avail);
    TRY(zmem_headroom_read(&avail.headroom_pct));
    /* Which higher stage, if any, needs less at this rank count, for the advice (device memory on a GPU,
     * the process's host peak on the CPU). */
    {
        zinc_mem_kind ck = e->dev->mem_kind == ZINC_MEMKIND_DEVICE ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
        uint64_t now = ck == ZINC_MEMKIND_DEVICE ? est.total[ck] : zmem_estimate_rss(&est, false);
        for (int s2 = est.stage + 1; s2 <= 3; s2++) {
            zinc_config alt = e->cfg;
            alt.zero.stage = s2;
            if (!zcfg_given(&e->cfg, "zero_optimization.overlap_comm")) alt.zero.overlap_comm = s2 == 3;
            zmem_estimate ae;
            if (zmem_estimate_engine_cfg(e, &alt, &ae) != ZINC_OK) {
                zinc__error_clear();
                continue;
            }
            uint64_t b = ck == ZINC_MEMKIND_DEVICE ? ae.total[ck] : zmem_estimate_rss(&ae, false);
            if (b < now && (est.cheaper_stage < 0 || b < est.cheaper_bytes)) {
                est.cheaper_stage = s2;
                est.cheaper_bytes = b;
            }
        }
    }
    if (e->dev->mem_kind == ZINC_MEMKIND_DEVICE) { /* a GPU, or the cpu device presented as one */
        uint64_t used = 0, total = 0;
        int gpus = e->dev->kind == ZINC_DEVICE_CUDA ? zdev_cuda_count() : 1;
        e->dev->ops->mem_info(e->dev, &used, &total);
        avail.device_free = total - used;
        avail.have_device = env_bytes(ZENV_FAKE_DEVICE_FREE, &avail.device_free) || total > 0;
        avail.ranks_per_device = gpus > 0 ? (e->comm->local_size + gpus - 1) / gpus : 1;
    }
    ZLOG_DEBUG(&e->log,
               "pre-flight: per rank %" PRIu64 " device, %" PRIu64 " host, %" PRIu64 " pinned, %" PRIu64
               " NVMe bytes; %d rank(s) on this node; MemAvailable %" PRIu64 "%s",
               est.total[ZINC_MEMKIND_DEVICE], est.total[ZINC_MEMKIND_HOST], est.total[ZINC_MEMKIND_PINNED],
               est.total[ZINC_MEMKIND_NVME], e->comm->local_size, avail.mem_available,
               avail.have_mem ? "" : " (unknown)");
    TRY(zmem_preflight_check(&est, e->comm->local_size, &avail, nvme_path));
fail:
    return st;
}

zinc_status zmem_allgather_reports(zinc_engine *e, zinc_memory_report *all) {
    zinc_status st = ZINC_OK;
    zinc_memory_report mine;
    if (!e || !all) return ZERR(ZINC_ERR_INVALID_ARG, "zmem_allgather_reports: NULL argument");
    TRY(zinc_memory_get(e, &mine));
    TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
fail:
    return st;
}

zinc_status zmem_allgather_u64(zinc_engine *e, const uint64_t *mine, int n, uint64_t *all) {
    if (!e || !mine || !all || n < 1) return ZERR(ZINC_ERR_INVALID_ARG, "zmem_allgather_u64: bad argument");
    return zcomm_allgather_bytes(e->comm, mine, all, (size_t)n * sizeof *mine);
}
