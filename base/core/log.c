#include "base/core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/core/env.h"

static const char *level_name(zinc_log_level l) {
    switch (l) {
    case ZINC_LOG_DEBUG: return "DEBUG";
    case ZINC_LOG_INFO: return "INFO";
    case ZINC_LOG_WARN: return "WARN";
    case ZINC_LOG_ERROR: return "ERROR";
    default: return "?";
    }
}

void zinc_log_stderr(void *userdata, zinc_log_level level, int rank, const char *msg) {
    (void)userdata;
    if (rank != 0) {
        const char *all = zenv_get(ZENV_LOG_ALL_RANKS);
        if (!(all && all[0] == '1' && level >= ZINC_LOG_WARN)) return;
    }
    fprintf(stderr, "[zinc %s r%d] %s\n", level_name(level), rank, msg);
}

zlog zlog_default(void) {
    zlog l = {zinc_log_stderr, NULL, ZINC_LOG_INFO, 0};
    return l;
}

void zlog_msg(const zlog *l, zinc_log_level level, const char *fmt, ...) {
    if (!l || !l->fn || level < l->level) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    l->fn(l->userdata, level, l->rank, buf);
}
