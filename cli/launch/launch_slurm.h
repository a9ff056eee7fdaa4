/* zinc launch inside a Slurm allocation: the ranks start through srun (one job step per attempt) instead of
 * mpirun. Kept apart from cli/cmd_launch.c, which calls these at two places: when it resolves its options
 * (which launcher, how many ranks) and when it builds an attempt's command line. */
#ifndef ZINC_CLI_LAUNCH_SLURM_H
#define ZINC_CLI_LAUNCH_SLURM_H

#include <stddef.h>
#include <stdint.h>

#include "cli/common/options.h"

/* --launcher's values, in the order of ZCLI_LAUNCHER_CHOICES. */
typedef enum zcli_launcher { ZCLI_LAUNCHER_AUTO, ZCLI_LAUNCHER_MPIRUN, ZCLI_LAUNCHER_SRUN } zcli_launcher;
#define ZCLI_LAUNCHER_CHOICES "auto|mpirun|srun"

/* zinc launch's Slurm options (a second option table, "Slurm:", in its --help). */
typedef struct zcli_slurm_opts {
    int launcher;     /* zcli_launcher */
    const char *srun; /* srun and its options, split at spaces */
} zcli_slurm_opts;
#define ZCLI_SLURM_DEFAULTS                                                                                            \
    { .launcher = ZCLI_LAUNCHER_AUTO, .srun = "srun" }
extern const zcli_table zcli_slurm_table;

/* Resolves --launcher auto (srun inside a Slurm allocation: SLURM_JOB_ID set; mpirun elsewhere) and, when
 * *ranks is 0 (no -n) inside an allocation, takes the allocation's task count (SLURM_NTASKS). Returns the
 * launcher to use and writes one line for the user saying which and why into `why` (empty when it is
 * plain mpirun outside Slurm). *ranks stays 0 when nothing gives a count: the caller's usage error. */
zcli_launcher zcli_slurm_resolve(zcli_launcher asked, int64_t *ranks, char *why, size_t cap);

/* Writes srun's part of an attempt's command line into argv[0..cap): the tokens of `srun_words` (the
 * launcher and its options, split at spaces in place), then --ntasks=N and --kill-on-bad-exit=1 (a rank
 * that dies ends the step at once, so a restart does not wait for the collective watchdog). `ntasks` is
 * the buffer the --ntasks=N argument is written into (32 bytes). Returns how many entries it wrote. */
int zcli_srun_prefix(char *srun_words, int64_t ranks, char **argv, int cap, char *ntasks);

#endif
