/* Adam and AdamW (DeepSpeed's FusedAdam / DeepSpeedCPUAdam): the kernels are zadam_step
 * (kernels/cpu_kernels.h) and the device's adam_step (zcu_adam_step_host on cuda). */
#include <math.h>

#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

_Static_assert(sizeof(zadam_hparams) <= ZOPT_HP_BYTES, "zopt_hp holds zadam_hparams");

void zopt_adam_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    double t = (double)s->t;
    /* The kernels weigh the moments with the float betas (b and 1 - b in float); the bias corrections
     * divide by the sum of those same weights, 1 - b^t, in double from the float b. From the double beta
     * instead they disagree by 1 - beta2 rounded to float (1.3e-5 relative for 0.999): every update of
     * the early steps was that much too large / 2 (issue 29). */
    double b1 = (double)(float)s->beta1, b2 = (double)(float)s->beta2;
    *(zadam_hparams *)hp->bytes = (zadam_hparams){
        .lr = (float)s->lr,
        .beta1 = (float)s->beta1,
        .beta2 = (float)s->beta2,
        .eps = (float)o->eps,
        .weight_decay = (float)o->weight_decay,
        .bias_correction1 = o->bias_correction ? 1.0 - pow(b1, t) : 1.0, /* double: zadam_hparams */
        .bias_correction2 = o->bias_correction ? 1.0 - pow(b2, t) : 1.0,
        .grad_factor = (float)s->grad_factor,
        .adamw = o->adam_w_mode,
    };
}

static zinc_status adam_device(zdevice *d, const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    return d->ops->adam_step(d, (const zadam_hparams *)hp->bytes, p->n, p->master, p->m, p->v, p->grad, p->gdt, p->out,
                             p->pdt, p->decay_mask);
}

static void adam_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    zadam_step((const zadam_hparams *)hp->bytes, p->n, p->master, p->m, p->v, p->grad, p->gdt, p->out, p->pdt,
               p->decay_mask);
}

const zopt_desc zopt_adam = {
    .name = "Adam",
    .family = "Adam/AdamW/Lamb",
    .state_tensors = 3,
    .moment_names = {"Adam exp_avg", "Adam exp_avg_sq"},
    .hparams = zopt_adam_hparams,
    .device = adam_device,
    .cpu = adam_cpu,
};
