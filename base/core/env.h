/* The environment variables zinc reads, in one table (env.c): every read in the library and the zinc
 * program goes through here, so a variable cannot be read without being listed, typed and documented
 * (docs/env.md holds the same table; tests/test_env.c checks that the two agree).
 *
 * Test hooks (faked memory figures, fault injection, kill points) are read only when env.c is compiled
 * with ZINC_TEST_HOOKS, which only the test programs' copy of it is (CMakeLists.txt, zinc_env_hooks): the
 * library and the installed zinc program treat them as unset. Values are read at each call (tests set and unset them between runs); parsing and
 * range checks stay with the code that uses the value, which also words the error. */
#ifndef ZINC_RUNTIME_CORE_ENV_H
#define ZINC_RUNTIME_CORE_ENV_H

#include <stdbool.h>

typedef enum zenv_id {
    /* settings for users */
    ZENV_COMM,
    ZENV_DEVICE_COMM,
    ZENV_STAGING_BYTES,
    ZENV_MPI_PIECE_ELEMENTS,
    ZENV_COLLECTIVE_TIMEOUT_S,
    ZENV_LOG_ALL_RANKS,
    ZENV_SIMD,
    ZENV_MEM_HEADROOM,
    ZENV_PREFLIGHT,
    ZENV_EXPERIMENTAL_CUDA,
    ZENV_NCCL_LIBRARY,
    ZENV_BLAS_LIBRARY,
    /* test hooks (ZINC_TEST_HOOKS builds only) */
    ZENV_CPU_DISCRETE,
    ZENV_TEST_RANKS_PER_NODE,
    ZENV_FAKE_MEM_AVAILABLE,
    ZENV_FAKE_MEMLOCK,
    ZENV_FAKE_AS_FREE,
    ZENV_FAKE_NVME_FREE,
    ZENV_FAKE_DEVICE_FREE,
    ZENV_FAKE_CGROUP_FREE,
    ZENV_CKPT_TEST_KILL_AFTER_BYTES,
    ZENV_CKPT_TEST_KILL_BETWEEN_RENAMES,
    ZENV_CKPT_TEST_NO_EXCHANGE,
    ZENV_CKPT_TEST_KILL_IN_RETENTION,
    ZENV_CKPT_TEST_WRITE_ERRNO,
    ZENV_CKPT_TEST_SNAPSHOT_DELAY_MS,
    ZENV_CKPT_TEST_PUBLISH_DELAY_MS,
    ZENV_AIO_FAULT,
    ZENV_TRACE_TEST_ESTIMATE_CLOCK,
    ZENV_TRACE_TEST_MAX_EVENTS,
    ZENV_TEST_INF_GRAD_STEPS,
    /* set by others: MPI launchers (whether and where this process was launched), the shell */
    ZENV_OMPI_COMM_WORLD_RANK,
    ZENV_OMPI_COMM_WORLD_SIZE,
    ZENV_PMI_RANK,
    ZENV_PMIX_RANK,
    ZENV_SLURM_PROCID,
    ZENV_SLURM_STEP_ID,
    ZENV_SLURM_JOB_ID,
    ZENV_SLURM_NTASKS,
    ZENV_TORCH_RANK,
    ZENV_TORCH_WORLD_SIZE,
    ZENV_TORCH_LOCAL_RANK,
    ZENV_PATH,
    ZENV_MALLOC_MMAP_THRESHOLD,
    ZENV_GLIBC_TUNABLES,
    ZENV_COUNT
} zenv_id;

typedef enum zenv_kind {
    ZENV_SETTING,   /* a zinc setting for users */
    ZENV_TEST_HOOK, /* for tests only: ignored unless built with ZINC_TEST_HOOKS */
    ZENV_FOREIGN,   /* set by a launcher or the shell; zinc only reads it */
} zenv_kind;

typedef struct zenv_var {
    const char *name;
    const char *type; /* the values it takes, as docs/env.md words them: "flag (1)", "bytes", "a, b or c" */
    const char *dflt; /* what applies when it is unset, as docs/env.md words it */
    const char *who;  /* "library" or "zinc program" (the CLI) */
    zenv_kind kind;
    const char *what; /* one line: what it does */
} zenv_var;

/* The variable's value; NULL when unset or empty, and for a test hook in a build without
 * ZINC_TEST_HOOKS (or an id out of range). */
const char *zenv_get(zenv_id id);
/* zenv_get for the table's row called `name`, for code that holds a variable by name (base/core/dynlib.h);
 * NULL for a name the table does not have. */
const char *zenv_get_named(const char *name);
/* The table row of `id` (NULL out of range). */
const zenv_var *zenv_info(zenv_id id);
/* Whether this build reads the test hooks. */
bool zenv_test_hooks_enabled(void);

#endif
