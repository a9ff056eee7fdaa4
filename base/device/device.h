/* The compute device under the engine: one small table of operations on the engine's compute-device
 * buffers (parameters, gradients, buckets, gather buffers, and the optimizer state when it is not
 * offloaded). The engine never touches those buffers with memcpy/memset or the CPU kernels directly:
 * it goes through these operations, so the same engine code runs on the CPU and (later) on a GPU.
 *
 *   cpu   (device_cpu.c): the buffers are host memory; every operation is the CPU kernel or libc call the
 *         engine used before this layer existed, so results are bitwise the same. Streams are NULL and
 *         every operation is complete on return.
 *   cuda  (device_cuda.c, built only with the CUDA backend): cudaMallocAsync'd buffers, kernels from
 *         kernels/cuda_kernels.h enqueued on a compute stream; collectives run on a comm stream ordered
 *         against it with events (comm_begin / comm_wait). The host waits only where it needs a value.
 *
 * Ordering contract for the engine: operations run in issue order on the compute stream. Before a
 * collective reads or writes a device buffer, call zdev_comm_begin; to use a collective's result, pass
 * its request to zdev_comm_wait (on cpu that is zcomm_wait). `copy` with a host side (H2D, D2H) is
 * complete on return (the host buffer may be read or reused at once). */
#ifndef ZINC_RUNTIME_DEVICE_H
#define ZINC_RUNTIME_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/comm/comm.h"
#include "kernels/cpu_kernels.h"
#include "kernels/thread_pool.h"
#include "base/core/log.h"
#include "base/core/memtrack.h"
#include "base/core/trace.h"
#include "zinc.h"

typedef enum { ZDEV_H2D = 0, ZDEV_D2H = 1, ZDEV_D2D = 2 } zdev_dir;
/* The streams of a device with streams (cuda), for the timeline's device spans. */
typedef enum { ZDEV_STREAM_COMPUTE = 0, ZDEV_STREAM_COMM = 1, ZDEV_STREAM_COPY = 2, ZDEV_STREAM_COUNT } zdev_stream;

#define ZDEV_COPY_SLOTS 4 /* events for copy_async / copy_wait */

typedef struct zdevice zdevice;

