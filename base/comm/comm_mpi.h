/* Private interface of the collective backends (base/comm/comm.c, comm_mpi.c, comm_single.c) and their tests.
 *
 * The MPI backend (name "mpi") runs every collective on its own duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN. Counts above zcomm_mpi_max_count() elements (ZCOMM_MPI_PIECE_DEFAULT by default,
 * ZINC_MPI_PIECE_ELEMENTS in the environment; at most INT_MAX, MPI counts are int) are split, so that the
 * temporary buffers Open MPI allocates inside a collective (about 1.5x the message for a reduce-scatter,
 * half of it for an allreduce) stay bounded by the piece and the memory estimate can count them:
 *   allreduce           consecutive chunks of at most max_count elements, one MPI_(I)allreduce each;
 *   reduce_scatterv     one MPI_(I)reduce_scatter when every count and their sum fit, else one MPI_(I)reduce
 *                       per owner rank and chunk of its slice (root = owner);
 *   allgatherv_inplace  one MPI_(I)allgatherv (displacements relative to the lowest one) when the counts,
 *                       their sum and the relative displacements fit, else one MPI_(I)bcast per rank and
 *                       chunk of its slice (root = owner);
 *   allgather_bytes     one MPI_Allgather when size * bytes fits, else per-rank chunked MPI_Bcast;
 *   bcast               chunks of at most max_count bytes.
 * fp16/bf16 sums and maxima use user-defined commutative MPI ops on a 2-byte contiguous datatype: each
 * combination of two vectors converts to float, adds (or compares) and rounds to nearest even once per
 * element. MAX propagates NaN. fp32 uses MPI_FLOAT with MPI_SUM / MPI_MAX.
 *
 * A split non-blocking call starts its first piece at once and each next one in zcomm_wait when the one
 * before it has completed, so one piece's temporaries are live per pending request.
 *
 * Determinism: for a fixed rank count, count, max_count and blocking/non-blocking choice the same MPI
 * algorithms run, so results repeat bit for bit. A blocking and a non-blocking call (different Open MPI
 * components: tuned vs libnbc), or a split and an unsplit call, may differ in the last bit for 3+ ranks.
 *
 * After an MPI error the communicator should be considered broken (requests already started are not
 * completed). Buffers are host memory; GPU buffers would be staged through pinned host memory in
 * comm_mpi.c (issue and wait) when the CUDA device backend needs MPI without NCCL. */
#ifndef ZINC_RUNTIME_COMM_MPI_H
#define ZINC_RUNTIME_COMM_MPI_H

#include <stddef.h>

#include "base/comm/comm.h"

/* The default largest count of one MPI call: 256Ki elements (1 MiB of fp32), large enough for full
 * shared-memory and network bandwidth, small enough that MPI's temporaries are a few MiB. */
#define ZCOMM_MPI_PIECE_DEFAULT ((size_t)1 << 18)

/* The largest element count passed to one MPI call (default ZCOMM_MPI_PIECE_DEFAULT, or
 * ZINC_MPI_PIECE_ELEMENTS read when a communicator is created). Tests lower it to exercise the splitting
 * paths; 0 restores the default. Must be set to the same value on every rank, and not while a
 * non-blocking collective is pending. */
void zcomm_mpi_set_max_count(size_t n);
size_t zcomm_mpi_max_count(void);

/* 1 when the process was started by a launcher: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun),
 * PMI_RANK (MPICH hydra, srun --mpi=pmi2), PMIX_RANK (PMIx launchers, srun --mpi=pmix), or SLURM_PROCID
 * together with SLURM_STEP_ID (inside an srun step; SLURM_NTASKS alone is also set in an salloc/sbatch
 * shell and does not count). */
int zcomm_launcher_detected(void);

/* Initialises MPI (MPI_THREAD_FUNNELED) unless it already is, and then registers zinc_finalize with
 * atexit (once). ZINC_ERR_STATE if MPI was already finalised. Defined in comm.c. */
zinc_status zcomm_mpi_ensure_init(const zlog *log);

#endif
