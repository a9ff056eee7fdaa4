/* Offload equivalence: for ZeRO stages 1-3 and fp32/bf16/fp16, training with the optimizer state
 * offloaded to host memory (offload_optimizer.device "cpu") and to NVMe files (device "nvme") gives
 * BITWISE the same fp32 master weights as no offload, on this run's rank count (1-4 under mpirun).
 *
 * Why bitwise: all three stores hand the same Adam kernel the same fp32 values chunk by chunk, and the
 * kernel is elementwise, so chunking (sub_group_size 1024 here, so every rank has several chunks and
 * the NVMe pipeline's read-ahead, update and write-back overlap) cannot change a single bit; the NVMe
 * store only moves bytes through files (checked by CRC32C). Any difference is a bug, not rounding.
 *
 * The NVMe runs write under $ZINC_BINARY_DIR/offload_equiv_nvme with varied aio settings and buffer
 * counts; where that file system refuses O_DIRECT the test reports a skip (77). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"
#include "offload/aio.h"
#include "zt.h"

#define STEPS 6

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_WARN};

static mlp_config model(void) {
    mlp_config c = eu_model();
    c.hidden = 96; /* ~11.4k parameters: 12 chunks of 1024 on one rank, 3 on four */
    return c;
}

/* Trains STEPS steps with the given zero_optimization additions and top-level extras; returns the
 * gathered master weights (malloc'd) or NULL. */
static float *train(int stage, zinc_dtype t, const char *zero_extra, const char *extra, size_t *n, int *rank,
                    int *world, int64_t *nvme_bytes) {
    char cfg[8192];
    eu_run r = {.stage = stage, .dtype = t, .overlap_comm = stage >= 2, .zero_extra = zero_extra, .extra = extra};
    eu_config(&r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = eu_device(&r);
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    float *w = NULL;
    zinc_status st = zinc_create(&o, &e);
    ZT_OK(st);
    if (st != ZINC_OK) return NULL;
    *rank = zinc_rank(e);
    *world = zinc_world_size(e);
    mlp_config mc = model();
    st = mlp_create(e, &mc, &m);
    ZT_OK(st);
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) {
        st = mlp_train_step(m, s, NULL, NULL);
        ZT_OK(st);
    }
    if (st == ZINC_OK) {
        zinc_memory_report rep;
        zinc_memory_get(e, &rep);
        *nvme_bytes = (int64_t)rep.current[ZINC_MEMKIND_NVME][ZINC_MEM_MASTER];
        *n = (size_t)zinc_numel_total(e);
        w = malloc(*n * sizeof *w);
        st = zinc_gather_master(e, w, *n);
        ZT_OK(st);
        if (st != ZINC_OK) {
            free(w);
            w = NULL;
        }
    }
    mlp_destroy(m);
    zinc_destroy(e);
    return w;
}

static size_t first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) return i;
    return n;
}

int main(void) {
    zt_name = "offload_equiv";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/offload_equiv_nvme", zt_build_dir());
    mkdir(dir, 0700);
    if (!zt_direct_io_supported(dir)) {
        rmdir(dir);
        return zt_skip("the build directory's file system refuses O_DIRECT: NVMe offload not checked here");
    }
    static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    /* Varied IO settings: the tightest pipeline (3 buffers) with tiny blocks and queue, a deeper one,
     * and DeepSpeed's sequential/single-submit modes. */
    static const char *const aio[3] = {
        "\"aio\": {\"block_size\": 4096, \"queue_depth\": 2, \"intra_op_parallelism\": 1}",
        "\"aio\": {\"block_size\": 1048576, \"queue_depth\": 8, \"intra_op_parallelism\": 2}",
        "\"aio\": {\"block_size\": 8192, \"queue_depth\": 4, \"intra_op_parallelism\": 3, \"single_submit\": true, "
        "\"overlap_events\": false}"};
    static const int buffers[3] = {3, 5, 4};
    for (int stage = 1; stage <= 3; stage++)
        for (int d = 0; d < 3; d++) {
            zinc_dtype t = dtypes[d];
            char z_none[256], z_cpu[512], z_nvme[4600];
            snprintf(z_none, sizeof z_none, "\"sub_group_size\": 1024");
            snprintf(z_cpu, sizeof z_cpu,
                     "\"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": %s}",
                     d == 1 ? "true" : "false");
            snprintf(z_nvme, sizeof z_nvme,
                     "\"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", "
                     "\"buffer_count\": %d}",
                     dir, buffers[(stage + d) % 3]);
            size_t n0 = 0, n1 = 0, n2 = 0;
            int rank = 0, world = 1;
            int64_t nv0 = 0, nv1 = 0, nv2 = 0;
            float *w0 = train(stage, t, z_none, NULL, &n0, &rank, &world, &nv0);
            float *w1 = train(stage, t, z_cpu, NULL, &n1, &rank, &world, &nv1);
            float *w2 = train(stage, t, z_nvme, aio[(stage + d) % 3], &n2, &rank, &world, &nv2);
            if (w0 && w1 && w2) {
                ZT_CHECK(n0 == n1 && n0 == n2, "element counts %zu %zu %zu", n0, n1, n2);
                size_t d1 = first_diff(w0, w1, n0), d2 = first_diff(w0, w2, n0);
                ZT_CHECK(d1 == n0,
                         "ranks %d stage %d %s: cpu offload differs from no offload at element %zu (%.9g vs %.9g)",
                         world, stage, eu_dtype_name(t), d1, d1 < n0 ? w1[d1] : 0.0, d1 < n0 ? w0[d1] : 0.0);
                ZT_CHECK(d2 == n0,
                         "ranks %d stage %d %s: nvme offload differs from no offload at element %zu (%.9g vs %.9g)",
                         world, stage, eu_dtype_name(t), d2, d2 < n0 ? w2[d2] : 0.0, d2 < n0 ? w0[d2] : 0.0);
                ZT_CHECK(nv0 == 0 && nv1 == 0 && nv2 > 0, "NVMe master bytes: none %lld, cpu %lld, nvme %lld",
                         (long long)nv0, (long long)nv1, (long long)nv2);
                if (rank == 0)
                    printf("ranks %d stage %d %-4s: cpu offload %s, nvme offload %s no offload (%zu weights, %d "
                           "buffers, %s)\n",
                           world, stage, eu_dtype_name(t), d1 == n0 ? "==" : "!=", d2 == n0 ? "==" : "!=", n0,
                           buffers[(stage + d) % 3], aio[(stage + d) % 3] + 8);
            }
            free(w0);
            free(w1);
            free(w2);
        }
    rmdir(dir); /* fails while a concurrent run still has its directory there */
    return zt_finish();
}
