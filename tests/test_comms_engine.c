/* comms_logger through the engine API (zinc_comms_summary), on the device the tests run on: cpu (the MPI
 * backend), or the CUDA emulation (tests/cuda_emulated.cmake) with NCCL (non-blocking collectives completed by
 * the compute stream's wait, which the logger times) or with MPI through pinned staging. Per optimizer step the
 * bytes of each op equal the stage's ZeRO volume, computed from the MLP's shapes and zero/partition.c's rules as
 * tests/test_comms_volume.py does (docs/comms.md): 2 micro-steps, overlap_comm on, stage 3 with no module under
 * the persistence threshold and every module kept from its forward to its backward (the default reuse
 * distance). Rows come back sorted, with their reserved space zeroed, and a short array gets the first rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zt.h"

static int64_t up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* The modules' flat sizes: each parameter (weight, then bias) on an 8-element boundary. */
static int mlp_modules(const mlp_config *c, int64_t *mods) {
    int dims[64], n = 0;
    dims[n++] = c->in_dim;
    for (int i = 0; i < c->depth && n < 62; i++) dims[n++] = c->hidden;
    dims[n++] = c->classes;
    for (int i = 0; i + 1 < n; i++) mods[i] = up(up((int64_t)dims[i + 1] * dims[i], 8) + dims[i + 1], 8);
    return n - 1;
}

typedef struct {
    uint64_t all_reduce, reduce_scatter, all_gather;
} volume;

static volume summed(zinc_engine *e, int world) {
    volume v = {0};
    int n = 0;
    ZT_OK(zinc_comms_summary(e, NULL, 0, &n));
    zinc_comms_record *rows = calloc((size_t)n + 1, sizeof *rows);
    int again = 0;
    ZT_OK(zinc_comms_summary(e, rows, n, &again));
    ZT_CHECK(again == n, "the row count is stable: %d then %d", n, again);
    for (int i = 0; i < n; i++) {
        uint64_t b = rows[i].msg_bytes * rows[i].count;
        if (!strcmp(rows[i].op, "all_reduce")) v.all_reduce += b;
        if (!strcmp(rows[i].op, "reduce_scatter")) v.reduce_scatter += b;
        if (!strcmp(rows[i].op, "all_gather")) v.all_gather += b;
        for (int k = 0; k < 4; k++) ZT_CHECK(rows[i].reserved[k] == 0, "reserved zeroed");
        if (i)
            ZT_CHECK(strcmp(rows[i - 1].op, rows[i].op) < 0 ||
                         (!strcmp(rows[i - 1].op, rows[i].op) && rows[i - 1].msg_bytes < rows[i].msg_bytes),
                     "rows sorted by op, then size");
        double n1 = (double)(world - 1) / world;
        double factor = !strcmp(rows[i].op, "all_reduce") ? 2 * n1 : !strcmp(rows[i].op, "broadcast") ? 1 : n1;
        ZT_NEAR(rows[i].busbw_gbps, rows[i].algbw_gbps * factor, 1e-12, 1e-12, "%s: busbw %g = algbw %g x %g",
                rows[i].op, rows[i].busbw_gbps, rows[i].algbw_gbps, factor);
        ZT_NEAR(rows[i].algbw_gbps, rows[i].total_latency_s > 0 ? (double)b / rows[i].total_latency_s / 1e9 : 0, 1e-12,
                1e-9, "%s: algbw = bytes / time", rows[i].op);
    }
    /* a short array: the first rows */
    if (n > 1) {
        zinc_comms_record one;
        ZT_OK(zinc_comms_summary(e, &one, 1, &again));
        ZT_CHECK(again == n && !strcmp(one.op, rows[0].op) && one.msg_bytes == rows[0].msg_bytes,
                 "max 1: the first row, n the total");
    }
    free(rows);
    return v;
}

static void check_stage(int stage, int world) {
    eu_run r = {.stage = stage,
                .dtype = ZINC_FP32,
                .overlap_comm = 1,
                .gas = 2,
                .train_batch = 24,
                .extra = "\"comms_logger\": {\"enabled\": true}"};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    ZT_OK(mlp_train_step(m, 0, NULL, NULL));
    volume a = summed(e, world);
    ZT_OK(mlp_train_step(m, 1, NULL, NULL));
    ZT_OK(mlp_train_step(m, 2, NULL, NULL));
    volume b = summed(e, world);
    mlp_config mc = eu_model();
    int64_t mods[64], flat = 0;
    int nm = mlp_modules(&mc, mods);
    for (int i = 0; i < nm; i++) flat += mods[i];
    int64_t padded = up(up(flat, 8) / world + (up(flat, 8) % world != 0), 64) * world;
    volume want = {0};
    if (stage == 0) want.all_reduce = (uint64_t)padded * 4;
    if (stage == 1) want.reduce_scatter = (uint64_t)padded * 4;
    if (stage == 2 || stage == 3) want.reduce_scatter = 2 * (uint64_t)flat * 4;
    if (stage == 1 || stage == 2) want.all_gather = (uint64_t)padded * 4;
    if (stage == 3) want.all_gather = 2 * (uint64_t)flat * 4; /* each module once per micro-step, kept for backward */
    uint64_t got[3] = {(b.all_reduce - a.all_reduce) / 2, (b.reduce_scatter - a.reduce_scatter) / 2,
                       (b.all_gather - a.all_gather) / 2};
    uint64_t exp[3] = {want.all_reduce, want.reduce_scatter, want.all_gather};
    const char *names[3] = {"all_reduce", "reduce_scatter", "all_gather"};
    for (int k = 0; k < 3; k++)
        ZT_CHECK(got[k] == exp[k], "stage %d, %d ranks, device %s: %s %llu bytes per step, want %llu", stage, world,
                 zinc_device(e) == ZINC_DEVICE_CUDA ? "cuda" : "cpu", names[k], (unsigned long long)got[k],
                 (unsigned long long)exp[k]);
    if (zinc_rank(e) == 0)
        printf("stage %d: all_reduce %llu, reduce_scatter %llu, all_gather %llu bytes per step\n", stage,
               (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    /* without the block: no rows */
    eu_run off = {.stage = 2, .dtype = ZINC_FP32, .gas = 2, .train_batch = 24};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&off, &e, &m));
    if (!e) return zt_finish();
    int world = zinc_world_size(e), n = -1;
    ZT_OK(mlp_train_step(m, 0, NULL, NULL));
    ZT_OK(zinc_comms_summary(e, NULL, 0, &n));
    ZT_CHECK(n == 0, "comms_logger off: %d rows", n);
    ZT_OK(zinc_comms_log_summary(e));
    ZT_ERR(zinc_comms_summary(e, NULL, 3, &n), ZINC_ERR_INVALID_ARG, "NULL out");
    mlp_destroy(m);
    zinc_destroy(e);
    if (world < 2) return zt_skip("the volume checks need 2 or more ranks (at 1 zinc sends nothing)");
    for (int stage = 0; stage <= 3; stage++) check_stage(stage, world);
    return zt_finish();
}
