/* The sizing plan (plan.h): the flat layout, then every buffer in the order zinc_build allocates them. */
#include "runtime/mem/plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "offload/param_nvme.h"
#include "offload/state.h"
#include "base/comm/comm_mpi.h"
#include "base/core/error.h"
#include "base/device/device.h"
#include "kernels/cpu_kernels.h"
#include "runtime/mem/plan_gather.h"
#include "zero/sizing.h"
#include "zero/zeropp.h"
#include "runtime/optim/optim.h"

zplan_device zplan_device_for(zinc_device_kind kind) {
    if (kind == ZINC_DEVICE_CUDA)
        return (zplan_device){.compute_kind = ZINC_MEMKIND_DEVICE, .fixed_bytes = zdev_cuda_fixed_bytes()};
    return (zplan_device){.compute_kind = ZINC_MEMKIND_HOST, .host_addressable = true};
}

const char *zplan_when_name(zplan_when w) {
    static const char *names[] = {"create", "build", "step", "checkpoint"};
    return (unsigned)w < ZPLAN_WHEN_COUNT ? names[w] : "?";
}

static void put(zplan *p, zplan_buf b, const char *what, zinc_mem_category cat, zinc_mem_kind kind, zplan_when when,
                int count, uint64_t each) {
    if (count < 1 || each == 0) count = 0, each = 0;
    p->buf[b] = (zplan_entry){.what = what,
                              .cat = cat,
                              .kind = kind,
                              .when = when,
                              .count = count,
                              .each = each,
                              .bytes = (uint64_t)count * each};
}

void zplan_put(zplan *p, zplan_buf b, const char *what, zinc_mem_category cat, zinc_mem_kind kind, zplan_when when,
               int count, uint64_t each) {
    put(p, b, what, cat, kind, when, count, each);
}

static zinc_status check_model(const zplan_model *m, int world, int rank) {
    if (!m || m->nparams < 1 || !m->numel || !m->module)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: a model with at least one parameter is required");
    if (world < 1 || rank < 0 || rank >= world)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: rank %d of world %d is out of range", rank, world);
    if (m->module[0] < 0) return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: parameter 0 has module %d", m->module[0]);
    for (int i = 0; i < m->nparams; i++) {
        if (m->numel[i] < 1)
            return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: parameter %d has %" PRId64 " elements", i, m->numel[i]);
        if (i > 0 && m->module[i] < m->module[i - 1])
            return ZERR(ZINC_ERR_INVALID_ARG,
                        "memory plan: parameter %d: modules must be in order (module %d after %d)", i, m->module[i],
                        m->module[i - 1]);
    }
    if (m->ndeclared < 0 || m->ndeclared > ZPLAN_MAX_DECLARED || (m->ndeclared && !m->declared))
        return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: %d declarations of the model's memory (0..%d)", m->ndeclared,
                    ZPLAN_MAX_DECLARED);
    if (m->nmodules && m->module[m->nparams - 1] >= m->nmodules)
        return ZERR(ZINC_ERR_INVALID_ARG, "memory plan: parameter %d has module %d of %d", m->nparams - 1,
                    m->module[m->nparams - 1], m->nmodules);
    return ZINC_OK;
}

/* The flat buffer: each parameter on a ZPART_PARAM_ALIGN boundary, modules in order; the partition and
 * the range this rank's optimizer owns. */
