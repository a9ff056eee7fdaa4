/* zinc launch: an elastic agent for `zinc train ... --save DIR`. It starts the ranks (launch_start.c), watches
 * the job (launch_job.c) and, when it fails (a rank that exits with an error, dies by a signal, or is ended by
 * the collective watchdog; a host that is lost), restarts it from DIR's latest checkpoint, up to
 * --max-restarts times. With --hostfile, the hosts that no longer answer are left out, and the restart runs on
 * the largest rank count, at least --min-ranks, that the hosts left hold and that keeps the global batch
 * (launch_world.c). It does not loop on a deterministic failure: the same exit status on the same rank count
 * with `latest` at the same step as the failure before stops it. A job stopped by a preemption signal
 * (114/115), or by a signal the launcher passed on to it, is not restarted: the scheduler stopped it. */
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

#include "cli/common/commands.h"
#include "cli/launch/launch.h"
#include "cli/launch/launch_slurm.h"
#include "cli/common/options.h"
#include "cli/train/train.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/clock.h"

#define O(f) offsetof(zcli_launch_opts, f)
/* tries of a probe that fails fast before its host counts as lost (see zcli_launch_run_probes) */
#define PROBE_TRIES 3
static const zcli_opt launch_table_opts[] =
    {{"-n", ZCLI_INT, O(ranks), "N", 1, 65536, NULL, "ranks to start (mpirun -np N; required)"},
     {"--min-ranks", ZCLI_INT, O(min_ranks), "M", 1, 65536, NULL,
      "restart on fewer ranks, down to M, when hosts are lost: the largest\ncount that keeps train_batch_size and "
      "the micro batch"},
     {"--max-restarts", ZCLI_INT, O(max_restarts), "K", 0, 1000, NULL, "restarts after failures before giving up"},
     {"--hostfile", ZCLI_TEXT, O(hostfile), "FILE", 0, 0, NULL,
      "the hosts, Open MPI's syntax (`host slots=K` per line); after a\nfailure each is probed and those that do "
      "not answer are left out"},
     {"--probe-timeout", ZCLI_INT, O(probe_timeout_s), "S", 1, 3600, NULL,
      "seconds a host has to answer the probe after a failure"},
     {"--mpirun", ZCLI_TEXT, O(mpirun), "CMD", 0, 0, NULL, "the launcher and its options, split at spaces"},
     {0}};
#undef O
/* Settled after parsing (zcli_cmd_launch). */
static const zcli_later launch_later[] = {{"--min-ranks", "N, no shrinking"}, {0}};
static const zcli_table launch_table = {"options:", launch_table_opts, launch_later};

static void describe(int status, char *buf, size_t cap) {
    if (WIFEXITED(status))
        snprintf(buf, cap, "exit status %d%s", WEXITSTATUS(status),
                 WEXITSTATUS(status) == 113 ? " (the collective watchdog: a rank died or stalled)" : "");
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "wait status %d", status);
}

/* The wall clock with milliseconds, UTC, at the monotonic time `at` (0: now): when each failure and restart
 * happened. */
static void utc_at(double at, char *buf, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (at > 0) {
        double back = zclock_now_s() - at;
        if (back > 0) {
            int64_t ns = (int64_t)ts.tv_nsec - (int64_t)((back - (double)(int64_t)back) * 1e9);
            ts.tv_sec -= (time_t)back + (ns < 0);
            ts.tv_nsec = (long)(ns < 0 ? ns + 1000000000 : ns);
        }
    }
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char s[32];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", s, (int)(ts.tv_nsec / 1000000) % 1000);
}

typedef struct launch_state {
    const zcli_launch_opts *o;
    char **cmd;
    int ncmd;
    const char *save;
    zcli_launch_hosts *hosts; /* NULL without --hostfile */
    zcli_launch_batch batch;
    bool batch_known;
    int64_t world;
    /* the restarts so far, and the failure before (a deterministic failure repeats it) */
    int restarts, prev_status;
    int64_t prev_step, prev_world;
    double t_detected; /* when the last failure was seen (CLOCK_MONOTONIC; 0: none yet) */
} launch_state;