typedef struct zdevice_ops {
    const char *name;
    /* Device memory, zeroed, counted in memtrack under (the device's mem_kind, cat). */
    zinc_status (*alloc)(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out);
    void (*free)(zdevice *d, zinc_mem_category cat, void *p, size_t bytes);
    /* Host memory for staging device copies (page-locked on cuda, counted as pinned; plain host on cpu),
     * zeroed. */
    zinc_status (*alloc_host)(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out);
    void (*free_host)(zdevice *d, zinc_mem_category cat, void *p, size_t bytes);
    zinc_status (*memset0)(zdevice *d, void *p, size_t bytes);
    zinc_status (*copy)(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir);
    /* An H2D or D2H copy that may still run after return (cuda: on the copy stream, after the compute work
     * issued so far; the host buffer should be page-locked for it to be truly asynchronous), completing
     * event `slot` (0 .. ZDEV_COPY_SLOTS-1). Neither buffer may be touched, nor the slot reused, before
     * copy_wait(slot). cpu: a memcpy, complete on return. */
    zinc_status (*copy_async)(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir, int slot);
    /* The host waits for the last copy_async on `slot` (at once if there was none). */
    zinc_status (*copy_wait)(zdevice *d, int slot);
    /* Page-locks (and unlocks) host memory the device copies to and from (cuda: cudaHostRegister); a no-op
     * on cpu. */
    zinc_status (*pin)(zdevice *d, void *p, size_t bytes);
    void (*unpin)(zdevice *d, void *p);
    /* The kernels of kernels/cpu_kernels.h on device buffers, same semantics and same bits. */
    zinc_status (*cast_to_f32)(zdevice *d, float *dst, const void *src, zinc_dtype t, size_t n);
    zinc_status (*cast_from_f32)(zdevice *d, void *dst, zinc_dtype t, const float *src, size_t n);
    /* dst (in dt) = src (in st) * scale, the product rounded to fp32 and then once to dt. */
    zinc_status (*convert)(zdevice *d, void *dst, zinc_dtype dt, const void *src, zinc_dtype st, size_t n, float scale);
    zinc_status (*axpy_f32)(zdevice *d, float *dst, const void *src, zinc_dtype t, float scale, size_t n,
                            int accumulate);
    zinc_status (*scale)(zdevice *d, void *x, zinc_dtype t, float scale, size_t n);
    /* Deterministic statistics of a device buffer, returned to the host (the host waits for them). On
     * cuda the sum is in a different (fixed) order than on cpu; nonfinite is exact only as a 0/non-0
     * flag unless first_nonfinite is found (it is, on overflow). */
    zinc_status (*grad_stats)(zdevice *d, const void *x, zinc_dtype t, size_t n, zgrad_stats *out);
    /* zadam_step on device buffers; h is a host pointer read before return. */
    zinc_status (*adam_step)(zdevice *d, const zadam_hparams *h, size_t n, float *master, float *m, float *v,
                             const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                             const uint8_t *decay_mask);
    /* LAMB's two passes over one piece of a tensor (zlamb_sums / zlamb_apply on device buffers; h is a host
     * pointer read before return). lamb_sums: out[0..1] (2 doubles of device memory) = (accumulate ? out :
     * 0) + (||master||^2, ||u||^2) of the piece; workspace: zdev_lamb_workspace_bytes() of device memory
     * (unused on cpu, may be NULL there). lamb_apply: the update with the tensor's coefficient. */
    zinc_status (*lamb_sums)(zdevice *d, const zlamb_hparams *h, size_t n, const float *master, const float *m,
                             const float *v, const void *grad, zinc_dtype gdt, void *workspace, double *out,
                             int accumulate);
    zinc_status (*lamb_apply)(zdevice *d, const zlamb_hparams *h, float coeff, size_t n, float *master, float *m,
                              float *v, const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt);
    /* The host waits for the compute stream (not the whole device). */
    zinc_status (*synchronize)(zdevice *d);
    /* The collective stream waits for the compute work issued so far. */
    zinc_status (*comm_begin)(zdevice *d);
    /* Completes a request of a collective on device buffers: cpu zcomm_wait; cuda the compute stream
     * waits for it (the host does not). req may be NULL (no-op). Frees the request. */
    zinc_status (*comm_wait)(zdevice *d, zcomm *c, zcomm_req *req);
    /* The communicator for collectives on device buffers: cpu `host` itself (borrowed); cuda an NCCL
     * communicator over the ranks of `host` on the comm stream (owned by the caller). */
    zinc_status (*comm_create)(zdevice *d, zcomm *host, const zlog *log, zcomm **out);
    /* Bytes used and total according to the device itself (0, 0 on cpu). */
    void (*mem_info)(zdevice *d, uint64_t *used, uint64_t *total);
    /* --trace: a span of stream s's work, from what was issued on s before trace_begin to what was issued
     * before trace_end, timed by the device itself (cuda: a cudaEvent pair) and turned into spans on the
     * stream's track by trace_flush, after the step (the host waits for the events there). NULL on cpu,
     * where the host's own spans are the work. trace_begin returns a handle, or -1 (not traced). Use the
     * zdev_trace_* wrappers below. */
    int (*trace_begin)(zdevice *d, zdev_stream s);
    void (*trace_end)(zdevice *d, int handle, ztrace_cat cat, const char *name, const char *key, int64_t value);
    zinc_status (*trace_flush)(zdevice *d);
    void (*destroy)(zdevice *d);
} zdevice_ops;

struct zdevice {
    const zdevice_ops *ops;
    zinc_device_kind kind;
    zinc_mem_kind mem_kind; /* where alloc counts its bytes */
    bool host_addressable;  /* device buffers are plain host memory (cpu) */
    zmemtrack *mem;
    void *compute_stream; /* cudaStream_t as void *; NULL on cpu */
    void *comm_stream;
    void *impl;
    /* The threads of this device's host-side CPU kernels (all of them on cpu; the offloaded optimizer
     * step on cuda): made by zdev_create with the engine's cpu_threads, destroyed with the device. NULL
     * (a device made by zdev_create_cpu directly): the kernels' process default pool. */
    zpool *pool;
};

