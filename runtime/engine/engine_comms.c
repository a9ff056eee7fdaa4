/* comms_logger (base/comm/comm_log.h) for the engine: made from the config at zinc_create and attached to
 * both communicators (host and compute device: one logger, so the staged backend's host rounds count once),
 * printed every steps_per_print under verbose and at zinc_destroy, read by zinc_comms_summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config_schema.h"
#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"

zinc_status zengine_comms_start(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    const zcfg_comms_logger *c = &e->cfg.comms_logger;
    if (!c->enabled) return ZINC_OK;
    zcomm_log_settings s = {.verbose = c->verbose, .prof_all = c->prof_all, .debug = c->debug};
    for (int i = 0; zkey_comm_op_names[i]; i++) {
        int op = zcomm_op_from_name(zkey_comm_op_names[i]);
        if (op < 0) FAIL(ZINC_ERR_INTERNAL, "comms_logger: op \"%s\" unknown to the logger", zkey_comm_op_names[i]);
        if (c->prof_ops & (1u << i)) s.prof_ops |= 1u << op;
    }
    TRY(zcomm_log_create(&s, &e->log, e->world, &e->comms));
    e->comm->log = e->comms;
    if (e->dcomm) e->dcomm->log = e->comms;
fail:
    return st;
}

static zinc_status after_step(zinc_engine *e, const zinc_step_info *info, bool ok) {
    (void)info;
    if (!ok) return ZINC_OK;
    if (!zcomm_log_verbose(e->comms) || e->cfg.steps_per_print <= 0 || e->steps % e->cfg.steps_per_print)
        return ZINC_OK;
    char when[64];
    snprintf(when, sizeof when, "after step %lld", (long long)e->steps);
    zcomm_log_print(e->comms, when);
    return ZINC_OK;
}

static void finish(zinc_engine *e) {
    if (!e->comms) return;
    char when[64];
    snprintf(when, sizeof when, "end of run, %lld step%s", (long long)e->steps, e->steps == 1 ? "" : "s");
    if (e->built) zcomm_log_print(e->comms, when); /* not for an engine whose zinc_create or zinc_build failed */
    if (e->comm) e->comm->log = NULL;
    if (e->dcomm) e->dcomm->log = NULL;
    if (e->hcomm) e->hcomm->log = NULL;
    if (e->qgz_intra) e->qgz_intra->log = NULL;
    if (e->qgz_inter) e->qgz_inter->log = NULL;
    zcomm_log_destroy(e->comms);
    e->comms = NULL;
}

const zengine_observer zengine_observer_comms = {.name = "comms_logger", .step_end = after_step, .destroy = finish};

zinc_status zinc_comms_summary(const zinc_engine *e, zinc_comms_record *out, int max, int *n) {
    zinc_status st = ZINC_OK;
    zcomm_log_row *rows = NULL;
    if (!e || !n || max < 0 || (max > 0 && !out))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_comms_summary: NULL engine or n, a negative max, or NULL out with "
                                          "max > 0");
    size_t have = zcomm_log_rows(e->comms, NULL, 0);
    *n = (int)have;
    if (!have || !max) return ZINC_OK;
    TRY_ALLOC(rows, have, "the comms_logger rows");
    have = zcomm_log_rows(e->comms, rows, have);
    for (size_t i = 0; i < have && i < (size_t)max; i++) {
        zinc_comms_record *r = &out[i];
        memset(r, 0, sizeof *r);
        snprintf(r->op, sizeof r->op, "%s", rows[i].name);
        r->msg_bytes = rows[i].msg_bytes;
        r->count = rows[i].count;
        r->total_latency_s = rows[i].total_s;
        r->min_latency_s = rows[i].min_s;
        r->max_latency_s = rows[i].max_s;
        r->algbw_gbps = rows[i].algbw;
        r->busbw_gbps = rows[i].busbw;
    }
fail:
    free(rows);
    return st;
}

zinc_status zinc_comms_log_summary(const zinc_engine *e) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_comms_log_summary: NULL engine");
    char when[64];
    snprintf(when, sizeof when, "after step %lld", (long long)e->steps);
    if (e->comms) zcomm_log_print(e->comms, when);
    return ZINC_OK;
}
