/* comms_logger's figures in zinc train's --report: one object per op and message size, the fields of
 * zinc_comms_record (include/zinc.h), so tools read what the end-of-run table shows. */
#include "cli/common/comms_report.h"

#include <stdlib.h>

int zcli_report_comms(const zinc_engine *e, json_t *report) {
    int n = 0;
    if (zinc_comms_summary(e, NULL, 0, &n) != ZINC_OK) return -1;
    if (n == 0) return 0;
    zinc_comms_record *rows = calloc((size_t)n, sizeof *rows);
    json_t *ops = json_array(), *comms = json_object();
    int bad = !rows || !ops || !comms || zinc_comms_summary(e, rows, n, &n) != ZINC_OK;
    for (int i = 0; !bad && i < n; i++) {
        const zinc_comms_record *r = &rows[i];
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "op", r->op, "msg_bytes",
                              (json_int_t)r->msg_bytes, "count", (json_int_t)r->count, "bytes",
                              (json_int_t)(r->msg_bytes * r->count), "total_latency_ms", r->total_latency_s * 1e3,
                              "avg_latency_ms", r->total_latency_s * 1e3 / (double)r->count, "min_latency_ms",
                              r->min_latency_s * 1e3, "max_latency_ms", r->max_latency_s * 1e3, "algbw_gbps",
                              r->algbw_gbps, "busbw_gbps", r->busbw_gbps);
        bad = !o || json_array_append_new(ops, o) != 0;
    }
    if (!bad) {
        json_object_set_new(comms, "rank", json_integer(zinc_rank(e)));
        json_object_set_new(comms, "world_size", json_integer(zinc_world_size(e)));
        json_object_set_new(comms, "ops", ops);
        ops = NULL;
        bad = json_object_set_new(report, "comms", comms) != 0;
        comms = NULL;
    }
    json_decref(ops);
    json_decref(comms);
    free(rows);
    return bad ? -1 : 0;
}
