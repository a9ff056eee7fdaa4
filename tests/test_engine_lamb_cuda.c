/* LAMB on the CUDA device through the engine (issue 14) against the same run on the cpu device, at this
 * run's rank count: ZeRO stages 0-3 (stages 1-3 split tensors across ranks: the norms are the whole
 * tensor's), fp32, bf16 and fp16 with dynamic loss scaling, the optimizer state on the device and offloaded
 * to host memory (sub_group_size small enough that tensors straddle chunks: the offloaded step stages
 * gradients down and parameters up in both passes) and at stage 2 to NVMe files, and in fp16 an overflow injected on the last rank at
 * step 2, which every rank must skip (parameters untouched, the loss scale halved: hysteresis 1) from the
 * gradient statistics before training on. The
 * example MLP computes on the host in both runs (MLP_COMPUTE_HOST), so the gradients are the same
 * bits and any difference is the optimizer's.
 *
 *   - On the CUDA emulation (ZINC_CUDA_EMULATED=1, tests/cuda_emulated.cmake), whose LAMB launchers run
 *     the cpu device's kernels, the runs must be bitwise equal: what differs is only the host code (device
 *     buffers, the norms buffer and its download, staging, streams).
 *   - On a GPU the sums pass adds in the kernel's own fixed order (within ~1e-12 relative of the CPU's),
 *     which can move a trust ratio by an ulp: tolerance 1e-5 (fp32) / 2e-2 (bf16, fp16) on the master
 *     weights, those of test_engine_cuda.c.
 * Also: two cuda runs are bitwise equal, and the device memory the step used under "other" is the sizing
 * plan's (the decay mask and LAMB's per-tensor norms, ZPLAN_TENSOR_SUMS). Exits 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/device/device.h"
#include "runtime/engine/engine_internal.h"
#include "engine_util.h"
#include "zt.h"

#define STEPS 6
#define OVERFLOW_STEP 2

static const char *LAMB = "{\"type\": \"Lamb\", \"params\": {\"lr\": 0.01, \"betas\": [0.9, 0.999], \"eps\": 1e-6, "
                          "\"weight_decay\": 0.01, \"max_coeff\": 10.0, \"min_coeff\": 0.01}}";
static const char *OFFLOAD = "\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}, "
                             "\"sub_group_size\": 1000";
static char g_nvme[1400]; /* the same to NVMe files under the build directory (buffered IO where O_DIRECT is refused) */

static int g_emulated, g_rank;

static double tolerance(zinc_dtype t) { return g_emulated ? 0 : t == ZINC_FP32 ? 1e-5 : 2e-2; }

typedef struct result {
    float *w;
    size_t n;
    int64_t skipped;
    float scale_before, scale_after; /* around the overflow step */
    int skip_kept_params;            /* the skipped step left the master weights bitwise as they were */
} result;

static float *master(zinc_engine *e, size_t *n) {
    *n = (size_t)zinc_numel_total(e);
    float *p = malloc(*n * sizeof *p);
    if (p && zinc_gather_master(e, p, *n) != ZINC_OK) {
        free(p);
        return NULL;
    }
    return p;
}

/* The device memory under "other" at the steps' peak equals the plan's (cuda runs). */
static void check_memory(zinc_engine *e, const char *what) {
    zinc_memory_report rep;
    ZT_OK(zinc_memory_get(e, &rep));
    uint64_t want[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(&e->plan, ZPLAN_IN_STEP, want);
    uint64_t got = rep.peak[ZINC_MEMKIND_DEVICE][ZINC_MEM_OTHER];
    ZT_CHECK(got == want[ZINC_MEMKIND_DEVICE][ZINC_MEM_OTHER], "%s: device memory \"other\" peaked at %llu, plan %llu",
             what, (unsigned long long)got, (unsigned long long)want[ZINC_MEMKIND_DEVICE][ZINC_MEM_OTHER]);
    bool offload = e->cfg.zero.offload_optimizer.device != ZOFFLOAD_NONE;
    ZT_CHECK((e->plan.buf[ZPLAN_TENSOR_SUMS].bytes > 0) == !offload,
             "%s: the plan has %llu bytes of LAMB norms in device memory (expected %s)", what,
             (unsigned long long)e->plan.buf[ZPLAN_TENSOR_SUMS].bytes, offload ? "none" : "some");
}

static zinc_status train(const eu_run *base, int cuda, const char *what, result *out) {
    eu_run r = *base;
    r.cuda = cuda;
    r.mlp_compute = MLP_COMPUTE_HOST;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    memset(out, 0, sizeof *out);
    zinc_status st = eu_create(&r, &e, &m);
    if (st != ZINC_OK) return st;
    g_rank = zinc_rank(e);
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) {
        bool inject = r.dtype == ZINC_FP16 && s == OVERFLOW_STEP;
        float *before = NULL;
        size_t n;
        if (inject) {
            before = master(e, &n);
            out->scale_before = zinc_loss_scale(e);
            if (zinc_rank(e) == zinc_world_size(e) - 1) mlp_inject_grad(m, INFINITY);
        }
        zinc_step_info info;
        st = mlp_train_step(m, s, &info, NULL);
        if (st == ZINC_OK && inject) {
            out->scale_after = info.loss_scale;
            float *after = master(e, &n);
            out->skip_kept_params = !info.taken && before && after && !memcmp(before, after, n * sizeof(float));
            free(after);
        }
        if (st == ZINC_OK) out->skipped = info.steps_skipped;
        free(before);
    }
    if (st == ZINC_OK && cuda) check_memory(e, what);
    if (st == ZINC_OK) out->w = master(e, &out->n);
    if (st == ZINC_OK && !out->w) st = ZINC_ERR_NOMEM;
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}

