/* Internal logging: a small sink (callback, level, rank) that every part of zinc logs through, so the
 * library never prints on its own. Code that runs before an engine exists (config loading) takes one too. */
#ifndef ZINC_RUNTIME_LOG_H
#define ZINC_RUNTIME_LOG_H

#include "zinc.h"

typedef struct zlog {
    zinc_log_fn fn; /* NULL: discard */
    void *userdata;
    zinc_log_level level;
    int rank;
} zlog;

/* A sink that prints to stderr on rank 0 at level >= INFO. */
zlog zlog_default(void);

void zlog_msg(const zlog *l, zinc_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define ZLOG_DEBUG(l, ...) zlog_msg((l), ZINC_LOG_DEBUG, __VA_ARGS__)
#define ZLOG_INFO(l, ...) zlog_msg((l), ZINC_LOG_INFO, __VA_ARGS__)
#define ZLOG_WARN(l, ...) zlog_msg((l), ZINC_LOG_WARN, __VA_ARGS__)
#define ZLOG_ERROR(l, ...) zlog_msg((l), ZINC_LOG_ERROR, __VA_ARGS__)

#endif
