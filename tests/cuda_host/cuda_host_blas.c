/* See cublas_v2.h in this folder. */
#include <stdlib.h>

#include "cublas_v2.h"
#include "cuda_host.h"

struct cuda_host_blas {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t s) {
    handle->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

typedef struct gemm_args {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_args;

static void run_gemm(void *p) {
    const gemm_args *g = p;
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            float acc = 0.0f;
            for (int q = 0; q < g->k; q++) {
                float a = g->ta ? g->A[(size_t)i * g->lda + q] : g->A[(size_t)q * g->lda + i];
                float b = g->tb ? g->B[(size_t)q * g->ldb + j] : g->B[(size_t)j * g->ldb + q];
                acc += a * b;
            }
            float *c = &g->C[(size_t)j * g->ldc + i];
            /* beta == 0: C is not read (it may hold NaN), as BLAS specifies */
            *c = g->beta == 0.0f ? g->alpha * acc : g->alpha * acc + g->beta * *c;
        }
}

static int max1(int a) { return a > 1 ? a : 1; }

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* Stored shapes: A is (ta ? k x m : m x k), B is (tb ? n x k : k x n), column-major. */
    int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < max1(arows) || ldb < max1(brows) || ldc < max1(m)) {
        cuda_host_error("cublasSgemm(m=%d n=%d k=%d lda=%d ldb=%d ldc=%d): invalid dimensions", m, n, k, lda, ldb,
                        ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if (k > 0) {
        cuda_host_check_span(A, ((size_t)lda * (size_t)(acols - 1) + (size_t)arows) * sizeof(float), "cublasSgemm A");
        cuda_host_check_span(B, ((size_t)ldb * (size_t)(bcols - 1) + (size_t)brows) * sizeof(float), "cublasSgemm B");
    }
    cuda_host_check_span(C, ((size_t)ldc * (size_t)(n - 1) + (size_t)m) * sizeof(float), "cublasSgemm C");
    gemm_args g = {ta, tb, m, n, k, lda, ldb, ldc, *alpha, *beta, A, B, C};
    return cuda_host_enqueue(handle->stream, run_gemm, &g, sizeof g) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                                    : CUBLAS_STATUS_INVALID_VALUE;
}
