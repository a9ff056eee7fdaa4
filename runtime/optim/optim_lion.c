/* Lion (Chen et al. 2023; DeepSpeed's FusedLion / DeepSpeedCPULion): one moment. The device's adam_step
 * runs it when the hparams say lion (zcu_lion_step_host on cuda); on the CPU zlion_step. */
#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

static void lion_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    zopt_adam_hparams(o, s, hp);
    zadam_hparams *h = (zadam_hparams *)hp->bytes;
    h->adamw = 1; /* p *= 1 - lr*wd */
    h->lion = 1;
}

static zinc_status lion_device(zdevice *d, const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    return d->ops->adam_step(d, (const zadam_hparams *)hp->bytes, p->n, p->master, p->m, NULL, p->grad, p->gdt, p->out,
                             p->pdt, p->decay_mask);
}

static void lion_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    zlion_step((const zadam_hparams *)hp->bytes, p->n, p->master, p->m, p->grad, p->gdt, p->out, p->pdt, p->decay_mask);
}

const zopt_desc zopt_lion = {
    .name = "Lion",
    .family = "Lion",
    .state_tensors = 2,
    .moment_names = {"Lion exp_avg", NULL},
    .hparams = lion_hparams,
    .device = lion_device,
    .cpu = lion_cpu,
};
