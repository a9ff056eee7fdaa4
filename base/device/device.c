/* Device selection and the host<->device helpers shared by every device backend (see device.h). */
#include "base/device/device.h"

#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"
#include "base/core/error.h"
#include "kernels/cuda_kernels.h"

static zinc_status create_kind(zinc_device_kind kind, zmemtrack *mem, const zlog *log, int local_rank, zdevice **out) {
    if (kind == ZINC_DEVICE_CUDA) return zdev_create_cuda(mem, log, local_rank, out);
    const char *discrete = zenv_get(ZENV_CPU_DISCRETE);
    if (discrete && !strcmp(discrete, "1")) {
        ZLOG_INFO(log, "device cpu presented as a discrete device (ZINC_CPU_DISCRETE=1): buffers are reached "
                       "through copies and counted as device memory");
        return zdev_create_cpu_discrete(mem, out);
    }
    return zdev_create_cpu(mem, out);
}

zinc_status zdev_create(zinc_device_kind kind, zmemtrack *mem, const zlog *log, int local_rank, int host_threads,
                        zdevice **out) {
    zinc_status st = ZINC_OK;
    zdevice *d = NULL;
    *out = NULL;
    TRY(create_kind(kind, mem, log, local_rank, &d));
    TRY(zpool_create(host_threads, &d->pool));
    *out = d;
    return ZINC_OK;
fail:
    zdev_destroy(d);
    return st;
}

uint64_t zdev_cuda_fixed_bytes(void) {
    /* zcu_grad_stats_workspace_bytes() is ZCU_STATS_BLOCKS partial sums and flags (kernels/grad_stats.cu
     * asserts it), which a build without CUDA cannot call. */
    return ZDEV_CUDA_CONV_ELEMS * sizeof(float) + (uint64_t)ZCU_STATS_BLOCKS * (sizeof(double) + sizeof(int)) +
           sizeof(zcu_grad_stats_result);
}

uint64_t zdev_lamb_workspace_bytes(void) {
    return (uint64_t)ZCU_STATS_BLOCKS * 2 * sizeof(double); /* kernels/lamb.cu asserts it */
}

#ifndef ZINC_HAVE_CUDA
int zdev_cuda_count(void) { return 0; }

zinc_status zdev_create_cuda(zmemtrack *mem, const zlog *log, int local_rank, zdevice **out) {
    (void)mem, (void)log, (void)local_rank;
    *out = NULL;
    return ZERR(ZINC_ERR_UNSUPPORTED, "device cuda: this zinc was built without the CUDA backend (configure with "
                                      "-DZINC_CUDA=ON where nvcc, the CUDA toolkit and NCCL are installed)");
}
#endif

#define ZDEV_TILE 16384 /* elements per staging tile */

zinc_status zdev_download_f32(zdevice *d, float *host_dst, const void *src, zinc_dtype t, size_t n) {
    zinc_status st = ZINC_OK;
    char *tile = NULL;
    if (d->host_addressable) {
        ZDEV_ON_POOL(d, zcast_to_f32(host_dst, src, t, n));
        return ZINC_OK;
    }
    size_t es = zinc_dtype_size(t);
    TRY_ALLOC(tile, ZDEV_TILE * es, "a device download tile");
    for (size_t i = 0; i < n; i += ZDEV_TILE) {
        size_t k = n - i < ZDEV_TILE ? n - i : ZDEV_TILE;
        TRY(d->ops->copy(d, tile, (const char *)src + i * es, k * es, ZDEV_D2H));
        zcast_to_f32(host_dst + i, tile, t, k);
    }
fail:
    free(tile);
    return st;
}

zinc_status zdev_upload_f32(zdevice *d, void *dst, zinc_dtype t, const float *host_src, size_t n) {
    zinc_status st = ZINC_OK;
    char *tile = NULL;
    if (d->host_addressable) {
        ZDEV_ON_POOL(d, zcast_from_f32(dst, t, host_src, n));
        return ZINC_OK;
    }
    size_t es = zinc_dtype_size(t);
    TRY_ALLOC(tile, ZDEV_TILE * es, "a device upload tile");
    for (size_t i = 0; i < n; i += ZDEV_TILE) {
        size_t k = n - i < ZDEV_TILE ? n - i : ZDEV_TILE;
        zcast_from_f32(tile, t, host_src + i, k);
        TRY(d->ops->copy(d, (char *)dst + i * es, tile, k * es, ZDEV_H2D));
    }
fail:
    free(tile);
    return st;
}
