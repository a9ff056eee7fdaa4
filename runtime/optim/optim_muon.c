/* Muon with its auxiliary AdamW (DeepSpeed 0.19.8 MuonWithAuxAdam; kernels/cpu_kernels.h states the
 * formulas): the matrices the model marks ZINC_PARAM_MUON take the Muon step, every other element AdamW.
 * The Newton-Schulz iteration needs each matrix whole, which the flat partition splits across ranks: the
 * engine assembles each matrix's Nesterov momentum on its owner rank, orthogonalises it there and scatters
 * the update back before this pass (runtime/engine/engine_muon.c), so this kernel stays elementwise: the
 * momentum (recomputed from the same gradient, the same float operations), the decay and the update for a
 * matrix's elements, AdamW for the rest. Three state tensors, as Adam's: a matrix's momentum is kept where
 * Adam keeps exp_avg, so checkpoints hold it in that section; a matrix keeps no exp_avg_sq: the store holds
 * that tensor for the AdamW elements only, compacted (p->v: their values in order; the plan states which
 * elements, runtime/mem/plan_muon.c), and checkpoints leave the matrices' part of the section unwritten
 * (zeros, the bytes it always held). CPU kernels only. */
#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

_Static_assert(sizeof(zmuon_hparams) <= ZOPT_HP_BYTES, "zopt_hp holds zmuon_hparams");

static void muon_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    zopt_step as = *s;
    as.lr = s->adam_lr;
    zopt_hp adam;
    zopt_adam_hparams(o, &as, &adam);
    *(zmuon_hparams *)hp->bytes = (zmuon_hparams){
        .adam = *(const zadam_hparams *)adam.bytes,
        .lr = (float)s->lr,
        .beta = (float)o->momentum,
        .weight_decay = (float)o->weight_decay,
        .grad_factor = (float)s->grad_factor,
        .upd_scale = 1.0f, /* stages 1-3: 1 / clip (zengine_muon_hparams) */
        .nesterov = 1,     /* muon_update's default; DeepSpeed's engine never passes another */
    };
}

static void muon_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    const zmuon_hparams *h = (const zmuon_hparams *)hp->bytes;
    size_t gsz = zinc_dtype_size(p->gdt), psz = p->out ? zinc_dtype_size(p->pdt) : 0, vi = 0;
    /* runs of whole mask groups of one kind (the piece starts on a group boundary) */
    for (size_t i = 0; i < p->n;) {
        bool mat = p->decay_mask && p->upd && (p->decay_mask[i / ZADAM_MASK_GROUP] & ZOPT_MASK_MATRIX);
        size_t j = i;
        while (j < p->n && (p->decay_mask && p->upd && (p->decay_mask[j / ZADAM_MASK_GROUP] & ZOPT_MASK_MATRIX)) == mat)
            j += ZADAM_MASK_GROUP - j % ZADAM_MASK_GROUP;
        if (j > p->n) j = p->n;
        const void *g = (const char *)p->grad + i * gsz;
        void *out = p->out ? (char *)p->out + i * psz : NULL;
        const uint8_t *mask = p->decay_mask ? p->decay_mask + i / ZADAM_MASK_GROUP : NULL;
        if (mat)
            zmuon_apply_ref(h, j - i, p->master + i, p->m + i, g, p->gdt, p->upd + i, out, p->pdt, mask);
        else /* exp_avg_sq holds only the AdamW elements (the matrices keep none: offload/state.h vgaps) */
            zadam_step(&h->adam, j - i, p->master + i, p->m + i, p->v + vi, g, p->gdt, out, p->pdt, mask);
        if (!mat) vi += j - i;
        i = j;
    }
}

const zopt_desc zopt_muon = {
    .name = "Muon",
    .family = "Muon",
    .state_tensors = 3,
    .moment_names = {"Muon momentum / Adam exp_avg", "Adam exp_avg_sq"},
    .hparams = muon_hparams,
    .cpu = muon_cpu,
    .whole_matrix = true,
};