static double maxdiff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

static void run_case(int stage, zinc_dtype t, int offload) {
    char what[160];
    snprintf(what, sizeof what, "Lamb stage %d %s%s", stage, zinc_dtype_name(t),
             offload == 2 ? " offload nvme"
             : offload    ? " offload cpu"
                          : "");
    eu_run r = {.stage = stage,
                .dtype = t,
                .optimizer = LAMB,
                .zero_extra = offload == 2 ? g_nvme
                              : offload    ? OFFLOAD
                                           : NULL,
                .extra = offload == 2 ? "\"zinc\": {\"allow_buffered_io\": true}" : NULL,
                .fp16_extra = "\"hysteresis\": 1"}; /* the overflow halves the scale at once */
    result cpu, gpu, again;
    zinc_status st = train(&r, 0, what, &cpu);
    ZT_CHECK(st == ZINC_OK, "%s on the cpu device: %s", what, zinc_last_error());
    if (st != ZINC_OK) return;
    st = train(&r, 1, what, &gpu);
    ZT_CHECK(st == ZINC_OK, "%s on the cuda device: %s", what, zinc_last_error());
    if (st != ZINC_OK) {
        free(cpu.w);
        return;
    }
    ZT_CHECK(gpu.n == cpu.n, "%s: %zu weights on cuda, %zu on cpu", what, gpu.n, cpu.n);
    double d = gpu.n == cpu.n ? maxdiff(gpu.w, cpu.w, gpu.n) : INFINITY;
    bool same = gpu.n == cpu.n && !memcmp(gpu.w, cpu.w, gpu.n * sizeof(float));
    if (g_emulated)
        ZT_CHECK(same, "%s: the emulated cuda run differs from the cpu run (max |diff| %.3g; must be bitwise)", what,
                 d);
    else
        ZT_CHECK(d <= tolerance(t), "%s: max |cuda - cpu| %.3g > %.3g", what, d, tolerance(t));
    if (t == ZINC_FP16) {
        ZT_CHECK(gpu.skipped == 1 && cpu.skipped == 1, "%s: steps skipped: cuda %lld, cpu %lld (expected 1)", what,
                 (long long)gpu.skipped, (long long)cpu.skipped);
        ZT_CHECK(gpu.skip_kept_params, "%s: the overflowed step was taken or changed the parameters on cuda", what);
        ZT_CHECK(gpu.scale_after == gpu.scale_before / 2 && gpu.scale_after == cpu.scale_after,
                 "%s: loss scale around the overflow on cuda %g -> %g (cpu -> %g)", what, (double)gpu.scale_before,
                 (double)gpu.scale_after, (double)cpu.scale_after);
    } else {
        ZT_CHECK(gpu.skipped == 0, "%s: %lld steps skipped on cuda", what, (long long)gpu.skipped);
    }
    if (!offload && stage % 2 == 0) { /* deterministic: the same run twice, the same bits */
        st = train(&r, 1, what, &again);
        ZT_CHECK(st == ZINC_OK && again.n == gpu.n && !memcmp(again.w, gpu.w, gpu.n * sizeof(float)),
                 "%s: two cuda runs differ", what);
        free(again.w);
    }
    if (g_rank == 0) printf("%-32s max |cuda - cpu| = %.3g%s\n", what, d, same ? " (bitwise equal)" : "");
    free(cpu.w);
    free(gpu.w);
}

int main(void) {
    zt_name = "engine_lamb_cuda";
    if (zdev_cuda_count() == 0) return zt_skip("no GPU (or zinc built without the CUDA backend)");
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    const char *emu = getenv("ZINC_CUDA_EMULATED");
    g_emulated = emu && !strcmp(emu, "1");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/lamb_cuda_nvme", zt_build_dir());
    mkdir(dir, 0700);
    snprintf(g_nvme, sizeof g_nvme,
             "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}, \"sub_group_size\": 1000", dir);
    static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_FP16, ZINC_BF16};
    for (int di = 0; di < 3; di++)
        for (int stage = 0; stage <= 3; stage++)
            for (int offload = 0; offload <= (stage > 0 ? 2 : 0); offload++) {
                if (dtypes[di] == ZINC_BF16 && offload) continue; /* bf16: the device path only */
                if (offload == 2 && stage != 2) continue;         /* nvme: one stage */
                run_case(stage, dtypes[di], offload);
            }
    return zt_finish();
}