static zinc_status lay_out(zplan *p, const zplan_model *m) {
    zinc_status st = ZINC_OK;
    int64_t off = 0, *mod_numel = NULL;
    p->nparams = m->nparams;
    p->nmodules = m->nmodules ? m->nmodules : m->module[m->nparams - 1] + 1;
    TRY_ALLOC(p->flat_offset, p->nparams, "the memory plan");
    TRY_ALLOC(p->module_begin, p->nmodules, "the memory plan");
    TRY_ALLOC(p->module_end, p->nmodules, "the memory plan");
    TRY_ALLOC(p->persistent, p->nmodules, "the memory plan");
    TRY_ALLOC(mod_numel, p->nmodules, "the memory plan");
    /* Modules in order, each parameter on a ZPART_PARAM_ALIGN boundary; a module without parameters is
     * an empty range where it stands. */
    for (int mod = 0, i = 0; mod < p->nmodules; mod++) {
        p->module_begin[mod] = off;
        for (; i < m->nparams && m->module[i] == mod; i++) {
            p->flat_offset[i] = off;
            off = zpart_align_up(off + m->numel[i], ZPART_PARAM_ALIGN);
            mod_numel[mod] += m->numel[i];
            p->numel += m->numel[i];
            if (m->numel[i] > p->largest_param) p->largest_param = m->numel[i];
        }
        p->module_end[mod] = off;
        int64_t flat = off - p->module_begin[mod];
        if (mod_numel[mod] > p->largest_module) p->largest_module = mod_numel[mod];
        if (flat > p->largest_module_flat) p->largest_module_flat = flat;
    }
    zpart_init(&p->part, off, p->world, p->rank);
    p->qgz_layout = (zsize_qgz_layout){.total = p->part.padded};
    if (m->qgz_group && p->nparams > 0) {
        TRY_ALLOC(p->qgz_group, p->nparams, "the memory plan");
        memcpy(p->qgz_group, m->qgz_group, (size_t)p->nparams * sizeof(int64_t));
        p->qgz_layout = (zsize_qgz_layout){p->nparams, p->flat_offset, p->qgz_group, p->part.padded};
    }
    p->own_lo = p->stage == 0 ? 0 : (int64_t)p->rank * p->part.shard;
    p->own_hi = p->stage == 0 ? p->part.padded : p->own_lo + p->part.shard;
fail:
    free(mod_numel);
    return st;
}

/* Parameters: the full flat buffer (stages 0-2), or the shard plus the modules that stay gathered. */
static void plan_params(zplan *p, const zinc_config *cfg) {
    zinc_mem_kind ck = p->device.compute_kind;
    uint64_t csz = zinc_dtype_size(p->compute_dtype);
    if (p->stage <= 2) {
        put(p, ZPLAN_PARAMS, "parameters", ZINC_MEM_PARAMS, ck, ZPLAN_AT_BUILD, 1, (uint64_t)p->part.padded * csz);
        return;
    }
    if (cfg->zero.offload_param.device == ZOFFLOAD_NVME) { /* one file, offload/param_nvme.c */
        int64_t align = p->device.nvme_align ? p->device.nvme_align : ZPLAN_NVME_ALIGN;
        zstate_param_geometry g =
            zstate_param_geometry_make(p->part.shard, csz, align, cfg->zero.offload_param.buffer_size, 0, 0,
                                       cfg->zero.offload_param.max_in_cpu);
        put(p, ZPLAN_PARAMS, "the parameter shard (NVMe file)", ZINC_MEM_PARAMS, ZINC_MEMKIND_NVME, ZPLAN_AT_BUILD, 1,
            g.file_bytes);
        put(p, ZPLAN_PARAMS_RESIDENT, "the parameter shard's elements kept in memory (offload_param.max_in_cpu)",
            ZINC_MEM_PARAMS, ZINC_MEMKIND_HOST, ZPLAN_AT_BUILD, 1, g.resident_bytes);
    } else {
        put(p, ZPLAN_PARAMS, "the parameter shard", ZINC_MEM_PARAMS, ck, ZPLAN_AT_BUILD, 1,
            (uint64_t)p->part.shard * csz);
    }
    int64_t total = 0;
    for (int i = 0; i < p->nmodules; i++) {
        p->persistent[i] =
            zsize_persistent(p->module_end[i] - p->module_begin[i], &total, cfg->zero.param_persistence_threshold,
                             cfg->zero.model_persistence_threshold);
        p->npersistent += p->persistent[i];
    }
    p->persistent_numel = total;
    /* Modules of different sizes: `each` holds all of them together. */
    put(p, ZPLAN_PARAMS_PERSISTENT, "persistent gathered parameters", ZINC_MEM_PARAMS, ck, ZPLAN_AT_BUILD, 1,
        (uint64_t)total * csz);
    if (total) p->buf[ZPLAN_PARAMS_PERSISTENT].count = p->npersistent;
    int G = zpp_hpz_size(&cfg->zero, p->world);
    if (G > 1) {
        zpartition hp;
        zpp_secondary_partition(&p->part, G, p->rank, &hp);
        put(p, ZPLAN_HPZ_SECONDARY, "the hpZ secondary parameter shard", ZINC_MEM_PARAMS, ck, ZPLAN_AT_BUILD, 1,
            (uint64_t)hp.shard * csz);
    }
}

