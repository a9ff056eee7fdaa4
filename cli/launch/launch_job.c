/* zinc launch: one job run to its end. The job's stderr passes through the launcher line by line, which
 * reads from it which rank or host failed (mpirun's reports) and when the restarted job resumed (zinc
 * train's "resumed from" line); a SIGTERM, SIGINT or SIGUSR1 that reaches the launcher is passed on to the
 * job as the signal its launcher forwards to every rank, so the whole job saves and stops (114). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/launch/launch.h"
#include "base/core/clock.h"

static volatile sig_atomic_t last_signal, signal_count;

static void on_signal(int sig) {
    last_signal = sig;
    signal_count++;
}

void zcli_launch_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a wait or poll returns EINTR and the loop forwards at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int zcli_launch_signal_received(void) { return last_signal; }

static const char *sig_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

/* The child: its own process group (a terminal's ^C reaches the launcher, which forwards it once), ended
 * with SIGTERM if the launcher dies (mpirun then ends its ranks), stderr into the pipe. */
static pid_t spawn(char **argv, int err_fd, bool quiet) {
    pid_t pid = fork();
    if (pid > 0) setpgid(pid, pid); /* both sides, so a kill of the group never races the child's own call */
    if (pid != 0) return pid;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGUSR1, &dfl, NULL);
    if (quiet) { /* no input; output to err_fd (the probe's pipe) or nowhere */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, 0), dup2(err_fd >= 0 ? err_fd : null, 1), dup2(err_fd >= 0 ? err_fd : null, 2);
        if (err_fd >= 0) close(err_fd);
    } else if (err_fd >= 0) {
        dup2(err_fd, 2);
        close(err_fd);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "zinc launch: cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* What one line of the job's stderr says about the failure or the resume. */
static void read_line(const char *l, zcli_launch_run *r) {
    int rank, pid, sig;
    char node[ZCLI_LAUNCH_HOST_MAX];
    const char *p;
    if (!r->who[0] && (p = strstr(l, " noticed that process rank ")) &&
        sscanf(p, " noticed that process rank %d with PID %d on node %255s exited on signal %d", &rank, &pid, node,
               &sig) == 4)
        snprintf(r->who, sizeof r->who, "rank %d on host %s ended by signal %d (%s)", rank, node, sig, strsignal(sig));
    else if (!r->who[0] && (p = strstr(l, "Remote daemon:")) && (p = strstr(p, " on node ")) &&
             sscanf(p, " on node %255s", node) == 1)
        snprintf(r->who, sizeof r->who, "host %s: mpirun lost its daemon there (the host or its network is gone)",
                 node);
    else if (!r->who[0] && (p = strstr(l, "Process name: [[")) && sscanf(p, "Process name: [[%*d,%*d],%d]", &rank) == 1)
        snprintf(r->who, sizeof r->who, "rank %d", rank);
    else if ((p = strstr(l, "Exit code:")) && sscanf(p, "Exit code: %d", &sig) == 1 && !strchr(r->who, '(') &&
             !strncmp(r->who, "rank ", 5)) {
        size_t n = strlen(r->who);
        snprintf(r->who + n, sizeof r->who - n, " (exit status %d)", sig);
    }
    /* Open MPI's peer-disconnect report names the host a rank lost: a fallback when nothing more precise comes */
    if (!r->peer[0] && (p = strstr(l, "Peer host:")) && sscanf(p, "Peer host: %255s", node) == 1) {
        snprintf(r->peer, sizeof r->peer, "%s", node);
        r->t_peer = zclock_now_s();
    }
    if (r->who[0] && !r->t_who) r->t_who = zclock_now_s();
    int64_t step;
    if (!r->t_resumed && (p = strstr(l, "zinc train: resumed from ")) && (p = strstr(p, " at step ")) &&
        sscanf(p, " at step %" SCNd64, &step) == 1) {
        r->t_resumed = zclock_now_s();
        r->resumed_step = step;
    }
}

/* Copies what the pipe holds to stderr, line by line through read_line. false at EOF. */
static bool pump(int fd, char *buf, size_t *len, size_t cap, zcli_launch_run *r) {
    ssize_t k = read(fd, buf + *len, cap - 1 - *len);
    if (k < 0) return errno == EINTR || errno == EAGAIN;
    if (k == 0) {
        if (*len) fwrite(buf, 1, *len, stderr);
        *len = 0;
        return false;
    }
    *len += (size_t)k;
    char *start = buf, *nl;
    buf[*len] = 0;
    while ((nl = memchr(start, '\n', (size_t)(buf + *len - start)))) {
        *nl = 0;
        fprintf(stderr, "%s\n", start);
        read_line(start, r);
        start = nl + 1;
    }
    size_t rest = (size_t)(buf + *len - start);
    if (rest == cap - 1) { /* a line longer than the buffer goes out as it is */
        fwrite(buf, 1, rest, stderr);
        rest = 0;
    }
    memmove(buf, start, rest);
    *len = rest;
    return true;
}

int zcli_launch_run_job(char **argv, int fwd_sig, double t_detected, zcli_launch_run *r) {
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC)) return -1;
    fflush(NULL);
    r->t_start = zclock_now_s();
    pid_t pid = spawn(argv, fds[1], false);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    char buf[16384];
    size_t len = 0;
    bool open_pipe = true, done = false, told_resume = false;
    int forwarded = 0, status = 0;
    double drain_until = 0;
    while (!done || (open_pipe && zclock_now_s() < drain_until)) {
        if (signal_count > forwarded) {
            forwarded = signal_count;
            if (!r->preempted_by) r->preempted_by = last_signal;
            fprintf(stderr,
                    "zinc launch: %s: passed on to the job as %s (every rank saves at its next step and "
                    "stops)%s\n",
                    sig_name(last_signal), sig_name(fwd_sig),
                    forwarded > 1 ? "; a second signal: the ranks stop at once" : "");
            kill(pid, fwd_sig);
        }
        if (open_pipe) {
            struct pollfd pf = {.fd = fds[0], .events = POLLIN};
            int k = poll(&pf, 1, 100);
            if (k > 0) open_pipe = pump(fds[0], buf, &len, sizeof buf, r);
            if (r->t_resumed && !told_resume && t_detected > 0) {
                told_resume = true;
                fprintf(stderr,
                        "zinc launch: resumed at step %" PRId64 " %.2f s after the failure was detected (%.2f s of "
                        "them from this job's start to its resume)\n",
                        r->resumed_step, r->t_resumed - t_detected, r->t_resumed - r->t_start);
            }
        } else {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (!done) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                done = true;
                r->t_end = zclock_now_s();
                drain_until =
                    r->t_end + 1.0; /* what the job wrote last; a leftover holder of the pipe is not waited for */
            } else if (w < 0 && errno != EINTR) {
                status = -1;
                done = true;
                r->t_end = zclock_now_s();
            }
        }
    }
    if (len) fwrite(buf, 1, len, stderr);
    close(fds[0]);
    if (!r->who[0] && r->peer[0]) {
        snprintf(r->who, sizeof r->who, "host %s: a rank elsewhere lost its connection to it", r->peer);
        r->t_who = r->t_peer;
    }
    r->status = status;
    return status < 0 ? -1 : 0;
}

