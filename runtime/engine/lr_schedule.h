/* Learning-rate schedules of DeepSpeed (deepspeed/runtime/lr_schedules.py): WarmupLR, WarmupDecayLR,
 * WarmupCosineLR, OneCycle. Pure functions of the number of optimizer steps taken, so resuming from a
 * checkpoint needs only the step count. */
#ifndef ZINC_RUNTIME_LR_SCHEDULE_H
#define ZINC_RUNTIME_LR_SCHEDULE_H

#include <stdint.h>

#include "runtime/config/config.h"

/* The lr for the step that follows `steps_taken` completed steps (DeepSpeed's last_batch_iteration =
 * steps_taken, so the first step uses iteration 0). base_lr is optimizer.params.lr (WarmupCosineLR
 * scales it; the others ignore it unless the schedule is none). */
double zlr_at(const zcfg_scheduler *s, double base_lr, int64_t steps_taken);
/* OneCycle with cycle_momentum: the beta1 to use at that step (DeepSpeed sets betas = (mom, beta2)).
 * Returns base_beta1 for every other schedule. */
double zlr_beta1_at(const zcfg_scheduler *s, double base_beta1, int64_t steps_taken);

#endif
