/* The communication logger (comm_log.h). Rows are few (ops x message sizes x callers): a linear search
 * keeps them in the order first seen, and the summary sorts a copy. */
#include "base/comm/comm_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/bytes.h"
#include "base/core/clock.h"
#include "base/core/error.h"

static const char *const op_names[ZCOMM_OP_COUNT] = {
    "all_reduce", "reduce_scatter", "all_gather", "all_gather_object",
    "broadcast",  "barrier",        "send_recv",  "all_to_all_single",
};

const char *zcomm_op_name(zcomm_op_kind op) { return (int)op >= 0 && op < ZCOMM_OP_COUNT ? op_names[op] : "?"; }

int zcomm_op_from_name(const char *name) {
    for (int i = 0; name && i < ZCOMM_OP_COUNT; i++)
        if (!strcmp(name, op_names[i])) return i;
    return -1;
}

void zcomm_op_bandwidth(zcomm_op_kind op, double bytes, double seconds, int world, double *algbw, double *busbw) {
    double n = world > 0 ? world : 1, factor = 0;
    switch (op) {
    case ZCOMM_OP_ALL_REDUCE: factor = 2 * (n - 1) / n; break;
    case ZCOMM_OP_REDUCE_SCATTER:
    case ZCOMM_OP_ALL_GATHER:
    case ZCOMM_OP_ALL_GATHER_OBJECT:
    case ZCOMM_OP_ALL_TO_ALL: factor = (n - 1) / n; break;
    case ZCOMM_OP_BROADCAST:
    case ZCOMM_OP_SEND_RECV: factor = 1; break;
    default: factor = 0; break;
    }
    *algbw = seconds > 0 ? bytes / seconds / 1e9 : 0;
    *busbw = *algbw * factor;
}

typedef struct row {
    zcomm_op_kind op;
    const char *caller; /* a __func__: static storage; NULL without debug */
    uint64_t msg_bytes, count;
    double total_s, min_s, max_s;
} row;

typedef zcomm_log_pending pending;

struct zcomm_log {
    zcomm_log_settings s;
    const zlog *log;
    int world;
    int depth; /* collectives in progress on this thread: only the outermost is counted */
    row *rows;
    size_t nrows, caprows;
    pending *pend;
    size_t npend, cappend;
    bool lost; /* a row or pending record could not be stored (out of memory): said once in the summary */
};

