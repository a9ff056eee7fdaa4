/* The CUDA device (see device.h). Built only with the CUDA backend; it has never run on a GPU (the
 * engine refuses it unless ZINC_EXPERIMENTAL_CUDA=1).
 *
 * - Memory: cudaMallocAsync / cudaFreeAsync on the compute stream (zeroed with cudaMemsetAsync), counted
 *   under ZINC_MEMKIND_DEVICE; staging host memory is cudaHostAlloc'd (pinned) and counted as such.
 * - Streams: every kernel (kernels/cuda_kernels.h launchers) and device copy runs on the compute stream,
 *   except copy_async's, which run on a copy stream after the compute work issued before them;
 *   collectives run on the comm stream, which waits for an event recorded on the compute stream
 *   (comm_begin); the compute stream waits for a collective's event (comm_wait, zcomm_nccl_wait_stream).
 * - The host waits (cudaStreamSynchronize of the compute stream, never the whole device) only where it
 *   needs a value: copies to or from host memory, the gradient statistics of the step, teardown.
 * - Collectives on device buffers: NCCL with one rank per GPU; several ranks sharing a GPU (or
 *   ZINC_DEVICE_COMM=mpi) use the MPI backend through pinned host staging (comm_staged.h). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm_nccl.h"
#include "base/device/comm_staged.h"
#include "base/device/device.h"
#include "base/core/error.h"
#include "kernels/cuda_kernels.h"

#define SCAN_ELEMS ((size_t)1 << 16) /* host tile for finding the first non-finite gradient */

typedef struct cuda_impl {
    int ordinal;
    cudaStream_t compute, comm, copy;
    cudaEvent_t ev;                     /* recorded on compute by comm_begin, waited for by comm */
    cudaEvent_t copy_after;             /* recorded on compute by copy_async, waited for by copy */
    cudaEvent_t slots[ZDEV_COPY_SLOTS]; /* recorded on copy after each copy_async */
    void *stats_ws;                     /* zcu_grad_stats workspace */
    zcu_grad_stats_result *stats_dev;
    zcu_grad_stats_result *stats_host; /* pinned */
    float *conv;                       /* ZDEV_CUDA_CONV_ELEMS floats of device scratch */
    void *scan;                        /* SCAN_ELEMS * 4 bytes, pinned */
    size_t fixed_bytes;                /* of stats_ws + stats_dev + conv, counted as device staging */
    struct gpu_spans *trace;           /* --trace: event pairs of this step (made at the first) */
} cuda_impl;

static cuda_impl *im(zdevice *d) { return (cuda_impl *)d->impl; }
static cudaStream_t cs(zdevice *d) { return im(d)->compute; }

#define CU_TRY(call)                                                                                                   \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            FAIL(e_ == cudaErrorMemoryAllocation ? ZINC_ERR_NOMEM : ZINC_ERR_DEVICE, "cuda: %s failed: %s", #call,     \
                 cudaGetErrorString(e_));                                                                              \
    } while (0)

/* For the launchers of kernels/cuda_kernels.h (a cudaError_t as int). */
#define K_TRY(call)                                                                                                    \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != 0) FAIL(ZINC_ERR_DEVICE, "cuda: %s failed: %s", #call, zcu_error_string(rc_));                      \
    } while (0)

static zinc_status cu_alloc(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    zinc_status st = ZINC_OK;
    void *p = NULL;
    *out = NULL;
    if (bytes == 0) return ZINC_OK;
    cudaError_t e = cudaMallocAsync(&p, bytes, cs(d));
    if (e != cudaSuccess)
        return ZERR(e == cudaErrorMemoryAllocation ? ZINC_ERR_NOMEM : ZINC_ERR_DEVICE,
                    "cuda: allocating %zu bytes of GPU memory for %s (%s) failed: %s", bytes, what,
                    zinc_mem_category_name(cat), cudaGetErrorString(e));
    CU_TRY(cudaMemsetAsync(p, 0, bytes, cs(d)));
    zmem_add(d->mem, ZINC_MEMKIND_DEVICE, cat, bytes);
    *out = p;
    return ZINC_OK;
fail:
    cudaFreeAsync(p, cs(d));
    return st;
}

