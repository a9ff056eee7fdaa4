/* LAMB (DeepSpeed's FusedLamb): per-tensor trust ratio, so two passes (kernels/cpu_kernels.h, zlamb_*; the
 * device's lamb_sums / lamb_apply, zcu_lamb_* on cuda). Weight decay is per tensor: a tensor that is not
 * decayed runs with weight_decay 0. */
#include <math.h>

#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

_Static_assert(sizeof(zlamb_hparams) <= ZOPT_HP_BYTES, "zopt_hp holds zlamb_hparams");

static void lamb_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    double t = (double)s->t;
    /* The kernels weigh the moments with the float betas (b and 1 - b in float); the bias corrections
     * divide by the sum of those same weights, 1 - b^t, in double from the float b. From the double beta
     * instead they disagree by 1 - beta2 rounded to float (1.3e-5 relative for 0.999): every update of
     * the early steps was that much too large / 2 (issue 29). */
    double b1 = (double)(float)s->beta1, b2 = (double)(float)s->beta2;
    *(zlamb_hparams *)hp->bytes = (zlamb_hparams){
        .lr = (float)s->lr,
        .beta1 = (float)s->beta1,
        .beta2 = (float)s->beta2,
        .eps = (float)o->eps,
        .weight_decay = (float)o->weight_decay,
        .grad_factor = (float)s->grad_factor,
        .bias_correction1 = o->bias_correction ? 1.0 - pow(b1, t) : 1.0,
        .bias_correction2 = o->bias_correction ? 1.0 - pow(b2, t) : 1.0,
        .max_coeff = (float)o->max_coeff,
        .min_coeff = (float)o->min_coeff,
        .eps_inside_sqrt = o->eps_inside_sqrt,
    };
}

static zlamb_hparams for_tensor(const zopt_hp *hp, const zopt_piece *p) {
    zlamb_hparams h = *(const zlamb_hparams *)hp->bytes;
    if (!p->decayed) h.weight_decay = 0;
    return h;
}

static zinc_status lamb_device(zdevice *d, const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    zlamb_hparams h = for_tensor(hp, p);
    if (pass == ZOPT_SUMS)
        return d->ops->lamb_sums(d, &h, p->n, p->master, p->m, p->v, p->grad, p->gdt, p->workspace, p->sums, 1);
    return d->ops->lamb_apply(d, &h, p->coeff, p->n, p->master, p->m, p->v, p->grad, p->gdt, p->out, p->pdt);
}

static void lamb_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    zlamb_hparams h = for_tensor(hp, p);
    if (pass == ZOPT_APPLY) {
        zlamb_apply(&h, p->coeff, p->n, p->master, p->m, p->v, p->grad, p->gdt, p->out, p->pdt, NULL);
        return;
    }
    double w, u;
    zlamb_sums(&h, p->n, p->master, p->m, p->v, p->grad, p->gdt, NULL, &w, &u);
    p->sums[0] += w;
    p->sums[1] += u;
}

static float lamb_coeff(const zopt_hp *hp, double wsq, double usq) {
    return zlamb_coeff((const zlamb_hparams *)hp->bytes, wsq, usq);
}

const zopt_desc zopt_lamb = {
    .name = "Lamb",
    .family = "Adam/AdamW/Lamb",
    .state_tensors = 3,
    .moment_names = {"Adam exp_avg", "Adam exp_avg_sq"},
    .tensor_norms = true,
    .device_sums_workspace = zdev_lamb_workspace_bytes,
    .sums_name = "LAMB's per-tensor norms",
    .hparams = lamb_hparams,
    .device = lamb_device,
    .cpu = lamb_cpu,
    .coeff = lamb_coeff,
};
