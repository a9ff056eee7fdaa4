/* Test-only host emulation of the CUDA runtime calls the example MLP's GPU path makes (mlp_cuda.c), so
 * that path's logic (matrix layouts, leading dimensions, buffer sizes, the order of its steps) runs in CI
 * on a machine without a GPU: tests/test_mlp_gpu_path.c. "Device" memory is host memory, filled with NaN
 * bytes on allocation as uninitialised GPU memory would be garbage, and every copy is checked to stay
 * inside one allocation. Streams are NULL; every call is complete on return. Not a CUDA replacement:
 * only what mlp_cuda.c needs, with the same signatures. */
#ifndef ZINC_TESTS_CUDA_HOST_RUNTIME_H
#define ZINC_TESTS_CUDA_HOST_RUNTIME_H

#include <stddef.h>

typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 } cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
typedef struct cuda_host_stream *cudaStream_t;

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
const char *cudaGetErrorString(cudaError_t e);

/* For tests: the first emulation error (an out-of-range copy, a bad cuBLAS argument), or NULL. */
const char *cuda_host_first_error(void);
/* For the emulated kernels: records an error when [p, p + bytes) starts inside a cudaMalloc'd block but
 * runs past its end (pointers outside every block are the engine's own buffers and are not checked). */
void cuda_host_check_span(const void *p, size_t bytes, const char *what);
/* For tests: bytes currently allocated through cudaMalloc. */
size_t cuda_host_bytes_in_use(void);

#endif
