/* The engine's side of the sizing plan and the memory estimate (runtime/mem/plan.h, mem_estimate.h):
 * the plan for an engine's model, ranks and device, the pre-flight zinc_build runs, and the collectives
 * `zinc mem measure` uses to gather every rank's figures. */
#ifndef ZINC_RUNTIME_ENGINE_MEM_H
#define ZINC_RUNTIME_ENGINE_MEM_H

#include "base/config/config.h"
#include "runtime/mem/mem_estimate.h"
#include "runtime/mem/plan.h"
#include "zinc.h"

struct zinc_engine;

/* The plan for this engine's registered model, ranks and device (what it is and what zinc_create
 * allocated for it) under cfg: the engine's own config, or another for the pre-flight's alternatives.
 * The NVMe alignment is the plan's assumption (ZPLAN_NVME_ALIGN) unless nvme_align is given. */
zinc_status zengine_plan(struct zinc_engine *e, const zinc_config *cfg, uint32_t nvme_align, zplan *out);

/* The estimate for an engine that exists (its plan, summed; the initialisation scratch of the way it is
 * built), and the same for another config of it. */
zinc_status zengine_estimate(struct zinc_engine *e, zest_estimate *out);
zinc_status zengine_estimate_cfg(struct zinc_engine *e, const zinc_config *cfg, zest_estimate *out);

/* zinc_build's pre-flight (after the layout, before any allocation): estimates this engine from its
 * plan and checks it against what the machine offers. ZINC_PREFLIGHT=0 in the environment turns it off. */
zinc_status zengine_preflight(struct zinc_engine *e, const zplan *plan);

/* Collective: every rank's memory report, in rank order (all holds world entries), on every rank. */
zinc_status zengine_allgather_reports(struct zinc_engine *e, zinc_memory_report *all);

/* Collective: n values from every rank, in rank order (all holds world x n). */
zinc_status zengine_allgather_u64(struct zinc_engine *e, const uint64_t *mine, int n, uint64_t *all);

#endif
