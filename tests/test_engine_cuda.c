/* The engine on the CUDA device (label gpu; exits 77 without a GPU or without the CUDA backend): the
 * equivalence matrix of test_engine_equiv.c on one rank — stages 0-3 x fp32/bf16/fp16, overlap_comm off
 * and on, plus CPU offload of the optimizer state (the host-staged step) — must match the CPU engine's
 * 1-rank stage-0 run within the same tolerances, and two identical CUDA runs must be bitwise equal.
 * The example MLP computes on the GPU (cuBLAS and its own kernels on the engine's compute stream); its
 * host path, which reaches the device buffers through zinc_copy_to_host / zinc_copy_from_host, is run
 * too at stage 0 and 3. The engine accepts device cuda only with ZINC_EXPERIMENTAL_CUDA=1, set here.
 * Under mpirun with more ranks than GPUs the ranks share a GPU and the collectives go through MPI with
 * pinned staging; the reference is then the cpu engine at the same rank count. Built against the CUDA
 * emulation (tests/cuda_emulated.cmake) the same program runs in CI without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device/device.h"
#include "engine_util.h"
#include "zt.h"

#define STEPS 8

static double tolerance(zinc_dtype t) { return t == ZINC_FP32 ? 1e-5 : 2e-2; }

static double maxdiff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

int main(void) {
    zt_name = "engine_cuda";
    if (zdev_cuda_count() == 0) return zt_skip("no GPU (or zinc built without the CUDA backend)");
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    static const char *offload = "\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}";
    for (int d = 0; d < 3; d++) {
        zinc_dtype t = dtypes[d];
        eu_run ref_run = {.stage = 0, .dtype = t};
        float *ref = NULL;
        size_t nref = 0;
        ZT_OK(eu_train(&ref_run, STEPS, &ref, &nref));
        if (!ref) continue;
        for (int stage = 0; stage <= 3; stage++) {
            /* overlap off, overlap on, cpu offload, the MLP computing on the host */
            static const char *names[4] = {"", "overlap", "offload", "mlp-host"};
            for (int variant = 0; variant < 4; variant++) {
                if (variant == 2 && stage == 0) continue;   /* offload needs stage >= 1 */
                if (variant == 3 && stage != 0 && stage != 3) continue;
                eu_run r = {.stage = stage, .dtype = t, .overlap_comm = variant == 1, .cuda = 1,
                            .zero_extra = variant == 2 ? offload : NULL,
                            .mlp_compute = variant == 3 ? MLP_COMPUTE_HOST : MLP_COMPUTE_AUTO};
                float *p = NULL, *q = NULL;
                size_t n = 0, n2 = 0;
                zinc_status st = eu_train(&r, STEPS, &p, &n);
                ZT_CHECK(st == ZINC_OK, "stage %d %s variant %d: %s", stage, eu_dtype_name(t), variant,
                         zinc_last_error());
                if (st != ZINC_OK) continue;
                ZT_CHECK(n == nref, "element count %zu vs reference %zu", n, nref);
                double md = n == nref ? maxdiff(p, ref, n) : INFINITY;
                ZT_CHECK(md <= tolerance(t), "cuda stage %d %s variant %d: max |diff| vs cpu %.3g > %.3g", stage,
                         eu_dtype_name(t), variant, md, tolerance(t));
                printf("cuda stage %d %-4s %-10s: max |diff| vs cpu 1-rank stage 0 = %.3g\n", stage, eu_dtype_name(t),
                       names[variant], md);
                if (variant == 0) {
                    ZT_OK(eu_train(&r, STEPS, &q, &n2));
                    ZT_CHECK(p && q && n == n2 && memcmp(p, q, n * sizeof(float)) == 0,
                             "cuda stage %d %s: two identical runs differ", stage, eu_dtype_name(t));
                }
                free(p);
                free(q);
            }
        }
        free(ref);
    }
    return zt_finish();
}