/* Optimizer state: fp32 master, exp_avg and (but for Lion) exp_avg_sq over the own range, where
 * offload_optimizer puts them (offload/state.c): the compute device, host memory (pinned with pin_memory
 * on a discrete device only: on the CPU it would only spend RLIMIT_MEMLOCK), or one NVMe file per tensor
 * with swap buffers. */
static void plan_state(zplan *p, const zinc_config *cfg) {
    const zcfg_offload *oo = &cfg->zero.offload_optimizer;
    int64_t own = p->own_hi - p->own_lo;
    const zopt_desc *o = zopt_get(cfg->optimizer.type);
    int nt = p->state_tensors = o ? o->state_tensors : ZSTATE_MAX_TENSORS;
    bool offload = oo->device == ZOFFLOAD_CPU || oo->device == ZOFFLOAD_NVME;
    zinc_mem_kind staging = p->device.host_addressable ? ZINC_MEMKIND_HOST : ZINC_MEMKIND_PINNED;
    zstate_layout l =
        zstate_layout_make(oo, cfg->zero.sub_group_size, own, p->device.compute_kind, p->device.host_addressable);
    p->state_kind = l.kind;
    p->state_chunk = l.chunk;

    p->nvme_chunk = zstate_chunk_elems(cfg->zero.sub_group_size, own);
    int64_t align = p->device.nvme_align ? p->device.nvme_align : ZPLAN_NVME_ALIGN;
    zstate_nvme_geometry geo = zstate_nvme_geometry_make(own, p->nvme_chunk, align, oo->buffer_count);
    p->nvme_buffers = geo.buffers;
    p->nvme_stride = geo.stride;
    p->nvme_file_bytes = geo.file_bytes;

    uint64_t sbytes = oo->device == ZOFFLOAD_NVME ? p->nvme_file_bytes : (uint64_t)own * sizeof(float);
    put(p, ZPLAN_MASTER, "fp32 master weights", ZINC_MEM_MASTER, p->state_kind, ZPLAN_AT_BUILD, 1, sbytes);
    put(p, ZPLAN_EXP_AVG, o ? o->moment_names[0] : "exp_avg", ZINC_MEM_EXP_AVG, p->state_kind, ZPLAN_AT_BUILD, 1,
        sbytes);
    put(p, ZPLAN_EXP_AVG_SQ, o && o->moment_names[1] ? o->moment_names[1] : "exp_avg_sq", ZINC_MEM_EXP_AVG_SQ,
        p->state_kind, ZPLAN_AT_BUILD, 1, nt > 2 ? sbytes : 0);
    /* Swap buffers are pinned when io_uring registers them, host memory when the kernel refuses
     * (RLIMIT_MEMLOCK): the plan says pinned. */
    if (oo->device == ZOFFLOAD_NVME)
        put(p, ZPLAN_NVME_SWAP, "NVMe swap buffers", ZINC_MEM_STAGING, ZINC_MEMKIND_PINNED, ZPLAN_AT_BUILD,
            p->nvme_buffers, (uint64_t)nt * (uint64_t)p->nvme_stride);
    /* Offloaded from a discrete device, the step stages two chunks of the fp32 gradient shard and two of
     * the updated compute-dtype parameters (engine_step_pass.c's pipeline), in pinned memory zinc_build makes
     * once for the run. */
    if (offload && !p->device.host_addressable) {
        put(p, ZPLAN_OFFLOAD_GRAD_STAGING, "offload gradient staging", ZINC_MEM_STAGING, staging, ZPLAN_AT_BUILD, 2,
            (uint64_t)p->state_chunk * sizeof(float));
        put(p, ZPLAN_OFFLOAD_PARAM_STAGING, "offload parameter staging", ZINC_MEM_STAGING, staging, ZPLAN_AT_BUILD, 2,
            (uint64_t)p->state_chunk * zinc_dtype_size(p->compute_dtype));
    }
    /* State in device memory is read and written through host staging in checkpoint passes. */
    if (!offload && !p->device.host_addressable)
        put(p, ZPLAN_HOST_VIEW_STAGING, "optimizer-state staging", ZINC_MEM_STAGING, staging, ZPLAN_IN_CHECKPOINT, 1,
            (uint64_t)nt * (uint64_t)p->state_chunk * sizeof(float));
    /* The weight-decay mask: one byte per ZPART_PARAM_ALIGN own elements, built on the host and copied to
     * a device the host cannot address, where the kernels read it. */
    uint64_t mask = (uint64_t)(own / ZPART_PARAM_ALIGN);
    put(p, ZPLAN_DECAY_MASK, "the weight-decay mask", ZINC_MEM_OTHER, ZINC_MEMKIND_HOST, ZPLAN_AT_BUILD, 1, mask);
    if (!p->device.host_addressable)
        put(p, ZPLAN_DECAY_MASK_DEVICE, "the weight-decay mask (device copy)", ZINC_MEM_OTHER, p->device.compute_kind,
            ZPLAN_AT_BUILD, 1, mask);
}

