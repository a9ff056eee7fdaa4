/* The CPU device (see device.h): buffers are 64-byte aligned host memory and every operation is the CPU
 * kernel the engine has always used, so results are bitwise those of the engine before the device layer.
 * Everything is complete on return; there are no streams. The kernels run on the device's own thread
 * pool (d->pool, sized by the engine's cpu_threads), so two engines in a process keep their own counts.
 *
 * "cpu-discrete" is the same device presented as a discrete one (host_addressable false, buffers counted
 * as device memory, staging as pinned): the engine then takes every path it takes on a GPU (state
 * reached through copies, host-view passes, staged offload steps, non-blocking device collectives), so
 * CI runs that logic without a GPU. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/device/comm_staged.h"
#include "base/device/device.h"
#include "base/core/error.h"

/* Device buffers count under the device's memory kind, staging under the kind of host memory a discrete
 * device would stage through (pinned). */
static zinc_status cpu_alloc(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return zmem_host_alloc(d->mem, d->mem_kind, cat, bytes, what, out);
}

static void cpu_free(zdevice *d, zinc_mem_category cat, void *p, size_t bytes) {
    zmem_host_free(d->mem, d->mem_kind, cat, p, bytes);
}

static zinc_mem_kind staging_kind(const zdevice *d) {
    return d->host_addressable ? ZINC_MEMKIND_HOST : ZINC_MEMKIND_PINNED;
}

static zinc_status cpu_alloc_host(zdevice *d, zinc_mem_category cat, size_t bytes, const char *what, void **out) {
    return zmem_host_alloc(d->mem, staging_kind(d), cat, bytes, what, out);
}

static void cpu_free_host(zdevice *d, zinc_mem_category cat, void *p, size_t bytes) {
    zmem_host_free(d->mem, staging_kind(d), cat, p, bytes);
}

static zinc_status cpu_memset0(zdevice *d, void *p, size_t bytes) {
    (void)d;
    if (bytes) memset(p, 0, bytes);
    return ZINC_OK;
}

static zinc_status cpu_copy(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir) {
    (void)d, (void)dir;
    if (bytes) memcpy(dst, src, bytes);
    return ZINC_OK;
}

static zinc_status cpu_copy_async(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir, int slot) {
    (void)slot;
    return cpu_copy(d, dst, src, bytes, dir);
}

static zinc_status cpu_copy_wait(zdevice *d, int slot) {
    (void)d, (void)slot;
    return ZINC_OK;
}

static zinc_status cpu_pin(zdevice *d, void *p, size_t bytes) {
    (void)d, (void)p, (void)bytes;
    return ZINC_OK;
}

static void cpu_unpin(zdevice *d, void *p) { (void)d, (void)p; }

static zinc_status cpu_cast_to_f32(zdevice *d, float *dst, const void *src, zinc_dtype t, size_t n) {
    ZDEV_ON_POOL(d, zcast_to_f32(dst, src, t, n));
    return ZINC_OK;
}

static zinc_status cpu_cast_from_f32(zdevice *d, void *dst, zinc_dtype t, const float *src, size_t n) {
    ZDEV_ON_POOL(d, zcast_from_f32(dst, t, src, n));
    return ZINC_OK;
}

/* Through a small fp32 tile: widen, multiply, round once. */
static zinc_status cpu_convert(zdevice *d, void *dst, zinc_dtype dt, const void *src, zinc_dtype st, size_t n,
                               float scale) {
    float tile[2048];
    size_t ds = zinc_dtype_size(dt), ss = zinc_dtype_size(st);
    for (size_t i = 0; i < n; i += 2048) {
        size_t k = n - i < 2048 ? n - i : 2048;
        ZDEV_ON_POOL(d, zcast_to_f32(tile, (const char *)src + i * ss, st, k));
        if (scale != 1.0f)
            for (size_t j = 0; j < k; j++) tile[j] *= scale;
        ZDEV_ON_POOL(d, zcast_from_f32((char *)dst + i * ds, dt, tile, k));
    }
    return ZINC_OK;
}

