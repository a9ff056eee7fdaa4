/* The emulation's own interface (see cuda_runtime_api.h in this folder), for the emulated kernels,
 * cuBLAS and NCCL, and for tests. */
#ifndef ZINC_TESTS_CUDA_HOST_H
#define ZINC_TESTS_CUDA_HOST_H

#include <stddef.h>

#include "cuda_runtime_api.h"

/* Enqueues fn(args) on stream s: `args` (args_bytes) is copied now, fn runs when the stream gets there
 * (at once on the NULL stream). This is how the emulated kernels "launch". */
cudaError_t cuda_host_enqueue(cudaStream_t s, void (*fn)(void *args), const void *args, size_t args_bytes);

/* Runs everything enqueued on s so far (the work it waits for included), without the host waiting for
 * any other stream. */
void cuda_host_stream_flush(cudaStream_t s);

/* Aborts (see cuda_host_error) when [p, p + bytes) starts inside a device allocation but runs past its
 * end, or lies in freed device memory (pointers outside every device allocation are host memory and are
 * not checked). */
void cuda_host_check_span(const void *p, size_t bytes, const char *what);
/* A misuse of the CUDA API by the code under test (an out-of-range span, a bad cuBLAS argument, a stream
 * waiting on itself): prints it (printf-style) and aborts, so the test fails. */
void cuda_host_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
