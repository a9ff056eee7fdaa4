/* The communication logger (base/comm/comm_log.h) below the engine: nccl-tests' algbw/busbw against numbers
 * worked by hand; message sizes per op; prof_ops filtering; DeepSpeed's debug names (the caller's function);
 * non-blocking ops timed to their wait; the staged backend's host rounds counted once; a communicator
 * without a logger untouched. Run without a launcher (single backend) and under mpirun (tests/comms.cmake). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/config/config_schema.h"
#include "base/device/comm_staged.h"
#include "base/device/device.h"
#include "zt.h"

static int P;

/* ---------------------------------------------------------------- the formulas */

static void test_bandwidth_by_hand(void) {
    double alg, bus;
    /* 1 GB in 0.5 s = 2 GB/s; all_reduce on 4 ranks moves 2(n-1)/n = 1.5 of it per rank: 3 GB/s */
    zcomm_op_bandwidth(ZCOMM_OP_ALL_REDUCE, 1e9, 0.5, 4, &alg, &bus);
    ZT_NEAR(alg, 2.0, 1e-12, 0, "all_reduce algbw %g", alg);
    ZT_NEAR(bus, 3.0, 1e-12, 0, "all_reduce busbw %g", bus);
    /* reduce_scatter of a 300 MB array on 3 ranks in 0.1 s: algbw 3, busbw 3 x 2/3 = 2 */
    zcomm_op_bandwidth(ZCOMM_OP_REDUCE_SCATTER, 3e8, 0.1, 3, &alg, &bus);
    ZT_NEAR(alg, 3.0, 1e-12, 0, "reduce_scatter algbw %g", alg);
    ZT_NEAR(bus, 2.0, 1e-12, 0, "reduce_scatter busbw %g", bus);
    /* all_gather of 8 MB on 8 ranks in 1 ms: 8 GB/s, busbw 7 */
    zcomm_op_bandwidth(ZCOMM_OP_ALL_GATHER, 8e6, 1e-3, 8, &alg, &bus);
    ZT_NEAR(alg, 8.0, 1e-12, 0, "all_gather algbw %g", alg);
    ZT_NEAR(bus, 7.0, 1e-12, 0, "all_gather busbw %g", bus);
    /* broadcast: busbw = algbw */
    zcomm_op_bandwidth(ZCOMM_OP_BROADCAST, 5e8, 0.25, 16, &alg, &bus);
    ZT_NEAR(alg, 2.0, 1e-12, 0, "broadcast algbw %g", alg);
    ZT_NEAR(bus, 2.0, 1e-12, 0, "broadcast busbw %g", bus);
    /* 2 ranks: all_reduce busbw = algbw (2 x 1/2); one rank: nothing crosses a bus */
    zcomm_op_bandwidth(ZCOMM_OP_ALL_REDUCE, 1e9, 1, 2, &alg, &bus);
    ZT_NEAR(bus, 1.0, 1e-12, 0, "all_reduce 2 ranks busbw %g", bus);
    zcomm_op_bandwidth(ZCOMM_OP_ALL_REDUCE, 1e9, 1, 1, &alg, &bus);
    ZT_CHECK(alg == 1.0 && bus == 0.0, "1 rank: algbw %g busbw %g", alg, bus);
    /* barrier moves nothing; a zero duration gives 0, not inf */
    zcomm_op_bandwidth(ZCOMM_OP_BARRIER, 0, 1e-3, 4, &alg, &bus);
    ZT_CHECK(alg == 0 && bus == 0, "barrier: %g %g", alg, bus);
    zcomm_op_bandwidth(ZCOMM_OP_ALL_GATHER, 1e6, 0, 4, &alg, &bus);
    ZT_CHECK(alg == 0 && bus == 0, "zero time: %g %g", alg, bus);
}

