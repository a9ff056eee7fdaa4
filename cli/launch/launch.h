/* zinc launch's parts: the hosts it may run on (launch_hosts.c), the rank count a restart keeps the global
 * batch with (launch_world.c), how ranks are started on them (launch_start.c: mpirun; the one place another
 * launcher goes), and one job run watched to its end (launch_job.c). cmd_launch.c is the restart loop. */
#ifndef ZINC_CLI_LAUNCH_H
#define ZINC_CLI_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/launch/launch_slurm.h"
#include "cli/common/options.h"

#define ZCLI_LAUNCH_MAX_ARGS 1024
#define ZCLI_LAUNCH_MAX_HOSTS 1024
#define ZCLI_LAUNCH_HOST_MAX 256

typedef struct zcli_launch_opts {
    int64_t ranks, min_ranks, max_restarts, probe_timeout_s;
    const char *mpirun;    /* the launcher and its options, split at spaces */
    const char *hostfile;  /* Open MPI syntax, or NULL: mpirun places the ranks */
    zcli_slurm_opts slurm; /* --launcher, --srun (cli/launch_slurm.h): srun inside a Slurm allocation */
} zcli_launch_opts;

/* ---- hosts (launch_hosts.c) ---- */
typedef struct zcli_launch_host {
    char name[ZCLI_LAUNCH_HOST_MAX];
    int64_t slots;
    bool lost; /* did not answer the probe after a failure: left out of every later start */
} zcli_launch_host;

typedef struct zcli_launch_hosts {
    zcli_launch_host h[ZCLI_LAUNCH_MAX_HOSTS];
    int n;
} zcli_launch_hosts;

/* Reads an Open MPI hostfile: `host [slots=K] [max_slots=K]` per line, `#` comments; a host without slots
 * counts as 1 (and is passed on as host:1, so mpirun agrees). A host named twice adds its slots.
 * Returns 0, or 1 after writing what is wrong (file, line, token, how to fix) into err. */
int zcli_launch_hosts_read(const char *path, zcli_launch_hosts *out, char *err, size_t cap);
/* The slots of the hosts not lost. */
int64_t zcli_launch_hosts_slots(const zcli_launch_hosts *hs, bool live_only);
/* The hosts not lost as mpirun's --host list, "a:2,b:1" (host:slots), malloc'd; NULL when out of memory. */
char *zcli_launch_hosts_list(const zcli_launch_hosts *hs);
/* "a (2 slots), b (1 slot)" of the hosts not lost (lost ones with live_only false, marked). */
void zcli_launch_hosts_text(const zcli_launch_hosts *hs, char *buf, size_t cap);

/* ---- the rank count (launch_world.c) ---- */
/* What keeps the global batch: the training command's --config (with its --set and --steps), loaded at each
 * candidate rank count; a count is usable when the config loads there with the starting count's
 * train_batch_size and micro batch (gradient_accumulation_steps derived: give train_batch_size and the micro
 * batch and leave the accumulation out). The LR schedule steps on by step, so it is kept too. */
typedef struct zcli_launch_batch {
    const char *config;
    const char *sets[ZCLI_MAX_SETS + 1];
    int64_t steps;
    int64_t tb, mb, start; /* at the starting rank count */
} zcli_launch_batch;

/* Loads the command's config at `ranks` ranks. 0, or 1 with err filled (the loader's message). */
int zcli_launch_batch_read(char **cmd, int ncmd, int64_t ranks, zcli_launch_batch *b, char *err, size_t cap);
/* The largest rank count in [lo, hi] that keeps the batch, or 0 when none does; `why` says which count was
 * picked and why (the counts that keep it), or why none could be. */
int64_t zcli_launch_pick_world(const zcli_launch_batch *b, int64_t lo, int64_t hi, char *why, size_t cap);

/* ---- starting ranks (launch_start.c) ---- */
typedef struct zcli_argv {
    char *v[ZCLI_LAUNCH_MAX_ARGS];
    int n;
    char words[4096]; /* the launcher's own words, split in place */
    char np[32];      /* "-np"'s N, or srun's --ntasks=N */
} zcli_argv;

/* The command that starts `ranks` ranks of cmd (on the hosts of host_list, "a:2,b:1", when not NULL), resuming
 * from resume_dir (replacing the command's own --resume) when not NULL. 0, or -1 when it does not fit. */
int zcli_launch_job_argv(const zcli_launch_opts *o, int64_t ranks, const char *host_list, char **cmd, int ncmd,
                         const char *resume_dir, zcli_argv *out);
/* A command that runs `true` on one host: it succeeds when ranks can be started there. */
int zcli_launch_probe_argv(const zcli_launch_opts *o, const char *host, zcli_argv *out);
/* The signal that reaches every rank when sent to the started command (mpirun forwards SIGUSR1 and SIGUSR2
 * to its processes, and ends the job at once on SIGTERM), and its name. */
int zcli_launch_preempt_signal(const zcli_launch_opts *o);

/* ---- one job (launch_job.c) ---- */
typedef struct zcli_launch_run {
    int status;                      /* the wait status */
    double t_start, t_end;           /* CLOCK_MONOTONIC */
    double t_resumed;                /* when the job said it resumed (0: it did not) */
    int64_t resumed_step;            /* from that line */
    int preempted_by;                /* a signal the launcher received and forwarded during the run (0: none) */
    char who[512];                   /* which rank or host failed, as the launcher's output told (may be empty) */
    double t_who;                    /* when that was first said (0: never) */
    char peer[ZCLI_LAUNCH_HOST_MAX]; /* a host a rank said it lost its connection to (may be empty) */
    double t_peer;
} zcli_launch_run;

/* Starts argv, passes its stderr through (reading what it says about failed ranks and hosts and its resume)
 * and waits; forwards SIGTERM/SIGINT/SIGUSR1 that reach the launcher as fwd_sig. t_detected (CLOCK_MONOTONIC,
 * 0: a first start): when the failure this job restarts after was seen, for the time-to-resume line.
 * -1 when it cannot start. */
int zcli_launch_run_job(char **argv, int fwd_sig, double t_detected, zcli_launch_run *r);
/* One host's answer to the probe: ok, or why not (its exit status and the last line it printed, or the
 * timeout) and how many tries it took. */
typedef struct zcli_launch_probe_result {
    bool ok;
    int tries;
    char why[320];
} zcli_launch_probe_result;

/* Runs each probe at once and waits up to timeout_s in all. A probe that fails before the timeout is tried
 * again (up to `tries` times, 1 s apart): a fast failure can be a transient one of the launcher (a daemon of
 * the job that just died still leaving), and dropping a live host shrinks the job for good; a host that does
 * not answer within timeout_s is not tried again. */
void zcli_launch_run_probes(zcli_argv *probes, int n, double timeout_s, int tries, zcli_launch_probe_result *res);
/* Installs the launcher's handler for SIGTERM/SIGINT/SIGUSR1; the last one received (0: none). */
void zcli_launch_signals_install(void);
int zcli_launch_signal_received(void);

#endif
