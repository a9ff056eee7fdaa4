/* The narrow views of the engine that zero/ and offload/ work through: they never see struct zinc_engine
 * (runtime/engine depends on them, not the other way round). Filled once at zinc_build, after the layout
 * and the parameter buffers exist; the modules array no longer moves then (registration is closed). */
#include "runtime/engine/engine_internal.h"

void zengine_contexts(zinc_engine *e) {
    e->state_ctx = (zstate_ctx){
        .dev = e->dev,
        .mem = &e->mem,
        .log = &e->log,
        .comm = e->comm,
        .offload = e->cfg.zero.offload_optimizer,
        .aio = e->cfg.aio,
        .sub_group_size = e->cfg.zero.sub_group_size,
        .tensors = e->optim->state_tensors,
        .vgaps = {e->plan.nvgaps, e->plan.vgaps}, /* Muon's matrices keep no exp_avg_sq (runtime/mem/plan_muon.c) */
    };
    zgrads_ctx g = {
        .dev = e->dev,
        .dcomm = e->dcomm,
        .log = &e->log,
        .part = &e->part,
        .stage = e->stage,
        .rank = e->rank,
        .world = e->world,
        .grad_dtype = e->grad_dtype,
        .comm_dtype = e->comm_dtype,
        .prescale_gradients = e->cfg.prescale_gradients,
        .predivide_factor = e->cfg.gradient_predivide_factor,
        .modules = e->modules,
        .nmodules = e->nmodules,
        .sizes = &e->plan.grads,
        .deterministic = e->cfg.deterministic_reduction,
        .gas = e->cfg.gradient_accumulation_steps,
        .qgz_intra = e->qgz_intra,
        .qgz_inter = e->qgz_inter,
        .shard_add = zengine_grads_on_nvme(e) ? zengine_grads_add : NULL, /* engine_gstore.c */
        .shard_zero = zengine_grads_on_nvme(e) ? zengine_grads_zero : NULL,
        .shard_owner = e,
        .qgz_layout = &e->plan.qgz_layout,
    };
    zgrads_init(&e->grads, &g);
    zgather_ctx s = {
        .dev = e->dev,
        .dcomm = e->dcomm,
        .log = &e->log,
        .part = &e->part,
        .rank = e->rank,
        .world = e->world,
        .compute_dtype = e->compute_dtype,
        .params_shard = e->params_shard,
        .read_own = zengine_params_gather_read,
        .can_prefetch_own = zengine_params_can_prefetch,
        .prefetch_own = zengine_params_prefetch,
        .read_ud = e,
        .own_lo = e->own_lo,
        .cfg = &e->cfg.zero,
        .modules = e->modules,
        .nmodules = e->nmodules,
        .hcomm = e->hcomm,
    };
    if (e->hcomm) zpp_secondary_partition(&e->part, e->hcomm->size, e->rank, &s.hpart);
    zgather_init(&e->gather, &s);
}