/* The config's op names (what prof_ops accepts) are the logger's, in any order. */
static void test_names_agree(void) {
    int n = 0;
    for (int i = 0; zkey_comm_op_names[i]; i++, n++)
        ZT_CHECK(zcomm_op_from_name(zkey_comm_op_names[i]) >= 0, "prof_ops name \"%s\" unknown to the logger",
                 zkey_comm_op_names[i]);
    ZT_CHECK(n == ZCOMM_OP_COUNT, "config lists %d op names, the logger %d", n, (int)ZCOMM_OP_COUNT);
    ZT_CHECK(zcomm_op_from_name("reduce") == -1, "an op zinc never issues");
}

/* ---------------------------------------------------------------- recording through the wrappers */

static const zcomm_log_row *find(const zcomm_log_row *rows, size_t n, const char *name, uint64_t bytes) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name) && rows[i].msg_bytes == bytes) return &rows[i];
    return NULL;
}

/* Issues one of each collective (the all-gathers and reduce-scatter non-blocking) from this function. */
static void issue_each(zcomm *c, float *buf, float *recv, size_t per) {
    size_t *counts = calloc((size_t)P, sizeof *counts), *displs = calloc((size_t)P, sizeof *displs);
    for (int r = 0; r < P; r++) counts[r] = per, displs[r] = (size_t)r * per;
    zcomm_req *rq = NULL, *gq = NULL;
    ZT_OK(zcomm_allreduce(c, buf, 100, ZINC_FP32, ZCOMM_SUM, NULL));
    ZT_OK(zcomm_reduce_scatterv(c, buf, recv, counts, ZINC_FP32, &rq));
    ZT_OK(zcomm_wait(c, rq));
    ZT_OK(zcomm_allgatherv_inplace(c, buf, counts, displs, ZINC_FP16, &gq));
    ZT_OK(zcomm_wait(c, gq));
    double mine = 1, all[8];
    ZT_OK(zcomm_allgather_bytes(c, &mine, all, sizeof mine));
    ZT_OK(zcomm_bcast(c, buf, 12, 0));
    ZT_OK(zcomm_barrier(c));
    free(counts);
    free(displs);
}