/* The sums pass of a per-tensor optimizer (LAMB; runtime/engine/engine_step_pass.c) with the state in
 * device memory the host cannot read: what its descriptor asks for (the norms ||p||^2, ||u||^2 of every
 * tensor and the sums kernel's workspace), made by zinc_build (cudaFree in every step would wait for the
 * whole device). On the cpu device the norms are a host array of the step, and offloaded state is summed
 * by the CPU kernels into host memory: no device buffer. */
static void plan_tensor_sums(zplan *p, const zinc_config *cfg) {
    const zcfg_offload *oo = &cfg->zero.offload_optimizer;
    bool offload = oo->device == ZOFFLOAD_CPU || oo->device == ZOFFLOAD_NVME;
    const zopt_desc *o = zopt_get(cfg->optimizer.type);
    if (!o || !o->device_sums_workspace || offload || p->device.host_addressable) return;
    put(p, ZPLAN_TENSOR_SUMS, o->sums_name, ZINC_MEM_OTHER, p->device.compute_kind, ZPLAN_AT_BUILD, 1,
        zopt_tensor_sums_bytes(o, p->nparams));
}

uint64_t zplan_ckpt_file_bytes(int64_t n, bool with_params, zinc_dtype param_dtype) {
    uint64_t off = 4096, sec = 4096;
    for (int s = 0; s < 4; s++) {
        if (s == 3 && !with_params) break;
        off = (off + sec - 1) / sec * sec + (uint64_t)n * (s == 3 ? zinc_dtype_size(param_dtype) : sizeof(float));
    }
    return off;
}

/* checkpoint.writer.decoupled: a save keeps its shard file's image in host memory while the steps go on
 * (runtime/checkpoint/checkpoint_async.c). Stage 0 has one file, written by rank 0. Counted whole: where
 * MemAvailable at a save does not hold it, the writer streams through at most two io_buffer_size slots
 * instead, which are less. */
static void plan_snapshot(zplan *p, const zinc_config *cfg) {
    if (!cfg->checkpoint.writer_decoupled || (p->stage == 0 && p->rank != 0)) return;
    int64_t lo = p->stage == 0 ? 0 : p->own_lo, hi = p->stage == 0 ? p->part.numel : p->own_hi;
    if (lo > p->part.numel) lo = p->part.numel;
    if (hi > p->part.numel) hi = p->part.numel;
    put(p, ZPLAN_CKPT_SNAPSHOT, "the decoupled checkpoint's snapshot", ZINC_MEM_STAGING, ZINC_MEMKIND_HOST,
        ZPLAN_IN_STEP, 1, zplan_ckpt_file_bytes(hi - lo, p->stage == 3, p->compute_dtype));
}

