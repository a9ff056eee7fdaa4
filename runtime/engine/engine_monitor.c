/* The scalars DeepSpeed's engine hands its monitors at each optimizer step (deepspeed/runtime/engine.py):
 * backward() at the accumulation boundary writes Train/Samples/train_loss at the samples seen before the
 * step; step() writes Train/Samples/lr (the lr after the scheduler stepped: the next step's) and, in fp16,
 * Train/Samples/loss_scale (the scale after its update) at the samples seen after it. Skipped steps count:
 * DeepSpeed's global_samples grows by train_batch_size at every step. zinc's model reports the loss after
 * zinc_step (zinc_record_loss), so the lr and scale wait for it and the files get DeepSpeed's order.
 *
 * With wall_clock_breakdown, DeepSpeed's _write_monitor adds the step's five timers after them, at the samples
 * seen after the step: Train/Samples/elapsed_time_ms_{forward,backward,backward_inner,backward_allreduce,step}
 * (engine_wallclock.c). Beyond DeepSpeed's engine, in its tag scheme (HF Trainer users know these figures as
 * train/grad_norm and the throughput lines): Train/Samples/grad_norm (a taken step's global gradient norm
 * before clipping; none for a skipped step), Train/Samples/samples_per_second and flops_per_second (the time
 * from the previous zinc_step's end, or from zinc_build for the first; FLOP/s from zinc_flops_per_sample,
 * when the model declared its FLOPs), and Train/Samples/eval_loss (zinc_record_eval_loss; the tag of
 * DeepSpeed's pipeline engine) at the samples seen so far. */
#include <math.h>

#include "base/core/error.h"
#include "base/core/trace.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/engine/lr_schedule.h"

#define TAG_LOSS "Train/Samples/train_loss"
#define TAG_LR "Train/Samples/lr"
#define TAG_SCALE "Train/Samples/loss_scale"
#define TAG_GRAD_NORM "Train/Samples/grad_norm"
#define TAG_SAMPLES_S "Train/Samples/samples_per_second"
#define TAG_FLOPS_S "Train/Samples/flops_per_second"
#define TAG_EVAL_LOSS "Train/Samples/eval_loss"
static const char *const tag_elapsed[5] = {"Train/Samples/elapsed_time_ms_forward",
                                           "Train/Samples/elapsed_time_ms_backward",
                                           "Train/Samples/elapsed_time_ms_backward_inner",
                                           "Train/Samples/elapsed_time_ms_backward_allreduce",
                                           "Train/Samples/elapsed_time_ms_step"};

static zinc_status monitor_open(zinc_engine *e, const zinc_options *o) {
    (void)o;
    const char *tags[] = {TAG_LOSS, TAG_LR, e->cfg.fp16.enabled ? TAG_SCALE : NULL, NULL};
    zinc_status mine = ZINC_OK;
    e->mon.t_prev_ns = ztrace_now_ns();
    if (e->rank == 0) mine = zmon_open(&e->cfg.tensorboard, &e->cfg.csv_monitor, tags, &e->log, &e->monitor);
    return zcomm_agree_status(e->comm, mine);
}

static void write_held(zinc_engine *e) {
    if (!e->mon.held) return;
    zmon_scalar(e->monitor, TAG_LR, e->mon.lr, e->mon.samples);
    if (e->cfg.fp16.enabled) zmon_scalar(e->monitor, TAG_SCALE, e->mon.loss_scale, e->mon.samples);
    if (e->cfg.wall_clock_breakdown)
        for (int i = 0; i < 5; i++) zmon_scalar(e->monitor, tag_elapsed[i], e->mon.elapsed_ms[i], e->mon.samples);
    if (isfinite(e->mon.grad_norm)) zmon_scalar(e->monitor, TAG_GRAD_NORM, e->mon.grad_norm, e->mon.samples);
    if (e->mon.step_s > 0) {
        double samples_s = (double)e->cfg.train_batch_size / e->mon.step_s;
        zmon_scalar(e->monitor, TAG_SAMPLES_S, samples_s, e->mon.samples);
        double fps = zinc_flops_per_sample(e);
        if (fps > 0) zmon_scalar(e->monitor, TAG_FLOPS_S, fps * samples_s, e->mon.samples);
    }
    e->mon.held = false;
}

static zinc_status monitor_step(zinc_engine *e, const zinc_step_info *info, bool ok) {
    if (!ok) return ZINC_OK;
    e->mon.loss_due = true;
    int64_t now = ztrace_now_ns();
    double step_s = (double)(now - e->mon.t_prev_ns) / 1e9;
    e->mon.t_prev_ns = now;
    if (!e->monitor) return ZINC_OK;
    write_held(e); /* the previous step's, when its loss never came */
    e->mon.samples = e->steps * e->cfg.train_batch_size;
    e->mon.lr = zlr_at(&e->cfg.scheduler, e->cfg.optimizer.lr, e->steps_taken);
    e->mon.loss_scale = e->scaler.cur_scale;
    e->mon.grad_norm = info->taken ? info->grad_norm : (double)NAN;
    e->mon.step_s = step_s;
    e->mon.held = true;
    return ZINC_OK;
}

static void monitor_close(zinc_engine *e) {
    write_held(e);
    zmon_close(e->monitor);
    e->monitor = NULL;
}

const zengine_observer zengine_observer_monitor = {.name = "monitor",
                                                   .create = monitor_open,
                                                   .step_end = monitor_step,
                                                   .destroy = monitor_close};

zinc_status zinc_record_loss(zinc_engine *e, double loss) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_record_loss: engine is NULL");
    if (!e->mon.loss_due)
        return ZERR(ZINC_ERR_STATE, "zinc_record_loss: no zinc_step since the last loss recorded; call it once after "
                                    "each zinc_step, with that step's loss");
    e->mon.loss_due = false;
    zmon_scalar(e->monitor, TAG_LOSS, loss, (e->steps - 1) * e->cfg.train_batch_size);
    write_held(e);
    return ZINC_OK;
}

zinc_status zinc_record_eval_loss(zinc_engine *e, double loss) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_record_eval_loss: engine is NULL");
    if (!isfinite(loss))
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_record_eval_loss: the loss %g is not finite; pass the mean "
                    "validation loss over the evaluated batches",
                    loss);
    zmon_scalar(e->monitor, TAG_EVAL_LOSS, loss, e->steps * e->cfg.train_batch_size);
    return ZINC_OK;
}
