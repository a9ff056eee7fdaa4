/* The one place zinc reads its environment (see env.h). The rows follow zenv_id's order; docs/env.md
 * holds the same table for users and tests/test_env.c checks that the names, values, defaults, readers
 * and kinds agree. The only getenv call of the library is in zenv_get. */
#include "base/core/env.h"

#include <stdlib.h>
#include <string.h>

#define SETTING(id, n, t, d, w, what) [id] = {n, t, d, w, ZENV_SETTING, what}
#define HOOK(id, n, t, what) [id] = {n, t, "unset", "library", ZENV_TEST_HOOK, what}
#define FOREIGN(id, n, t, w, what) [id] = {n, t, "unset", w, ZENV_FOREIGN, what}

static const zenv_var g_vars[ZENV_COUNT] = {
    SETTING(ZENV_COMM, "ZINC_COMM", "single or mpi", "automatic", "library",
            "the host collective backend: single (one rank) or mpi; unset: mpi when started by a launcher or "
            "with MPI initialised, else single"),
    SETTING(ZENV_DEVICE_COMM, "ZINC_DEVICE_COMM", "auto, nccl, mpi or staged", "auto", "library",
            "collectives on device buffers: NCCL, MPI, or MPI through pinned host staging; auto: NCCL with "
            "one GPU per rank, staging when ranks share a GPU"),
    SETTING(ZENV_STAGING_BYTES, "ZINC_STAGING_BYTES", "bytes, 4096 to 2^40", "67108864 (64 MiB)", "library",
            "host staging memory per rank for collectives on device buffers through MPI"),
    SETTING(ZENV_MPI_PIECE_ELEMENTS, "ZINC_MPI_PIECE_ELEMENTS", "elements, 64 to 2^31-1", "262144", "library",
            "the largest element count one MPI call gets (bounds MPI's temporary buffers)"),
    SETTING(ZENV_COLLECTIVE_TIMEOUT_S, "ZINC_COLLECTIVE_TIMEOUT_S", "seconds, 0 = off",
            "0 (off); 1800 in the zinc program", "library",
            "a rank that waits longer than this in a collective ends its process with status 113"),
    SETTING(ZENV_LOG_ALL_RANKS, "ZINC_LOG_ALL_RANKS", "flag (1)", "unset", "library",
            "the default log sink (zinc_log_stderr) prints warnings and errors of every rank, not rank 0 only"),
    SETTING(ZENV_SIMD, "ZINC_SIMD", "scalar, avx2 or avx512", "the best the CPU has", "library",
            "caps the SIMD path of the CPU optimizer kernels (can only lower it); read once per process"),
    SETTING(ZENV_MEM_HEADROOM, "ZINC_MEM_HEADROOM", "percent, 0 to 90", "10", "library",
            "the share of each memory limit the pre-flight check keeps free"),
    SETTING(ZENV_PREFLIGHT, "ZINC_PREFLIGHT", "0", "on", "library",
            "0 turns off the memory pre-flight check of zinc_build"),
    SETTING(ZENV_EXPERIMENTAL_CUDA, "ZINC_EXPERIMENTAL_CUDA", "flag (1)", "unset", "library",
            "lets the engine use the CUDA device backend, which has never run on a GPU"),
    SETTING(ZENV_NCCL_LIBRARY, "ZINC_NCCL_LIBRARY", "a file name or path", "libnccl.so.2, then libnccl.so", "library",
            "the NCCL library device cuda loads at its first NCCL communicator (instead of the default "
            "names)"),
    SETTING(ZENV_BLAS_LIBRARY, "ZINC_BLAS_LIBRARY", "a file name or path",
            "libopenblas.so.0, then libcblas.so.3, libblas.so.3", "library",
            "the CBLAS (cblas_sgemm) Muon's Newton-Schulz loads at zinc_build when the process has none (instead of "
            "the default names)"),
    HOOK(ZENV_CPU_DISCRETE, "ZINC_CPU_DISCRETE", "flag (1)",
         "presents the cpu device as a discrete one (buffers reached through copies, counted as device memory)"),
    HOOK(ZENV_TEST_RANKS_PER_NODE, "ZINC_TEST_RANKS_PER_NODE", "ranks, dividing the world",
         "the ranks per node ZeRO++'s qgZ takes (consecutive ranks) instead of MPI_COMM_TYPE_SHARED's count, so one "
         "machine runs its two-stage all-to-all"),
    HOOK(ZENV_FAKE_MEM_AVAILABLE, "ZINC_FAKE_MEM_AVAILABLE", "bytes",
         "the pre-flight's MemAvailable instead of /proc/meminfo's"),
    HOOK(ZENV_FAKE_MEMLOCK, "ZINC_FAKE_MEMLOCK", "bytes", "the pre-flight's RLIMIT_MEMLOCK"),
    HOOK(ZENV_FAKE_AS_FREE, "ZINC_FAKE_AS_FREE", "bytes", "the pre-flight's free address space under RLIMIT_AS"),
    HOOK(ZENV_FAKE_NVME_FREE, "ZINC_FAKE_NVME_FREE", "bytes", "the pre-flight's free space under nvme_path"),
    HOOK(ZENV_FAKE_DEVICE_FREE, "ZINC_FAKE_DEVICE_FREE", "bytes", "the pre-flight's free device memory"),
    HOOK(ZENV_FAKE_CGROUP_FREE, "ZINC_FAKE_CGROUP_FREE", "bytes",
         "the pre-flight's free memory (and limit) of the memory cgroup"),
    HOOK(ZENV_CKPT_TEST_KILL_AFTER_BYTES, "ZINC_CKPT_TEST_KILL_AFTER_BYTES", "bytes",
         "a checkpoint save raises SIGKILL after writing this many bytes"),
    HOOK(ZENV_CKPT_TEST_KILL_BETWEEN_RENAMES, "ZINC_CKPT_TEST_KILL_BETWEEN_RENAMES", "flag (1)",
         "a checkpoint save without atomic exchange raises SIGKILL between its two renames"),
    HOOK(ZENV_CKPT_TEST_KILL_IN_RETENTION, "ZINC_CKPT_TEST_KILL_IN_RETENTION", "flag (1)",
         "zinc_checkpoint_keep_last raises SIGKILL after moving its first old checkpoint aside"),
    HOOK(ZENV_CKPT_TEST_WRITE_ERRNO, "ZINC_CKPT_TEST_WRITE_ERRNO", "errno (28: ENOSPC, 5: EIO)",
         "the writes of a checkpoint's shard file, manifest and latest fail with this errno"),
    HOOK(ZENV_CKPT_TEST_SNAPSHOT_DELAY_MS, "ZINC_CKPT_TEST_SNAPSHOT_DELAY_MS", "milliseconds",
         "the decoupled checkpoint's writer thread pauses this long inside each piece it copies"),
    HOOK(ZENV_CKPT_TEST_PUBLISH_DELAY_MS, "ZINC_CKPT_TEST_PUBLISH_DELAY_MS", "milliseconds",
         "a checkpoint's publish (its manifest, directory and latest) pauses this long before its first write"),
    HOOK(ZENV_CKPT_TEST_NO_EXCHANGE, "ZINC_CKPT_TEST_NO_EXCHANGE", "flag (1)",
         "checkpoint saves take the portable replace (two renames) instead of renameat2(RENAME_EXCHANGE)"),
    HOOK(ZENV_AIO_FAULT, "ZINC_AIO_FAULT", "fault spec (offload/aio.h)",
         "NVMe IO fault injection, e.g. write:EIO:skip=3:count=1, read:short, refuse_direct, no_uring"),
    HOOK(ZENV_TRACE_TEST_ESTIMATE_CLOCK, "ZINC_TRACE_TEST_ESTIMATE_CLOCK", "flag (1)",
         "--trace estimates every rank's clock offset, even where the rank shares rank 0's clock"),
    HOOK(ZENV_TRACE_TEST_MAX_EVENTS, "ZINC_TRACE_TEST_MAX_EVENTS", "spans, 1 to 2^20",
         "--trace keeps at most this many spans per process (rounded up to its blocks of 1024) instead of 2^20"),
    [ZENV_TEST_INF_GRAD_STEPS] = {"ZINC_TEST_INF_GRAD_STEPS", "step numbers from 1, comma-separated", "unset",
                                  "zinc program", ZENV_TEST_HOOK,
                                  "zinc train --model mlp adds inf to a gradient of the last rank at these steps "
                                  "(skipped-step tests)"},
    FOREIGN(ZENV_OMPI_COMM_WORLD_RANK, "OMPI_COMM_WORLD_RANK", "rank", "library, zinc program",
            "Open MPI's mpirun: set means launched (library); the rank for messages before an engine exists "
            "(zinc program)"),
    FOREIGN(ZENV_OMPI_COMM_WORLD_SIZE, "OMPI_COMM_WORLD_SIZE", "ranks", "library",
            "Open MPI's mpirun: set means launched"),
    FOREIGN(ZENV_PMI_RANK, "PMI_RANK", "rank", "library, zinc program", "PMI launchers (MPICH's hydra): as above"),
    FOREIGN(ZENV_PMIX_RANK, "PMIX_RANK", "rank", "library, zinc program", "PMIx launchers: as above"),
    FOREIGN(ZENV_SLURM_PROCID, "SLURM_PROCID", "rank", "library, zinc program",
            "srun: launched when SLURM_STEP_ID is set too; the rank (zinc program)"),
    FOREIGN(ZENV_SLURM_STEP_ID, "SLURM_STEP_ID", "step", "library", "srun: a job step (see SLURM_PROCID)"),
    FOREIGN(ZENV_SLURM_JOB_ID, "SLURM_JOB_ID", "job id", "zinc program",
            "salloc, sbatch, srun: inside a Slurm allocation, where zinc launch starts ranks with srun"),
    FOREIGN(ZENV_SLURM_NTASKS, "SLURM_NTASKS", "count", "zinc program",
            "salloc, sbatch: the allocation's task count, zinc launch's default -n"),
    FOREIGN(ZENV_TORCH_RANK, "RANK", "rank", "zinc program",
            "torchrun / torch.distributed launchers: with WORLD_SIZE above 1 and no MPI, PMI or srun rank, zinc train "
            "refuses to start and names the mpirun command to use"),
    FOREIGN(ZENV_TORCH_WORLD_SIZE, "WORLD_SIZE", "ranks", "zinc program", "torchrun: see RANK"),
    FOREIGN(ZENV_TORCH_LOCAL_RANK, "LOCAL_RANK", "rank on the node", "zinc program", "torchrun: see RANK"),
    FOREIGN(ZENV_PATH, "PATH", "directories", "zinc program", "where `zinc mem` looks for gnuplot to draw plots"),
    FOREIGN(ZENV_MALLOC_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", "bytes (glibc)", "zinc program",
            "glibc's mmap threshold: set, the zinc program leaves it to glibc instead of holding it at 1 MiB"),
    FOREIGN(ZENV_GLIBC_TUNABLES, "GLIBC_TUNABLES", "glibc tunables", "zinc program",
            "glibc's tunables: with glibc.malloc.mmap_threshold in it, as MALLOC_MMAP_THRESHOLD_"),
};

bool zenv_test_hooks_enabled(void) {
#ifdef ZINC_TEST_HOOKS
    return true;
#else
    return false;
#endif
}

const zenv_var *zenv_info(zenv_id id) {
    if ((int)id < 0 || id >= ZENV_COUNT) return NULL;
    return &g_vars[id];
}

const char *zenv_get(zenv_id id) {
    const zenv_var *v = zenv_info(id);
    if (!v || !v->name) return NULL;
    if (v->kind == ZENV_TEST_HOOK && !zenv_test_hooks_enabled()) return NULL;
    const char *s = getenv(v->name);
    return s && *s ? s : NULL;
}

const char *zenv_get_named(const char *name) {
    for (int id = 0; name && id < ZENV_COUNT; id++)
        if (g_vars[id].name && !strcmp(g_vars[id].name, name)) return zenv_get((zenv_id)id);
    return NULL;
}