/* Gradients and reduction buckets (zero/sizing.c; zero/grads.c allocates with the same function). */
static void plan_grads(zplan *p, const zinc_config *cfg) {
    zinc_mem_kind ck = p->device.compute_kind;
    p->send_needs_copy = zsize_send_needs_copy(p->comm_dtype, p->grad_dtype, cfg->prescale_gradients,
                                               cfg->gradient_predivide_factor, p->world);
    zgrads_plan_make(&(zgrads_plan_in){.stage = p->stage,
                                       .world = p->world,
                                       .part = &p->part,
                                       .grad_dtype = p->grad_dtype,
                                       .comm_dtype = p->comm_dtype,
                                       .send_needs_copy = p->send_needs_copy,
                                       .reduce_bucket_size = cfg->zero.reduce_bucket_size,
                                       .biggest_module = p->largest_module_flat,
                                       .overlap_comm = cfg->zero.overlap_comm,
                                       .deterministic = cfg->deterministic_reduction,
                                       .gas = cfg->gradient_accumulation_steps,
                                       .shard_elsewhere = zplan_grads_on_nvme(cfg, p->stage)},
                     &p->grads);
    const zgrads_plan *g = &p->grads;
    put(p, ZPLAN_GRADS_FULL, "the gradient buffer", ZINC_MEM_GRADS, ck, ZPLAN_AT_BUILD, 1, g->bytes_grads_full);
    put(p, ZPLAN_GRADS_SHARD, "the fp32 gradient shard", ZINC_MEM_GRADS, ck, ZPLAN_AT_BUILD, 1, g->bytes_grads_shard);
    if (zplan_grads_on_nvme(cfg, p->stage)) { /* the shard in a file instead (runtime/engine/engine_gstore.c) */
        int64_t align = p->device.nvme_align ? p->device.nvme_align : ZPLAN_NVME_ALIGN;
        int64_t buffer_size = cfg->zero.offload_param.buffer_size;
        zstate_param_geometry gg = zstate_param_geometry_make(p->part.shard, sizeof(float), align, buffer_size,
                                                              zplan_grad_scratch_elems(p->state_chunk, buffer_size),
                                                              ZSTATE_GRAD_PREFETCH_BUFFERS, 0);
        put(p, ZPLAN_GRADS_SHARD, "the fp32 gradient shard (NVMe file)", ZINC_MEM_GRADS, ZINC_MEMKIND_NVME,
            ZPLAN_AT_BUILD, 1, gg.file_bytes);
        put(p, ZPLAN_GRAD_SWAP, "NVMe gradient swap and prefetch buffers, scratch and block sums", ZINC_MEM_STAGING,
            ZINC_MEMKIND_HOST, ZPLAN_AT_BUILD, 1,
            gg.swap_bytes + gg.scratch_bytes + gg.prefetch_bytes + zplan_grad_stat_bytes(p->part.shard));
    }
    put(p, ZPLAN_BUCKET_GRADS, "a gradient bucket", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, g->nbuckets,
        g->bytes_bucket_grads);
    put(p, ZPLAN_BUCKET_SEND, "a communication buffer", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, g->nbuckets,
        g->bytes_bucket_send);
    put(p, ZPLAN_BUCKET_RECV, "a reduce-scatter buffer", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, g->nbuckets,
        g->bytes_bucket_recv);
    put(p, ZPLAN_LANDING, "the gradient landing buffer for large modules", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, 1,
        g->bytes_landing);
    put(p, ZPLAN_DETERM_SHARDS, "the deterministic reduction's partial sums", ZINC_MEM_GRADS, ck, ZPLAN_AT_BUILD,
        g->determ_shards, g->bytes_determ_shard);
    put(p, ZPLAN_DETERM_RECV, "the deterministic reduction's receive buffer", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, 1,
        g->bytes_determ_recv);
    int L = p->device.qgz_ranks_per_node;
    if (p->stage == 3 && cfg->zero.quantized_gradients && L > 0 && p->world > L && g->nbuckets > 0) {
        zsize_qgz q;
        zsize_qgz_scratch(g->bucket_cap, p->part.shard, p->world, L, &p->qgz_layout, &q);
        put(p, ZPLAN_QGZ_SCRATCH, "the qgZ all-to-all buffers", ZINC_MEM_BUCKETS, ck, ZPLAN_AT_BUILD, 1, q.total);
    }
}

