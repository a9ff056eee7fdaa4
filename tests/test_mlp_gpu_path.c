/* The example MLP's GPU path (examples/mlp/mlp_cuda.c: cuBLAS products, mlp_kernels.cu) run on the host:
 * built against tests/cuda_host/, an emulation of the CUDA runtime and cuBLAS calls it makes, with the
 * plain-C versions of its kernels. It must train like the host path (mlp.c) on the same engine: every
 * stage x fp32/bf16/fp16, at 1 and 2 ranks, with an injected overflow (fp16) and gradient accumulation.
 * This checks the path's logic (matrix layouts, leading dimensions, buffer sizes, the order of its work,
 * that nothing reads a buffer it never wrote: emulated device memory starts as NaN) without a GPU; the
 * CUDA kernels and cuBLAS themselves run in test_engine_cuda on a GPU.
 *
 * Tolerance: the emulated products sum in a different order than the host loops (the bias last, not
 * first), so results differ by fp32 rounding, which 8 Adam steps carry into the weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host/cuda_runtime.h"
#include "engine_util.h"
#include "zt.h"

#define STEPS 8

typedef struct trained {
    float *w;
    size_t n;
    double loss[STEPS];
    zinc_step_info info[STEPS];
} trained;

static zinc_status train(const eu_run *r, trained *t) {
    zinc_engine *e = NULL;
    zinc_mlp *m = NULL;
    memset(t, 0, sizeof *t);
    zinc_status st = eu_create(r, &e, &m);
    if (st != ZINC_OK) return st;
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) {
        if (s == 3 && r->dtype == ZINC_FP16) zinc_mlp_inject_grad(m, INFINITY); /* a skipped step */
        zinc_mlp_metrics met;
        st = zinc_mlp_train_step(m, s, &t->info[s], &met);
        t->loss[s] = met.loss;
    }
    if (st == ZINC_OK) {
        t->n = (size_t)zinc_numel_total(e);
        t->w = malloc(t->n * sizeof(float));
        st = t->w ? zinc_gather_master(e, t->w, t->n) : ZINC_ERR_NOMEM;
    }
    zinc_mlp_destroy(m);
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

int main(void) {
    zt_name = "mlp_gpu_path";
    static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    /* fp32: rounding-order differences only; bf16/fp16: one ulp of a 16-bit weight can flip. */
    static const double tol[3] = {2e-5, 2e-2, 2e-2};
    const char *rank_env = getenv("OMPI_COMM_WORLD_RANK");
    int rank = rank_env ? atoi(rank_env) : 0;
    for (int d = 0; d < 3; d++)
        for (int stage = 0; stage <= 3; stage++) {
            eu_run host = {.stage = stage, .dtype = dtypes[d], .mlp_compute = ZINC_MLP_COMPUTE_HOST};
            eu_run gpu = host;
            gpu.mlp_compute = ZINC_MLP_COMPUTE_DEVICE;
            trained a, b;
            zinc_status sa = train(&host, &a), sb = train(&gpu, &b);
            ZT_CHECK(sa == ZINC_OK && sb == ZINC_OK, "stage %d %s: host %s, gpu path %s: %s", stage,
                     eu_dtype_name(dtypes[d]), zinc_status_name(sa), zinc_status_name(sb), zinc_last_error());
            const char *err = cuda_host_first_error();
            ZT_CHECK(!err, "stage %d %s: the emulation caught: %s", stage, eu_dtype_name(dtypes[d]), err ? err : "");
            ZT_CHECK(cuda_host_bytes_in_use() == 0, "stage %d %s: %zu bytes of emulated device memory leaked",
                     stage, eu_dtype_name(dtypes[d]), cuda_host_bytes_in_use());
            if (sa == ZINC_OK && sb == ZINC_OK && a.n == b.n) {
                double md = maxdiff(a.w, b.w, a.n), ml = 0;
                for (int s = 0; s < STEPS; s++) {
                    double dl = fabs(a.loss[s] - b.loss[s]);
                    if (!(dl <= ml)) ml = dl;
                    ZT_CHECK(a.info[s].taken == b.info[s].taken, "stage %d %s step %d: taken %d (host) vs %d (gpu path)",
                             stage, eu_dtype_name(dtypes[d]), s, a.info[s].taken, b.info[s].taken);
                }
                ZT_CHECK(md <= tol[d], "stage %d %s: max |weight diff| gpu path vs host %.3g > %.3g", stage,
                         eu_dtype_name(dtypes[d]), md, tol[d]);
                ZT_CHECK(ml <= 1e-3, "stage %d %s: max |loss diff| %.3g > 1e-3", stage, eu_dtype_name(dtypes[d]), ml);
                ZT_CHECK(dtypes[d] != ZINC_FP16 || (a.info[3].taken == 0 && b.info[3].taken == 0),
                         "stage %d fp16: the injected overflow was not skipped", stage);
                ZT_CHECK(isfinite(b.loss[STEPS - 1]) && b.loss[STEPS - 1] < b.loss[0],
                         "stage %d %s: the gpu path did not learn (loss %.4f -> %.4f)", stage,
                         eu_dtype_name(dtypes[d]), b.loss[0], b.loss[STEPS - 1]);
                if (rank == 0)
                    printf("stage %d %-4s: gpu path vs host: max |weight diff| %.3g, max |loss diff| %.3g\n", stage,
                           eu_dtype_name(dtypes[d]), md, ml);
            }
            free(a.w);
            free(b.w);
        }
    return zt_finish();
}
