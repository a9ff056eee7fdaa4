/* Test-only host emulation of the cuBLAS calls zinc's example MLP makes (see cuda_runtime_api.h here):
 * column-major SGEMM with cuBLAS's argument checks (a leading dimension smaller than the matrix is an
 * error), run on the handle's stream like any other emulated work. */
#ifndef ZINC_TESTS_CUDA_HOST_CUBLAS_H
#define ZINC_TESTS_CUDA_HOST_CUBLAS_H

#include "cuda_runtime_api.h"

typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7 }
    cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef struct cuda_host_blas *cublasHandle_t;

/* As in cuBLAS's own header: the library's functions carry the _v2 names (what dlsym must look for). */
#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasSgemm cublasSgemm_v2

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t s);
/* C (m x n) = alpha op(A) op(B) + beta C, all column-major; op(A) is m x k, op(B) k x n. alpha and beta
 * are host pointers, read at the call. */
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);

#endif
