/* The scalars DeepSpeed's engine hands its monitors at each optimizer step (deepspeed/runtime/engine.py):
 * backward() at the accumulation boundary writes Train/Samples/train_loss at the samples seen before the
 * step; step() writes Train/Samples/lr (the lr after the scheduler stepped: the next step's) and, in fp16,
 * Train/Samples/loss_scale (the scale after its update) at the samples seen after it. Skipped steps count:
 * DeepSpeed's global_samples grows by train_batch_size at every step. zinc's model reports the loss after
 * zinc_step (zinc_record_loss), so the lr and scale wait for it and the files get DeepSpeed's order. */
#include "runtime/core/error.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/engine/lr_schedule.h"

#define TAG_LOSS "Train/Samples/train_loss"
#define TAG_LR "Train/Samples/lr"
#define TAG_SCALE "Train/Samples/loss_scale"

zinc_status zengine_monitor_open(zinc_engine *e) {
    const char *tags[] = {TAG_LOSS, TAG_LR, e->cfg.fp16.enabled ? TAG_SCALE : NULL, NULL};
    zinc_status mine = ZINC_OK;
    if (e->rank == 0) mine = zmon_open(&e->cfg.tensorboard, &e->cfg.csv_monitor, tags, &e->log, &e->monitor);
    return zcomm_agree_status(e->comm, mine);
}

static void write_held(zinc_engine *e) {
    if (!e->mon.held) return;
    zmon_scalar(e->monitor, TAG_LR, e->mon.lr, e->mon.samples);
    if (e->cfg.fp16.enabled) zmon_scalar(e->monitor, TAG_SCALE, e->mon.loss_scale, e->mon.samples);
    e->mon.held = false;
}

void zengine_monitor_step(zinc_engine *e) {
    e->mon.loss_due = true;
    if (!e->monitor) return;
    write_held(e); /* the previous step's, when its loss never came */
    e->mon.samples = e->steps * e->cfg.train_batch_size;
    e->mon.lr = zlr_at(&e->cfg.scheduler, e->cfg.optimizer.lr, e->steps_taken);
    e->mon.loss_scale = e->scaler.cur_scale;
    e->mon.held = true;
}

void zengine_monitor_close(zinc_engine *e) {
    write_held(e);
    zmon_close(e->monitor);
    e->monitor = NULL;
}

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
