/* zinc launch's Slurm side (launch_slurm.h). Inside an allocation (salloc, sbatch) the ranks start as a job
 * step with srun, which places them on the allocation's nodes and gives them PMIx (the site's MpiDefault,
 * or --srun "srun --mpi=pmix"); mpirun would work there too, but srun is what the site configures and
 * accounts for, and Slurm's --signal reaches the ranks of a step directly. */
#include "cli/launch/launch_slurm.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"

#define O(f) offsetof(zcli_slurm_opts, f)
static const zcli_opt slurm_opts[] = {{"--launcher", ZCLI_CHOICE, O(launcher), "L", 0, 0, ZCLI_LAUNCHER_CHOICES,
                                       "how the ranks start; auto: srun inside a Slurm allocation,\n"
                                       "SLURM_JOB_ID set, where -n defaults to SLURM_NTASKS; mpirun elsewhere"},
                                      {"--srun", ZCLI_TEXT, O(srun), "CMD", 0, 0, NULL,
                                       "srun and its options, split at spaces (e.g. \"srun --mpi=pmix\");\n"
                                       "zinc launch adds --ntasks=N --kill-on-bad-exit=1"},
                                      {0}};
#undef O
const zcli_table zcli_slurm_table = {"Slurm:", slurm_opts, NULL};

/* SLURM_NTASKS as a count in 1..65536 (zinc launch's -n range), or 0 when unset or not such a number. */
static int64_t slurm_ntasks(void) {
    const char *v = zenv_get(ZENV_SLURM_NTASKS);
    if (!v) return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *end || n < 1 || n > 65536 ? 0 : (int64_t)n;
}

zcli_launcher zcli_slurm_resolve(zcli_launcher asked, int64_t *ranks, char *why, size_t cap) {
    const char *job = zenv_get(ZENV_SLURM_JOB_ID);
    why[0] = 0;
    if (!job) {
        if (asked == ZCLI_LAUNCHER_SRUN)
            snprintf(why, cap,
                     "starting the ranks with srun (--launcher srun; outside an allocation, each "
                     "attempt is a job of its own)");
        return asked == ZCLI_LAUNCHER_SRUN ? ZCLI_LAUNCHER_SRUN : ZCLI_LAUNCHER_MPIRUN;
    }
    int64_t alloc = slurm_ntasks();
    bool from_alloc = !*ranks && alloc;
    if (from_alloc) *ranks = alloc;
    zcli_launcher use = asked == ZCLI_LAUNCHER_AUTO ? ZCLI_LAUNCHER_SRUN : asked;
    const char *step = zenv_get(ZENV_SLURM_STEP_ID);
    snprintf(why, cap, "inside Slurm job %s (SLURM_JOB_ID): starting %" PRId64 " rank%s%s with %s%s%s", job, *ranks,
             *ranks == 1 ? "" : "s", from_alloc ? " (SLURM_NTASKS)" : "",
             use == ZCLI_LAUNCHER_SRUN ? "srun, one job step per attempt" : "mpirun",
             asked == ZCLI_LAUNCHER_AUTO ? " (--launcher auto)" : "",
             step ? "; note: zinc launch itself runs in a job step (SLURM_STEP_ID), whose resources the ranks' "
                    "step may wait for: run it from the batch script or salloc, not under srun"
                  : "");
    return use;
}

int zcli_srun_prefix(char *srun_words, int64_t ranks, char **argv, int cap, char *ntasks) {
    int n = 0;
    for (char *t = strtok(srun_words, " "); t && n < cap - 2; t = strtok(NULL, " ")) argv[n++] = t;
    snprintf(ntasks, 32, "--ntasks=%" PRId64, ranks);
    argv[n++] = ntasks;
    argv[n++] = "--kill-on-bad-exit=1";
    return n;
}
