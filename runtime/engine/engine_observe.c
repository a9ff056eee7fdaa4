/* The observers: what watches the run without changing it (the wall-clock breakdown, DeepSpeed's monitors,
 * the trace, comms_logger). Each is one descriptor (zengine_observer, engine_internal.h) in the file that
 * implements it, listed once here; zinc_create, zinc_step and zinc_destroy walk this table, in its order,
 * and name no observer themselves. The model's FLOPs (engine_flops.c) are no row: they are declarations
 * the monitor and the trace read. */
#include <stddef.h>

#include "runtime/engine/engine_internal.h"

/* The order is the one the hooks need: the wall clock fills the step's times before the monitor writes
 * them; the trace's file is written before comms_logger prints the step's table; at zinc_destroy the
 * trace's last collectives still count in comms_logger's end-of-run table. */
static const zengine_observer *const observers[] = {
    &zengine_observer_wallclock,
    &zengine_observer_monitor,
    &zengine_observer_trace,
    &zengine_observer_comms,
};
#define NOBSERVERS (int)(sizeof observers / sizeof observers[0])

zinc_status zengine_observers_create(zinc_engine *e, const zinc_options *o) {
    for (int i = 0; i < NOBSERVERS; i++) {
        zinc_status st = observers[i]->create ? observers[i]->create(e, o) : ZINC_OK;
        if (st != ZINC_OK) return st;
    }
    return ZINC_OK;
}

void zengine_observers_step_begin(zinc_engine *e) {
    for (int i = 0; i < NOBSERVERS; i++)
        if (observers[i]->step_begin) observers[i]->step_begin(e);
}

zinc_status zengine_observers_step_end(zinc_engine *e, const zinc_step_info *info, zinc_status st) {
    for (int i = 0; i < NOBSERVERS; i++) {
        if (!observers[i]->step_end) continue;
        zinc_status mine = observers[i]->step_end(e, info, st == ZINC_OK);
        if (st == ZINC_OK) st = mine;
    }
    return st;
}

void zengine_observers_destroy(zinc_engine *e) {
    for (int i = 0; i < NOBSERVERS; i++)
        if (observers[i]->destroy) observers[i]->destroy(e);
}
