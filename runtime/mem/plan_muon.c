/* The sizing plan's part for a whole-matrix optimizer (Muon; runtime/engine/engine_muon.c does the step):
 * which rank owns each matrix, which own elements keep no exp_avg_sq, and the buffers of the step. The
 * engine takes all three from its plan, so the estimate and the pre-flight count what it holds. */
#include <stdlib.h>

#include "base/core/error.h"
#include "kernels/cpu_kernels.h"
#include "offload/state.h"
#include "runtime/mem/plan.h"
#include "runtime/optim/optim.h"

static double flops_of(const zplan_model *m, int i) {
    return zmuon_ns_flops(m->muon_rows[i], m->numel[i] / m->muon_rows[i], ZMUON_NS_STEPS);
}

/* The largest matrix not yet placed (ties: registration order) to the least loaded rank (ties: the lowest). */
static zinc_status owners(zplan *p, const zplan_model *m) {
    zinc_status st = ZINC_OK;
    double *load = NULL;
    TRY_ALLOC(load, (size_t)p->world, "Muon's owner loads");
    for (int placed = 0; placed < p->nmuon; placed++) {
        int pick = -1;
        for (int i = 0; i < m->nparams; i++)
            if (m->muon_rows[i] && p->muon_owner[i] < 0 && (pick < 0 || flops_of(m, i) > flops_of(m, pick))) pick = i;
        int best = 0;
        for (int r = 1; r < p->world; r++)
            if (load[r] < load[best]) best = r;
        p->muon_owner[pick] = best;
        load[best] += flops_of(m, pick);
    }
fail:
    free(load);
    return st;
}

/* Each matrix's aligned flat range (the decay mask marks whole ZPART_PARAM_ALIGN groups, the end's padding
 * with the matrix) clipped to the own range, own-relative. */
static zinc_status gaps(zplan *p, const zplan_model *m) {
    zinc_status st = ZINC_OK;
    TRY_ALLOC(p->vgaps, 2 * (size_t)(p->nmuon > 0 ? p->nmuon : 1), "Muon's exp_avg_sq gaps");
    for (int i = 0; i < m->nparams; i++) {
        if (!m->muon_rows[i]) continue;
        int64_t lo = p->flat_offset[i], hi = zpart_align_up(lo + m->numel[i], ZPART_PARAM_ALIGN);
        lo = lo > p->own_lo ? lo : p->own_lo;
        hi = hi < p->own_hi ? hi : p->own_hi;
        if (hi <= lo) continue;
        p->vgaps[2 * p->nvgaps] = lo - p->own_lo;
        p->vgaps[2 * p->nvgaps + 1] = hi - p->own_lo;
        p->nvgaps++;
    }
fail:
    return st;
}

uint64_t zplan_muon_scratch_floats(const zplan *p, const zplan_model *m) {
    uint64_t send = 0, mats = 0, wmax = 0, wall = 0;
    for (int i = 0; i < m->nparams; i++) {
        if (!m->muon_rows[i]) continue;
        uint64_t w = zmuon_ns_work_floats(m->muon_rows[i], m->numel[i] / m->muon_rows[i]);
        if (w > wall) wall = w;
        int64_t lo, hi;
        zpart_intersect(&p->part, p->rank, p->flat_offset[i], p->flat_offset[i] + m->numel[i], &lo, &hi);
        send += hi > lo ? (uint64_t)(hi - lo) : 0;
        if (p->muon_owner[i] != p->rank) continue;
        mats += (uint64_t)m->numel[i];
        if (w > wmax) wmax = w;
    }
    if (!p->nmuon) return 0;
    if (p->stage == 0 || p->world == 1) return wall; /* all_local: the workspace */
    /* exchanged: send, receive (the owned matrices' pieces: as many as their elements), the matrices and
     * the workspace, with a float of slack after each */
    return send + mats + mats + wmax + 4;
}

zinc_status zplan_muon(zplan *p, const zplan_model *m, const zinc_config *cfg) {
    zinc_status st = ZINC_OK;
    const zopt_desc *o = zopt_get(cfg->optimizer.type);
    if (!o || !o->whole_matrix) return ZINC_OK;
    int64_t own = p->own_hi - p->own_lo;
    zplan_put(p, ZPLAN_MUON_UPDATE, "Muon's whole-matrix update", ZINC_MEM_OTHER, ZINC_MEMKIND_HOST, ZPLAN_AT_BUILD, 1,
              (uint64_t)own * sizeof(float));
    if (!m->muon_rows) return ZINC_OK;
    TRY_ALLOC(p->muon_owner, (size_t)p->nparams, "Muon's owners");
    for (int i = 0; i < m->nparams; i++) {
        p->muon_owner[i] = -1;
        p->nmuon += m->muon_rows[i] != 0;
    }
    TRY(owners(p, m));
    TRY(gaps(p, m));
    /* exp_avg_sq over the kept elements only: in memory, or the compacted NVMe file */
    zstate_vgaps g = {p->nvgaps, p->vgaps};
    zplan_entry *v = &p->buf[ZPLAN_EXP_AVG_SQ];
    uint64_t vbytes = (uint64_t)zstate_v_kept(&g, own) * sizeof(float);
    if (p->offload == ZOFFLOAD_NVME) {
        int64_t align = p->device.nvme_align ? p->device.nvme_align : ZPLAN_NVME_ALIGN;
        vbytes = zstate_nvme_v_layout(own, p->nvme_chunk, align, &g, NULL);
    }
    if (v->count) zplan_put(p, ZPLAN_EXP_AVG_SQ, v->what, v->cat, v->kind, v->when, 1, vbytes);
    zplan_put(p, ZPLAN_MUON_SCRATCH, "Muon's matrix assembly and Newton-Schulz workspace", ZINC_MEM_SCRATCH,
              ZINC_MEMKIND_HOST, ZPLAN_IN_STEP, 1, zplan_muon_scratch_floats(p, m) * sizeof(float));
fail:
    return st;
}