static void cu_free(zdevice *d, zinc_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    cudaFreeAsync(p, cs(d));
    zmem_sub(d->mem, ZINC_MEMKIND_DEVICE, cat, bytes);
}

static zinc_status cu_alloc_host(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    void *p = NULL;
    *out = NULL;
    if (bytes == 0) return ZINC_OK;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess)
        return ZERR(ZINC_ERR_NOMEM, "cuda: allocating %zu bytes of pinned host memory for %s failed: %s", bytes, what,
                    cudaGetErrorString(e));
    memset(p, 0, bytes);
    zmem_add(d->mem, ZINC_MEMKIND_PINNED, cat, bytes);
    *out = p;
    return ZINC_OK;
}

static void cu_free_host(zdevice *d, zinc_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    cudaFreeHost(p);
    zmem_sub(d->mem, ZINC_MEMKIND_PINNED, cat, bytes);
}

static zinc_status cu_memset0(zdevice *d, void *p, size_t bytes) {
    zinc_status st = ZINC_OK;
    if (bytes) CU_TRY(cudaMemsetAsync(p, 0, bytes, cs(d)));
fail:
    return st;
}

static zinc_status cu_copy(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir) {
    zinc_status st = ZINC_OK;
    static const enum cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                 cudaMemcpyDeviceToDevice};
    if (!bytes) return ZINC_OK;
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, kinds[dir], cs(d)));
    if (dir != ZDEV_D2D) CU_TRY(cudaStreamSynchronize(cs(d))); /* the host side is used or reused next */
fail:
    return st;
}

static zinc_status cu_copy_async(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir, int slot) {
    zinc_status st = ZINC_OK;
    cuda_impl *c = im(d);
    if (slot < 0 || slot >= ZDEV_COPY_SLOTS || dir == ZDEV_D2D)
        return ZERR(ZINC_ERR_INTERNAL, "cuda: copy_async: slot %d / direction %d", slot, (int)dir);
    if (!bytes) return ZINC_OK;
    CU_TRY(cudaEventRecord(c->copy_after, c->compute));
    CU_TRY(cudaStreamWaitEvent(c->copy, c->copy_after, 0));
    int h = zdev_trace_begin(d, ZDEV_STREAM_COPY);
    CU_TRY(
        cudaMemcpyAsync(dst, src, bytes, dir == ZDEV_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, c->copy));
    zdev_trace_end(d, h, ZTRACE_COPY, dir == ZDEV_H2D ? "h2d" : "d2h", "bytes", (int64_t)bytes);
    CU_TRY(cudaEventRecord(c->slots[slot], c->copy));
fail:
    return st;
}

static zinc_status cu_copy_wait(zdevice *d, int slot) {
    zinc_status st = ZINC_OK;
    if (slot < 0 || slot >= ZDEV_COPY_SLOTS) return ZERR(ZINC_ERR_INTERNAL, "cuda: copy_wait: slot %d", slot);
    CU_TRY(cudaEventSynchronize(im(d)->slots[slot]));
fail:
    return st;
}

static zinc_status cu_pin(zdevice *d, void *p, size_t bytes) {
    (void)d;
    if (!p || !bytes) return ZINC_OK;
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess)
        return ZERR(ZINC_ERR_NOMEM,
                    "cuda: page-locking %zu bytes of host memory (cudaHostRegister) failed: %s; "
                    "raise the pinned-memory limit (ulimit -l) or set pin_memory false",
                    bytes, cudaGetErrorString(e));
    return ZINC_OK;
}

static void cu_unpin(zdevice *d, void *p) {
    (void)d;
    if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

static zinc_status cu_cast_to_f32(zdevice *d, float *dst, const void *src, zinc_dtype t, size_t n) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_cast_to_f32(dst, src, t, n, cs(d)));
fail:
    return st;
}

static zinc_status cu_cast_from_f32(zdevice *d, void *dst, zinc_dtype t, const float *src, size_t n) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_cast_from_f32(dst, t, src, n, cs(d)));
fail:
    return st;
}

