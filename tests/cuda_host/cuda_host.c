/* See cuda_runtime.h and cublas_v2.h in this folder. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "cuda_runtime.h"

typedef struct block {
    char *p;
    size_t bytes;
    struct block *next;
} block;

static block *blocks;
static size_t in_use;
static char first_error[512];

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...) {
    if (first_error[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_error, sizeof first_error, fmt, ap);
    va_end(ap);
}

const char *cuda_host_first_error(void) { return first_error[0] ? first_error : NULL; }
size_t cuda_host_bytes_in_use(void) { return in_use; }

static block *find(const void *p) {
    for (block *b = blocks; b; b = b->next)
        if ((const char *)p >= b->p && (const char *)p < b->p + b->bytes) return b;
    return NULL;
}

void cuda_host_check_span(const void *p, size_t bytes, const char *what) {
    block *b = find(p);
    if (b && (size_t)((const char *)p - b->p) + bytes > b->bytes)
        record("%s: %zu bytes at offset %zu run past the end of their allocation", what, bytes,
               (size_t)((const char *)p - b->p));
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    block *b = malloc(sizeof *b);
    char *p = malloc(bytes ? bytes : 1);
    if (!b || !p) {
        free(b);
        free(p);
        return cudaErrorMemoryAllocation;
    }
    memset(p, 0xff, bytes); /* NaN in every float lane: what reading unwritten memory should look like */
    *b = (block){p, bytes, blocks};
    blocks = b;
    in_use += bytes;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    if (!ptr) return cudaSuccess;
    for (block **pb = &blocks; *pb; pb = &(*pb)->next)
        if ((*pb)->p == ptr) {
            block *b = *pb;
            *pb = b->next;
            in_use -= b->bytes;
            free(b->p);
            free(b);
            return cudaSuccess;
        }
    record("cudaFree(%p): not a pointer cudaMalloc returned", ptr);
    return cudaErrorInvalidValue;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
    cuda_host_check_span(ptr, bytes, "cudaMemset");
    memset(ptr, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    (void)s;
    if (kind == cudaMemcpyHostToDevice && !find(dst)) {
        record("cudaMemcpyAsync: host-to-device destination %p (%zu bytes) is not device memory", dst, bytes);
        return cudaErrorInvalidValue;
    }
    cuda_host_check_span(dst, bytes, "cudaMemcpyAsync destination");
    cuda_host_check_span(src, bytes, "cudaMemcpyAsync source");
    memcpy(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    }
    return "unknown error";
}

/* ---------------------------------------------------------------- cuBLAS */

struct cuda_host_blas {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t s) {
    handle->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

static int max1(int a) { return a > 1 ? a : 1; }

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc) {
    (void)handle;
    /* Stored shapes: A is (ta ? k x m : m x k), B is (tb ? n x k : k x n), column-major. */
    int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < max1(arows) || ldb < max1(brows) || ldc < max1(m)) {
        record("cublasSgemm(m=%d n=%d k=%d lda=%d ldb=%d ldc=%d): invalid dimensions", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    cuda_host_check_span(A, ((size_t)lda * (size_t)(acols - 1) + (size_t)arows) * sizeof(float), "cublasSgemm A");
    cuda_host_check_span(B, ((size_t)ldb * (size_t)(bcols - 1) + (size_t)brows) * sizeof(float), "cublasSgemm B");
    cuda_host_check_span(C, ((size_t)ldc * (size_t)(n - 1) + (size_t)m) * sizeof(float), "cublasSgemm C");
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                float a = ta ? A[(size_t)i * lda + p] : A[(size_t)p * lda + i];
                float b = tb ? B[(size_t)p * ldb + j] : B[(size_t)j * ldb + p];
                acc += a * b;
            }
            float *c = &C[(size_t)j * ldc + i];
            /* beta == 0 means C is not read (it may hold NaN), as in BLAS. */
            *c = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}
