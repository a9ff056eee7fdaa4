/* The collective watchdog (watchdog.h). One thread, started at the first arm, polls the deadline; arming
 * and disarming are atomic stores, so a collective that completes in time costs nothing more. */
#include "base/comm/watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/core/env.h"

static _Atomic int64_t g_deadline_ns; /* 0: disarmed */
static _Atomic(const char *) g_what;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static zlog g_log;
static int g_have_log, g_rank;
static double g_timeout = -1;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double zwatch_timeout_s(void) {
    if (g_timeout < 0) {
        const char *v = zenv_get(ZENV_COLLECTIVE_TIMEOUT_S);
        char *end = NULL;
        /* Off unless asked for: the library ends a process only when its user chose that (the zinc program
         * asks for 1800 s unless the variable is set; see cli/main.c). */
        double t = v && *v ? strtod(v, &end) : 0.0;
        if (v && *v && (*end || !(t >= 0) || t > 1e7)) t = 0.0; /* unusable values: off */
        g_timeout = t;
    }
    return g_timeout;
}

void zwatch_configure(const zlog *log, int rank) {
    pthread_mutex_lock(&g_log_mu);
    if (log && !g_have_log) {
        g_log = *log;
        g_log.rank = rank;
        g_have_log = 1;
    }
    g_rank = rank;
    pthread_mutex_unlock(&g_log_mu);
}

static void *watch(void *arg) {
    (void)arg;
    double t = zwatch_timeout_s();
    useconds_t tick = t < 10 ? 100000 : 1000000;
    for (;;) {
        usleep(tick);
        int64_t d = atomic_load(&g_deadline_ns);
        if (d == 0 || now_ns() < d) continue;
        const char *what = atomic_load(&g_what);
        pthread_mutex_lock(&g_log_mu);
        char msg[512];
        snprintf(msg, sizeof msg,
                 "rank %d waited more than %.0f s (ZINC_COLLECTIVE_TIMEOUT_S) in collective %s: another rank has "
                 "died, stopped, or was started with different settings; ending this process (exit status %d) so "
                 "that the launcher ends the job",
                 g_rank, t, what ? what : "?", ZWATCH_EXIT);
        /* Every rank logs this one (the default log prints rank 0 only). */
        if (g_have_log && g_log.fn && g_log.fn != zinc_log_stderr)
            g_log.fn(g_log.userdata, ZINC_LOG_ERROR, g_rank, msg);
        else
            zinc_log_stderr(NULL, ZINC_LOG_ERROR, 0, msg);
        pthread_mutex_unlock(&g_log_mu);
        _exit(ZWATCH_EXIT);
    }
    return NULL;
}

static void start(void) {
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &a, watch, NULL) != 0) g_timeout = 0; /* no thread: no watchdog */
    pthread_attr_destroy(&a);
}

void zwatch_arm(const char *what) {
    double t = zwatch_timeout_s();
    if (t <= 0) return;
    pthread_once(&g_once, start);
    atomic_store(&g_what, what);
    atomic_store(&g_deadline_ns, now_ns() + (int64_t)(t * 1e9));
}

void zwatch_disarm(void) { atomic_store(&g_deadline_ns, 0); }