/* Stages 2-3: a module entered twice in one backward keeps its gradients in a buffer of its own (zero/grads.c
 * enter_held), allocated at its first backward entry. `each` holds all of them together. */
static void plan_held(zplan *p, const zplan_model *m) {
    if (p->stage < 2 || !m->reentered) return;
    int64_t elems = 0;
    int n = 0;
    for (int i = 0; i < p->nmodules; i++)
        if (m->reentered[i]) elems += p->module_end[i] - p->module_begin[i], n++;
    put(p, ZPLAN_HELD, "the gradient buffers of modules entered twice in backward", ZINC_MEM_BUCKETS,
        p->device.compute_kind, ZPLAN_IN_STEP, 1, (uint64_t)elems * zinc_dtype_size(p->grad_dtype));
    if (elems) p->buf[ZPLAN_HELD].count = n;
}

/* Initialisation scratch (engine.c init_params): a whole-tensor init_fn needs the largest tensor this
 * rank initialises (whole tensors at stages 0-2, ones touching the own shard at 3) in fp32, except in
 * place (fp32 parameters in host memory, stages 0-2); a ranged one pieces of at most ZINC_INIT_PIECE
 * elements of what this rank holds. */
static void plan_init(zplan *p, const zplan_model *m) {
    p->init_in_place = p->stage <= 2 && p->compute_dtype == ZINC_FP32 && p->device.host_addressable;
    int64_t most = 0, most_whole = 0;
    for (int i = 0; i < m->nparams; i++) {
        int64_t lo = p->flat_offset[i], hi = lo + m->numel[i];
        if (p->stage == 3) {
            lo = lo > p->own_lo ? lo : p->own_lo;
            hi = hi < p->own_hi ? hi : p->own_hi;
            if (hi <= lo) continue;
        }
        if (hi - lo > most) most = hi - lo;
        if (m->numel[i] > most_whole) most_whole = m->numel[i];
    }
    p->init_scratch_ranged = most < ZINC_INIT_PIECE ? most : ZINC_INIT_PIECE;
    p->init_scratch_whole = p->init_in_place ? 0 : most_whole;
}

/* MPI's temporaries: the largest message (stage 0's gradient all-reduce, the reduce buckets, the
 * parameter all-gathers) is cut into pieces of comm_piece elements (comm_mpi.c); with overlap_comm one
 * piece per pending bucket is in flight. A single rank calls no reducing collective. */
static void plan_comm_temp(zplan *p) {
    p->comm_piece = (int64_t)zcomm_mpi_max_count();
    p->comm_pending = p->grads.nbuckets > 1 ? p->grads.nbuckets : 1;
    if (p->world < 2) return;
    int64_t msg = p->stage <= 2
                      ? p->part.padded
                      : (p->grads.bucket_cap > p->largest_module_flat ? p->grads.bucket_cap : p->largest_module_flat);
    if (msg > p->comm_piece) msg = p->comm_piece;
    size_t es = zinc_dtype_size(p->comm_dtype);
    if (zinc_dtype_size(p->grad_dtype) > es) es = zinc_dtype_size(p->grad_dtype);
    if (zinc_dtype_size(p->compute_dtype) > es) es = zinc_dtype_size(p->compute_dtype);
    p->comm_temp = (uint64_t)p->comm_pending * ZPLAN_MPI_TEMP_FACTOR * (uint64_t)msg * es;
}

