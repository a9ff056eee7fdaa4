/* Test-only host emulation of the CUDA runtime: the subset zinc's CUDA host code calls (runtime/
 * device_cuda.c, base/comm/comm_nccl.c, examples/mlp/mlp_cuda.c), with the same names and signatures, so
 * that code runs in CI on machines without a GPU (tests/cuda_emulated.cmake). Not a CUDA replacement:
 * it exists to run zinc's own host logic (which stream does what, which event orders what, when the host
 * waits, buffer sizes) against CUDA's documented semantics, adversarially:
 *
 *   - Streams are lazy: work enqueued on a stream runs only when something forces it: a synchronize of
 *     that stream or of an event recorded on it, or a stream that waits for such an event running up to
 *     that wait. A missing event or synchronize therefore shows up as stale or not-yet-written data.
 *     The legacy NULL stream runs work at once (only host-side test code uses it).
 *   - Device and pinned allocations start as NaN bytes (0xff), not zeros; freed device memory is kept
 *     poisoned for a while (quarantine), so late readers see NaN rather than the old values.
 *   - Copies follow the documented host-synchronisation rules: from pageable host memory the source is
 *     taken at the call (the caller may reuse it); to pageable host memory the call completes the copy
 *     (it waits for the stream); to or from pinned memory the copy runs when the stream does.
 *   - Every copy and emulated kernel checks that its span stays inside one device allocation.
 * Single-threaded: one host thread drives it (zinc's engine does). */
#ifndef ZINC_TESTS_CUDA_HOST_RUNTIME_API_H
#define ZINC_TESTS_CUDA_HOST_RUNTIME_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
};

typedef struct cuda_host_stream *cudaStream_t;
typedef struct cuda_host_event *cudaEvent_t;

#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostRegisterDefault 0x00

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t s);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned int flags);
cudaError_t cudaHostUnregister(void *ptr);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr);

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s);
/* Synchronous: on the legacy stream, after the work of every stream (as with the legacy default stream). */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
/* Timing events (created without cudaEventDisableTiming) take the host's monotonic clock when their stream
 * reaches them; the elapsed time needs both reached (else cudaErrorNotReady) and both timing events
 * (else cudaErrorInvalidResourceHandle), as CUDA does. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaDeviceSynchronize(void);

#ifdef __cplusplus
}
#endif
#endif
