/* Backend selection and the MPI lifetime (see comm.h, comm_mpi.h).
 *
 * zcomm_create picks, in order:
 *   ZINC_COMM=single|mpi in the environment (an override, mostly for tests and debugging);
 *   "mpi" when MPI is already initialised (the application called MPI_Init) or a launcher started us;
 *   "single" otherwise, without calling MPI_Init (a plain `./train` needs no launcher).
 * zcomm_mpi_ensure_init initialises MPI when zinc is the first to need it and registers zinc_finalize
 * with atexit once, so that a program that never calls zinc_finalize still finalises MPI (mpirun
 * otherwise reports a process that exited without MPI_Finalize). MPI initialised by the application is
 * never finalised by zinc. MPI must be initialised from the main thread (MPI_THREAD_FUNNELED). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/comm/comm_mpi.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/log.h"

static int g_we_initialised; /* zinc called MPI_Init_thread */
static int g_atexit_registered;

static int env_set(zenv_id id) { return zenv_get(id) != NULL; }

int zcomm_launcher_detected(void) {
    if (env_set(ZENV_OMPI_COMM_WORLD_RANK) || env_set(ZENV_OMPI_COMM_WORLD_SIZE)) return 1;
    if (env_set(ZENV_PMI_RANK) || env_set(ZENV_PMIX_RANK)) return 1;
    if (env_set(ZENV_SLURM_PROCID) && env_set(ZENV_SLURM_STEP_ID)) return 1;
    return 0;
}

zinc_status zcomm_mpi_ensure_init(const zlog *log) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin)
        return ZERR(ZINC_ERR_STATE, "MPI has already been finalised (zinc_finalize or MPI_Finalize was "
                                    "called); create every engine before finalising");
    if (init) return ZINC_OK;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        return ZERR(ZINC_ERR_COMM, "MPI_Init_thread(MPI_THREAD_FUNNELED) failed: %s", msg);
    }
    g_we_initialised = 1;
    if (!g_atexit_registered) {
        if (atexit(zinc_finalize) == 0)
            g_atexit_registered = 1;
        else
            ZLOG_WARN(log, "comm: atexit(zinc_finalize) failed; call zinc_finalize() before exiting");
    }
    if (provided < MPI_THREAD_FUNNELED)
        ZLOG_WARN(log,
                  "comm: MPI provides thread level %d < MPI_THREAD_FUNNELED; zinc only calls MPI from "
                  "the thread that created the engine",
                  provided);
    ZLOG_DEBUG(log, "comm: MPI initialised by zinc (thread level %d)", provided);
    return ZINC_OK;
}

void zinc_finalize(void) {
    if (!g_we_initialised) return;
    g_we_initialised = 0;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

zinc_status zcomm_create(const zlog *log, zcomm **out) {
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zcomm_create: out is NULL");
    *out = NULL;
    const char *force = zenv_get(ZENV_COMM);
    if (force && force[0]) {
        if (strcmp(force, "single") == 0) return zcomm_create_single(out);
        if (strcmp(force, "mpi") == 0) return zcomm_create_mpi(log, out);
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_COMM=%s: expected \"single\" or \"mpi\" (or unset to choose "
                    "automatically)",
                    force);
    }
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    int launched = zcomm_launcher_detected();
    if (fin) {
        if (launched)
            return ZERR(ZINC_ERR_STATE, "started by an MPI launcher but MPI has already been finalised "
                                        "(zinc_finalize or MPI_Finalize was called before zinc_create)");
        ZLOG_DEBUG(log, "comm: MPI already finalised and no launcher: single-rank backend");
        return zcomm_create_single(out);
    }
    if (init || launched) {
        ZLOG_DEBUG(log, "comm: %s: MPI backend", init ? "MPI already initialised" : "started by a launcher");
        return zcomm_create_mpi(log, out);
    }
    ZLOG_DEBUG(log, "comm: no launcher: single-rank backend");
    return zcomm_create_single(out);
}
