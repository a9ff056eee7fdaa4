/* The CUDA LAMB kernels (kernels/lamb.cu: zcu_lamb_sums, zcu_lamb_apply) against their CPU references
 * (zlamb_sums_ref, zlamb_apply_ref), on fresh random state. Exits 77 without a CUDA device. Built twice:
 * against CUDA (label gpu), and against the host emulation of CUDA (tests/cuda_host, label cuda-emulated),
 * where the launchers check their arguments and spans and run the CPU reference on the stream: there it
 * tests the launcher contract (argument errors, n = 0, accumulate, the sums pass leaving the state as it is,
 * every param_out element written), not the device code.
 *
 * Cases: gradients fp32/fp16/bf16 x param_out fp32/fp16/bf16/none x eps inside/outside the root x weight
 * decay 0/0.01 x decay mask none/random, sizes 1, 7, 4099 and 300001, pointers aligned, all shifted by one
 * element (vector path after a peeled head) and shifted by different counts (scalar fallback). Checks:
 * apply bit-equal to the reference (master, m, v, param_out, which is poisoned first); the sums within
 * 1e-12 relative of the reference (double sums in another order), the same when the tensor is given as two
 * pieces with accumulate, and bitwise equal on a second run (no atomics); the state unchanged by the sums. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"
#include "zt_cuda.h"

static uint64_t rng;

#define LAUNCH(call) ZT_CHECK((call) == 0, "%s failed", #call)

static void *dalloc(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    CU(cudaMemset(p, 0xFF, bytes ? bytes : 1));
    return p;
}
static void h2d(void *d, const void *h, size_t b) { CU(cudaMemcpy(d, h, b, cudaMemcpyHostToDevice)); }
static void d2h(void *h, const void *d, size_t b) { CU(cudaMemcpy(h, d, b, cudaMemcpyDeviceToHost)); }
static int rel_ok(double a, double b, double rtol) { return fabs(a - b) <= rtol * fabs(b); }

static void store(void *buf, zinc_dtype t, size_t i, float x) {
    if (t == ZINC_FP32) ((float *)buf)[i] = x;
    else if (t == ZINC_FP16) ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x);
    else ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x);
}

/* Element offsets of master, m, v, grad, param_out from their allocations. */
typedef struct offsets { size_t p, m, v, g, o; } offsets;
static const offsets k_offsets[3] = {{0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {1, 0, 3, 2, 1}};

typedef struct lcase {
    zinc_dtype gdt;
    int pdt; /* 3: none */
    int inside, use_mask;
    float wd;
} lcase;

static void run_case(const lcase *c, size_t n, const offsets *o, void *ws, double *dout) {
    char name[160];
    snprintf(name, sizeof name, "n=%zu grad=%s out=%s inside=%d wd=%g mask=%d offsets=%zu,%zu,%zu,%zu,%zu", n,
             zinc_dtype_name(c->gdt), c->pdt == 3 ? "none" : zinc_dtype_name((zinc_dtype)c->pdt), c->inside,
             (double)c->wd, c->use_mask, o->p, o->m, o->v, o->g, o->o);
    const zinc_dtype pdt = c->pdt == 3 ? ZINC_FP32 : (zinc_dtype)c->pdt;
    const size_t gsz = zinc_dtype_size(c->gdt), psz = zinc_dtype_size(pdt), nm = (n + 7) / 8;
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4), *po = malloc(n * 4);
    float *xp = malloc(n * 4), *xm = malloc(n * 4), *xv = malloc(n * 4), *xpo = malloc(n * 4);
    void *g = malloc(n * 4);
    uint8_t *mask = malloc(nm);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)(0.3 * zt_rand_normal(&rng));
        m[i] = (float)(0.01 * zt_rand_normal(&rng));
        v[i] = (float)(1e-4 * zt_rand_uniform(&rng));
        store(g, c->gdt, i, (float)(0.1 * zt_rand_normal(&rng)));
    }
    for (size_t i = 0; i < nm; i++) mask[i] = (uint8_t)(zt_rand_u64(&rng) % 3 != 0);
    const uint8_t *hmask = c->use_mask ? mask : NULL;
    zlamb_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = c->wd,
                       .grad_factor = 0.5f, .bias_correction1 = 1 - pow(0.9f, 3), .bias_correction2 = 1 - pow(0.999f, 3),
                       .max_coeff = 10.0f, .min_coeff = 0.01f, .eps_inside_sqrt = c->inside};

    char *dp = dalloc((n + o->p) * 4), *dm = dalloc((n + o->m) * 4), *dv = dalloc((n + o->v) * 4);
    char *dg = dalloc((n + o->g) * gsz), *dpo = dalloc((n + o->o) * psz), *dmask = dalloc(nm);
    float *P = (float *)dp + o->p, *M = (float *)dm + o->m, *V = (float *)dv + o->v;
    void *G = dg + o->g * gsz, *PO = c->pdt == 3 ? NULL : dpo + o->o * psz;
    h2d(P, p, n * 4), h2d(M, m, n * 4), h2d(V, v, n * 4), h2d(G, g, n * gsz), h2d(dmask, mask, nm);
    const uint8_t *dmk = c->use_mask ? (const uint8_t *)dmask : NULL;

    /* sums: whole, again (same bits), and as two pieces accumulated */
    double w, u, s1[2], s2[2], s3[2];
    zlamb_sums_ref(&h, n, p, m, v, g, c->gdt, hmask, &w, &u);
    LAUNCH(zcu_lamb_sums(&h, n, P, M, V, G, c->gdt, dmk, ws, dout, 0, NULL));
    d2h(s1, dout, sizeof s1);
    LAUNCH(zcu_lamb_sums(&h, n, P, M, V, G, c->gdt, dmk, ws, dout, 0, NULL));
    d2h(s2, dout, sizeof s2);
    const size_t half = (n / 2) & ~(size_t)7; /* pieces start on mask groups */
    LAUNCH(zcu_lamb_sums(&h, half, P, M, V, G, c->gdt, dmk, ws, dout, 0, NULL));
    LAUNCH(zcu_lamb_sums(&h, n - half, P + half, M + half, V + half, (char *)G + half * gsz, c->gdt,
                         dmk ? dmk + half / 8 : NULL, ws, dout, 1, NULL));
    d2h(s3, dout, sizeof s3);
    ZT_CHECK(rel_ok(s1[0], w, 1e-12) && rel_ok(s1[1], u, 1e-12), "%s: sums %.17g %.17g vs the reference's %.17g %.17g",
             name, s1[0], s1[1], w, u);
    ZT_CHECK(!memcmp(s1, s2, sizeof s1), "%s: two runs of the sums differ", name);
    ZT_CHECK(rel_ok(s3[0], w, 1e-12) && rel_ok(s3[1], u, 1e-12), "%s: sums of two pieces %.17g %.17g vs %.17g %.17g",
             name, s3[0], s3[1], w, u);
    d2h(xp, P, n * 4), d2h(xm, M, n * 4), d2h(xv, V, n * 4);
    ZT_CHECK(!memcmp(xp, p, n * 4) && !memcmp(xm, m, n * 4) && !memcmp(xv, v, n * 4), "%s: the sums wrote the state",
             name);

    /* apply with the reference's coefficient */
    const float coeff = zlamb_coeff(&h, w, u);
    zlamb_apply_ref(&h, coeff, n, p, m, v, g, c->gdt, c->pdt == 3 ? NULL : po, pdt, hmask);
    LAUNCH(zcu_lamb_apply(&h, coeff, n, P, M, V, G, c->gdt, PO, pdt, dmk, NULL));
    d2h(xp, P, n * 4), d2h(xm, M, n * 4), d2h(xv, V, n * 4);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&xp[i], &p[i], 4) || memcmp(&xm[i], &m[i], 4) || memcmp(&xv[i], &v[i], 4);
    ZT_CHECK(bad == 0, "%s: apply differs from the reference in %zu of %zu elements", name, bad, n);
    if (PO) {
        d2h(xpo, PO, n * psz);
        ZT_CHECK(!memcmp(xpo, po, n * psz), "%s: param_out differs from the reference (or was not written)", name);
    }
    CU(cudaFree(dp));
    CU(cudaFree(dm));
    CU(cudaFree(dv));
    CU(cudaFree(dg));
    CU(cudaFree(dpo));
    CU(cudaFree(dmask));
    free(p), free(m), free(v), free(po), free(xp), free(xm), free(xv), free(xpo), free(g), free(mask);
}

