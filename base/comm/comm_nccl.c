/* The NCCL zcomm backend (see comm_nccl.h). */
#include "base/comm/comm_nccl.h"

#include <cuda_runtime_api.h>
/* nccl.h declares a few functions as f() rather than f(void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/error.h"
#include "base/core/log.h"
#include "base/core/dynlib.h"

/* NCCL is loaded at the first communicator (base/core/dynlib.h), not linked: a CPU run of a build
 * with the CUDA backend never maps it, and the build starts where NCCL is not installed. These are the
 * functions this file calls, with the types nccl.h declares. */
/* clang-format off */
#define NCCL_FUNCTIONS(X) \
    X(GetErrorString) X(GetVersion) X(GetUniqueId) X(CommInitRank) X(CommDestroy) X(GroupStart) X(GroupEnd) \
    X(AllReduce) X(ReduceScatter) X(Reduce) X(AllGather) X(Broadcast)
/* clang-format on */

static struct nccl_api {
#define NCCL_MEMBER(f) __typeof__(&nccl##f) f;
    NCCL_FUNCTIONS(NCCL_MEMBER)
#undef NCCL_MEMBER
} nccl;

static zinc_status load_nccl(const zlog *log) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int loaded;
    static const char *const names[] = {"libnccl.so.2", "libnccl.so", NULL};
    static const char *const symbols[] = {
#define NCCL_NAME(f) "nccl" #f,
        NCCL_FUNCTIONS(NCCL_NAME)
#undef NCCL_NAME
            NULL};
    static const zdynlib lib = {
        .what = "device cuda needs NCCL for its collectives",
        .env = "ZINC_NCCL_LIBRARY",
        .names = names,
        .symbols = symbols,
        .fix = "install NCCL 2 (Debian/Ubuntu: libnccl2) and put its folder on LD_LIBRARY_PATH, name the file in "
               "ZINC_NCCL_LIBRARY, or set ZINC_DEVICE_COMM=staged to reduce through MPI with pinned host staging",
    };
    void *fns[sizeof symbols / sizeof symbols[0] - 1];
    _Static_assert(sizeof fns == sizeof nccl, "one pointer per NCCL function");
    zinc_status st = ZINC_OK;
    pthread_mutex_lock(&lock);
    if (!loaded) {
        st = zdynlib_load(&lib, fns, log);
        if (st == ZINC_OK) {
            /* POSIX: a function's address from dlsym converts through void *. */
            memcpy(&nccl, fns, sizeof nccl);
            loaded = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int own_stream;
    void *scratch; /* device scratch for host-buffer staging and the barrier */
    size_t scratch_bytes;
    zlog log;
} nccl_impl;

struct zcomm_req {
    cudaEvent_t ev;
};

#define NCCL_TRY(call)                                                                                                 \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) FAIL(ZINC_ERR_COMM, "nccl: %s failed: %s", #call, nccl.GetErrorString(r_));             \
    } while (0)

#define CUDA_TRY(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) FAIL(ZINC_ERR_DEVICE, "nccl backend: %s failed: %s", #call, cudaGetErrorString(e_));    \
    } while (0)

static nccl_impl *impl_of(zcomm *c) { return (nccl_impl *)c->impl; }

static zinc_status nccl_type(zinc_dtype t, ncclDataType_t *out) {
    switch (t) {
    case ZINC_FP32: *out = ncclFloat32; return ZINC_OK;
    case ZINC_FP16: *out = ncclFloat16; return ZINC_OK;
    case ZINC_BF16: *out = ncclBfloat16; return ZINC_OK;
    }
    return ZERR(ZINC_ERR_INVALID_ARG, "nccl: unknown dtype %d", (int)t);
}

/* After enqueuing a collective: either hand back a request (an event on the comm stream) or block. */
static zinc_status finish(zcomm *c, zcomm_req **req) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    zcomm_req *r = NULL;
    if (!req) {
        CUDA_TRY(cudaStreamSynchronize(im->stream));
        return ZINC_OK;
    }
    *req = NULL;
    TRY_ALLOC(r, 1, "an NCCL request");
    CUDA_TRY(cudaEventCreateWithFlags(&r->ev, cudaEventDisableTiming));
    {
        cudaError_t e = cudaEventRecord(r->ev, im->stream);
        if (e != cudaSuccess) {
            cudaEventDestroy(r->ev);
            FAIL(ZINC_ERR_DEVICE, "nccl backend: cudaEventRecord failed: %s", cudaGetErrorString(e));
        }
    }
    *req = r;
    return ZINC_OK;
