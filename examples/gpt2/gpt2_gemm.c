/* See gpt2_gemm.h. oneDNN is built on OpenMP (Debian's libdnnl2): dnnl_sgemm opens a team of
 * omp_get_max_threads() threads, a count kept per calling thread, so each product sets the calling
 * thread's to 1 (with one thread oneDNN runs the product inline, no team is started) and puts the caller's
 * back afterwards: a program that uses OpenMP itself keeps its own setting. */
#include "gpt2_gemm.h"

#include <cblas.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/core/error.h"

#if ZINC_GPT2_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#define HAVE_ONEDNN 1
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
