/* wall_clock_breakdown: DeepSpeed's engine timers (deepspeed/runtime/engine.py EngineTimers,
 * deepspeed/utils/timer.py), measured where the engine sees the same boundaries, on the trace recorder's
 * clock (ztrace_now_ns), so the figures agree with a --trace of the same run:
 *   fwd            the outermost forward modules (DeepSpeed times engine.forward); a forward inside an open
 *                  backward is a recomputation and counts as backward, as it runs inside loss.backward();
 *   bwd            the outermost backward modules plus the gradient reductions (engine.backward);
 *   bwd_allreduce  the gradient reductions: the buckets reduced as modules exit backward, the flush when the
 *                  next micro-step starts, the boundary reduction in zinc_step;
 *   bwd_inner      bwd - bwd_allreduce (loss.backward);
 *   step           zinc_step without its boundary reduction (engine.step).
 * Each micro-step logs "time (ms) | fwd_microstep: ... | step_microstep: ..." and each optimizer step
 * "time (ms) | fwd: ... | step: ..." (the step's micro-steps summed), as DeepSpeed prints them on rank 0,
 * and the monitors get the step's five Train/Samples/elapsed_time_ms_* scalars (engine_monitor.c). */
#include <stdio.h>

#include "base/core/trace.h"
#include "runtime/engine/engine_internal.h"

int64_t zengine_wc_now(const zinc_engine *e) { return e->cfg.wall_clock_breakdown ? ztrace_now_ns() : 0; }

void zengine_wc_module_enter(zinc_engine *e, int phase) {
    if (!e->cfg.wall_clock_breakdown) return;
    if (phase == ZINC_BACKWARD) {
        if (e->open_backward == 0 && e->wc.bwd_t0 == 0) e->wc.bwd_t0 = ztrace_now_ns(); /* before the increment */
    } else if (e->open_backward == 0 && e->wc.open_forward++ == 0) {
        e->wc.fwd_t0 = ztrace_now_ns();
    }
}

void zengine_wc_module_exit(zinc_engine *e, int phase) {
    if (!e->cfg.wall_clock_breakdown) return;
    if (phase == ZINC_BACKWARD) {
        if (e->open_backward == 0 && e->wc.bwd_t0) { /* after the decrement and the module's reductions */
            e->wc.bwd += ztrace_now_ns() - e->wc.bwd_t0;
            e->wc.bwd_t0 = 0;
        }
    } else if (e->wc.open_forward > 0 && --e->wc.open_forward == 0) {
        e->wc.fwd += ztrace_now_ns() - e->wc.fwd_t0;
        e->wc.fwd_t0 = 0;
    }
}

/* A reduction that ran since t0. One inside an open backward is already inside its bwd span; the others
 * (the flush, the boundary) are added to bwd here. */
void zengine_wc_reduced(zinc_engine *e, int64_t t0) {
    if (!t0) return;
    int64_t d = ztrace_now_ns() - t0;
    e->wc.reduce += d;
    if (!e->wc.bwd_t0) e->wc.bwd += d;
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

void zengine_wc_micro_end(zinc_engine *e) {
    if (!e->cfg.wall_clock_breakdown) return;
    if (e->rank == 0)
        ZLOG_INFO(&e->log,
                  "time (ms) | fwd_microstep: %.2f | bwd_microstep: %.2f | bwd_inner_microstep: %.2f | "
                  "bwd_allreduce_microstep: %.2f | step_microstep: %.2f",
                  ms(e->wc.fwd), ms(e->wc.bwd), ms(e->wc.bwd - e->wc.reduce), ms(e->wc.reduce), ms(e->wc.step));
    e->wc.g_fwd += e->wc.fwd;
    e->wc.g_bwd += e->wc.bwd;
    e->wc.g_reduce += e->wc.reduce;
    e->wc.fwd = e->wc.bwd = e->wc.reduce = e->wc.step = 0;
}

static void step_begin(zinc_engine *e) {
    e->wc.step_t0 = zengine_wc_now(e);
    e->wc.step_reduce0 = e->wc.reduce;
}

static zinc_status step_end(zinc_engine *e, const zinc_step_info *info, bool ok) {
    (void)info;
    int64_t t0 = e->wc.step_t0;
    if (!ok || !e->cfg.wall_clock_breakdown || !t0) return ZINC_OK;
    /* the boundary reduction ran inside zinc_step, and is bwd's (DeepSpeed reduces in engine.backward) */
    int64_t boundary = e->wc.reduce - e->wc.step_reduce0;
    e->wc.step = ztrace_now_ns() - t0 - boundary;
    int64_t step = e->wc.step;
    zengine_wc_micro_end(e);
    double v[5] = {ms(e->wc.g_fwd), ms(e->wc.g_bwd), ms(e->wc.g_bwd - e->wc.g_reduce), ms(e->wc.g_reduce), ms(step)};
    if (e->rank == 0)
        ZLOG_INFO(&e->log, "time (ms) | fwd: %.2f | bwd: %.2f | bwd_inner: %.2f | bwd_allreduce: %.2f | step: %.2f",
                  v[0], v[1], v[2], v[3], v[4]);
    for (int i = 0; i < 5; i++) e->mon.elapsed_ms[i] = v[i];
    e->wc.g_fwd = e->wc.g_bwd = e->wc.g_reduce = 0;
    return ZINC_OK;
}

const zengine_observer zengine_observer_wallclock = {.name = "wall_clock_breakdown",
                                                     .step_begin = step_begin,
                                                     .step_end = step_end};
