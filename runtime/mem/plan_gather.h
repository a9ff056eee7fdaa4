/* The sizing plan's stage-3 gather buffers: zero/gather.c decides at run time which modules are gathered
 * (the first micro-step records the module order; later ones prefetch within stage3_prefetch_bucket_size
 * and stage3_max_live_parameters, and keep a module gathered when it returns within
 * stage3_max_reuse_distance elements). This replays that policy for a model that enters its modules
 * 0..N-1 in forward and N-1..0 in backward and gives the most non-persistent elements gathered at once. */
#ifndef ZINC_RUNTIME_MEM_PLAN_GATHER_H
#define ZINC_RUNTIME_MEM_PLAN_GATHER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config/config.h"
#include "zinc.h"

/* Modules [begin[i], end[i]) of the flat buffer, persistent[i] for the ones that stay gathered. */
zinc_status zplan_gather_peak(const int64_t *begin, const int64_t *end, const bool *persistent, int nm,
                              const zcfg_zero *z, int64_t *peak);
/* The same, and the most bytes in zero/gather.c's ZINC_MEM_GATHER buffers at once: gathered copies of
 * elem_bytes per element and, with qwZ, wire[i] bytes per gather of module i in flight (wire NULL: none). */
zinc_status zplan_gather_peak_bytes(const int64_t *begin, const int64_t *end, const bool *persistent, int nm,
                                    const zcfg_zero *z, uint64_t elem_bytes, const uint64_t *wire, int64_t *peak,
                                    uint64_t *peak_bytes);

#endif
