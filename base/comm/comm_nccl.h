/* The NCCL collective backend: a zcomm (base/comm/comm.h) over NCCL for DEVICE buffers, one rank per GPU.
 * Only built with the CUDA backend (ZINC_HAVE_CUDA).
 *
 * Buffers: allreduce, reduce_scatterv and allgatherv_inplace take device pointers. bcast and
 * allgather_bytes take device or host pointers: host buffers (the engine's small metadata exchanges) are
 * staged through a small device scratch buffer owned by the communicator.
 *
 * Streams and requests: every collective is enqueued on the communicator's stream (the `stream` given at
 * creation, or a non-blocking stream the communicator creates when that is NULL). With a non-NULL req
 * pointer the call returns at once with a request that holds a cudaEvent recorded on that stream after
 * the collective; zcomm_wait synchronizes that event (the host waits until the collective is done) and
 * frees the request. zcomm_nccl_wait_stream instead makes another stream wait on the event, without
 * blocking the host. With a NULL req pointer the call is blocking: it synchronizes the communicator's
 * stream before returning. allgather_bytes, bcast and barrier are always blocking.
 *
 * Counts may exceed INT_MAX (NCCL counts are size_t). reduce_scatterv uses ncclReduceScatter when all
 * counts are equal and otherwise a group of one ncclReduce per owner rank; allgatherv_inplace uses an
 * in-place ncclAllGather when counts are equal and the slices contiguous in rank order, else a group of
 * one ncclBroadcast per rank. fp16 maps to ncclFloat16, bf16 to ncclBfloat16.
 *
 * NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected"): several ranks
 * sharing one GPU must use the MPI backend instead. */
#ifndef ZINC_RUNTIME_COMM_NCCL_H
#define ZINC_RUNTIME_COMM_NCCL_H

#include "base/comm/comm.h"

/* Creates an NCCL communicator with the ranks of `mpi`: rank 0 calls ncclGetUniqueId, the id is sent with
 * zcomm_bcast over `mpi`, and every rank calls ncclCommInitRank(mpi->size, id, mpi->rank). The caller has
 * already selected the GPU (cudaSetDevice(mpi->local_rank % device_count)); the communicator uses the
 * current device. `mpi` may be NULL for a single-rank communicator (rank 0 of 1). `mpi` is only used
 * during creation and is not owned. `stream`: a cudaStream_t as void *, or NULL (see above). Errors:
 * ZINC_ERR_COMM naming the NCCL call and ncclGetErrorString; ZINC_ERR_DEVICE for CUDA failures. */
zinc_status zcomm_create_nccl(zcomm *mpi, void *stream, const zlog *log, zcomm **out);

/* Makes `stream` (a cudaStream_t as void *) wait for the request's collective and frees the request;
 * the host does not wait. req may be NULL (no-op). c must be an NCCL communicator. */
zinc_status zcomm_nccl_wait_stream(zcomm *c, zcomm_req *req, void *stream);

/* The communicator's stream (a cudaStream_t as void *). */
void *zcomm_nccl_stream(zcomm *c);

#endif
