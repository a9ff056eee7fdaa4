/* See signals.h. Everything the handler touches is preallocated and reached through atomics. */
#include "base/core/signals.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct slot {
    atomic_int state; /* 0 free, 1 being written, 2 armed */
    bool tree;
    char path[ZSIG_PATH_MAX];
} slot;

static slot slots[ZSIG_MAX_PATHS];
static atomic_int pending, deferred;
static atomic_llong pending_ns; /* CLOCK_MONOTONIC when the first signal arrived */
static pthread_once_t once = PTHREAD_ONCE_INIT;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Removes what is inside the directory open at dfd (depth-limited: zinc's swap trees are two levels), never
 * following links (unlinkat removes a link itself). Only system calls: safe in a signal handler. */
static void empty_dir(int dfd, int depth) {
    char buf[4096];
    for (int rounds = 0; rounds < 1024; rounds++) {
        long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
        if (n <= 0) return;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *nm = d->d_name;
            if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]))) continue;
            if (d->d_type == DT_DIR && depth < 4) {
                int sub = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    empty_dir(sub, depth + 1);
                    close(sub);
                }
                unlinkat(dfd, nm, AT_REMOVEDIR);
            } else {
                unlinkat(dfd, nm, 0);
            }
        }
    }
}

void zsig_cleanup_now(void) {
    /* Trees first, then the directories removed only when empty (a run directory above the rank trees). */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ZSIG_MAX_PATHS; i++) {
            slot *s = &slots[i];
            if (atomic_load(&s->state) != 2 || s->tree != (pass == 0)) continue;
            if (s->tree) {
                int dfd = open(s->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd >= 0) {
                    empty_dir(dfd, 0);
                    close(dfd);
                }
            }
            rmdir(s->path);
        }
}

static const int handled_sigs[3] = {SIGTERM, SIGINT, SIGUSR1};
static atomic_int ours; /* bit i: handled_sigs[i] has zinc's handler */

static void handler(int sig) {
    int saved_errno = errno;
    /* Deferred, the first signal is only recorded; a second one (the user or the scheduler insisting) ends
     * the process at once as without deferral: an interrupted save leaves the previous checkpoint. */
    int before = atomic_exchange(&pending, sig);
    if (before == 0) {
        struct timespec ts; /* clock_gettime is async-signal-safe (POSIX) */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        atomic_store(&pending_ns, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
    if (atomic_load(&deferred) && before == 0) {
        errno = saved_errno;
        return;
    }
    zsig_cleanup_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_once(void) {
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        if (sigaction(handled_sigs[i], NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue; /* the program's own, or ignored */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGTERM);
        sigaddset(&sa.sa_mask, SIGINT);
        sigaddset(&sa.sa_mask, SIGUSR1);
        sa.sa_flags = SA_RESTART;
        if (sigaction(handled_sigs[i], &sa, NULL) == 0) atomic_fetch_or(&ours, 1 << i);
    }
}

void zsig_install(void) { pthread_once(&once, install_once); }

int zsig_pending(void) { return atomic_load(&pending); }

double zsig_pending_since(void) {
    long long ns = atomic_load(&pending_ns);
    return ns ? 1e-9 * (double)ns : 0;
}

bool zsig_handles(int sig) {
    for (int i = 0; i < 3; i++)
        if (handled_sigs[i] == sig) return (atomic_load(&ours) >> i) & 1;
    return false;
}

void zsig_defer(bool on) { atomic_store(&deferred, on ? 1 : 0); }

int zsig_remember(const char *path, bool tree) {
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= ZSIG_PATH_MAX) return -1;
    for (int i = 0; i < ZSIG_MAX_PATHS; i++) {
        int want = 0;
        if (!atomic_compare_exchange_strong(&slots[i].state, &want, 1)) continue;
        memcpy(slots[i].path, path, n + 1);
        slots[i].tree = tree;
        atomic_store(&slots[i].state, 2);
        return i;
    }
    return -1;
}

void zsig_forget(int i) {
    if (i >= 0 && i < ZSIG_MAX_PATHS) atomic_store(&slots[i].state, 0);
}