static void test_records(zcomm *c, const char *backend) {
    size_t per = 24;
    float *buf = calloc(per * (size_t)P + 100, sizeof *buf), *recv = calloc(per, sizeof *recv);
    zcomm_log *l = NULL;
    zcomm_log_settings s = {.prof_all = true};
    ZT_OK(zcomm_log_create(&s, NULL, P, &l));
    c->log = l;
    issue_each(c, buf, recv, per);
    issue_each(c, buf, recv, per);
    c->log = NULL;
    issue_each(c, buf, recv, per); /* not counted: no logger attached */
    zcomm_log_row rows[16];
    size_t n = zcomm_log_rows(l, rows, 16);
    ZT_CHECK(n == 6, "%s: %zu rows, want one per op", backend, n);
    /* nccl-tests' S: the whole array for reduce-scatter and all-gather, the output for all_gather_object */
    struct {
        const char *name;
        uint64_t bytes;
    } want[] = {{"all_reduce", 400},
                {"reduce_scatter", per * (uint64_t)P * 4},
                {"all_gather", per * (uint64_t)P * 2},
                {"all_gather_object", 8 * (uint64_t)P},
                {"broadcast", 12},
                {"barrier", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const zcomm_log_row *r = find(rows, n, want[i].name, want[i].bytes);
        ZT_CHECK(r != NULL, "%s: no row %s of %llu bytes", backend, want[i].name, (unsigned long long)want[i].bytes);
        if (!r) continue;
        ZT_CHECK(r->count == 2, "%s: %s counted %llu times, want 2", backend, want[i].name,
                 (unsigned long long)r->count);
        ZT_CHECK(r->total_s >= 0 && r->min_s <= r->max_s && r->min_s * 2 <= r->total_s + 1e-12,
                 "%s: %s latencies total %g min %g max %g", backend, want[i].name, r->total_s, r->min_s, r->max_s);
        double alg, bus;
        zcomm_op_bandwidth(r->op, (double)r->msg_bytes * 2, r->total_s, P, &alg, &bus);
        ZT_CHECK(alg == r->algbw && bus == r->busbw, "%s: %s bandwidth from the totals", backend, want[i].name);
    }
    /* sorted by name, then size */
    for (size_t i = 1; i < n && i < 16; i++) ZT_CHECK(strcmp(rows[i - 1].name, rows[i].name) <= 0, "rows sorted");
    zcomm_log_destroy(l);
    free(buf);
    free(recv);
}

/* prof_all false: only the ops in prof_ops; debug: the caller joins the name. */
static void test_filter_and_debug(zcomm *c) {
    size_t per = 8;
    float *buf = calloc(per * (size_t)P + 100, sizeof *buf), *recv = calloc(per, sizeof *recv);
    zcomm_log *l = NULL;
    zcomm_log_settings s = {.prof_all = false,
                            .debug = true,
                            .prof_ops = (1u << ZCOMM_OP_ALL_GATHER) | (1u << ZCOMM_OP_BARRIER)};
    ZT_OK(zcomm_log_create(&s, NULL, P, &l));
    c->log = l;
    issue_each(c, buf, recv, per);
    c->log = NULL;
    zcomm_log_row rows[16];
    size_t n = zcomm_log_rows(l, rows, 16);
    ZT_CHECK(n == 2, "prof_ops [all_gather, barrier]: %zu rows", n);
    ZT_CHECK(find(rows, n, "all_gather | [Caller Func: issue_each]", per * (uint64_t)P * 2) != NULL,
             "debug names the calling function: %s", n ? rows[0].name : "(none)");
    ZT_CHECK(find(rows, n, "barrier | [Caller Func: issue_each]", 0) != NULL, "barrier kept");
    zcomm_log_destroy(l);
    /* an empty selection records nothing */
    s.prof_ops = 0;
    ZT_OK(zcomm_log_create(&s, NULL, P, &l));
    c->log = l;
    issue_each(c, buf, recv, per);
    c->log = NULL;
    ZT_CHECK(zcomm_log_rows(l, NULL, 0) == 0, "prof_all false, prof_ops []: nothing");
    zcomm_log_destroy(l);
    free(buf);
    free(recv);
}

/* The staged backend runs each collective as rounds on the host communicator: with one logger on both
 * (as the engine attaches it) each collective counts once, with its whole size. */
static void test_staged_counts_once(zcomm *host) {
    zmemtrack mem = {0};
    zdevice *dev = NULL;
    zcomm *st = NULL;
    ZT_OK(zdev_create_cpu(&mem, &dev));
    ZT_OK(zcomm_create_staged(host, dev, 64, NULL, &st));
    zcomm_log *l = NULL;
    zcomm_log_settings s = {.prof_all = true};
    ZT_OK(zcomm_log_create(&s, NULL, P, &l));
    host->log = st->log = l;
    float buf[1000] = {0};
    ZT_OK(zcomm_allreduce(st, buf, 1000, ZINC_FP32, ZCOMM_SUM, NULL)); /* 4000 bytes in 64-byte rounds */
    host->log = st->log = NULL;
    zcomm_log_row rows[8];
    size_t n = zcomm_log_rows(l, rows, 8);
    ZT_CHECK(n == 1 && rows[0].count == 1 && rows[0].msg_bytes == 4000,
             "staged all_reduce: %zu rows, first %s x%llu of %llu bytes (want one of 4000)", n, n ? rows[0].name : "-",
             n ? (unsigned long long)rows[0].count : 0ull, n ? (unsigned long long)rows[0].msg_bytes : 0ull);
    zcomm_log_destroy(l);
    zcomm_destroy(st);
    zdev_destroy(dev);
}

/* ---------------------------------------------------------------- the config block and the API's arguments */

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};