/* A probe under way: its process, the start of its output (which says why it failed) and when it is tried again. */
typedef struct probe_run {
    pid_t pid;
    int fd;
    double retry_at; /* when a failed try is tried again (0: not waiting) */
    char out[512];
    size_t len;
} probe_run;

static void probe_start(probe_run *p, char **argv) {
    int fds[2];
    p->pid = -1;
    p->len = 0;
    if (pipe2(fds, O_CLOEXEC) || fcntl(fds[0], F_SETFL, O_NONBLOCK)) { /* the probe's end stays blocking */
        p->fd = -1;
        return;
    }
    fflush(NULL);
    p->pid = spawn(argv, fds[1], true);
    close(fds[1]);
    p->fd = fds[0];
}

/* Keeps the start of what the probe printed, where the specific complaint comes (ssh's, the agent's) before
 * Open MPI's generic help text; the rest is read and dropped, so a chatty probe never blocks on a full pipe. */
static void probe_read(probe_run *p) {
    char tmp[1024];
    ssize_t k;
    while (p->fd >= 0 && (k = read(p->fd, tmp, sizeof tmp)) != 0) {
        if (k < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) close(p->fd), p->fd = -1;
            return;
        }
        size_t n = (size_t)k, room = sizeof p->out - 1 - p->len;
        memcpy(p->out + p->len, tmp, n < room ? n : room);
        p->len += n < room ? n : room;
    }
    if (p->fd >= 0) close(p->fd), p->fd = -1; /* end of file */
}

