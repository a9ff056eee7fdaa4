/* The engine's plan, estimate and pre-flight (engine_mem.h). */
#include "runtime/engine/engine_mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"
#include "base/core/error.h"
#include "base/device/comm_staged.h"
#include "runtime/engine/engine_internal.h"

zinc_status zengine_plan(zinc_engine *e, const zinc_config *cfg, uint32_t nvme_align, zplan *out) {
    zinc_status st = ZINC_OK;
    int64_t *numel = NULL;
    int *module = NULL;
    bool *reentered = NULL;
    int64_t *muon_rows = NULL;
    int64_t *qgz_group = NULL; /* ZeRO++ qgZ: each tensor's quantization group, from its shape */
    TRY_ALLOC(numel, e->nparams, "the engine's memory plan");
    TRY_ALLOC(muon_rows, e->nparams, "the engine's memory plan");
    TRY_ALLOC(module, e->nparams, "the engine's memory plan");
    TRY_ALLOC(reentered, e->nmodules > 0 ? e->nmodules : 1, "the engine's memory plan");
    for (int i = 0; i < e->nmodules; i++) reentered[i] = e->modules[i].reentered;
    for (int i = 0; i < e->nparams; i++) {
        numel[i] = e->params[i]->numel;
        module[i] = e->params[i]->module;
        muon_rows[i] = e->params[i]->flags & ZINC_PARAM_MUON ? e->params[i]->shape[0] : 0; /* 2-D (engine_model.c) */
    }
    if (e->qgz_intra) {
        TRY_ALLOC(qgz_group, e->nparams > 0 ? e->nparams : 1, "the engine's memory plan");
        for (int i = 0; i < e->nparams; i++)
            qgz_group[i] = zsize_qgz_group(e->params[i]->ndim, e->params[i]->shape, e->params[i]->numel, e->world);
    }
    /* The device: a GPU (or the cpu device presented as one, which counts the cuda device's fixed
     * scratch) allocates in device memory and stages through pinned memory. */
    zplan_device dev = {.compute_kind = e->dev->mem_kind,
                        .host_addressable = e->dev->host_addressable,
                        .fixed_bytes = e->dev->mem_kind == ZINC_MEMKIND_DEVICE ? zdev_cuda_fixed_bytes() : 0,
                        .comm_staging_bytes = zcomm_staged_bytes(e->dcomm),
                        .nvme_align = nvme_align,
                        .qgz_ranks_per_node = e->qgz_intra ? e->qgz_intra->size : 0};
    TRY(zplan_make(&(zplan_model){e->nparams, numel, module, e->nmodules, e->ndeclared, e->declared, reentered,
                                  muon_rows, qgz_group},
                   cfg, e->world, e->rank, &dev, out));
fail:
    free(muon_rows);
    free(qgz_group);
    free(numel);
    free(module);
    free(reentered);
    return st;
}

zinc_status zinc_memory_declare(zinc_engine *e, zinc_mem_category category, zinc_mem_kind kind, uint64_t bytes,
                                const char *label) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_memory_declare: engine is NULL");
    if (e->built)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_memory_declare(\"%s\"): call it before zinc_build (the pre-flight there "
                    "checks the whole process against the machine)",
                    label ? label : "");
    if (category != ZINC_MEM_ACTIVATIONS && category != ZINC_MEM_SCRATCH)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_memory_declare: category %d (%s) is zinc's own; a model declares ZINC_MEM_ACTIVATIONS or "
                    "ZINC_MEM_SCRATCH",
                    (int)category, zinc_mem_category_name(category));
    if (kind != ZINC_MEMKIND_HOST && kind != ZINC_MEMKIND_PINNED && kind != ZINC_MEMKIND_DEVICE)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_memory_declare: memory kind %d is not host, pinned or device (NVMe bytes are not memory)",
                    (int)kind);
    if (e->ndeclared == ZPLAN_MAX_DECLARED)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_memory_declare: more than %d declarations; sum some of them",
                    ZPLAN_MAX_DECLARED);
    if (!bytes) return ZINC_OK;
    /* the plan sums the declarations in uint64_t: each, and their total, stay far below 2^64 so no sum wraps
     * into a small number that the pre-flight would pass */
    const uint64_t most = (uint64_t)1 << 60;
    uint64_t sum = bytes;
    for (int i = 0; i < e->ndeclared; i++) sum += e->declared[i].bytes < most ? e->declared[i].bytes : most;
    if (bytes > most || sum > most)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_memory_declare(\"%s\"): %" PRIu64 " bytes bring the declarations to more than 2^60 "
                    "bytes (1 EiB), beyond any machine; declare what the model really holds",
                    label ? label : "", bytes);
    zplan_declared *d = &e->declared[e->ndeclared++];
    *d = (zplan_declared){.cat = category, .kind = kind, .bytes = bytes};
    snprintf(d->label, sizeof d->label, "%s", label ? label : "");
    return ZINC_OK;
}

