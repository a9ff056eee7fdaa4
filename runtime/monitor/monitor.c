/* The monitors of one engine (monitor.h): DeepSpeed's MonitorMaster, which hands each scalar to every
 * enabled writer. */
#include <stdlib.h>
#include <string.h>

#include "base/core/error.h"
#include "runtime/monitor/monitor_internal.h"

struct zmon {
    const zlog *log;
    bool tb_on, csv_on;
    zmon_tb tb;
    zmon_csv csv;
};

zinc_status zmon_open(const zcfg_monitor *tb, const zcfg_monitor *csv, const char *const *tags, const zlog *log,
                      zmon **out) {
    zinc_status st = ZINC_OK;
    *out = NULL;
    bool tb_on = tb && tb->enabled, csv_on = csv && csv->enabled;
    if (!tb_on && !csv_on) return ZINC_OK;
    zmon *m = NULL;
    TRY_ALLOC(m, 1, "the monitors");
    m->log = log;
    m->tb.file.fd = m->tb.dir.fd = m->csv.dir.fd = -1;
    if (tb_on) {
        TRY(zmon_tb_open(&m->tb, tb, log));
        m->tb_on = true;
    }
    if (csv_on) {
        m->csv_on = true; /* from here on closing it is right, whatever the open left */
        TRY(zmon_csv_open(&m->csv, csv, tags));
        ZLOG_INFO(log, "csv_monitor: writing %s/*.csv", m->csv.dir.path);
    }
    *out = m;
    return ZINC_OK;
fail:
    if (m) { /* the files this open created hold nothing yet: not left behind */
        zmon_file_discard(&m->tb.dir, &m->tb.file);
        for (int i = 0; i < m->csv.ntags; i++) zmon_file_discard(&m->csv.dir, &m->csv.tags[i].file);
    }
    zmon_close(m);
    return st;
}

void zmon_scalar(zmon *m, const char *tag, double value, int64_t samples) {
    if (!m) return;
    if (m->tb_on) zmon_tb_scalar(&m->tb, tag, value, samples, m->log);
    if (m->csv_on) zmon_csv_scalar(&m->csv, tag, value, samples, m->log);
}

const char *zmon_output_dir(const zmon *m, const char *block) {
    if (!m) return NULL;
    if (!strcmp(block, "tensorboard")) return m->tb_on ? m->tb.dir.path : NULL;
    if (!strcmp(block, "csv_monitor")) return m->csv_on ? m->csv.dir.path : NULL;
    return NULL;
}

void zmon_close(zmon *m) {
    if (!m) return;
    zmon_file_close(&m->tb.file, m->log, "tensorboard");
    zmon_dir_close(&m->tb.dir);
    if (m->csv_on) zmon_csv_close(&m->csv, m->log);
    free(m);
}
