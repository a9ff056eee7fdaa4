/* SGD as torch.optim.SGD computes it (zsgd_step, kernels/cpu_kernels.h): DeepSpeed 0.19.8 builds
 * torch.optim.SGD for "type": "SGD" (engine.py _configure_basic_optimizer: a name outside its own list is
 * looked up in torch.optim). One state tensor, the momentum buffer (kept where Adam keeps exp_avg, so
 * checkpoints hold it in their exp_avg section; allocated even with momentum 0, when it is never touched).
 * torch's buffer starts as None and the first step stores the gradient itself: here the first step taken
 * (t == 1, from the step count a checkpoint restores). OneCycle's momentum cycling does not apply (torch's
 * SGD has no betas; the config loader warns, as DeepSpeed does). Like Adagrad it has only CPU kernels: on
 * a GPU its state must be offloaded. */
#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

_Static_assert(sizeof(zsgd_hparams) <= ZOPT_HP_BYTES, "zopt_hp holds zsgd_hparams");

static void sgd_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    *(zsgd_hparams *)hp->bytes = (zsgd_hparams){
        .lr = (float)s->lr,
        .momentum = (float)o->momentum,
        .one_minus_dampening = (float)(1.0 - o->dampening), /* torch: alpha=1 - dampening, a Python float */
        .weight_decay = (float)o->weight_decay,
        .grad_factor = (float)s->grad_factor,
        .nesterov = o->nesterov,
        .maximize = o->maximize,
        .first = s->t == 1,
    };
}

static void sgd_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    zsgd_step((const zsgd_hparams *)hp->bytes, p->n, p->master, p->m, p->grad, p->gdt, p->out, p->pdt, p->decay_mask);
}

const zopt_desc zopt_sgd = {
    .name = "SGD",
    .family = "SGD",
    .state_tensors = 2,
    .moment_names = {"SGD momentum buffer", NULL},
    .hparams = sgd_hparams,
    .cpu = sgd_cpu,
};
