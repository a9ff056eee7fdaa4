/* See gpt2_gemm.h. oneDNN is built on OpenMP (Debian's libdnnl2): dnnl_sgemm opens a team of
 * omp_get_max_threads() threads, a count kept per calling thread, so each product sets the calling
 * thread's to 1 (with one thread oneDNN runs the product inline, no team is started) and puts the caller's
 * back afterwards: a program that uses OpenMP itself keeps its own setting. */
#include "gpt2_gemm.h"

#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/error.h"

#if ZINC_GPT2_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#define HAVE_ONEDNN 1
/* oneDNN's bf16 GEMM, row-major like dnnl_sgemm: exported by libdnnl (DNNL_API, extern "C" in its
 * src/cpu/gemm/gemm.cpp) for its own tests, not declared in the installed headers. */
dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha,
                                    const uint16_t *A, dnnl_dim_t lda, const uint16_t *B, dnnl_dim_t ldb, float beta,
                                    float *C, dnnl_dim_t ldc);
#else
#define HAVE_ONEDNN 0
#endif

static atomic_int selected = HAVE_ONEDNN ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS;

int gpt2_gemm_have_onednn(void) { return HAVE_ONEDNN; }

const char *gpt2_gemm_name(gpt2_gemm_backend b) { return b == GPT2_GEMM_ONEDNN ? "onednn" : "openblas"; }

zinc_status gpt2_gemm_parse(const char *name, gpt2_gemm_backend *out) {
    if (!strcmp(name, "openblas")) {
        *out = GPT2_GEMM_OPENBLAS;
    } else if (!strcmp(name, "onednn")) {
        if (!HAVE_ONEDNN)
            return ZERR(ZINC_ERR_UNSUPPORTED, "--gemm onednn: this build has no oneDNN (install libdnnl-dev, "
                                              "scripts/install-deps.sh, and rebuild), or use --gemm openblas");
        *out = GPT2_GEMM_ONEDNN;
    } else if (!strcmp(name, "auto")) {
        *out = HAVE_ONEDNN ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS;
    } else {
        return ZERR(ZINC_ERR_INVALID_ARG, "--gemm '%s': expected openblas, onednn or auto", name);
    }
    return ZINC_OK;
}

void gpt2_gemm_select(gpt2_gemm_backend b) {
    atomic_store(&selected, HAVE_ONEDNN ? (int)b : GPT2_GEMM_OPENBLAS);
    openblas_set_num_threads(1);
}

gpt2_gemm_backend gpt2_gemm_selected(void) { return (gpt2_gemm_backend)atomic_load(&selected); }

void gpt2_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
#if ZINC_GPT2_ONEDNN
    if (atomic_load_explicit(&selected, memory_order_relaxed) == GPT2_GEMM_ONEDNN) {
        int callers = omp_get_max_threads();
        if (callers != 1) omp_set_num_threads(1);
        dnnl_status_t st = dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (callers != 1) omp_set_num_threads(callers);
        if (st == dnnl_success) return; /* it refuses only arguments OpenBLAS would refuse too */
    }
#endif
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans, tb == 'T' ? CblasTrans : CblasNoTrans, (int)M,
                (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

#if ZINC_GPT2_ONEDNN
static dnnl_status_t onednn_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                                 int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int callers = omp_get_max_threads();
    if (callers != 1) omp_set_num_threads(1);
    dnnl_status_t st = dnnl_gemm_bf16bf16f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (callers != 1) omp_set_num_threads(callers);
    return st;
}
#endif

static atomic_int bf16_works = -1; /* -1: not tried yet */

int gpt2_gemm_bf16_available(void) {
    if (gpt2_gemm_selected() != GPT2_GEMM_ONEDNN) return 0;
    int w = atomic_load(&bf16_works);
#if ZINC_GPT2_ONEDNN
    if (w < 0) {
        const uint16_t one = 0x3f80; /* 1.0 */
        float c = 0;
        w = onednn_bf16('N', 'N', 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1) == dnnl_success && c == 1.0f;
        atomic_store(&bf16_works, w);
    }
#endif
    return w > 0;
}

static float *widen(const uint16_t *x, int64_t rows, int64_t cols, int64_t ld) {
    float *f = malloc((size_t)(rows * cols) * sizeof *f);
    if (!f) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint32_t u = (uint32_t)x[r * ld + c] << 16;
            memcpy(&f[r * cols + c], &u, sizeof u);
        }
    return f;
}

void gpt2_gemm_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t lda,
                    const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
#if ZINC_GPT2_ONEDNN
    if (gpt2_gemm_bf16_available() && onednn_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success)
        return;
#endif
    int64_t ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M, br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
    float *Af = widen(A, ar, ac, lda), *Bf = widen(B, br, bc, ldb);
    if (Af && Bf) {
        gpt2_sgemm(ta, tb, M, N, K, alpha, Af, ac, Bf, bc, beta, C, ldc);
    } else { /* no memory for the widened copies: element by element */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0;
                for (int64_t k = 0; k < K; k++) {
                    uint32_t a = (uint32_t)(ta == 'N' ? A[i * lda + k] : A[k * lda + i]) << 16,
                             b = (uint32_t)(tb == 'N' ? B[k * ldb + j] : B[j * ldb + k]) << 16;
                    float af, bf;
                    memcpy(&af, &a, 4), memcpy(&bf, &b, 4);
                    s += af * bf;
                }
                C[i * ldc + j] = alpha * s + (beta == 0.0f ? 0.0f : beta * C[i * ldc + j]);
            }
    }
    free(Af);
    free(Bf);
}