/* --trace: a device span (see trace_begin); one predictable branch when not recording. */
static inline int zdev_trace_begin(zdevice *d, zdev_stream s) {
    return ztrace_active() && d->ops->trace_begin ? d->ops->trace_begin(d, s) : -1;
}
static inline void zdev_trace_end(zdevice *d, int handle, ztrace_cat cat, const char *name, const char *key,
                                  int64_t value) {
    if (handle >= 0) d->ops->trace_end(d, handle, cat, name, key, value);
}

/* Runs `call` with the fast CPU kernels on d's pool (see zkernels_use_pool). */
#define ZDEV_ON_POOL(d, call)                                                                                          \
    do {                                                                                                               \
        zpool *zdev_prev_pool_ = zkernels_use_pool((d)->pool);                                                         \
        call;                                                                                                          \
        zkernels_use_pool(zdev_prev_pool_);                                                                            \
    } while (0)

/* kind ZINC_DEVICE_CPU or ZINC_DEVICE_CUDA (ZINC_ERR_UNSUPPORTED in a build without CUDA,
 * ZINC_ERR_DEVICE without a GPU; the GPU is local_rank modulo the GPU count), with a pool of
 * host_threads CPU kernel threads (1 .. ZPOOL_MAX_THREADS). `mem` must outlive the device. */
zinc_status zdev_create(zinc_device_kind kind, zmemtrack *mem, const zlog *log, int local_rank, int host_threads,
                        zdevice **out);
zinc_status zdev_create_cpu(zmemtrack *mem, zdevice **out);
/* The cpu device presented as a discrete device (device_cpu.c); zdev_create gives it for kind cpu when
 * ZINC_CPU_DISCRETE=1 is in the environment (tests of the GPU code paths on machines without a GPU). */
zinc_status zdev_create_cpu_discrete(zmemtrack *mem, zdevice **out);
zinc_status zdev_create_cuda(zmemtrack *mem, const zlog *log, int local_rank, zdevice **out);
/* GPUs visible to this process (0 in a build without CUDA, or without a driver). */
int zdev_cuda_count(void);
/* Device memory the cuda device allocates for itself at creation, counted as device staging: the fp32
 * scratch of scaled dtype conversions (ZDEV_CUDA_CONV_ELEMS floats) and the gradient statistics'
 * workspace and result. The estimator adds it for device cuda; the cpu-discrete device counts it too, so
 * that its footprint is the cuda device's. */
#define ZDEV_CUDA_CONV_ELEMS ((size_t)1 << 20)
uint64_t zdev_cuda_fixed_bytes(void);
/* Device memory LAMB's sums pass needs besides its 2 doubles per tensor (zcu_lamb_sums' workspace: one
 * partial pair per block of its fixed grid); callable in a build without CUDA (the sizing plan). */
uint64_t zdev_lamb_workspace_bytes(void);
static inline void zdev_destroy(zdevice *d) {
    if (!d) return;
    zpool *p = d->pool;
    d->ops->destroy(d);
    zpool_destroy(p);
}

/* The request pointer for a collective the engine completes at once: NULL (blocking) on a host-addressable
 * device, else r (complete it with zdev_comm_wait, so the host does not block). */
static inline zcomm_req **zdev_req(const zdevice *d, zcomm_req **r) {
    *r = NULL;
    return d->host_addressable ? NULL : r;
}
static inline zinc_status zdev_comm_begin(zdevice *d) { return d->ops->comm_begin(d); }
static inline zinc_status zdev_comm_wait(zdevice *d, zcomm *c, zcomm_req *req) { return d->ops->comm_wait(d, c, req); }

/* Host <-> device with a cast, through a small host tile (cpu: the cast itself, in place):
 * host_dst (fp32) = src (device, in t); dst (device, in t) = host_src (fp32). Same bits as the casts. */
zinc_status zdev_download_f32(zdevice *d, float *host_dst, const void *src, zinc_dtype t, size_t n);
zinc_status zdev_upload_f32(zdevice *d, void *dst, zinc_dtype t, const float *host_src, size_t n);

#endif