static zinc_status cpu_axpy(zdevice *d, float *dst, const void *src, zinc_dtype t, float scale, size_t n,
                            int accumulate) {
    ZDEV_ON_POOL(d, zaxpy_f32(dst, src, t, scale, n, accumulate));
    return ZINC_OK;
}

static zinc_status cpu_scale(zdevice *d, void *x, zinc_dtype t, float scale, size_t n) {
    ZDEV_ON_POOL(d, zscale_inplace(x, t, scale, n));
    return ZINC_OK;
}

static zinc_status cpu_grad_stats(zdevice *d, const void *x, zinc_dtype t, size_t n, zgrad_stats *out) {
    ZDEV_ON_POOL(d, zgrad_stats(x, t, n, out));
    return ZINC_OK;
}

static zinc_status cpu_adam(zdevice *d, const zadam_hparams *h, size_t n, float *master, float *m, float *v,
                            const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt,
                            const uint8_t *decay_mask) {
    ZDEV_ON_POOL(d, zadam_step(h, n, master, m, v, grad, gdt, param_out, pdt, decay_mask));
    return ZINC_OK;
}

static zinc_status cpu_lamb_sums(zdevice *d, const zlamb_hparams *h, size_t n, const float *master, const float *m,
                                 const float *v, const void *grad, zinc_dtype gdt, void *workspace, double *out,
                                 int accumulate) {
    double w = 0, u = 0;
    (void)workspace;
    if (n) ZDEV_ON_POOL(d, zlamb_sums(h, n, master, m, v, grad, gdt, NULL, &w, &u));
    out[0] = (accumulate ? out[0] : 0) + w;
    out[1] = (accumulate ? out[1] : 0) + u;
    return ZINC_OK;
}

static zinc_status cpu_lamb_apply(zdevice *d, const zlamb_hparams *h, float coeff, size_t n, float *master, float *m,
                                  float *v, const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt) {
    ZDEV_ON_POOL(d, zlamb_apply(h, coeff, n, master, m, v, grad, gdt, param_out, pdt, NULL));
    return ZINC_OK;
}

static zinc_status cpu_nop(zdevice *d) {
    (void)d;
    return ZINC_OK;
}

static zinc_status cpu_comm_wait(zdevice *d, zcomm *c, zcomm_req *req) {
    (void)d;
    return zcomm_wait(c, req);
}

/* The host backend itself, or (ZINC_DEVICE_COMM=staged) the staging path GPUs shared by several ranks use,
 * run over plain host memory so CI tests it. */
static zinc_status cpu_comm_create(zdevice *d, zcomm *host, const zlog *log, zcomm **out) {
    zinc_status st = ZINC_OK;
    zdcomm_choice choice;
    *out = NULL;
    TRY(zdcomm_choice_from_env(&choice));
    if (choice == ZDCOMM_NCCL)
        FAIL(ZINC_ERR_UNSUPPORTED, "ZINC_DEVICE_COMM=nccl: NCCL needs device cuda; this engine runs on the cpu "
                                   "(unset ZINC_DEVICE_COMM, or use device cuda)");
    if (choice != ZDCOMM_STAGED) {
        *out = host;
        return ZINC_OK;
    }
    TRY(zcomm_create_staged_env(host, d, log, out));
fail:
    return st;
}

static void cpu_mem_info(zdevice *d, uint64_t *used, uint64_t *total) {
    (void)d;
    *used = *total = 0;
}

static void cpu_destroy(zdevice *d) {
    if (d && d->impl) { /* discrete: its pending copies, and the cuda device's scratch it counted */
        free(d->impl);
        zmem_sub(d->mem, ZINC_MEMKIND_DEVICE, ZINC_MEM_STAGING, zdev_cuda_fixed_bytes());
    }
    free(d);
}

/* The discrete presentation defers every copy_async to its copy_wait: the latest a copy stream may run
 * it. An engine that touched a staging buffer before waiting for its copy, or reused a slot early, then
 * gets wrong values or an error here instead of a race on a GPU. */
typedef struct pending_copy {
    void *dst;
    const void *src;
    size_t bytes;
} pending_copy;