zinc_status zcomm_log_create(const zcomm_log_settings *s, const zlog *log, int world, zcomm_log **out) {
    zinc_status st = ZINC_OK;
    zcomm_log *l = NULL;
    if (!s || !out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_log_create: settings and out must not be NULL");
    TRY_ALLOC(l, 1, "the communication logger");
    l->s = *s;
    l->log = log;
    l->world = world;
    *out = l;
    return ZINC_OK;
fail:
    return st;
}

void zcomm_log_destroy(zcomm_log *l) {
    if (!l) return;
    free(l->rows);
    free(l->pend);
    free(l);
}

bool zcomm_log_verbose(const zcomm_log *l) { return l && l->s.verbose; }

static bool selected(const zcomm_log *l, zcomm_op_kind op) { return l->s.prof_all || (l->s.prof_ops & (1u << op)); }

bool zcomm_log_begin(zcomm_log *l, zcomm_op_kind op, double *t0) {
    bool rec = l->depth == 0 && selected(l, op);
    l->depth++;
    *t0 = rec ? zclock_now_s() : 0;
    return rec;
}

static void row_name(const zcomm_log *l, zcomm_op_kind op, const char *caller, char *buf, size_t cap) {
    if (l->s.debug && caller)
        snprintf(buf, cap, "%s | [Caller Func: %s]", zcomm_op_name(op), caller);
    else
        snprintf(buf, cap, "%s", zcomm_op_name(op));
}

static void record(zcomm_log *l, zcomm_op_kind op, size_t bytes, const char *caller, double seconds) {
    if (!l->s.debug) caller = NULL;
    row *r = NULL;
    for (size_t i = 0; i < l->nrows && !r; i++) {
        row *x = &l->rows[i];
        if (x->op == op && x->msg_bytes == bytes &&
            (x->caller == caller || (x->caller && caller && !strcmp(x->caller, caller))))
            r = x;
    }
    if (!r) {
        if (l->nrows == l->caprows) {
            size_t cap = l->caprows ? 2 * l->caprows : 16;
            row *p = realloc(l->rows, cap * sizeof *p);
            if (!p) {
                l->lost = true;
                return;
            }
            l->rows = p;
            l->caprows = cap;
        }
        r = &l->rows[l->nrows++];
        *r = (row){.op = op, .caller = caller, .msg_bytes = bytes, .min_s = seconds, .max_s = seconds};
    }
    r->count++;
    r->total_s += seconds;
    if (seconds < r->min_s) r->min_s = seconds;
    if (seconds > r->max_s) r->max_s = seconds;
    if (l->s.verbose) {
        char name[96], size[32];
        double algbw, busbw;
        row_name(l, op, caller, name, sizeof name);
        zbytes_format(size, sizeof size, bytes);
        zcomm_op_bandwidth(op, (double)bytes, seconds, l->world, &algbw, &busbw);
        ZLOG_INFO(l->log, "comm op: %s | time (ms): %.3f | msg size: %s | algbw (GB/s): %.3f | busbw (GB/s): %.3f",
                  name, seconds * 1e3, size, algbw, busbw);
    }
}

void zcomm_log_end(zcomm_log *l, bool recorded, zcomm_op_kind op, size_t bytes, const char *caller, double t0,
                   const zcomm_req *req, zinc_status st) {
    l->depth--;
    if (!recorded || st != ZINC_OK) return;
    if (!req) {
        record(l, op, bytes, caller, zclock_now_s() - t0);
        return;
    }
    if (l->npend == l->cappend) {
        size_t cap = l->cappend ? 2 * l->cappend : 16;
        pending *p = realloc(l->pend, cap * sizeof *p);
        if (!p) {
            l->lost = true;
            return;
        }
        l->pend = p;
        l->cappend = cap;
    }
    l->pend[l->npend++] = (pending){.req = req, .op = op, .caller = caller, .bytes = bytes, .t0 = t0};
}

static bool take(zcomm_log *l, const zcomm_req *req, pending *out) {
    for (size_t i = 0; i < l->npend; i++) {
        if (l->pend[i].req != req) continue;
        *out = l->pend[i];
        l->pend[i] = l->pend[--l->npend];
        return true;
    }
    return false;
}

void zcomm_log_wait_begin(zcomm_log *l, const zcomm_req *req, zcomm_log_pending *p) {
    l->depth++;
    if (!take(l, req, p)) p->req = NULL;
}

void zcomm_log_wait_end(zcomm_log *l, const zcomm_log_pending *p, zinc_status st) {
    l->depth--;
    if (p->req && st == ZINC_OK) record(l, p->op, p->bytes, p->caller, zclock_now_s() - p->t0);
}

void zcomm_log_waited(zcomm_log *l, const zcomm_req *req) {
    pending p;
    if (take(l, req, &p)) record(l, p.op, p.bytes, p.caller, zclock_now_s() - p.t0);
}

static int by_name_then_size(const void *a, const void *b) {
    const zcomm_log_row *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->msg_bytes < y->msg_bytes ? -1 : x->msg_bytes > y->msg_bytes;
}

size_t zcomm_log_rows(const zcomm_log *l, zcomm_log_row *out, size_t max) {
    if (!l) return 0;
    if (!out || !max) return l->nrows;
    zcomm_log_row *all = calloc(l->nrows ? l->nrows : 1, sizeof *all);
    if (!all) return 0;
    for (size_t i = 0; i < l->nrows; i++) {
        const row *r = &l->rows[i];
        zcomm_log_row *o = &all[i];
        row_name(l, r->op, r->caller, o->name, sizeof o->name);
        o->op = r->op;
        o->msg_bytes = r->msg_bytes;
        o->count = r->count;
        o->total_s = r->total_s;
        o->min_s = r->min_s;
        o->max_s = r->max_s;
        zcomm_op_bandwidth(r->op, (double)r->msg_bytes * (double)r->count, r->total_s, l->world, &o->algbw, &o->busbw);
    }
    qsort(all, l->nrows, sizeof *all, by_name_then_size);
    for (size_t i = 0; i < l->nrows && i < max; i++) out[i] = all[i];
    free(all);
    return l->nrows;
}

void zcomm_log_print(const zcomm_log *l, const char *when) {
    if (!l) return;
    size_t n = zcomm_log_rows(l, NULL, 0);
    zcomm_log_row *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) {
        ZLOG_WARN(l->log, "comms_logger: out of memory printing the summary");
        return;
    }
    n = zcomm_log_rows(l, rows, n);
    ZLOG_INFO(l->log, "comms_logger summary (%s; %d rank%s; bandwidths as nccl-tests defines them):", when, l->world,
              l->world == 1 ? "" : "s");
    ZLOG_INFO(l->log, "%-20s%-16s%-12s%-20s%-18s%-16s%s", "Comm. Op", "Message Size", "Count", "Total Latency(ms)",
              "Avg Latency(ms)", "algbw (GB/s)", "busbw (GB/s)");
    if (!n) ZLOG_INFO(l->log, "(no collectives recorded)");
    for (size_t i = 0; i < n; i++) {
        char size[32];
        if (i == 0 || strcmp(rows[i].name, rows[i - 1].name)) ZLOG_INFO(l->log, "%s", rows[i].name);
        zbytes_format(size, sizeof size, rows[i].msg_bytes);
        ZLOG_INFO(l->log, "%-20s%-16s%-12llu%-20.3f%-18.3f%-16.3f%.3f", "", size, (unsigned long long)rows[i].count,
                  rows[i].total_s * 1e3, rows[i].total_s * 1e3 / (double)rows[i].count, rows[i].algbw, rows[i].busbw);
    }
    if (l->lost) ZLOG_WARN(l->log, "comms_logger: some collectives were not recorded (out of memory)");
    free(rows);
}
