/* GPU Adam benchmarks: the fused kernel over one flat shard, over the GPT-2 124M shapes in one flat
 * buffer, and the whole one-rank step (grad stats + finalize + Adam) against Adam alone.
 *
 *   bench_adam_cuda [--n 1e9] [--iters 20] [--skip-flat]
 *
 * Method: CUDA events around each launch on one stream, 3 warm-up runs, the median of --iters timed runs;
 * inputs are random on the device (zcu_fill_random, never zeros) and the gradient is refilled with a new
 * seed before every timed run (outside the timed region); sizes far past the L2. The device-copy ceiling
 * is a 1 GiB cudaMemcpyAsync device-to-device, read + written bytes counted. Output: one line per case,
 *   zinc-bench case=NAME n=N gdt=T pdt=T bpp=B ms=X gbps=Y pct_ceiling=Z [extra=...]
 * Exit 77 without a GPU, and in a build without the CUDA backend (where this file compiles to a stub). */
#ifndef ZINC_HAVE_CUDA
#include <stdio.h>
int main(void) {
    fprintf(stderr, "bench_adam_cuda: zinc was built without CUDA, skipped\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

#define CU(call)                                                                                           \
    do {                                                                                                   \
        cudaError_t e_ = (call);                                                                           \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "bench_adam_cuda: %s:%d %s: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorString(e_));                                                               \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)
#define ZCU(call)                                                                                          \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        if (rc_) {                                                                                         \
            fprintf(stderr, "bench_adam_cuda: %s:%d %s: %s\n", __FILE__, __LINE__, #call,                   \
                    zcu_error_string(rc_));                                                                \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static int g_iters = 20;
static cudaStream_t g_stream;
static cudaEvent_t g_ev0, g_ev1;
static double g_ceiling_gbps;
static uint64_t g_seed = 12345;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One case: `run` enqueues the timed work, `refresh` (optional) enqueues untimed input refresh. */
typedef void (*work_fn)(void *ctx);
static double time_median(work_fn run, work_fn refresh, void *ctx) {
    double *t = calloc((size_t)g_iters, sizeof *t);
    if (!t) exit(1);
    for (int i = 0; i < 3; i++) {
        if (refresh) refresh(ctx);
        run(ctx);
    }
    CU(cudaStreamSynchronize(g_stream));
    for (int i = 0; i < g_iters; i++) {
        if (refresh) refresh(ctx);
        CU(cudaEventRecord(g_ev0, g_stream));
        run(ctx);
        CU(cudaEventRecord(g_ev1, g_stream));
        CU(cudaEventSynchronize(g_ev1));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, g_ev0, g_ev1));
        t[i] = ms;
    }
    qsort(t, (size_t)g_iters, sizeof *t, cmp_double);
    double med = t[g_iters / 2];
    free(t);
    return med;
}

/* ------------------------------------------------------------------ device copy ceiling */

typedef struct { void *a, *b; size_t bytes; } copy_ctx;
static void run_copy(void *p) {
    copy_ctx *c = p;
    CU(cudaMemcpyAsync(c->b, c->a, c->bytes, cudaMemcpyDeviceToDevice, g_stream));
}

static void measure_ceiling(void) {
    copy_ctx c = {NULL, NULL, (size_t)1 << 30};
    CU(cudaMalloc(&c.a, c.bytes));
    CU(cudaMalloc(&c.b, c.bytes));
    ZCU(zcu_fill_random(c.a, ZINC_FP32, c.bytes / 4, 7, -1.0f, 1.0f, g_stream));
    double ms = time_median(run_copy, NULL, &c);
    g_ceiling_gbps = 2.0 * (double)c.bytes / ms / 1e6;
    printf("zinc-bench case=device_copy bytes=%zu ms=%.4f gbps=%.1f\n", c.bytes, ms, g_ceiling_gbps);
    fflush(stdout);
    CU(cudaFree(c.a));
    CU(cudaFree(c.b));
}

/* ------------------------------------------------------------------ Adam */

typedef struct {
    size_t n;
    float *master, *m, *v;
    void *grad, *out;
    zinc_dtype gdt, pdt;
    int has_out;
    uint8_t *mask;
    zadam_device_params *dparams;
    /* for the whole step */
    void *ws;
    zcu_grad_stats_result *stats;
    zcu_finalize_args fa;
} adam_ctx;

static void refresh_grad(void *p) {
    adam_ctx *c = p;
    ZCU(zcu_fill_random(c->grad, c->gdt, c->n, ++g_seed, -1.0f, 1.0f, g_stream));
}
static void run_adam(void *p) {
    adam_ctx *c = p;
    ZCU(zcu_adam_step(c->dparams, c->n, c->master, c->m, c->v, c->grad, c->gdt, c->has_out ? c->out : NULL, c->pdt,
                      c->mask, g_stream));
}
static void run_step(void *p) {
    adam_ctx *c = p;
    ZCU(zcu_grad_stats(c->grad, c->gdt, c->n, c->ws, c->stats, 0, g_stream));
    /* one rank: the cross-rank all-reduce of the statistics and the parameter all-gather are no-ops */
    ZCU(zcu_adam_finalize(c->stats, NULL, c->fa, c->dparams, g_stream));
    run_adam(p);
}

static void init_state(adam_ctx *c) {
    ZCU(zcu_fill_random(c->master, ZINC_FP32, c->n, 1, -1.0f, 1.0f, g_stream));
    ZCU(zcu_fill_random(c->m, ZINC_FP32, c->n, 2, -0.01f, 0.01f, g_stream));
    ZCU(zcu_fill_random(c->v, ZINC_FP32, c->n, 3, 1e-6f, 1e-4f, g_stream));
    zadam_device_params hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.01f, 1.0f / 65536.0f, 1, 0, 0.0f, 1.0f};
    CU(cudaMemcpyAsync(c->dparams, &hp, sizeof hp, cudaMemcpyHostToDevice, g_stream));
    memset(&c->fa, 0, sizeof c->fa);
    c->fa.lr = 1e-3f; c->fa.beta1 = 0.9f; c->fa.beta2 = 0.999f; c->fa.eps = 1e-8f; c->fa.weight_decay = 0.1f;
    c->fa.bias_correction1 = 0.1f; c->fa.bias_correction2 = 0.01f; c->fa.adamw = 1; c->fa.clip = 1.0f;
    c->fa.base_factor = 1.0f / 65536.0f;
    CU(cudaStreamSynchronize(g_stream));
}

