/* zinc launch --hostfile: Open MPI's hostfile syntax read, the hosts lost after a failure left out, and the
 * rest passed to the next start as mpirun's --host list. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/launch/launch.h"
#include "base/core/safe_file.h"
#include "zinc.h"

static int host_index(zcli_launch_hosts *hs, const char *name) {
    for (int i = 0; i < hs->n; i++)
        if (!strcmp(hs->h[i].name, name)) return i;
    return -1;
}

/* "slots=4" (or max_slots=, max-slots=, slots_max=): the value, or -1 with err filled. */
static int64_t count_value(const char *tok, const char *eq, const char *path, int line, char *err, size_t cap) {
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || *end || end == eq + 1 || v < 1 || v > 1 << 20) {
        snprintf(err, cap, "%s:%d: \"%s\": a slot count is a whole number from 1 to %d (host slots=K)", path, line, tok,
                 1 << 20);
        return -1;
    }
    return v;
}

int zcli_launch_hosts_read(const char *path, zcli_launch_hosts *out, char *err, size_t cap) {
    FILE *f = NULL;
    if (zfile_fopen_input("hostfile", path, &f) != ZINC_OK) {
        snprintf(err, cap, "%s", zinc_last_error());
        return 1;
    }
    out->n = 0;
    char buf[4096];
    int line = 0, rc = 1;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            snprintf(err, cap, "%s:%d: the line is longer than %zu characters", path, line, sizeof buf - 1);
            goto done;
        }
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *save = NULL, *tok = strtok_r(buf, " \t\r\n", &save);
        if (!tok) continue;
        if (strlen(tok) >= ZCLI_LAUNCH_HOST_MAX || strchr(tok, '=')) {
            snprintf(err, cap, "%s:%d: \"%s\" is not a host name (a line is `host [slots=K]`)", path, line, tok);
            goto done;
        }
        int64_t slots = 1;
        const char *host = tok;
        while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
            const char *eq = strchr(tok, '=');
            size_t k = eq ? (size_t)(eq - tok) : 0;
            bool is_slots = eq && k == 5 && !strncmp(tok, "slots", 5);
            bool is_max = eq && ((k == 9 && (!strncmp(tok, "max_slots", 9) || !strncmp(tok, "max-slots", 9) ||
                                             !strncmp(tok, "slots_max", 9))));
            if (!is_slots && !is_max) {
                snprintf(err, cap,
                         "%s:%d: \"%s\": zinc launch reads `host [slots=K] [max_slots=K]` per line (Open MPI's "
                         "hostfile syntax)",
                         path, line, tok);
                goto done;
            }
            int64_t v = count_value(tok, eq, path, line, err, cap);
            if (v < 0) goto done;
            if (is_slots) slots = v;
        }
        int i = host_index(out, host);
        if (i < 0) {
            if (out->n == ZCLI_LAUNCH_MAX_HOSTS) {
                snprintf(err, cap, "%s:%d: more than %d hosts", path, line, ZCLI_LAUNCH_MAX_HOSTS);
                goto done;
            }
            i = out->n++;
            snprintf(out->h[i].name, sizeof out->h[i].name, "%s", host);
            out->h[i].slots = 0;
            out->h[i].lost = false;
        }
        out->h[i].slots += slots;
    }
    if (ferror(f)) {
        snprintf(err, cap, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (!out->n) {
        snprintf(err, cap, "%s names no host (a line is `host [slots=K]`)", path);
        goto done;
    }
    rc = 0;
done:
    fclose(f);
    return rc;
}

int64_t zcli_launch_hosts_slots(const zcli_launch_hosts *hs, bool live_only) {
    int64_t s = 0;
    for (int i = 0; i < hs->n; i++)
        if (!live_only || !hs->h[i].lost) s += hs->h[i].slots;
    return s;
}

char *zcli_launch_hosts_list(const zcli_launch_hosts *hs) {
    size_t cap = 1;
    for (int i = 0; i < hs->n; i++) cap += strlen(hs->h[i].name) + 24;
    char *list = malloc(cap);
    if (!list) return NULL;
    size_t n = 0;
    list[0] = 0;
    for (int i = 0; i < hs->n; i++)
        if (!hs->h[i].lost)
            n += (size_t)snprintf(list + n, cap - n, "%s%s:%" PRId64, n ? "," : "", hs->h[i].name, hs->h[i].slots);
    return list;
}

void zcli_launch_hosts_text(const zcli_launch_hosts *hs, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < hs->n && n < cap; i++) {
        int k = snprintf(buf + n, cap - n, "%s%s (%" PRId64 " slot%s%s)", n ? ", " : "", hs->h[i].name, hs->h[i].slots,
                         hs->h[i].slots == 1 ? "" : "s", hs->h[i].lost ? ", lost" : "");
        if (k < 0) break;
        n += (size_t)k;
    }
}