zinc_status zplan_make(const zplan_model *m, const zinc_config *cfg, int world, int rank, const zplan_device *dev,
                       zplan *out) {
    zinc_status st = ZINC_OK;
    if (!out || !cfg || !dev) return ZERR(ZINC_ERR_INVALID_ARG, "zplan_make: NULL argument");
    memset(out, 0, sizeof *out);
    TRY(check_model(m, world, rank));
    out->stage = cfg->zero.stage;
    out->world = world;
    out->rank = rank;
    out->device = *dev;
    out->offload = cfg->zero.offload_optimizer.device;
    out->compute_dtype = cfg->compute_dtype;
    out->comm_dtype = cfg->comm_dtype;
    out->grad_dtype = zcfg_grad_dtype(cfg);
    TRY(lay_out(out, m));

    zinc_mem_kind staging = dev->host_addressable ? ZINC_MEMKIND_HOST : ZINC_MEMKIND_PINNED;
    if (dev->compute_kind == ZINC_MEMKIND_DEVICE)
        put(out, ZPLAN_DEVICE_SCRATCH, "the device's own scratch", ZINC_MEM_STAGING, ZINC_MEMKIND_DEVICE,
            ZPLAN_AT_CREATE, 1, dev->fixed_bytes);
    put(out, ZPLAN_COMM_STAGING, "collective staging", ZINC_MEM_STAGING, staging, ZPLAN_AT_CREATE, 1,
        dev->comm_staging_bytes);
    plan_params(out, cfg);
    plan_state(out, cfg);
    if (out->stage == 3 && cfg->zero.offload_param.device == ZOFFLOAD_NVME) { /* needs the state's chunk */
        int64_t align = out->device.nvme_align ? out->device.nvme_align : ZPLAN_NVME_ALIGN;
        zstate_param_geometry g =
            zstate_param_geometry_make(out->part.shard, zinc_dtype_size(out->compute_dtype), align,
                                       cfg->zero.offload_param.buffer_size,
                                       zplan_param_scratch_elems(out->state_chunk, cfg->zero.offload_param.buffer_size),
                                       cfg->zero.offload_param.buffer_count, cfg->zero.offload_param.max_in_cpu);
        /* the swap buffer, the step's scratch and the prefetch's buffer_count swap buffers */
        put(out, ZPLAN_PARAM_SWAP, "NVMe parameter swap and prefetch buffers and step scratch", ZINC_MEM_STAGING,
            ZINC_MEMKIND_HOST, ZPLAN_AT_BUILD, 1, g.swap_bytes + g.scratch_bytes + g.prefetch_bytes);
    }
    plan_tensor_sums(out, cfg);
    TRY(zplan_muon(out, m, cfg)); /* plan_muon.c: after the state (it trims exp_avg_sq) */
    plan_snapshot(out, cfg);
    plan_grads(out, cfg);
    plan_held(out, m);
    if (out->stage == 3) {
        /* qwZ: each gather in flight also holds its INT8 wire (zero/sizing.h) */
        uint64_t *wire = NULL, peak_bytes = 0;
        if (cfg->zero.quantized_weights && world > 1) {
            TRY_ALLOC(wire, out->nmodules > 0 ? out->nmodules : 1, "the plan's qwZ wire sizes");
            /* hpZ: the gathers from the secondary are quantized too, in pieces of the group's partition */
            zpartition hp;
            int G = zpp_hpz_size(&cfg->zero, world);
            zpp_secondary_partition(&out->part, G, out->rank, &hp);
            for (int i = 0; i < out->nmodules; i++) {
                wire[i] = zsize_quant_range_bytes(&out->part, out->module_begin[i], out->module_end[i]);
                uint64_t ws = G > 1 ? zsize_quant_range_bytes(&hp, out->module_begin[i], out->module_end[i]) : 0;
                if (ws > wire[i]) wire[i] = ws;
            }
        }
        st = zplan_gather_peak_bytes(out->module_begin, out->module_end, out->persistent, out->nmodules, &cfg->zero,
                                     zinc_dtype_size(out->compute_dtype), wire, &out->gather_peak_numel, &peak_bytes);
        free(wire);
        TRY(st);
        put(out, ZPLAN_GATHER, "gathered parameters", ZINC_MEM_GATHER, dev->compute_kind, ZPLAN_IN_STEP, 1, peak_bytes);
    }
    plan_init(out, m);
    plan_comm_temp(out);
    out->ndeclared = m->ndeclared;
    for (int i = 0; i < m->ndeclared; i++) out->declared[i] = m->declared[i];
    return ZINC_OK;
fail:
    zplan_free(out);
    return st;
}

