#include "base/core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ZINC_ERROR_CAP 4096

static _Thread_local char g_msg[ZINC_ERROR_CAP];
/* Set while the message is a user-facing config error: it carries no file:line trail (the message names
 * the key, value and range instead; the trail is for ZINC_ERR_INTERNAL and other zinc-side failures). */
static _Thread_local int g_plain;

static const char *basename_of(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

zinc_status zinc_error_at(zinc_status code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    g_plain = code == ZINC_ERR_CONFIG;
    if (!g_plain && (size_t)n < sizeof g_msg)
        snprintf(g_msg + n, sizeof g_msg - (size_t)n, " [%s:%d]", basename_of(file), line);
    return code;
}

void zinc__error_trace(const char *file, int line) {
    if (g_plain) return;
    size_t n = strlen(g_msg);
    /* Keep the first frames: the origin matters most, and a deep trace should not push it out. */
    if (n + 64 < sizeof g_msg) snprintf(g_msg + n, sizeof g_msg - n, " <- %s:%d", basename_of(file), line);
}

void zinc__error_clear(void) {
    g_msg[0] = '\0';
    g_plain = 0;
}

const char *zinc_last_error(void) { return g_msg; }

const char *zinc_status_name(zinc_status s) {
    switch (s) {
    case ZINC_OK: return "ZINC_OK";
    case ZINC_ERR_INVALID_ARG: return "ZINC_ERR_INVALID_ARG";
    case ZINC_ERR_CONFIG: return "ZINC_ERR_CONFIG";
    case ZINC_ERR_STATE: return "ZINC_ERR_STATE";
    case ZINC_ERR_NOMEM: return "ZINC_ERR_NOMEM";
    case ZINC_ERR_IO: return "ZINC_ERR_IO";
    case ZINC_ERR_COMM: return "ZINC_ERR_COMM";
    case ZINC_ERR_NONFINITE: return "ZINC_ERR_NONFINITE";
    case ZINC_ERR_DEVICE: return "ZINC_ERR_DEVICE";
    case ZINC_ERR_LOSS_SCALE: return "ZINC_ERR_LOSS_SCALE";
    case ZINC_ERR_UNSUPPORTED: return "ZINC_ERR_UNSUPPORTED";
    case ZINC_ERR_CORRUPT: return "ZINC_ERR_CORRUPT";
    case ZINC_ERR_INTERNAL: return "ZINC_ERR_INTERNAL";
    }
    return "ZINC_ERR_UNKNOWN";
}

const char *zinc_version(void) { return ZINC_VERSION_STRING; }