/* After a failure: probes every host still in use at once and marks those that do not answer as lost. */
static void probe_hosts(launch_state *L) {
    zcli_launch_hosts *hs = L->hosts;
    int idx[ZCLI_LAUNCH_MAX_HOSTS], n = 0;
    for (int i = 0; i < hs->n; i++)
        if (!hs->h[i].lost) idx[n++] = i;
    zcli_argv *probes = calloc((size_t)n, sizeof *probes);
    zcli_launch_probe_result *res = calloc((size_t)n, sizeof *res);
    if (!probes || !res) {
        free(probes);
        free(res);
        fprintf(stderr, "zinc launch: out of memory probing the hosts; keeping them all\n");
        return;
    }
    for (int k = 0; k < n; k++) zcli_launch_probe_argv(L->o, hs->h[idx[k]].name, &probes[k]);
    double t0 = zclock_now_s();
    zcli_launch_run_probes(probes, n, (double)L->o->probe_timeout_s, PROBE_TRIES, res);
    int lost = 0;
    for (int k = 0; k < n; k++) {
        if (res[k].ok) {
            if (res[k].tries > 1)
                fprintf(stderr, "zinc launch: host %s answered on try %d (before: %s)\n", hs->h[idx[k]].name,
                        res[k].tries, res[k].why);
            continue;
        }
        hs->h[idx[k]].lost = true;
        lost++;
        char cmd[1024] = "";
        for (int w = 0; probes[k].v[w]; w++) {
            size_t at = strlen(cmd);
            snprintf(cmd + at, sizeof cmd - at, "%s%s", w ? " " : "", probes[k].v[w]);
        }
        fprintf(stderr,
                "zinc launch: host %s did not answer (`%s` %s, after %d tr%s within %" PRId64
                " s): left out of the restart\n",
                hs->h[idx[k]].name, cmd, res[k].why, res[k].tries, res[k].tries == 1 ? "y" : "ies",
                L->o->probe_timeout_s);
    }
    fprintf(stderr, "zinc launch: probed %d host%s in %.2f s: %d answered, %d lost\n", n, n == 1 ? "" : "s",
            zclock_now_s() - t0, n - lost, lost);
    free(probes);
    free(res);
}

/* The most ranks the hosts left can hold, at most -n: by their slots, or in -n's proportion to the slots
 * when the job was started oversubscribed. */
static int64_t capacity(const launch_state *L) {
    if (!L->hosts) return L->o->ranks;
    int64_t live = zcli_launch_hosts_slots(L->hosts, true), all = zcli_launch_hosts_slots(L->hosts, false);
    if (L->o->ranks <= all) return live < L->o->ranks ? live : L->o->ranks;
    return L->o->ranks * live / all;
}

/* The rank count of the restart (0: none can run; the reason is printed). */
static int64_t restart_world(launch_state *L) {
    int64_t cap = capacity(L);
    if (cap >= L->world) return L->world; /* nothing lost: the same count (a shrunk job does not grow back) */
    char why[1024];
    if (!L->batch_known) {
        if (cap >= L->o->ranks) return L->o->ranks;
        fprintf(stderr,
                "zinc launch: cannot restart: the hosts left hold %" PRId64 " rank%s, fewer than -n %" PRId64
                " (give --min-ranks M to restart on fewer)\n",
                cap, cap == 1 ? "" : "s", L->o->ranks);
        return 0;
    }
    int64_t w = zcli_launch_pick_world(&L->batch, L->o->min_ranks, cap, why, sizeof why);
    fprintf(stderr, w ? "zinc launch: picked %s\n" : "zinc launch: cannot restart: %s\n", why);
    return w;
}

static int stopped_by_signal(const launch_state *L, int sig) {
    int64_t step = zckpt_latest_step(L->save);
    if (step >= 0) {
        fprintf(stderr,
                "zinc launch: %s between runs: not restarting; %s holds step %" PRId64 ", resumable with --resume %s\n",
                sig == SIGINT    ? "SIGINT"
                : sig == SIGUSR1 ? "SIGUSR1"
                                 : "SIGTERM",
                L->save, step, L->save);
        return ZCLI_EXIT_PREEMPTED;
    }
    fprintf(stderr, "zinc launch: stopped by a signal between runs; nothing saved\n");
    return ZCLI_EXIT_STOPPED;
}

/* Starts one run of the job on L->world ranks (resuming when DIR has a checkpoint) and waits for it.
 * 0, or the launcher's exit status when it could not start. */