fail:
    free(r);
    return st;
}

static zinc_status ensure_scratch(nccl_impl *im, size_t bytes) {
    zinc_status st = ZINC_OK;
    if (bytes <= im->scratch_bytes) return ZINC_OK;
    size_t want = bytes < 4096 ? 4096 : bytes;
    if (im->scratch) {
        CUDA_TRY(cudaStreamSynchronize(im->stream));
        cudaFree(im->scratch);
        im->scratch = NULL;
        im->scratch_bytes = 0;
    }
    CUDA_TRY(cudaMalloc(&im->scratch, want));
    im->scratch_bytes = want;
    return ZINC_OK;
fail:
    return st;
}

/* 1 when ptr is device (or managed) memory that NCCL can use directly. */
static int is_device_ptr(const void *ptr) {
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static zinc_status nccl_allreduce(zcomm *c, void *buf, size_t n, zinc_dtype t, zcomm_op op, zcomm_req **req) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    ncclDataType_t dt = ncclFloat32;
    if (req) *req = NULL;
    TRY(nccl_type(t, &dt));
    if (op != ZCOMM_SUM && op != ZCOMM_MAX) FAIL(ZINC_ERR_INVALID_ARG, "nccl: unknown reduction op %d", (int)op);
    if (n > 0) NCCL_TRY(nccl.AllReduce(buf, buf, n, dt, op == ZCOMM_SUM ? ncclSum : ncclMax, im->comm, im->stream));
    TRY(finish(c, req));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_reduce_scatterv(zcomm *c, const void *send, void *recv, const size_t *counts, zinc_dtype t,
                                        zcomm_req **req) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    ncclDataType_t dt = ncclFloat32;
    if (req) *req = NULL;
    TRY(nccl_type(t, &dt));
    if (!counts) FAIL(ZINC_ERR_INVALID_ARG, "nccl: reduce_scatterv needs counts");
    size_t es = zinc_dtype_size(t);
    int equal = 1;
    for (int r = 1; r < c->size; r++) equal &= counts[r] == counts[0];
    if (equal) {
        if (counts[0] > 0) NCCL_TRY(nccl.ReduceScatter(send, recv, counts[0], dt, ncclSum, im->comm, im->stream));
    } else {
        NCCL_TRY(nccl.GroupStart());
        size_t off = 0;
        ncclResult_t first_err = ncclSuccess;
        const char *what = NULL;
        for (int r = 0; r < c->size; r++) {
            if (counts[r] > 0 && first_err == ncclSuccess) {
                ncclResult_t e =
                    nccl.Reduce((const char *)send + off * es, recv, counts[r], dt, ncclSum, r, im->comm, im->stream);
                if (e != ncclSuccess) {
                    first_err = e;
                    what = "ncclReduce";
                }
            }
            off += counts[r];
        }
        ncclResult_t e2 = nccl.GroupEnd();
        if (first_err != ncclSuccess)
            FAIL(ZINC_ERR_COMM, "nccl: %s (reduce_scatterv) failed: %s", what, nccl.GetErrorString(first_err));
        if (e2 != ncclSuccess)
            FAIL(ZINC_ERR_COMM, "nccl: ncclGroupEnd (reduce_scatterv) failed: %s", nccl.GetErrorString(e2));
    }
    TRY(finish(c, req));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_allgatherv_inplace(zcomm *c, void *buf, const size_t *counts, const size_t *displs,
                                           zinc_dtype t, zcomm_req **req) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    ncclDataType_t dt = ncclFloat32;
    if (req) *req = NULL;
    TRY(nccl_type(t, &dt));
    if (!counts || !displs) FAIL(ZINC_ERR_INVALID_ARG, "nccl: allgatherv_inplace needs counts and displs");
    size_t es = zinc_dtype_size(t);
    int regular = 1;
    for (int r = 0; r < c->size; r++) regular &= counts[r] == counts[0] && displs[r] == (size_t)r * counts[0];
    if (regular) {
        if (counts[0] > 0 && c->size > 1)
            NCCL_TRY(
                nccl.AllGather((const char *)buf + displs[c->rank] * es, buf, counts[0], dt, im->comm, im->stream));
    } else if (c->size > 1) {
        NCCL_TRY(nccl.GroupStart());
        ncclResult_t first_err = ncclSuccess;
        for (int r = 0; r < c->size && first_err == ncclSuccess; r++) {
            if (counts[r] == 0) continue;
            char *p = (char *)buf + displs[r] * es;
            first_err = nccl.Broadcast(p, p, counts[r], dt, r, im->comm, im->stream);
        }
        ncclResult_t e2 = nccl.GroupEnd();
        if (first_err != ncclSuccess)
            FAIL(ZINC_ERR_COMM, "nccl: ncclBroadcast (allgatherv) failed: %s", nccl.GetErrorString(first_err));
        if (e2 != ncclSuccess)
            FAIL(ZINC_ERR_COMM, "nccl: ncclGroupEnd (allgatherv) failed: %s", nccl.GetErrorString(e2));
    }
    TRY(finish(c, req));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_allgather_bytes(zcomm *c, const void *in, void *out, size_t bytes) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    if (bytes == 0) return ZINC_OK;
    size_t total = bytes * (size_t)c->size;
    if (is_device_ptr(in) && is_device_ptr(out)) {
        NCCL_TRY(nccl.AllGather(in, out, bytes, ncclUint8, im->comm, im->stream));
        CUDA_TRY(cudaStreamSynchronize(im->stream));
        return ZINC_OK;
    }
    /* Stage: the gather result at [0, total), this rank's input copied into its slot first (in place). */
    TRY(ensure_scratch(im, total));
    char *d = (char *)im->scratch;
    CUDA_TRY(cudaMemcpyAsync(d + (size_t)c->rank * bytes, in, bytes, cudaMemcpyDefault, im->stream));
    NCCL_TRY(nccl.AllGather(d + (size_t)c->rank * bytes, d, bytes, ncclUint8, im->comm, im->stream));
    CUDA_TRY(cudaMemcpyAsync(out, d, total, cudaMemcpyDefault, im->stream));
    CUDA_TRY(cudaStreamSynchronize(im->stream));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_bcast(zcomm *c, void *buf, size_t bytes, int root) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    if (root < 0 || root >= c->size) FAIL(ZINC_ERR_INVALID_ARG, "nccl: bcast root %d out of range", root);
    if (bytes == 0) return ZINC_OK;
    if (is_device_ptr(buf)) {
        NCCL_TRY(nccl.Broadcast(buf, buf, bytes, ncclUint8, root, im->comm, im->stream));
    } else {
        TRY(ensure_scratch(im, bytes));
        if (c->rank == root) CUDA_TRY(cudaMemcpyAsync(im->scratch, buf, bytes, cudaMemcpyDefault, im->stream));
        NCCL_TRY(nccl.Broadcast(im->scratch, im->scratch, bytes, ncclUint8, root, im->comm, im->stream));
        CUDA_TRY(cudaMemcpyAsync(buf, im->scratch, bytes, cudaMemcpyDefault, im->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(im->stream));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_barrier(zcomm *c) {
    zinc_status st = ZINC_OK;
    nccl_impl *im = impl_of(c);
    TRY(ensure_scratch(im, sizeof(int)));
    CUDA_TRY(cudaMemsetAsync(im->scratch, 0, sizeof(int), im->stream));
    NCCL_TRY(nccl.AllReduce(im->scratch, im->scratch, 1, ncclInt32, ncclSum, im->comm, im->stream));
    CUDA_TRY(cudaStreamSynchronize(im->stream));
    return ZINC_OK;
fail:
    return st;
}

static zinc_status nccl_wait(zcomm *c, zcomm_req *req) {
    zinc_status st = ZINC_OK;
    (void)c;
    if (!req) return ZINC_OK;
    cudaError_t e = cudaEventSynchronize(req->ev);
    cudaEventDestroy(req->ev);
    free(req);
    if (e != cudaSuccess) FAIL(ZINC_ERR_DEVICE, "nccl backend: cudaEventSynchronize failed: %s", cudaGetErrorString(e));
    return ZINC_OK;
fail:
    return st;
}

static void nccl_destroy(zcomm *c) {
    if (!c) return;
    nccl_impl *im = impl_of(c);
    if (im) {
        if (im->stream) (void)cudaStreamSynchronize(im->stream);
        if (im->comm) nccl.CommDestroy(im->comm);
        if (im->scratch) cudaFree(im->scratch);
        if (im->own_stream && im->stream) cudaStreamDestroy(im->stream);
        free(im);
    }
    free(c);
}

static const zcomm_ops nccl_ops = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .reduce_scatterv = nccl_reduce_scatterv,
    .allgatherv_inplace = nccl_allgatherv_inplace,
    .allgather_bytes = nccl_allgather_bytes,
    .bcast = nccl_bcast,
    .barrier = nccl_barrier,
    .wait = nccl_wait,
    .destroy = nccl_destroy,
};

zinc_status zcomm_nccl_wait_stream(zcomm *c, zcomm_req *req, void *stream) {
    zinc_status st = ZINC_OK;
    if (!req) return ZINC_OK;
    if (!c || c->ops != &nccl_ops) FAIL(ZINC_ERR_INVALID_ARG, "zcomm_nccl_wait_stream: not an NCCL communicator");
    /* comms_logger times a collective to its completion: the host waits for it, as DeepSpeed's logger does */
    if (c->log && cudaEventSynchronize(req->ev) == cudaSuccess) zcomm_log_waited(c->log, req);
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, req->ev, 0);
    /* The wait is captured at enqueue time, so the event may be destroyed now. */
    cudaEventDestroy(req->ev);
    free(req);
    if (e != cudaSuccess) FAIL(ZINC_ERR_DEVICE, "nccl backend: cudaStreamWaitEvent failed: %s", cudaGetErrorString(e));
    return ZINC_OK;
fail:
    return st;
}

void *zcomm_nccl_stream(zcomm *c) {
    if (!c || c->ops != &nccl_ops) return NULL;
    return (void *)impl_of(c)->stream;
}

zinc_status zcomm_create_nccl(zcomm *mpi, void *stream, const zlog *log, zcomm **out) {
    zinc_status st = ZINC_OK;
    zcomm *c = NULL;
    nccl_impl *im = NULL;
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create_nccl: out is NULL");
    *out = NULL;
    int rank = mpi ? mpi->rank : 0, size = mpi ? mpi->size : 1;
    int ndev = 0;
    TRY(load_nccl(log));
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev <= 0) {
        (void)cudaGetLastError();
        FAIL(ZINC_ERR_DEVICE, "nccl backend: no CUDA device (%s)",
             ce != cudaSuccess ? cudaGetErrorString(ce) : "device count 0");
    }
    TRY_ALLOC(c, 1, "the NCCL communicator");
    TRY_ALLOC(im, 1, "the NCCL communicator state");
    c->ops = &nccl_ops;
    c->rank = rank;
    c->size = size;
    c->local_rank = mpi ? mpi->local_rank : 0;
    c->local_size = mpi ? mpi->local_size : 1;
    c->impl = im;
    if (log) im->log = *log;
    if (stream) {
        im->stream = (cudaStream_t)stream;
    } else {
        CUDA_TRY(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
        im->own_stream = 1;
    }

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_TRY(nccl.GetUniqueId(&id));
    if (mpi && size > 1) TRY(zcomm_bcast(mpi, &id, sizeof id, 0));
    NCCL_TRY(nccl.CommInitRank(&im->comm, size, id, rank));
    {
        int dev = -1, ver = 0;
        (void)cudaGetDevice(&dev);
        (void)nccl.GetVersion(&ver);
        ZLOG_DEBUG(&im->log, "nccl: communicator rank %d of %d on device %d (NCCL %d)", rank, size, dev, ver);
    }
    *out = c;
    return ZINC_OK;
fail:
    if (c) {
        if (im) {
            if (im->own_stream && im->stream) cudaStreamDestroy(im->stream);
            free(im);
        }
        free(c);
    }
    return st;
}
