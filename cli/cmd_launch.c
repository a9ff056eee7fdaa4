/* zinc launch: runs `zinc train ... --save DIR` under mpirun and restarts it from DIR's latest checkpoint
 * when the job fails (a rank that exits with an error, dies by a signal, or is ended by the collective
 * watchdog), up to --max-restarts times. It does not loop on a deterministic failure: the same exit status
 * with `latest` at the same step as the failure before stops it with that status. A job stopped by a
 * preemption signal (exit 114/115) is not restarted: the scheduler stopped it on purpose. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/launch_slurm.h"
#include "cli/options.h"
#include "cli/train.h"

#define LAUNCH_MAX_ARGS 1024

typedef struct launch_opts {
    int64_t ranks, max_restarts;
    const char *mpirun;
    zcli_slurm_opts slurm; /* --launcher, --srun (cli/launch_slurm.h) */
} launch_opts;

#define O(f) offsetof(launch_opts, f)
static const zcli_opt launch_table_opts[] = {{"-n", ZCLI_INT, O(ranks), "N", 1, 65536, NULL,
                                              "ranks to start (mpirun -np N; required)"},
                                             {"--max-restarts", ZCLI_INT, O(max_restarts), "K", 0, 1000, NULL,
                                              "restarts after failures before giving up (default 3)"},
                                             {"--mpirun", ZCLI_TEXT, O(mpirun), "CMD", 0, 0, NULL,
                                              "the launcher and its options, split at spaces (default \"mpirun\")"},
                                             {0}};
#undef O
static const zcli_table launch_table = {"options:", launch_table_opts};

/* The step `latest` names in dir (its tag step<N>), or -1. */
static int64_t latest_step(const char *dir) {
    char path[4096], tag[160] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    bool ok = fgets(tag, sizeof tag, f) != NULL;
    fclose(f);
    int64_t s = -1;
    if (!ok || sscanf(tag, "step%" SCNd64, &s) != 1) return -1;
    return s;
}

/* Starts argv and waits: the wait status, or -1 when it could not start. */
static int run_job(char **argv) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "zinc launch: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

static void describe(int status, char *buf, size_t cap) {
    if (WIFEXITED(status))
        snprintf(buf, cap, "exit status %d%s", WEXITSTATUS(status),
                 WEXITSTATUS(status) == 113 ? " (the collective watchdog: a rank died or stalled)" : "");
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "wait status %d", status);
}

/* mpirun's tokens, -np N, the train command, and --resume DIR (replacing the command's own) when resuming. */
static int build_argv(const launch_opts *o, char **cmd, int ncmd, const char *save, bool resume, char *words,
                      char **argv, char *np) {
    int n = 0;
    if (o->slurm.launcher == ZCLI_LAUNCHER_SRUN) {
        n = zcli_srun_prefix(words, o->ranks, argv, LAUNCH_MAX_ARGS - 8, np);
    } else {
        for (char *t = strtok(words, " "); t && n < LAUNCH_MAX_ARGS - 8; t = strtok(NULL, " ")) argv[n++] = t;
        snprintf(np, 32, "%" PRId64, o->ranks);
        argv[n++] = "-np";
        argv[n++] = np;
    }
    for (int i = 0; i < ncmd && n < LAUNCH_MAX_ARGS - 3; i++) {
        if (resume && !strcmp(cmd[i], "--resume") && i + 1 < ncmd) {
            i++;
            continue;
        }
        argv[n++] = cmd[i];
    }
    if (resume) {
        argv[n++] = "--resume";
        argv[n++] = (char *)save;
    }
    argv[n] = NULL;
    return n;
}

static int launch_loop(const launch_opts *o, char **cmd, int ncmd, const char *save) {
    int restarts = 0, prev_status = -1;
    int64_t prev_step = -2;
    for (;;) {
        char words[4096], np[32], why[128];
        char *argv[LAUNCH_MAX_ARGS];
        snprintf(words, sizeof words, "%s", o->slurm.launcher == ZCLI_LAUNCHER_SRUN ? o->slurm.srun : o->mpirun);
        bool resume = latest_step(save) >= 0;
        build_argv(o, cmd, ncmd, save, resume, words, argv, np);
        int status = run_job(argv);
        if (status < 0) {
            fprintf(stderr, "zinc launch: cannot start %s: %s\n", argv[0], strerror(errno));
            return 1;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            fprintf(stderr, "zinc launch: the job finished after %d restart%s\n", restarts, restarts == 1 ? "" : "s");
            return 0;
        }
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        describe(status, why, sizeof why);
        if (code == ZCLI_EXIT_PREEMPTED || code == ZCLI_EXIT_STOPPED || code == 2) {
            fprintf(stderr, "zinc launch: the job stopped with %s: %s; not restarted\n", why,
                    code == 2 ? "a usage error" : "preempted by a signal");
            return code;
        }
        int64_t step = latest_step(save);
        time_t now = time(NULL);
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        fprintf(stderr, "zinc launch: %s: the job ended with %s; %s latest checkpoint at step %" PRId64 "\n", when, why,
                save, step);
        if (status == prev_status && step == prev_step) {
            fprintf(stderr,
                    "zinc launch: the same failure (%s) at the same step %" PRId64 " twice: not "
                    "restarting a deterministic failure\n",
                    why, step);
            return code;
        }
        if (restarts >= o->max_restarts) {
            fprintf(stderr, "zinc launch: giving up after %d restart%s (--max-restarts %" PRId64 ")\n", restarts,
                    restarts == 1 ? "" : "s", o->max_restarts);
            return code;
        }
        restarts++;
        prev_status = status;
        prev_step = step;
        fprintf(stderr,
                "zinc launch: restart %d of %" PRId64 " from %s (step %" PRId64 "), world size %" PRId64 " -> %" PRId64
                "\n",
                restarts, o->max_restarts, save, step, o->ranks, o->ranks);
    }
}

int zcli_cmd_launch(int argc, char **argv) {
    launch_opts o = {.ranks = 0, .max_restarts = 3, .mpirun = "mpirun", .slurm = ZCLI_SLURM_DEFAULTS};
    zcli_cmd c = {.name = "zinc launch",
                  .usage = "usage: zinc launch -n N [--max-restarts K] [--mpirun CMD] -- zinc train ... --save DIR",
                  .about = "Runs the training command under mpirun and restarts it from DIR's latest checkpoint "
                           "(--resume DIR)\nwhen the job fails, counting restarts; the same failure at the same "
                           "step twice stops it.",
                  .tables = {&launch_table, &zcli_slurm_table},
                  .dst = {&o, &o.slurm}};
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--")) sep++;
    int pr = zcli_parse(&c, 1, sep, argv);
    if (pr) return pr == 1 ? 0 : 2;
    char slurm_why[512];
    o.slurm.launcher = zcli_slurm_resolve(o.slurm.launcher, &o.ranks, slurm_why, sizeof slurm_why);
    if (!o.ranks) return zcli_usage_error(&c, "-n N (the rank count) is required");
    if (sep >= argc - 1)
        return zcli_usage_error(&c, "give the training command after --: -- zinc train ... --save DIR");
    const char *save = zcli_peek(sep + 1, argc, argv, "--save");
    if (!save) return zcli_usage_error(&c, "the training command needs --save DIR: restarts resume from it");
    if (slurm_why[0]) fprintf(stderr, "zinc launch: %s\n", slurm_why);
    return launch_loop(&o, argv + sep + 1, argc - sep - 1, save);
}
