/* Adagrad as DeepSpeed's DeepSpeedCPUAdagrad computes it (zadagrad_step, kernels/cpu_kernels.h): one state
 * tensor, the sum of squared gradients (kept where Adam keeps exp_avg, so checkpoints hold it in their
 * exp_avg section), no bias correction. DeepSpeed runs it on the CPU only; so does zinc: on a GPU its
 * state must be offloaded (the shared pass stages the gradients down and the parameters up). */
#include "runtime/optim/optim.h"
#include "kernels/cpu_kernels.h"

_Static_assert(sizeof(zadagrad_hparams) <= ZOPT_HP_BYTES, "zopt_hp holds zadagrad_hparams");

static void adagrad_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp) {
    *(zadagrad_hparams *)hp->bytes = (zadagrad_hparams){
        .lr = (float)s->lr,
        .eps = (float)o->eps,
        .weight_decay = (float)o->weight_decay,
        .grad_factor = (float)s->grad_factor,
    };
}

static void adagrad_cpu(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p) {
    (void)pass;
    zadagrad_step((const zadagrad_hparams *)hp->bytes, p->n, p->master, p->m, p->grad, p->gdt, p->out, p->pdt,
                  p->decay_mask);
}

const zopt_desc zopt_adagrad = {
    .name = "Adagrad",
    .family = "Adagrad",
    .state_tensors = 2,
    .moment_names = {"Adagrad sum of squares", NULL},
    .hparams = adagrad_hparams,
    .cpu = adagrad_cpu,
};