static int run_once(launch_state *L, zcli_launch_run *r) {
    char *host_list = NULL, hosts_text[2048] = "";
    if (L->hosts) {
        if (!(host_list = zcli_launch_hosts_list(L->hosts))) {
            fprintf(stderr, "zinc launch: out of memory\n");
            return 1;
        }
        zcli_launch_hosts_text(L->hosts, hosts_text, sizeof hosts_text);
    }
    bool resume = zckpt_latest_step(L->save) >= 0;
    zcli_argv argv;
    if (zcli_launch_job_argv(L->o, L->world, host_list, L->cmd, L->ncmd, resume ? L->save : NULL, &argv)) {
        free(host_list);
        fprintf(stderr, "zinc launch: the command is too long (at most %d words)\n", ZCLI_LAUNCH_MAX_ARGS - 16);
        return 2;
    }
    if (!L->restarts)
        fprintf(stderr, "zinc launch: starting %" PRId64 " rank%s%s%s\n", L->world, L->world == 1 ? "" : "s",
                L->hosts ? " on " : "", hosts_text);
    int rc = zcli_launch_run_job(argv.v, zcli_launch_preempt_signal(L->o), L->t_detected, r);
    free(host_list);
    if (rc < 0) {
        fprintf(stderr, "zinc launch: cannot start %s: %s\n", argv.v[0], strerror(errno));
        return 1;
    }
    return 0;
}

/* Whether the run's end is final (finished, stopped on purpose, a usage error): code is then the status. */
static bool final_end(const launch_state *L, const zcli_launch_run *r, const char *why, int code) {
    if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) {
        fprintf(stderr, "zinc launch: the job finished on %" PRId64 " rank%s after %d restart%s\n", L->world,
                L->world == 1 ? "" : "s", L->restarts, L->restarts == 1 ? "" : "s");
        return true;
    }
    if (r->preempted_by) {
        fprintf(stderr, "zinc launch: the job stopped with %s after the launcher passed on %s; not restarted\n", why,
                r->preempted_by == SIGINT    ? "SIGINT"
                : r->preempted_by == SIGUSR1 ? "SIGUSR1"
                                             : "SIGTERM");
        return true;
    }
    if (code == ZCLI_EXIT_PREEMPTED || code == ZCLI_EXIT_STOPPED || code == 2) {
        fprintf(stderr, "zinc launch: the job stopped with %s: %s; not restarted\n", why,
                code == 2 ? "a usage error" : "preempted by a signal");
        return true;
    }
    return false;
}

/* The failure's report; true when it is the one before again (a deterministic failure: stop). */
static bool report_failure(launch_state *L, const zcli_launch_run *r, const char *why, int64_t step) {
    char when[64], reported[96] = "", held[64] = "has no checkpoint yet", at[64] = "before any checkpoint";
    utc_at(r->t_end, when, sizeof when);
    if (step >= 0) {
        snprintf(held, sizeof held, "holds step %" PRId64, step);
        snprintf(at, sizeof at, "at the same step %" PRId64, step);
    }
    if (r->t_who > 0) snprintf(reported, sizeof reported, "; first reported %.2f s before", r->t_end - r->t_who);
    fprintf(stderr, "zinc launch: %s: the job on %" PRId64 " rank%s ended with %s after %.2f s%s%s%s; %s %s\n", when,
            L->world, L->world == 1 ? "" : "s", why, r->t_end - r->t_start, r->who[0] ? ": " : "", r->who, reported,
            L->save, held);
    if (r->status == L->prev_status && step == L->prev_step && L->world == L->prev_world) {
        fprintf(stderr, "zinc launch: the same failure (%s) %s twice: not restarting a deterministic failure\n", why,
                at);
        return true;
    }
    return false;
}

/* After a failure: the hosts probed and the rank count picked. 0 to restart, else the exit status. */
static int prepare_restart(launch_state *L, int status, int64_t step, int code) {
    if (L->restarts >= L->o->max_restarts) {
        fprintf(stderr, "zinc launch: giving up after %d restart%s (--max-restarts %" PRId64 ")\n", L->restarts,
                L->restarts == 1 ? "" : "s", L->o->max_restarts);
        return code;
    }
    if (L->hosts) probe_hosts(L);
    if (zcli_launch_signal_received()) return stopped_by_signal(L, zcli_launch_signal_received());
    int64_t before = L->world, after = restart_world(L);
    if (!after) return code;
    L->restarts++;
    L->prev_status = status;
    L->prev_step = step;
    L->prev_world = before;
    L->world = after;
    char when[64], from[64] = "no checkpoint yet: from the start", hosts_text[2048] = "";
    if (L->hosts) zcli_launch_hosts_text(L->hosts, hosts_text, sizeof hosts_text);
    utc_at(0, when, sizeof when);
    if (step >= 0) snprintf(from, sizeof from, "step %" PRId64, step);
    fprintf(stderr,
            "zinc launch: %s: restart %d of %" PRId64 " from %s (%s), world size %" PRId64 " -> %" PRId64
            "%s%s, %.2f s after the failure was detected\n",
            when, L->restarts, L->o->max_restarts, L->save, from, before, after, L->hosts ? "; hosts " : "", hosts_text,
            zclock_now_s() - L->t_detected);
    return 0;
}