/* How the build initialises (before zinc_build: a whole-tensor init_fn, the larger scratch). */
static zest_init init_kind(const zinc_engine *e) {
    return e->init_none ? ZEST_INIT_NONE : e->init_ranged ? ZEST_INIT_RANGED : ZEST_INIT_WHOLE;
}

zinc_status zengine_estimate(zinc_engine *e, zest_estimate *out) { return zengine_estimate_cfg(e, &e->cfg, out); }

zinc_status zengine_estimate_cfg(zinc_engine *e, const zinc_config *cfg, zest_estimate *out) {
    zinc_status st = ZINC_OK;
    zplan plan;
    TRY(zengine_plan(e, cfg, 0, &plan));
    zest_from_plan(&plan, init_kind(e), out);
    zplan_free(&plan);
fail:
    return st;
}

/* Which higher stage, if any, needs less at this rank count, for the advice (device memory on a GPU,
 * the process's host peak on the CPU). */
static void cheaper_stage(zinc_engine *e, zest_estimate *est) {
    zinc_mem_kind ck = e->dev->mem_kind == ZINC_MEMKIND_DEVICE ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    uint64_t now = ck == ZINC_MEMKIND_DEVICE ? est->total[ck] : zest_rss(est, false);
    for (int s2 = est->stage + 1; s2 <= 3; s2++) {
        zinc_config alt = e->cfg;
        zcfg_set_stage(&alt, s2);
        zest_estimate ae;
        if (zengine_estimate_cfg(e, &alt, &ae) != ZINC_OK) {
            zinc__error_clear();
            continue;
        }
        uint64_t b = ck == ZINC_MEMKIND_DEVICE ? ae.total[ck] : zest_rss(&ae, false);
        if (b < now && (est->cheaper_stage < 0 || b < est->cheaper_bytes)) {
            est->cheaper_stage = s2;
            est->cheaper_bytes = b;
        }
    }
}

/* What ZeRO-Infinity (stage 3, the optimizer state and the parameters on NVMe) would need, for the advice:
 * only on the cpu device (parameter NVMe offload is implemented there, engine_pstore.c) and without ZeRO++
 * (its secondary partition and quantized gathers are in-memory designs). */
#define INFINITY_MIN_BUFFER ((int64_t)1 << 20) /* elements: smaller swap buffers only add requests */
static void infinity_choice(zinc_engine *e, zest_estimate *est) {
    const zcfg_zero *z = &e->cfg.zero;
    if (!e->dev->host_addressable || e->dev->mem_kind == ZINC_MEMKIND_DEVICE || zengine_params_on_nvme(e) ||
        z->quantized_weights || z->quantized_gradients || z->quantized_nontrainable_weights ||
        z->hpz_partition_size > 1)
        return;
    zinc_config alt = e->cfg;
    zcfg_set_stage(&alt, 3);
    alt.zero.offload_optimizer.device = ZOFFLOAD_NVME;
    alt.zero.offload_param.device = ZOFFLOAD_NVME;
    alt.zero.offload_param.max_in_cpu = 0; /* DeepSpeed's default 1e9 would keep a shard below 1e9 in memory */
    /* the parameter store's buffer_count prefetch buffers together, and each optimizer chunk, an eighth of the
     * shard at most: DeepSpeed's defaults (buffer_size 1e8, sub_group_size 1e9 elements) would hold all of a
     * shard below 100M elements in memory again */
    const int64_t M = INFINITY_MIN_BUFFER; /* whole multiples of it, at least one */
    int64_t shard = e->part.shard,
            nbuf = alt.zero.offload_param.buffer_count > 0 ? alt.zero.offload_param.buffer_count : 1;
    int64_t each = shard / 8 / nbuf / M * M, chunk = shard / 8 / M * M;
    each = each > M ? each : M, chunk = chunk > M ? chunk : M;
    if (alt.zero.offload_param.buffer_size > each) alt.zero.offload_param.buffer_size = each;
    if (alt.zero.sub_group_size > chunk) alt.zero.sub_group_size = chunk;
    zest_estimate ae;
    if (zengine_estimate_cfg(e, &alt, &ae) != ZINC_OK) {
        zinc__error_clear();
        return;
    }
    uint64_t b = zest_rss(&ae, false);
    if (b >= zest_rss(est, false)) return;
    est->infinity_fits_more = true;
    est->infinity_bytes = b;
    est->infinity_io = zest_disk_io(&ae, alt.gradient_accumulation_steps);
    est->infinity_buffer_size = alt.zero.offload_param.buffer_size;
    est->infinity_sub_group_size = alt.zero.sub_group_size;
}

/* The parameters on NVMe with part of the shard kept in memory (offload_param.max_in_cpu): the host peak with
 * none kept, from which the advice finds the largest max_in_cpu that fits. */