/* As the cpu device: widen to fp32, multiply in fp32, round once (through the fp32 scratch). */
static zinc_status cu_convert(zdevice *d, void *dst, zinc_dtype dt, const void *src, zinc_dtype sdt, size_t n,
                              float scale) {
    zinc_status st = ZINC_OK;
    size_t ds = zinc_dtype_size(dt), ss = zinc_dtype_size(sdt);
    if (scale == 1.0f && dt == ZINC_FP32) return cu_cast_to_f32(d, dst, src, sdt, n);
    if (scale == 1.0f && sdt == ZINC_FP32) return cu_cast_from_f32(d, dst, dt, src, n);
    for (size_t i = 0; i < n; i += ZDEV_CUDA_CONV_ELEMS) {
        size_t k = n - i < ZDEV_CUDA_CONV_ELEMS ? n - i : ZDEV_CUDA_CONV_ELEMS;
        K_TRY(zcu_cast_to_f32(im(d)->conv, (const char *)src + i * ss, sdt, k, cs(d)));
        if (scale != 1.0f) K_TRY(zcu_scale_inplace(im(d)->conv, ZINC_FP32, scale, k, cs(d)));
        K_TRY(zcu_cast_from_f32((char *)dst + i * ds, dt, im(d)->conv, k, cs(d)));
    }
fail:
    return st;
}

static zinc_status cu_axpy(zdevice *d, float *dst, const void *src, zinc_dtype t, float scale, size_t n,
                           int accumulate) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_axpy_f32(dst, src, t, scale, n, accumulate, cs(d)));
fail:
    return st;
}

static zinc_status cu_scale(zdevice *d, void *x, zinc_dtype t, float scale, size_t n) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_scale_inplace(x, t, scale, n, cs(d)));
fail:
    return st;
}

/* Only on overflow: the exact count and the first non-finite element, scanned on the host in tiles. */
static zinc_status find_nonfinite(zdevice *d, const void *x, zinc_dtype t, size_t n, zgrad_stats *out) {
    zinc_status st = ZINC_OK;
    size_t es = zinc_dtype_size(t);
    out->nonfinite = 0;
    out->first_nonfinite = SIZE_MAX;
    for (size_t i = 0; i < n; i += SCAN_ELEMS) {
        size_t k = n - i < SCAN_ELEMS ? n - i : SCAN_ELEMS;
        CU_TRY(cudaMemcpyAsync(im(d)->scan, (const char *)x + i * es, k * es, cudaMemcpyDeviceToHost, cs(d)));
        CU_TRY(cudaStreamSynchronize(cs(d)));
        zgrad_stats s;
        ZDEV_ON_POOL(d, zgrad_stats(im(d)->scan, t, k, &s));
        if (s.nonfinite && out->first_nonfinite == SIZE_MAX) out->first_nonfinite = i + s.first_nonfinite;
        out->nonfinite += s.nonfinite;
    }
    if (out->nonfinite == 0) out->nonfinite = 1; /* the device saw one: keep the step skipped */
fail:
    return st;
}

static zinc_status cu_grad_stats(zdevice *d, const void *x, zinc_dtype t, size_t n, zgrad_stats *out) {
    zinc_status st = ZINC_OK;
    cuda_impl *c = im(d);
    out->sumsq = 0;
    out->nonfinite = 0;
    out->first_nonfinite = SIZE_MAX;
    if (n == 0) return ZINC_OK;
    K_TRY(zcu_grad_stats(x, t, n, c->stats_ws, c->stats_dev, 0, c->compute));
    CU_TRY(cudaMemcpyAsync(c->stats_host, c->stats_dev, sizeof *c->stats_host, cudaMemcpyDeviceToHost, c->compute));
    CU_TRY(cudaStreamSynchronize(c->compute)); /* the host needs the statistic to decide the step */
    out->sumsq = c->stats_host->sumsq;
    if (c->stats_host->nonfinite) TRY(find_nonfinite(d, x, t, n, out));
fail:
    return st;
}

static zinc_status cu_adam(zdevice *d, const zadam_hparams *h, size_t n, float *master, float *m, float *v,
                           const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                           const uint8_t *decay_mask) {
    zinc_status st = ZINC_OK;
    int th = zdev_trace_begin(d, ZDEV_STREAM_COMPUTE);
    K_TRY(zcu_adam_step_host(h, n, master, m, v, grad, gdt, param_out, pdt, decay_mask, cs(d)));
    zdev_trace_end(d, th, ZTRACE_OPTIMIZER, "adam kernel", "elements", (int64_t)n);
fail:
    return st;
}

