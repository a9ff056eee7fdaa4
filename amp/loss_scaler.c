/* DeepSpeed's DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py, DeepSpeed
 * 0.19; the v0.17.1 growth rule), transcribed step for step, and the static scaler (LossScaler.update_scale is a no-op).
 *
 *   overflow:
 *     if delayed_shift == 1 or cur_hysteresis == 1:
 *       if cur_scale == min_scale: raise            -> ZLS_AT_MINIMUM (engine turns it into an error)
 *       cur_scale = max(cur_scale / scale_factor, min_scale)
 *     else: cur_hysteresis -= 1                      (scale kept)
 *     last_overflow_iter = cur_iter                  (also when absorbed by hysteresis)
 *   clean:
 *     if consecutive_hysteresis: cur_hysteresis = delayed_shift
 *     stable = cur_iter - last_overflow_iter - 1     (DeepSpeed >= 0.17.1; before, the -1 was missing)
 *     if stable > 0 and stable % scale_window == 0:
 *       if not consecutive_hysteresis: cur_hysteresis = delayed_shift
 *       cur_scale *= scale_factor
 *   cur_iter += 1
 *
 * With last_overflow_iter starting at -1 the first growth happens on call number scale_window + 1 (cur_iter
 * = scale_window), and after an overflow at iteration k on the (scale_window + 1)-th clean call after it,
 * i.e. after scale_window clean steps following it. There is no maximum scale, as in DeepSpeed. */
#include "amp/loss_scaler.h"

#include <math.h>
#include <string.h>

void zls_init_dynamic(zloss_scaler *s, int initial_scale_power, int64_t window, int hysteresis,
                      bool consecutive_hysteresis, double min_scale) {
    memset(s, 0, sizeof *s);
    s->dynamic = true;
    s->cur_scale = ldexp(1.0, initial_scale_power);
    s->min_scale = min_scale;
    s->scale_factor = 2.0;
    /* DeepSpeed divides by scale_window (a window of 0 raises ZeroDivisionError on the first clean step);
     * the config loader rejects it, and a window below 1 is treated as 1 here rather than crashing. */
    s->scale_window = window < 1 ? 1 : window;
    s->delayed_shift = hysteresis;
    s->cur_hysteresis = hysteresis;
    s->consecutive_hysteresis = consecutive_hysteresis;
    s->cur_iter = 0;
    s->last_overflow_iter = -1;
}

void zls_init_static(zloss_scaler *s, double scale) {
    memset(s, 0, sizeof *s);
    s->dynamic = false;
    s->cur_scale = scale;
    s->min_scale = scale;
    s->scale_factor = 2.0;
    s->scale_window = 1;
    s->delayed_shift = 1;
    s->cur_hysteresis = 1;
    s->consecutive_hysteresis = false;
    s->cur_iter = 0;
    s->last_overflow_iter = -1;
}

zls_event zls_update(zloss_scaler *s, bool overflow, double *prev_scale) {
    if (prev_scale) *prev_scale = s->cur_scale;
    /* The static scaler never changes; whether a static fp16 step is skipped on overflow is the engine's
     * decision, not the scaler's. */
    if (!s->dynamic) return ZLS_NO_CHANGE;

    zls_event ev = ZLS_NO_CHANGE;
    if (overflow) {
        if (s->delayed_shift == 1 || s->cur_hysteresis == 1) {
            if (s->cur_scale == s->min_scale) {
                /* DeepSpeed raises before touching any state (cur_iter included); zinc's contract is that
                 * cur_iter still counts the call, everything else stays as it was. */
                s->cur_iter += 1;
                return ZLS_AT_MINIMUM;
            }
            double next = s->cur_scale / s->scale_factor;
            s->cur_scale = next > s->min_scale ? next : s->min_scale;
            ev = ZLS_REDUCED;
        } else {
            s->cur_hysteresis -= 1;
            ev = ZLS_HYSTERESIS;
        }
        s->last_overflow_iter = s->cur_iter;
    } else {
        if (s->consecutive_hysteresis) s->cur_hysteresis = s->delayed_shift;
        /* DeepSpeed >= 0.17.1: grow after scale_window clean steps FOLLOWING the last overflow (the overflow
         * step itself is not one of them). cur_iter > last_overflow_iter always, so stable >= 0 and C's %
         * equals Python's. */
        int64_t stable = s->cur_iter - s->last_overflow_iter - 1;
        if (stable > 0 && stable % s->scale_window == 0) {
            if (!s->consecutive_hysteresis) s->cur_hysteresis = s->delayed_shift;
            s->cur_scale *= s->scale_factor;
            ev = ZLS_GREW;
        }
    }
    s->cur_iter += 1;
    return ev;
}