static void report(const char *name, const adam_ctx *c, double bpp, double ms, const char *extra) {
    double gbps = (double)c->n * bpp / ms / 1e6;
    printf("zinc-bench case=%s n=%zu gdt=%s pdt=%s bpp=%.0f ms=%.4f gbps=%.1f pct_ceiling=%.1f%s%s\n", name, c->n,
           zinc_dtype_name(c->gdt), c->has_out ? zinc_dtype_name(c->pdt) : "none", bpp, ms, gbps,
           100.0 * gbps / g_ceiling_gbps, extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

static double bytes_per_param(const adam_ctx *c) {
    return 24.0 + (double)zinc_dtype_size(c->gdt) + (c->has_out ? (double)zinc_dtype_size(c->pdt) : 0.0);
}

/* Runs the Adam variants and the whole step over one prepared layout. */
static void run_cases(const char *prefix, adam_ctx *c) {
    static const struct { zinc_dtype g, p; int out; const char *tag; } variants[] = {
        {ZINC_BF16, ZINC_BF16, 1, "bf16"},      /* mixed precision: 28 B/param */
        {ZINC_FP32, ZINC_FP32, 0, "fp32"},      /* all fp32, in place: 28 B/param, torch's fused AdamW case */
        {ZINC_FP32, ZINC_FP32, 1, "fp32_copy"}, /* all fp32 plus an fp32 param copy: 32 B/param */
    };
    char name[96], extra[128];
    double adam_bf16_ms = 0;
    for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
        c->gdt = variants[k].g;
        c->pdt = variants[k].p;
        c->has_out = variants[k].out;
        init_state(c);
        double ms = time_median(run_adam, refresh_grad, c);
        snprintf(name, sizeof name, "%s_adam_%s", prefix, variants[k].tag);
        report(name, c, bytes_per_param(c), ms, NULL);
        if (k == 0) adam_bf16_ms = ms;
    }
    /* whole step, bf16 grads and param copy */
    c->gdt = ZINC_BF16;
    c->pdt = ZINC_BF16;
    c->has_out = 1;
    init_state(c);
    double ms = time_median(run_step, refresh_grad, c);
    snprintf(name, sizeof name, "%s_step_bf16", prefix);
    snprintf(extra, sizeof extra, "adam_ms=%.4f ratio=%.3f", adam_bf16_ms, ms / adam_bf16_ms);
    report(name, c, bytes_per_param(c) + 2.0, ms, extra);
}

static void alloc_ctx(adam_ctx *c, size_t n) {
    memset(c, 0, sizeof *c);
    c->n = n;
    CU(cudaMalloc((void **)&c->master, n * 4));
    CU(cudaMalloc((void **)&c->m, n * 4));
    CU(cudaMalloc((void **)&c->v, n * 4));
    CU(cudaMalloc(&c->grad, n * 4));
    CU(cudaMalloc(&c->out, n * 4));
    CU(cudaMalloc((void **)&c->dparams, sizeof *c->dparams));
    CU(cudaMalloc(&c->ws, zcu_grad_stats_workspace_bytes()));
    CU(cudaMalloc((void **)&c->stats, sizeof *c->stats));
}
static void free_ctx(adam_ctx *c) {
    cudaFree(c->master); cudaFree(c->m); cudaFree(c->v); cudaFree(c->grad); cudaFree(c->out);
    cudaFree(c->dparams); cudaFree(c->ws); cudaFree(c->stats); cudaFree(c->mask);
}

/* GPT-2 124M shapes (L=12, C=768, V=50304, T=1024), as torch_adam.py's gpt2_shapes: 148 tensors. */
static size_t gpt2_layout(uint8_t **mask_out, size_t *real_out, int *ntensors) {
    const size_t L = 12, C = 768, V = 50304, T = 1024;
    size_t shapes[160][2];
    int nt = 0;
#define ADD(a, b) (shapes[nt][0] = (a), shapes[nt][1] = (b), nt++)
    ADD(V, C);
    ADD(T, C);
    for (size_t l = 0; l < L; l++) {
        ADD(C, 0); ADD(C, 0); ADD(3 * C, C); ADD(3 * C, 0); ADD(C, C); ADD(C, 0);
        ADD(C, 0); ADD(C, 0); ADD(4 * C, C); ADD(4 * C, 0); ADD(C, 4 * C); ADD(C, 0);
    }
    ADD(C, 0);
    ADD(C, 0);
#undef ADD
    size_t off = 0, real = 0;
    for (int i = 0; i < nt; i++) {
        size_t numel = shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1);
        real += numel;
        off += (numel + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP * ZADAM_MASK_GROUP;
    }
    uint8_t *mask = calloc(off / ZADAM_MASK_GROUP, 1);
    if (!mask) exit(1);
    size_t pos = 0;
    for (int i = 0; i < nt; i++) {
        size_t numel = shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1);
        size_t groups = (numel + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP;
        memset(mask + pos / ZADAM_MASK_GROUP, shapes[i][1] ? 1 : 0, groups); /* decay only 2-D weights */
        pos += groups * ZADAM_MASK_GROUP;
    }
    *mask_out = mask;
    *real_out = real;
    *ntensors = nt;
    return off;
}

int main(int argc, char **argv) {
    size_t n = 1000000000;
    int skip_flat = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) n = (size_t)strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) g_iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip-flat")) skip_flat = 1;
        else {
            fprintf(stderr, "usage: %s [--n 1e9] [--iters 20] [--skip-flat]\n", argv[0]);
            return 2;
        }
    }
    if (g_iters < 1) g_iters = 1;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= 0) {
        fprintf(stderr, "bench_adam_cuda: no CUDA device, skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("zinc-bench case=device name=\"%s\" sms=%d mem_gib=%.1f iters=%d\n", prop.name, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1 << 30), g_iters);
    CU(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CU(cudaEventCreate(&g_ev0));
    CU(cudaEventCreate(&g_ev1));
    measure_ceiling();

    adam_ctx c;
    if (!skip_flat) {
        alloc_ctx(&c, n);
        run_cases("flat", &c);
        free_ctx(&c);
    }

    uint8_t *hmask;
    size_t real;
    int nt;
    size_t padded = gpt2_layout(&hmask, &real, &nt);
    alloc_ctx(&c, padded);
    CU(cudaMalloc((void **)&c.mask, padded / ZADAM_MASK_GROUP));
    CU(cudaMemcpy(c.mask, hmask, padded / ZADAM_MASK_GROUP, cudaMemcpyHostToDevice));
    printf("zinc-bench case=gpt2_layout tensors=%d params=%zu padded=%zu\n", nt, real, padded);
    run_cases("gpt2", &c);
    free_ctx(&c);
    free(hmask);
    return 0;
}

#endif /* ZINC_HAVE_CUDA */