static void test_args(void *ws, double *dout) {
    zlamb_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .grad_factor = 1,
                       .bias_correction1 = 1, .bias_correction2 = 1, .max_coeff = 10, .min_coeff = 0.01f};
    float *d = dalloc(64 * 4);
    ZT_CHECK(zcu_lamb_apply(NULL, 1, 4, d, d, d, d, ZINC_FP32, NULL, ZINC_FP32, NULL, NULL) != 0, "apply without h");
    ZT_CHECK(zcu_lamb_apply(&h, 1, 4, d, NULL, d, d, ZINC_FP32, NULL, ZINC_FP32, NULL, NULL) != 0, "apply without m");
    ZT_CHECK(zcu_lamb_apply(&h, 1, 4, d, d, d, d, (zinc_dtype)9, NULL, ZINC_FP32, NULL, NULL) != 0,
             "apply with an unknown gradient dtype");
    ZT_CHECK(zcu_lamb_apply(&h, 1, 4, d, d, d, d, ZINC_FP32, d, (zinc_dtype)9, NULL, NULL) != 0,
             "apply with an unknown param_out dtype");
    ZT_CHECK(zcu_lamb_apply(&h, 1, 0, NULL, NULL, NULL, NULL, ZINC_FP32, NULL, ZINC_FP32, NULL, NULL) == 0,
             "apply of n=0 is a no-op");
    ZT_CHECK(zcu_lamb_sums(&h, 4, d, d, d, d, ZINC_FP32, NULL, ws, NULL, 0, NULL) != 0, "sums without out");
    ZT_CHECK(zcu_lamb_sums(&h, 4, d, d, d, d, ZINC_FP32, NULL, NULL, dout, 0, NULL) != 0, "sums without workspace");
    ZT_CHECK(zcu_lamb_sums(&h, 4, d, d, d, d, (zinc_dtype)9, NULL, ws, dout, 0, NULL) != 0,
             "sums with an unknown gradient dtype");
    double one[2] = {1.5, 2.5}, got[2];
    h2d(dout, one, sizeof one);
    LAUNCH(zcu_lamb_sums(&h, 0, NULL, NULL, NULL, NULL, ZINC_FP32, NULL, NULL, dout, 1, NULL));
    d2h(got, dout, sizeof got);
    ZT_CHECK(got[0] == 1.5 && got[1] == 2.5, "sums of n=0 with accumulate must leave out as it is");
    LAUNCH(zcu_lamb_sums(&h, 0, NULL, NULL, NULL, NULL, ZINC_FP32, NULL, NULL, dout, 0, NULL));
    d2h(got, dout, sizeof got);
    ZT_CHECK(got[0] == 0 && got[1] == 0, "sums of n=0 without accumulate must zero out");
    CU(cudaFree(d));
}

