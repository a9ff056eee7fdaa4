/* Test-only host emulation of the NCCL calls base/comm/comm_nccl.c makes (see cuda_runtime_api.h here).
 * Ranks are the processes of MPI_COMM_WORLD (a duplicate of it). A collective runs in two halves:
 *   - at the call, the stream's earlier work is run (what the collective waits for: if the caller did not
 *     make the stream wait for the producer of its input, the input is stale), the input is read and the
 *     ranks exchange it over MPI (all ranks call collectives in the same order, as NCCL requires);
 *   - the result is written into the output buffer by work enqueued on the stream, so a consumer that
 *     does not wait for the stream sees the old contents.
 * Reductions add the ranks' values in rank order, in fp32 for 16-bit types (NCCL's order differs; tests
 * compare within tolerances). Buffers must be device memory, as NCCL's must. */
#ifndef ZINC_TESTS_CUDA_HOST_NCCL_H
#define ZINC_TESTS_CUDA_HOST_NCCL_H

#include <stddef.h>

#include "cuda_runtime_api.h"

#define NCCL_VERSION_CODE 22000

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;
typedef struct cuda_host_nccl *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum {
    ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3, ncclInt64 = 4,
    ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8,
    ncclDouble = 8, ncclBfloat16 = 9
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s);

#endif
