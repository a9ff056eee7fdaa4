/* See nccl.h in this folder. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "nccl.h"
#include "zinc.h"

struct cuda_host_nccl {
    int nranks, rank;
    MPI_Comm mpi; /* MPI_COMM_NULL for one rank */
};

static int group_depth;

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    }
    return "unknown result";
}

ncclResult_t ncclGetVersion(int *version) {
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "cuda_host", 9);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (memcmp(id.internal, "cuda_host", 9) != 0) return ncclInvalidArgument;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return ncclInvalidUsage;
    c->nranks = nranks;
    c->rank = rank;
    c->mpi = MPI_COMM_NULL;
    if (nranks > 1) {
        int inited = 0, size = 0, me = -1;
        MPI_Initialized(&inited);
        if (inited) {
            MPI_Comm_size(MPI_COMM_WORLD, &size);
            MPI_Comm_rank(MPI_COMM_WORLD, &me);
        }
        if (size != nranks || me != rank) {
            cuda_host_error("ncclCommInitRank(%d ranks, rank %d): the emulation needs the ranks of MPI_COMM_WORLD "
                            "(size %d, rank %d)", nranks, rank, size, me);
            free(c);
            return ncclInvalidUsage;
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm && comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (group_depth == 0) return ncclInvalidUsage;
    group_depth--;
    return ncclSuccess;
}

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}

/* ---------------------------------------------------------------- the two halves */

static int check_buffers(const char *what, const void *send, size_t send_bytes, const void *recv, size_t recv_bytes) {
    struct cudaPointerAttributes a, b;
    cudaPointerGetAttributes(&a, send);
    cudaPointerGetAttributes(&b, recv);
    if ((send_bytes && a.type != cudaMemoryTypeDevice) || (recv_bytes && b.type != cudaMemoryTypeDevice)) {
        cuda_host_error("%s: NCCL buffers must be device memory (send %p, recv %p)", what, send, recv);
        return 0;
    }
    cuda_host_check_span(send, send_bytes, what);
    cuda_host_check_span(recv, recv_bytes, what);
    return 1;
}

/* The input as it is once the stream's earlier work has run. */
static void *take_input(cudaStream_t s, const void *send, size_t bytes) {
    cuda_host_stream_flush(s);
    void *in = malloc(bytes ? bytes : 1);
    if (in) memcpy(in, send, bytes);
    return in;
}

/* The second half: recv gets `bytes` of `result` when the stream gets there. Frees result. */
static ncclResult_t deliver(cudaStream_t s, void *recv, void *result, size_t bytes) {
    cudaError_t e = bytes ? cudaMemcpyAsync(recv, result, bytes, cudaMemcpyHostToDevice, s) : cudaSuccess;
    free(result); /* pageable source: taken at the call */
    return e == cudaSuccess ? ncclSuccess : ncclInvalidUsage;
}

/* Every rank's `bytes` of `in`, rank after rank (in itself for one rank). Frees in. */
static void *gather_all(ncclComm_t c, void *in, size_t bytes) {
    if (c->nranks == 1) return in;
    char *all = malloc(bytes * (size_t)c->nranks + 1);
    if (all) MPI_Allgather(in, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi);
    free(in);
    return all;
}

static double load(const void *p, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return zinc_load_f32(p, ZINC_FP16, i);
    case ncclBfloat16: return zinc_load_f32(p, ZINC_BF16, i);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    }
    return 0;
}

static void store(void *p, ncclDataType_t t, size_t i, double v) {
    switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t *)p)[i] = zinc_f32_to_fp16((float)v); break;
    case ncclBfloat16: ((uint16_t *)p)[i] = zinc_f32_to_bf16((float)v); break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    }
}

/* out[i] = op over ranks r of all[r][off + i], i < count, in rank order (fp32 arithmetic for float types
 * narrower than double, as the reduction kernels of NCCL do). */
static void reduce_ranks(const ncclComm_t c, const char *all, size_t per_rank, size_t off, size_t count,
                         ncclDataType_t t, ncclRedOp_t op, void *out) {
    size_t es = type_size(t);
    int narrow = t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32;
    for (size_t i = 0; i < count; i++) {
        double acc = load(all, t, off + i);
        for (int r = 1; r < c->nranks; r++) {
            double v = load(all + (size_t)r * per_rank * es, t, off + i);
            switch (op) {
            case ncclSum: case ncclAvg: acc = narrow ? (double)((float)acc + (float)v) : acc + v; break;
            case ncclProd: acc = narrow ? (double)((float)acc * (float)v) : acc * v; break;
            case ncclMax: acc = v > acc ? v : acc; break;
            case ncclMin: acc = v < acc ? v : acc; break;
            }
        }
        if (op == ncclAvg) acc /= c->nranks;
        store(out, t, i, acc);
    }
}

/* ---------------------------------------------------------------- collectives */

static ncclResult_t reduce_common(const char *what, const void *send, void *recv, size_t per_rank_in, size_t off,
                                  size_t count, ncclDataType_t t, ncclRedOp_t op, int deliver_here, ncclComm_t c,
                                  cudaStream_t s) {
    size_t es = type_size(t);
    if (!c || !es) return ncclInvalidArgument;
    if (!per_rank_in) return ncclSuccess;
    if (!check_buffers(what, send, per_rank_in * es, recv, deliver_here ? count * es : 0)) return ncclInvalidUsage;
    char *all = gather_all(c, take_input(s, send, per_rank_in * es), per_rank_in * es);
    void *out = malloc(count * es + 1);
    if (!all || !out) {
        free(all);
        free(out);
        return ncclInvalidUsage;
    }
    reduce_ranks(c, all, per_rank_in, off, count, t, op, out);
    free(all);
    if (!deliver_here) {
        free(out);
        return ncclSuccess;
    }
    return deliver(s, recv, out, count * es);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
    return reduce_common("ncclAllReduce", send, recv, count, 0, count, t, op, 1, comm, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
    if (!comm) return ncclInvalidArgument;
    return reduce_common("ncclReduceScatter", send, recv, recvcount * (size_t)comm->nranks,
                         recvcount * (size_t)comm->rank, recvcount, t, op, 1, comm, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s) {
    if (!comm || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
    return reduce_common("ncclReduce", send, recv, count, 0, count, t, op, comm->rank == root, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s) {
    size_t es = type_size(t), bytes = sendcount * es;
    if (!comm || !es) return ncclInvalidArgument;
    if (!sendcount) return ncclSuccess;
    if (!check_buffers("ncclAllGather", send, bytes, recv, bytes * (size_t)comm->nranks)) return ncclInvalidUsage;
    void *all = gather_all(comm, take_input(s, send, bytes), bytes);
    if (!all) return ncclInvalidUsage;
    return deliver(s, recv, all, bytes * (size_t)comm->nranks);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    size_t es = type_size(t), bytes = count * es;
    if (!comm || !es || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
    if (!count) return ncclSuccess;
    if (!check_buffers("ncclBroadcast", comm->rank == root ? send : recv, comm->rank == root ? bytes : 0, recv, bytes))
        return ncclInvalidUsage;
    void *buf = comm->rank == root ? take_input(s, send, bytes) : (cuda_host_stream_flush(s), malloc(bytes));
    if (!buf) return ncclInvalidUsage;
    if (comm->nranks > 1) MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm->mpi);
    return deliver(s, recv, buf, bytes);
}
