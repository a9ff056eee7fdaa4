/* Learning-rate schedules of DeepSpeed 0.19.8 (deepspeed/runtime/lr_schedules.py): WarmupLR, WarmupDecayLR,
 * WarmupCosineLR, OneCycle, LRRangeTest. Pure functions of the number of optimizer steps taken, so resuming
 * from a checkpoint needs only the step count.
 *
 * Where DeepSpeed's engine is in its schedule (engine.py): the scheduler's constructor writes the lr of
 * last_batch_iteration = -1 into the optimizer, and the engine calls scheduler.step() (last_batch_iteration
 * + 1) after each optimizer step that was taken, never after one skipped for non-finite gradients
 * (_take_model_step). So the step that follows `steps_taken` taken steps runs at iteration steps_taken - 1:
 * the first step at -1, the second at 0. A checkpoint saves last_batch_iteration and the optimizer's lr,
 * which resume restores, so a resumed run goes on from the same iteration. */
#ifndef ZINC_RUNTIME_LR_SCHEDULE_H
#define ZINC_RUNTIME_LR_SCHEDULE_H

#include <stdint.h>

#include "base/config/config.h"

/* DeepSpeed's last_batch_iteration during the step that follows `steps_taken` taken steps. */
int64_t zlr_iteration(int64_t steps_taken);

/* The lr at DeepSpeed's last_batch_iteration `it` (-1: what the constructor sets). base_lr is
 * optimizer.params.lr (WarmupCosineLR scales it; the others ignore it unless the schedule is none). */
double zlr_lr_at_iteration(const zcfg_scheduler *s, double base_lr, int64_t it);
/* OneCycle with cycle_momentum: beta1 at iteration `it` (DeepSpeed sets betas = (mom, 0.99)); base_beta1
 * for every other schedule. */
double zlr_beta1_at_iteration(const zcfg_scheduler *s, double base_beta1, int64_t it);
/* OneCycle with cycle_momentum: 0.99, the beta2 DeepSpeed writes with every momentum; base_beta2 otherwise. */
double zlr_beta2(const zcfg_scheduler *s, double base_beta2);

/* The same for the step that follows `steps_taken` taken steps: at zlr_iteration(steps_taken). */
double zlr_at(const zcfg_scheduler *s, double base_lr, int64_t steps_taken);
double zlr_beta1_at(const zcfg_scheduler *s, double base_beta1, int64_t steps_taken);

#endif
