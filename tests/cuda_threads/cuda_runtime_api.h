/* CUDA on CPU threads (tests/cuda_threads, see run.sh): the runtime calls gpt2_kernels.cu and
 * tests/test_gpt2_kernels_cuda.c make, and zinc's own kernels (kernels/<name>.cu) with tests/test_kernels_cuda.c and
 * test_kernels_lamb_cuda.c (run_lib.sh). Device memory is host memory (malloc, so AddressSanitizer sees every
 * access); streams are synchronous. */
#ifndef ZINC_TESTS_CUDA_THREADS_RUNTIME_API_H
#define ZINC_TESTS_CUDA_THREADS_RUNTIME_API_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorLaunchFailure = 719 } cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 } cudaMemcpyKind;
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind k);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
#ifdef __cplusplus
}
#endif
#endif