void zplan_free(zplan *p) {
    if (!p) return;
    free(p->flat_offset);
    free(p->module_begin);
    free(p->module_end);
    free(p->persistent);
    free(p->qgz_group);
    p->flat_offset = p->module_begin = p->module_end = p->qgz_group = NULL;
    p->qgz_layout = (zsize_qgz_layout){0};
    p->persistent = NULL;
    free(p->vgaps);
    free(p->muon_owner);
    p->vgaps = NULL;
    p->muon_owner = NULL;
}

void zplan_sum(const zplan *p, zplan_when when, uint64_t out[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT]) {
    for (int b = 0; b < ZPLAN_BUF_COUNT; b++) {
        const zplan_entry *x = &p->buf[b];
        if (!x->bytes) continue;
        bool in = x->when == ZPLAN_IN_CHECKPOINT ? when == ZPLAN_IN_CHECKPOINT
                  : when == ZPLAN_IN_CHECKPOINT  ? x->when <= ZPLAN_AT_BUILD
                                                 : x->when <= when;
        if (in) out[x->kind][x->cat] += x->bytes;
    }
    if (when >= ZPLAN_IN_STEP)
        for (int i = 0; i < p->ndeclared; i++) out[p->declared[i].kind][p->declared[i].cat] += p->declared[i].bytes;
}

bool zplan_differs(const zplan *p, zplan_when when, const uint64_t got[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT],
                   zinc_mem_kind *kind, zinc_mem_category *cat, uint64_t *want) {
    uint64_t w[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(p, when, w);
    /* Swap buffers the kernel would not register (RLIMIT_MEMLOCK) are ordinary host memory. */
    uint64_t swap = p->buf[ZPLAN_NVME_SWAP].bytes;
    uint64_t *wp = &w[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING], *wh = &w[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING];
    if (swap && p->buf[ZPLAN_NVME_SWAP].when <= when && *wp >= swap &&
        got[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] == *wp - swap &&
        got[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] == *wh + swap) {
        *wp -= swap;
        *wh += swap;
    }
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            if (got[k][c] != w[k][c]) {
                *kind = (zinc_mem_kind)k;
                *cat = (zinc_mem_category)c;
                *want = w[k][c];
                return true;
            }
    return false;
}

bool zplan_grads_on_nvme(const zinc_config *cfg, int stage) {
    const zopt_desc *o = zopt_get(cfg->optimizer.type);
    return stage == 3 && cfg->zero.offload_param.device == ZOFFLOAD_NVME && !cfg->deterministic_reduction &&
           !cfg->zero.quantized_gradients && !(o && o->whole_matrix);
}

int64_t zplan_grad_scratch_elems(int64_t chunk, int64_t buffer_size) {
    int64_t n = zplan_param_scratch_elems(chunk, buffer_size);
    return (n + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK * ZSTATS_BLOCK;
}

int64_t zplan_grad_stat_blocks(int64_t shard) { return (shard + ZSTATS_BLOCK - 1) / ZSTATS_BLOCK; }

uint64_t zplan_grad_stat_bytes(int64_t shard) {
    int64_t nb = zplan_grad_stat_blocks(shard);
    return (uint64_t)(nb > 0 ? nb : 1) * (sizeof(double) + 1);
}

int64_t zplan_param_scratch_elems(int64_t chunk, int64_t buffer_size) {
    int64_t cap = buffer_size < ZSTATE_POLL_ELEMS ? buffer_size : ZSTATE_POLL_ELEMS;
    cap = (cap + ZSTATE_CHUNK_ALIGN - 1) / ZSTATE_CHUNK_ALIGN * ZSTATE_CHUNK_ALIGN; /* whole mask groups */
    if (cap < ZSTATE_CHUNK_ALIGN) cap = ZSTATE_CHUNK_ALIGN;
    if (chunk < cap) return chunk > 0 ? chunk : 1;
    return cap;
}