static zinc_status discrete_copy_async(zdevice *d, void *dst, const void *src, size_t bytes, zdev_dir dir, int slot) {
    pending_copy *pc = (pending_copy *)d->impl;
    if (slot < 0 || slot >= ZDEV_COPY_SLOTS || dir == ZDEV_D2D)
        return ZERR(ZINC_ERR_INTERNAL, "cpu-discrete: copy_async: slot %d / direction %d", slot, (int)dir);
    if (pc[slot].bytes)
        return ZERR(ZINC_ERR_INTERNAL, "cpu-discrete: copy_async on slot %d before copy_wait of its last copy", slot);
    pc[slot] = (pending_copy){dst, src, bytes};
    return ZINC_OK;
}

static zinc_status discrete_copy_wait(zdevice *d, int slot) {
    pending_copy *pc = (pending_copy *)d->impl;
    if (slot < 0 || slot >= ZDEV_COPY_SLOTS) return ZERR(ZINC_ERR_INTERNAL, "cpu-discrete: copy_wait: slot %d", slot);
    if (pc[slot].bytes) memcpy(pc[slot].dst, pc[slot].src, pc[slot].bytes);
    pc[slot] = (pending_copy){0};
    return ZINC_OK;
}

static const zdevice_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free_host,
    .memset0 = cpu_memset0,
    .copy = cpu_copy,
    .copy_async = cpu_copy_async,
    .copy_wait = cpu_copy_wait,
    .pin = cpu_pin,
    .unpin = cpu_unpin,
    .cast_to_f32 = cpu_cast_to_f32,
    .cast_from_f32 = cpu_cast_from_f32,
    .convert = cpu_convert,
    .axpy_f32 = cpu_axpy,
    .scale = cpu_scale,
    .grad_stats = cpu_grad_stats,
    .adam_step = cpu_adam,
    .lamb_sums = cpu_lamb_sums,
    .lamb_apply = cpu_lamb_apply,
    .synchronize = cpu_nop,
    .comm_begin = cpu_nop,
    .comm_wait = cpu_comm_wait,
    .comm_create = cpu_comm_create,
    .mem_info = cpu_mem_info,
    .destroy = cpu_destroy,
};

/* The same operations under another name, with deferred asynchronous copies, for a device the engine
 * must treat as discrete. */
static zdevice_ops cpu_discrete_ops;
static pthread_once_t discrete_once = PTHREAD_ONCE_INIT;

static void init_discrete_ops(void) {
    cpu_discrete_ops = cpu_ops;
    cpu_discrete_ops.name = "cpu-discrete";
    cpu_discrete_ops.copy_async = discrete_copy_async;
    cpu_discrete_ops.copy_wait = discrete_copy_wait;
}

static zinc_status create(zmemtrack *mem, bool discrete, zdevice **out) {
    zinc_status st = ZINC_OK;
    zdevice *d = NULL;
    *out = NULL;
    TRY_ALLOC(d, 1, "the cpu device");
    if (discrete) pthread_once(&discrete_once, init_discrete_ops);
    d->ops = discrete ? &cpu_discrete_ops : &cpu_ops;
    d->kind = ZINC_DEVICE_CPU;
    d->mem_kind = discrete ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    d->host_addressable = !discrete;
    d->mem = mem;
    if (discrete) {
        pending_copy *pc = NULL;
        TRY_ALLOC(pc, ZDEV_COPY_SLOTS, "the cpu device's pending copies");
        d->impl = pc;
        /* Counted, not allocated: the CPU kernels need no scratch, but the footprint is the cuda device's. */
        zmem_add(mem, ZINC_MEMKIND_DEVICE, ZINC_MEM_STAGING, zdev_cuda_fixed_bytes());
    }
    *out = d;
    return ZINC_OK;
fail:
    cpu_destroy(d);
    return st;
}

zinc_status zdev_create_cpu(zmemtrack *mem, zdevice **out) { return create(mem, false, out); }
zinc_status zdev_create_cpu_discrete(zmemtrack *mem, zdevice **out) { return create(mem, true, out); }