static int launch_loop(launch_state *L) {
    L->prev_status = -1;
    L->prev_step = -2;
    L->prev_world = -1;
    zcli_launch_signals_install();
    for (;;) {
        if (zcli_launch_signal_received()) return stopped_by_signal(L, zcli_launch_signal_received());
        zcli_launch_run r;
        int rc = run_once(L, &r);
        if (rc) return rc;
        int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 128 + WTERMSIG(r.status);
        char why[128];
        describe(r.status, why, sizeof why);
        if (final_end(L, &r, why, code)) return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 ? 0 : code;
        L->t_detected = r.t_end;
        int64_t step = zckpt_latest_step(L->save);
        if (report_failure(L, &r, why, step)) return code;
        if ((rc = prepare_restart(L, r.status, step, code))) return rc;
    }
}

int zcli_cmd_launch(int argc, char **argv) {
    zcli_launch_opts o = {.ranks = 0,
                          .max_restarts = 3,
                          .mpirun = "mpirun",
                          .probe_timeout_s = 30,
                          .slurm = ZCLI_SLURM_DEFAULTS};
    zcli_cmd c =
        {.name = "zinc launch",
         .usage = "usage: zinc launch -n N [--min-ranks M] [--max-restarts K] [--hostfile FILE] [--probe-timeout "
                  "S]\n                   [--mpirun CMD | --launcher srun [--srun CMD]] -- zinc train ... --save DIR",
         .about = "Runs the training command under mpirun and restarts it from DIR's latest checkpoint "
                  "(--resume DIR)\nwhen the job fails, counting restarts and saying when, why, which rank "
                  "or host, and the\nworld size before and after; the same failure at the same step twice "
                  "stops it. With\n--hostfile, hosts that no longer answer are left out and the job "
                  "restarts on the largest\nrank count >= --min-ranks that they hold and that keeps "
                  "train_batch_size and the micro\nbatch. SIGTERM, SIGINT or SIGUSR1 to the launcher: the "
                  "job saves and stops (114), not\nrestarted.",
         .tables = {&launch_table, &zcli_slurm_table},
         .dst = {&o, &o.slurm}};
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--")) sep++;
    int pr = zcli_parse(&c, 1, sep, argv);
    if (pr) return pr == 1 ? 0 : 2;
    char slurm_why[512];
    o.slurm.launcher = zcli_slurm_resolve(o.slurm.launcher, &o.ranks, slurm_why, sizeof slurm_why);
    if (!o.ranks) return zcli_usage_error(&c, "-n N (the rank count) is required");
    if (o.hostfile && o.slurm.launcher == ZCLI_LAUNCHER_SRUN)
        return zcli_usage_error(&c, "--hostfile is for mpirun; inside a Slurm allocation srun places the ranks on the "
                                    "allocation's nodes (or give --launcher mpirun)");
    if (!o.min_ranks) o.min_ranks = o.ranks;
    if (o.min_ranks > o.ranks)
        return zcli_usage_error(&c, "--min-ranks %" PRId64 " is more than -n %" PRId64 ": give M <= N", o.min_ranks,
                                o.ranks);
    if (sep >= argc - 1)
        return zcli_usage_error(&c, "give the training command after --: -- zinc train ... --save DIR");
    launch_state L = {.o = &o, .cmd = argv + sep + 1, .ncmd = argc - sep - 1, .world = o.ranks};
    L.save = zcli_peek(sep + 1, argc, argv, "--save");
    if (!L.save) return zcli_usage_error(&c, "the training command needs --save DIR: restarts resume from it");
    if (slurm_why[0]) fprintf(stderr, "zinc launch: %s\n", slurm_why);
    static zcli_launch_hosts hosts;
    if (o.hostfile) {
        char err[1024];
        if (zcli_launch_hosts_read(o.hostfile, &hosts, err, sizeof err)) return zcli_usage_error(&c, "%s", err);
        L.hosts = &hosts;
    }
    if (o.min_ranks < o.ranks) {
        char err[4096];
        if (zcli_launch_batch_read(L.cmd, L.ncmd, o.ranks, &L.batch, err, sizeof err)) {
            fprintf(stderr, "zinc launch: the training command's config does not load at -n %" PRId64 " ranks:\n%s\n",
                    o.ranks, err);
            return 2;
        }
        L.batch_known = true;
    }
    return launch_loop(&L);
}