static zinc_status cu_lamb_sums(zdevice *d, const zlamb_hparams *h, size_t n, const float *master, const float *m,
                                const float *v, const void *grad, zinc_dtype gdt, void *workspace, double *out,
                                int accumulate) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_lamb_sums(h, n, master, m, v, grad, gdt, NULL, workspace, out, accumulate, cs(d)));
fail:
    return st;
}

static zinc_status cu_lamb_apply(zdevice *d, const zlamb_hparams *h, float coeff, size_t n, float *master, float *m,
                                 float *v, const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt) {
    zinc_status st = ZINC_OK;
    K_TRY(zcu_lamb_apply(h, coeff, n, master, m, v, grad, gdt, param_out, pdt, NULL, cs(d)));
fail:
    return st;
}

static zinc_status cu_synchronize(zdevice *d) {
    zinc_status st = ZINC_OK;
    CU_TRY(cudaStreamSynchronize(cs(d)));
fail:
    return st;
}

static zinc_status cu_comm_begin(zdevice *d) {
    zinc_status st = ZINC_OK;
    CU_TRY(cudaEventRecord(im(d)->ev, im(d)->compute));
    CU_TRY(cudaStreamWaitEvent(im(d)->comm, im(d)->ev, 0));
fail:
    return st;
}

static zinc_status cu_comm_wait(zdevice *d, zcomm *c, zcomm_req *req) {
    if (!req) return ZINC_OK;
    return zcomm_nccl_wait_stream(c, req, im(d)->compute);
}

/* NCCL when every rank of the node has a GPU of its own (NCCL refuses two ranks on one GPU), else the host
 * backend (MPI) through pinned staging buffers; ZINC_DEVICE_COMM overrides (comm_staged.h). */