static void resident_floor(zinc_engine *e, zest_estimate *est) {
    if (!zengine_params_on_nvme(e) || est->param_resident <= 0) return;
    zinc_config alt = e->cfg;
    alt.zero.offload_param.max_in_cpu = 0;
    zest_estimate ae;
    if (zengine_estimate_cfg(e, &alt, &ae) != ZINC_OK) {
        zinc__error_clear();
        return;
    }
    est->resident_floor_bytes = zest_rss(&ae, false);
}

zinc_status zengine_preflight(zinc_engine *e, const zplan *plan) {
    zinc_status st = ZINC_OK;
    const char *off = zenv_get(ZENV_PREFLIGHT);
    if (off && !strcmp(off, "0")) return ZINC_OK;
    zest_estimate est;
    zest_from_plan(plan, init_kind(e), &est);
    est.as_extra = zest_as_extra(zpool_threads(e->dev->pool));
    /* The NVMe files' directory: the optimizer state's, else the parameters' (offload_param nvme alone) */
    const char *nvme_path = e->cfg.zero.offload_optimizer.device == ZOFFLOAD_NVME || !zengine_params_on_nvme(e)
                                ? e->cfg.zero.offload_optimizer.nvme_path
                                : e->cfg.zero.offload_param.nvme_path;
    zest_available avail;
    zest_available_read(nvme_path, &avail);
    TRY(zest_headroom_read(&avail.headroom_pct));
    cheaper_stage(e, &est);
    infinity_choice(e, &est);
    resident_floor(e, &est);
    if (e->dev->mem_kind == ZINC_MEMKIND_DEVICE) { /* a GPU, or the cpu device presented as one */
        uint64_t used = 0, total = 0;
        int gpus = e->dev->kind == ZINC_DEVICE_CUDA ? zdev_cuda_count() : 1;
        e->dev->ops->mem_info(e->dev, &used, &total);
        zest_available_device(&avail, used, total, gpus > 0 ? (e->comm->local_size + gpus - 1) / gpus : 1);
    }
    ZLOG_DEBUG(&e->log,
               "pre-flight: per rank %" PRIu64 " device, %" PRIu64 " host, %" PRIu64 " pinned, %" PRIu64
               " NVMe bytes; %d rank(s) on this node; MemAvailable %" PRIu64 "%s",
               est.total[ZINC_MEMKIND_DEVICE], est.total[ZINC_MEMKIND_HOST], est.total[ZINC_MEMKIND_PINNED],
               est.total[ZINC_MEMKIND_NVME], e->comm->local_size, avail.mem_available,
               avail.have_mem ? "" : " (unknown)");
    TRY(zest_preflight_check(&est, e->comm->local_size, &avail, nvme_path));
fail:
    return st;
}

zinc_status zengine_allgather_reports(zinc_engine *e, zinc_memory_report *all) {
    zinc_status st = ZINC_OK;
    zinc_memory_report mine;
    if (!e || !all) return ZERR(ZINC_ERR_INVALID_ARG, "zengine_allgather_reports: NULL argument");
    TRY(zinc_memory_get(e, &mine));
    TRY(zcomm_allgather_bytes(e->comm, &mine, all, sizeof mine));
fail:
    return st;
}

zinc_status zengine_allgather_u64(zinc_engine *e, const uint64_t *mine, int n, uint64_t *all) {
    if (!e || !mine || !all || n < 1) return ZERR(ZINC_ERR_INVALID_ARG, "zengine_allgather_u64: bad argument");
    return zcomm_allgather_bytes(e->comm, mine, all, (size_t)n * sizeof *mine);
}

int zinc_activation_checkpointing(const zinc_engine *e) {
    return e && zcfg_given(&e->cfg, "activation_checkpointing") ? 1 : 0;
}

zinc_status zinc_module_reentered(zinc_engine *e, int module) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_reentered: engine is NULL");
    if (e->build_failed[0] || e->built) {
        char fn[64];
        snprintf(fn, sizeof fn, "zinc_module_reentered(%d)", module);
        return zengine_registration_open(e, fn, "reentered modules (the plan is made in zinc_build)");
    }
    if (module < 0 || module >= e->nmodules)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_module_reentered: module %d of %d (ids from zinc_module_add)", module,
                    e->nmodules);
    e->modules[module].reentered = true; /* zero/grads.c: its own buffer from the first backward entry */
    return ZINC_OK;
}

zinc_status zinc_memory_get(const zinc_engine *e, zinc_memory_report *out) {
    if (!e || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_memory_get: NULL argument");
    memset(out, 0, sizeof *out);
    zmem_report(&e->mem, out);
    /* The model's declared memory: held by it from zinc_build on (docs/mem.md). */
    for (int i = 0; e->built && i < e->ndeclared; i++) {
        const zplan_declared *d = &e->declared[i];
        out->current[d->kind][d->cat] += d->bytes;
        out->peak[d->kind][d->cat] += d->bytes;
        out->current_total[d->kind] += d->bytes;
        out->peak_total[d->kind] += d->bytes;
    }
    e->dev->ops->mem_info(e->dev, &out->device_used_bytes, &out->device_total_bytes);
    return ZINC_OK;
}