/* "exit status 1: FIRST LINE" from the probe's wait status and output (Open MPI's rule lines of dashes and
 * blank lines skipped). */
static void probe_why(probe_run *p, int st, char *why, size_t cap) {
    char status[64];
    if (WIFEXITED(st))
        snprintf(status, sizeof status, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(status, sizeof status, "signal %d", WTERMSIG(st));
    else
        snprintf(status, sizeof status, "wait status %d", st);
    p->out[p->len] = 0;
    for (char *line = p->out, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next) *next++ = 0;
        for (char *e = line + strlen(line); e > line && (e[-1] == '\r' || e[-1] == ' ');) *--e = 0; /* ssh's \r\n */
        if (line[strspn(line, " -\t")]) {
            snprintf(why, cap, "%s: %.240s", status, line);
            return;
        }
    }
    snprintf(why, cap, "%s, nothing printed", status);
}

void zcli_launch_run_probes(zcli_argv *probes, int n, double timeout_s, int tries, zcli_launch_probe_result *res) {
    probe_run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) {
        for (int i = 0; i < n; i++) {
            res[i].ok = false;
            res[i].tries = 0;
            snprintf(res[i].why, sizeof res[i].why, "out of memory starting the probe");
        }
        return;
    }
    double deadline = zclock_now_s() + timeout_s;
    int left = n;
    for (int i = 0; i < n; i++) {
        res[i].ok = false;
        res[i].tries = 1;
        res[i].why[0] = 0;
        probe_start(&runs[i], probes[i].v);
        if (runs[i].pid < 0) {
            snprintf(res[i].why, sizeof res[i].why, "cannot start the probe: %s", strerror(errno));
            left--;
        }
    }
    while (left && zclock_now_s() < deadline) {
        for (int i = 0; i < n; i++) {
            probe_run *p = &runs[i];
            if (p->retry_at > 0 && zclock_now_s() >= p->retry_at) {
                p->retry_at = 0;
                res[i].tries++;
                probe_start(p, probes[i].v);
                if (p->pid < 0) {
                    snprintf(res[i].why, sizeof res[i].why, "cannot start the probe: %s", strerror(errno));
                    left--;
                }
                continue;
            }
            if (p->pid <= 0) continue;
            probe_read(p);
            int st;
            if (waitpid(p->pid, &st, WNOHANG) != p->pid) continue;
            p->pid = 0;
            probe_read(p);
            if (p->fd >= 0) close(p->fd), p->fd = -1;
            res[i].ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!res[i].ok) probe_why(p, st, res[i].why, sizeof res[i].why);
            if (!res[i].ok && res[i].tries < tries && zclock_now_s() + 1.0 < deadline)
                p->retry_at = zclock_now_s() + 1.0;
            else
                left--;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++) {
        probe_run *p = &runs[i];
        if (p->pid > 0) { /* no answer within the timeout: the host counts as lost */
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            res[i].ok = false;
            snprintf(res[i].why, sizeof res[i].why, "no answer within %.0f s", timeout_s);
        }
        if (p->fd >= 0) close(p->fd);
    }
    free(runs);
}
