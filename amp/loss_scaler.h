/* Loss scaling for fp16: DeepSpeed's DynamicLossScaler state machine (DeepSpeed 0.19,
 * deepspeed/runtime/fp16/loss_scaler.py)
 * and the static scaler. bf16 and fp32 use a static scale of 1. The state is plain data so checkpoints
 * can store it. */
#ifndef ZINC_AMP_LOSS_SCALER_H
#define ZINC_AMP_LOSS_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "zinc.h"

typedef struct zloss_scaler {
    bool dynamic;
    double cur_scale;
    double min_scale;
    double scale_factor; /* 2 */
    int64_t scale_window;
    int delayed_shift; /* hysteresis as configured */
    int cur_hysteresis;
    bool consecutive_hysteresis;
    int64_t cur_iter;
    int64_t last_overflow_iter;
} zloss_scaler;

/* What one update did, for the log line. */
typedef enum {
    ZLS_NO_CHANGE = 0,
    ZLS_GREW,       /* scale doubled after a clean window */
    ZLS_REDUCED,    /* overflow: scale halved (or clamped to the minimum) */
    ZLS_HYSTERESIS, /* overflow absorbed by hysteresis: scale kept, hysteresis decremented */
    ZLS_AT_MINIMUM  /* overflow with the scale already at its minimum: an error for the caller */
} zls_event;

/* Dynamic: init = 2^initial_scale_power etc. Static: cur_scale = scale (1 for bf16/fp32). */
void zls_init_dynamic(zloss_scaler *s, int initial_scale_power, int64_t window, int hysteresis,
                      bool consecutive_hysteresis, double min_scale);
void zls_init_static(zloss_scaler *s, double scale);

/* Called once per optimizer step with whether any rank overflowed. Returns what happened; on
 * ZLS_AT_MINIMUM the state is left unchanged except cur_iter (the caller reports the error). */
zls_event zls_update(zloss_scaler *s, bool overflow, double *prev_scale);

#endif
