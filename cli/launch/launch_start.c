/* zinc launch: how ranks are started. Everything that depends on the program that starts them (mpirun's
 * options, its host list, how to check that a host can still run ranks, which signal it passes on to every
 * rank) is here, so another launcher (srun) is a branch in each of these functions. */
#include <inttypes.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/launch/launch.h"

/* The launcher's words (--mpirun, split at spaces) into out. */
static int launcher_words(const zcli_launch_opts *o, zcli_argv *out) {
    out->n = 0;
    const char *words = o->slurm.launcher == ZCLI_LAUNCHER_SRUN ? o->slurm.srun : o->mpirun;
    if (snprintf(out->words, sizeof out->words, "%s", words) >= (int)sizeof out->words) return -1;
    char *save = NULL;
    for (char *t = strtok_r(out->words, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (out->n >= ZCLI_LAUNCH_MAX_ARGS - 16) return -1;
        out->v[out->n++] = t;
    }
    return out->n ? 0 : -1;
}

int zcli_launch_job_argv(const zcli_launch_opts *o, int64_t ranks, const char *host_list, char **cmd, int ncmd,
                         const char *resume_dir, zcli_argv *out) {
    if (o->slurm.launcher == ZCLI_LAUNCHER_SRUN) { /* srun places the ranks on the allocation's nodes */
        if (snprintf(out->words, sizeof out->words, "%s", o->slurm.srun) >= (int)sizeof out->words) return -1;
        out->n = zcli_srun_prefix(out->words, ranks, out->v, ZCLI_LAUNCH_MAX_ARGS - 16, out->np);
    } else if (launcher_words(o, out)) {
        return -1;
    }
    if (host_list &&
        o->slurm.launcher != ZCLI_LAUNCHER_SRUN) { /* host:slots, so no file has to be written and removed */
        out->v[out->n++] = "--host";
        out->v[out->n++] = (char *)host_list;
    }
    if (o->slurm.launcher != ZCLI_LAUNCHER_SRUN) {
        snprintf(out->np, sizeof out->np, "%" PRId64, ranks);
        out->v[out->n++] = "-np";
        out->v[out->n++] = out->np;
    }
    for (int i = 0; i < ncmd; i++) {
        if (out->n >= ZCLI_LAUNCH_MAX_ARGS - 3) return -1;
        if (resume_dir && !strcmp(cmd[i], "--resume") && i + 1 < ncmd) {
            i++;
            continue;
        }
        out->v[out->n++] = cmd[i];
    }
    if (resume_dir) {
        out->v[out->n++] = "--resume";
        out->v[out->n++] = (char *)resume_dir;
    }
    out->v[out->n] = NULL;
    return 0;
}

int zcli_launch_probe_argv(const zcli_launch_opts *o, const char *host, zcli_argv *out) {
    if (launcher_words(o, out)) return -1;
    bool srun = o->slurm.launcher == ZCLI_LAUNCHER_SRUN;
    out->v[out->n++] = srun ? "--nodelist" : "--host";
    out->v[out->n++] = (char *)host;
    out->v[out->n++] = srun ? "--ntasks" : "-np";
    out->v[out->n++] = "1";
    out->v[out->n++] = "true";
    out->v[out->n] = NULL;
    return 0;
}

int zcli_launch_preempt_signal(const zcli_launch_opts *o) {
    (void)o; /* mpirun and srun both pass SIGUSR1 on to every rank (zinc train saves and exits 114); SIGTERM to
              * mpirun ends the job at once, and srun's SIGTERM reaches the ranks with a KillWait deadline */
    return SIGUSR1;
}