static void test_config(void) {
    zlog log = {zt_logcap_fn, &log_cap, ZINC_LOG_DEBUG, 0};
    zinc_config c;
    /* prof_ops while prof_all is true (the default): DeepSpeed logs everything; a warning says so */
    zt_logcap_clear(&log_cap);
    ZT_OK(zcfg_load_text("{\"train_batch_size\": 1, \"comms_logger\": {\"enabled\": true, \"prof_ops\": "
                         "[\"all_reduce\"]}}",
                         "t.json", 1, &log, &c));
    const char *last_warn = zt_logcap_last(&log_cap, ZINC_LOG_WARN, NULL);
    ZT_CHECK(log_cap.count[ZINC_LOG_WARN] == 1 && strstr(last_warn, "comms_logger.prof_ops") &&
                 strstr(last_warn, "prof_all false"),
             "prof_ops with prof_all: %d warnings, last \"%s\"", log_cap.count[ZINC_LOG_WARN], last_warn);
    ZT_CHECK(c.comms_logger.enabled && c.comms_logger.prof_all && c.comms_logger.prof_ops == 1u, "values kept");
    zt_logcap_clear(&log_cap);
    ZT_OK(zcfg_load_text("{\"train_batch_size\": 1, \"comms_logger\": {\"enabled\": true, \"prof_all\": false, "
                         "\"prof_ops\": [\"barrier\", \"all_gather\"]}}",
                         "t.json", 1, &log, &c));
    ZT_CHECK(log_cap.count[ZINC_LOG_WARN] == 0, "prof_all false: no warning (%s)",
             zt_logcap_last(&log_cap, ZINC_LOG_WARN, NULL));
    ZT_CHECK(c.comms_logger.prof_ops == ((1u << 5) | (1u << 2)), "prof_ops mask %#x", c.comms_logger.prof_ops);
    /* the dump writes the list back, and it loads to the same mask */
    char *dump = zcfg_dump_json(&c);
    ZT_CHECK(dump && strstr(dump, "\"all_gather\",") && strstr(dump, "\"barrier\""), "dump lists prof_ops");
    zinc_config again;
    if (dump) ZT_OK(zcfg_load_text(dump, "dump", 1, &log, &again));
    if (dump) ZT_CHECK(again.comms_logger.prof_ops == c.comms_logger.prof_ops, "dump round trip of prof_ops");
    free(dump);
    /* several problems in the block are reported together, each with its path */
    zinc_status st = zcfg_load_text("{\"train_batch_size\": 1, \"comms_logger\": {\"enabled\": 1, \"prof_ops\": "
                                    "[\"all_reduce\", \"send\"], \"verbos\": true}}",
                                    "t.json", 1, &log, &c);
    const char *m = zinc_last_error();
    ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(m, "(3 problems)") &&
                 strstr(m, "comms_logger.enabled: expected true or false") &&
                 strstr(m, "comms_logger.prof_ops[1]: \"send\" is not an op zinc issues") &&
                 strstr(m, "did you mean \"verbose\""),
             "bad block: %s", m);
}

static void test_api_arguments(void) {
    int n = -1;
    ZT_ERR(zinc_comms_summary(NULL, NULL, 0, &n), ZINC_ERR_INVALID_ARG, "zinc_comms_summary");
    ZT_ERR(zinc_comms_log_summary(NULL), ZINC_ERR_INVALID_ARG, "zinc_comms_log_summary");
}

int main(void) {
    zcomm *c = NULL;
    test_bandwidth_by_hand();
    test_names_agree();
    test_config();
    test_api_arguments();
    ZT_OK(zcomm_create(NULL, &c));
    if (!c) return zt_finish();
    P = c->size;
    if (P > 8) return zt_skip("the test's buffers assume at most 8 ranks");
    test_records(c, c->ops->name);
    test_filter_and_debug(c);
    test_staged_counts_once(c);
    zcomm_destroy(c);
    zinc_finalize();
    return zt_finish();
}
