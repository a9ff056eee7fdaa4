/* Collectives on compute-device buffers carried out by a host backend (MPI) through staging buffers in
 * host memory (page-locked on cuda). This is how several ranks that share one GPU train (NCCL refuses
 * two ranks of a communicator on one device) and how GPUs train where NCCL is not available.
 *
 * Every collective moves its data in rounds of at most `staging_bytes`: device -> host copy, the host
 * collective on the staging buffer, host -> device copy of the result. The device copies are ordered
 * after the compute work issued before them (they run on the compute stream), so the engine's
 * zdev_comm_begin is all the ordering needed. Calls complete before they return: a non-blocking call
 * sets *req to NULL, so the engine's later zcomm_wait / zdev_comm_wait are no-ops and no overlap with
 * backward happens on this path.
 *
 * Results: the same host collective runs on the same values, so sums match the host backend's except
 * that rounds split large buffers into several calls (an MPI library may pick another algorithm, and so
 * another summation order, for a different message size): within rounding of the unstaged sums, and
 * bitwise repeatable for a fixed rank count and staging size. */
#ifndef ZINC_RUNTIME_COMM_STAGED_H
#define ZINC_RUNTIME_COMM_STAGED_H

#include <stddef.h>

#include "base/comm/comm.h"
#include "base/device/device.h"

/* Which communicator a device's buffers use; ZINC_DEVICE_COMM in the environment picks it:
 *   auto    (default) cpu: the host backend itself; cuda: NCCL when every rank of the node has a GPU of
 *           its own, else MPI through staging
 *   nccl    NCCL (cuda only; an error when ranks share a GPU)
 *   mpi     the host backend: directly on cpu, through staging on cuda
 *   staged  the host backend through staging on every device (on cpu it exercises the staging path,
 *           for tests) */
typedef enum { ZDCOMM_AUTO = 0, ZDCOMM_NCCL, ZDCOMM_MPI, ZDCOMM_STAGED } zdcomm_choice;
zinc_status zdcomm_choice_from_env(zdcomm_choice *out);

/* Bytes of host staging memory per communicator: ZINC_STAGING_BYTES from the environment (at least
 * 4096), else ZCOMM_STAGING_DEFAULT. */
#define ZCOMM_STAGING_DEFAULT ((size_t)64 << 20)
zinc_status zcomm_staging_bytes_from_env(size_t *out);

/* Wraps `host` (borrowed: it must outlive the result, which does not destroy it) for buffers of `dev`.
 * The staging buffer comes from dev->ops->alloc_host under ZINC_MEM_STAGING. */
zinc_status zcomm_create_staged(zcomm *host, zdevice *dev, size_t staging_bytes, const zlog *log, zcomm **out);
/* The same with the staging size from ZINC_STAGING_BYTES (zcomm_staging_bytes_from_env). */
zinc_status zcomm_create_staged_env(zcomm *host, zdevice *dev, const zlog *log, zcomm **out);
/* The staging bytes of a communicator made by zcomm_create_staged; 0 for any other communicator. */
size_t zcomm_staged_bytes(const zcomm *c);

#endif