int main(void) {
    zt_name = "kernels_lamb_cuda";
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) return zt_skip("no CUDA device");
    rng = zt_seed();
    void *ws = dalloc(zcu_lamb_sums_workspace_bytes());
    double *dout = dalloc(2 * sizeof(double));
    test_args(ws, dout);
    #ifndef ZT_CUDA_BIG
#define ZT_CUDA_BIG 300001 /* the CPU-thread harness (tests/cuda_threads/run_lib.sh) builds it smaller */
#endif
    static const size_t sizes[] = {1, 7, 4099, ZT_CUDA_BIG};
    int combo = 0;
    for (int gi = 0; gi < 3; gi++)
        for (int pi = 0; pi < 4; pi++)
            for (int inside = 0; inside < 2; inside++)
                for (int wdi = 0; wdi < 2; wdi++)
                    for (int mk = 0; mk < 2; mk++, combo++) {
                        lcase c = {(zinc_dtype)gi, pi, inside, mk, wdi ? 0.01f : 0.0f};
                        for (int si = 0; si < 3; si++) run_case(&c, sizes[si], &k_offsets[combo % 3], ws, dout);
                        if (combo % 6 == 0) run_case(&c, sizes[3], &k_offsets[(combo / 6) % 3], ws, dout);
                    }
    CU(cudaFree(ws));
    CU(cudaFree(dout));
    return zt_finish();
}