static zinc_status cu_comm_create(zdevice *d, zcomm *host, const zlog *log, zcomm **out) {
    zinc_status st = ZINC_OK;
    zdcomm_choice choice;
    int gpus = zcu_device_count();
    bool shared = host->size > 1 && host->local_size > gpus;
    *out = NULL;
    TRY(zdcomm_choice_from_env(&choice));
    if (choice == ZDCOMM_NCCL && shared)
        FAIL(ZINC_ERR_UNSUPPORTED,
             "ZINC_DEVICE_COMM=nccl: %d ranks on this node share %d GPU%s and NCCL needs one rank per GPU (unset "
             "ZINC_DEVICE_COMM to use MPI with host staging, or run %d rank%s per node)",
             host->local_size, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
    if (choice == ZDCOMM_NCCL || (choice == ZDCOMM_AUTO && !shared))
        return zcomm_create_nccl(host->size > 1 ? host : NULL, d->comm_stream, log, out);
    if (shared && choice == ZDCOMM_AUTO)
        ZLOG_INFO(log,
                  "device cuda: %d ranks on this node share %d GPU%s: collectives go through MPI with pinned "
                  "host staging (NCCL needs one rank per GPU)",
                  host->local_size, gpus, gpus == 1 ? "" : "s");
    TRY(zcomm_create_staged_env(host, d, log, out));
fail:
    return st;
}

/* ---------------------------------------------------------------- --trace: spans on the streams */

#define TRACE_PAIRS 2048 /* device spans per step; more are dropped (and counted) */

typedef struct gpu_span {
    cudaEvent_t a, b; /* timing events, made at first use */
    zdev_stream stream;
    ztrace_cat cat;
    const char *name, *key;
    int64_t value;
    bool ended;
} gpu_span;

struct gpu_spans {
    gpu_span span[TRACE_PAIRS];
    int n;
    cudaEvent_t ref;
    int track[ZDEV_STREAM_COUNT];
};

static cudaStream_t stream_of(cuda_impl *c, zdev_stream s) {
    return s == ZDEV_STREAM_COMM ? c->comm : s == ZDEV_STREAM_COPY ? c->copy : c->compute;
}

static int cu_trace_begin(zdevice *d, zdev_stream s) {
    cuda_impl *c = im(d);
    if (!c->trace) {
        static const char *const names[ZDEV_STREAM_COUNT] = {"stream compute", "stream comm", "stream copy"};
        if (!(c->trace = calloc(1, sizeof *c->trace))) return -1;
        if (cudaEventCreateWithFlags(&c->trace->ref, cudaEventDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            free(c->trace);
            c->trace = NULL;
            return -1;
        }
        for (int k = 0; k < ZDEV_STREAM_COUNT; k++) c->trace->track[k] = ztrace_track(names[k]);
    }
    struct gpu_spans *t = c->trace;
    if (t->n == TRACE_PAIRS) {
        ztrace_count_dropped(1);
        return -1;
    }
    gpu_span *g = &t->span[t->n];
    if ((!g->a && cudaEventCreateWithFlags(&g->a, cudaEventDefault) != cudaSuccess) ||
        (!g->b && cudaEventCreateWithFlags(&g->b, cudaEventDefault) != cudaSuccess) ||
        cudaEventRecord(g->a, stream_of(c, s)) != cudaSuccess) {
        (void)cudaGetLastError();
        ztrace_count_dropped(1);
        return -1;
    }
    g->stream = s;
    g->ended = false;
    return t->n++;
}

static void cu_trace_end(zdevice *d, int handle, ztrace_cat cat, const char *name, const char *key, int64_t value) {
    struct gpu_spans *t = im(d)->trace;
    if (!t || handle < 0 || handle >= t->n) return;
    gpu_span *g = &t->span[handle];
    if (cudaEventRecord(g->b, stream_of(im(d), g->stream)) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    g->cat = cat;
    g->name = name;
    g->key = key;
    g->value = value;
    g->ended = true;
}

/* The host waits for the streams, then places each event on its own clock: the elapsed time from the
 * event to a reference event that completed just before the host read its clock. */
static zinc_status cu_trace_flush(zdevice *d) {
    zinc_status st = ZINC_OK;
    cuda_impl *c = im(d);
    struct gpu_spans *t = c->trace;
    if (!t || t->n == 0) return ZINC_OK;
    for (int k = 0; k < ZDEV_STREAM_COUNT; k++) CU_TRY(cudaStreamSynchronize(stream_of(c, (zdev_stream)k)));
    CU_TRY(cudaEventRecord(t->ref, c->compute));
    CU_TRY(cudaEventSynchronize(t->ref));
    int64_t now = ztrace_now_ns();
    for (int i = 0; i < t->n; i++) {
        gpu_span *g = &t->span[i];
        float ma = 0, mb = 0;
        if (!g->ended) continue;
        CU_TRY(cudaEventElapsedTime(&ma, g->a, t->ref));
        CU_TRY(cudaEventElapsedTime(&mb, g->b, t->ref));
        ztrace_gpu_span_at(now - (int64_t)((double)ma * 1e6), now - (int64_t)((double)mb * 1e6), g->cat, g->name,
                           t->track[g->stream], g->key, g->value);
    }
fail:
    t->n = 0;
    return st;
}

static void trace_destroy(cuda_impl *c) {
    struct gpu_spans *t = c->trace;
    if (!t) return;
    for (int i = 0; i < TRACE_PAIRS; i++) {
        if (t->span[i].a) cudaEventDestroy(t->span[i].a);
        if (t->span[i].b) cudaEventDestroy(t->span[i].b);
    }
    cudaEventDestroy(t->ref);
    free(t);
    c->trace = NULL;
}

static void cu_mem_info(zdevice *d, uint64_t *used, uint64_t *total) {
    size_t f = 0, t = 0;
    (void)d;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        f = t = 0;
    }
    *used = (uint64_t)(t - f);
    *total = (uint64_t)t;
}

static void cu_destroy(zdevice *d) {
    cuda_impl *c = im(d);
    if (c) {
        if (c->compute) cudaStreamSynchronize(c->compute);
        if (c->comm) cudaStreamSynchronize(c->comm);
        if (c->copy) cudaStreamSynchronize(c->copy);
        trace_destroy(c);
        cudaFree(c->stats_ws);
        cudaFree(c->stats_dev);
        cudaFree(c->conv);
        cudaFreeHost(c->stats_host);
        cudaFreeHost(c->scan);
        if (c->fixed_bytes) zmem_sub(d->mem, ZINC_MEMKIND_DEVICE, ZINC_MEM_STAGING, c->fixed_bytes);
        if (c->ev) cudaEventDestroy(c->ev);
        if (c->copy_after) cudaEventDestroy(c->copy_after);
        for (int i = 0; i < ZDEV_COPY_SLOTS; i++)
            if (c->slots[i]) cudaEventDestroy(c->slots[i]);
        if (c->copy) cudaStreamDestroy(c->copy);
        if (c->compute) cudaStreamDestroy(c->compute);
        if (c->comm) cudaStreamDestroy(c->comm);
        free(c);
    }
    free(d);
}

static const zdevice_ops cuda_ops = {
    .name = "cuda",
    .alloc = cu_alloc,
    .free = cu_free,
    .alloc_host = cu_alloc_host,
    .free_host = cu_free_host,
    .memset0 = cu_memset0,
    .copy = cu_copy,
    .copy_async = cu_copy_async,
    .copy_wait = cu_copy_wait,
    .pin = cu_pin,
    .unpin = cu_unpin,
    .cast_to_f32 = cu_cast_to_f32,
    .cast_from_f32 = cu_cast_from_f32,
    .convert = cu_convert,
    .axpy_f32 = cu_axpy,
    .scale = cu_scale,
    .grad_stats = cu_grad_stats,
    .adam_step = cu_adam,
    .lamb_sums = cu_lamb_sums,
    .lamb_apply = cu_lamb_apply,
    .synchronize = cu_synchronize,
    .comm_begin = cu_comm_begin,
    .comm_wait = cu_comm_wait,
    .comm_create = cu_comm_create,
    .mem_info = cu_mem_info,
    .trace_begin = cu_trace_begin,
    .trace_end = cu_trace_end,
    .trace_flush = cu_trace_flush,
    .destroy = cu_destroy,
};

int zdev_cuda_count(void) { return zcu_device_count(); }

zinc_status zdev_create_cuda(zmemtrack *mem, const zlog *log, int local_rank, zdevice **out) {
    zinc_status st = ZINC_OK;
    zdevice *d = NULL;
    cuda_impl *c = NULL;
    (void)log;
    *out = NULL;
    int gpus = zcu_device_count();
    if (gpus == 0)
        return ZERR(ZINC_ERR_DEVICE, "device cuda: no GPU is visible to this process (cudaGetDeviceCount is 0); "
                                     "use device cpu");
    TRY_ALLOC(d, 1, "the cuda device");
    d->ops = &cuda_ops;
    d->kind = ZINC_DEVICE_CUDA;
    d->mem_kind = ZINC_MEMKIND_DEVICE;
    d->host_addressable = false;
    d->mem = mem;
    TRY_ALLOC(c, 1, "the cuda device");
    d->impl = c;
    c->ordinal = (local_rank > 0 ? local_rank : 0) % gpus;
    CU_TRY(cudaSetDevice(c->ordinal));
    CU_TRY(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    CU_TRY(cudaStreamCreateWithFlags(&c->comm, cudaStreamNonBlocking));
    CU_TRY(cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming));
    CU_TRY(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    CU_TRY(cudaEventCreateWithFlags(&c->copy_after, cudaEventDisableTiming));
    for (int i = 0; i < ZDEV_COPY_SLOTS; i++) CU_TRY(cudaEventCreateWithFlags(&c->slots[i], cudaEventDisableTiming));
    d->compute_stream = c->compute;
    d->comm_stream = c->comm;
    size_t ws = zcu_grad_stats_workspace_bytes();
    CU_TRY(cudaMalloc(&c->stats_ws, ws));
    CU_TRY(cudaMalloc((void **)&c->stats_dev, sizeof *c->stats_dev));
    CU_TRY(cudaMalloc((void **)&c->conv, ZDEV_CUDA_CONV_ELEMS * sizeof(float)));
    c->fixed_bytes = ws + sizeof *c->stats_dev + ZDEV_CUDA_CONV_ELEMS * sizeof(float); /* zdev_cuda_fixed_bytes */
    zmem_add(mem, ZINC_MEMKIND_DEVICE, ZINC_MEM_STAGING, c->fixed_bytes);
    CU_TRY(cudaHostAlloc((void **)&c->stats_host, sizeof *c->stats_host, cudaHostAllocDefault));
    CU_TRY(cudaHostAlloc(&c->scan, SCAN_ELEMS * sizeof(float), cudaHostAllocDefault));
    *out = d;
    return ZINC_OK;
fail:
    if (d) cu_destroy(d);
    return st;
}
