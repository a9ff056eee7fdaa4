/* SIGTERM, SIGINT and SIGUSR1 (Slurm's --signal): what a run must undo when it is stopped (the NVMe swap files of its run directory),
 * and a flag a program can poll to stop in good order instead.
 *
 * zsig_install puts zinc's handler on each of the three signals whose disposition is still the default (a
 * program's own handler is left alone). The handler is async-signal-safe: it records the signal, and, unless
 * the program asked to handle it itself (zsig_defer), removes the registered paths (raw getdents64, unlinkat,
 * rmdir: no allocation, no locks) and ends the process by the same signal, so the exit status is as before. */
#ifndef ZINC_RUNTIME_CORE_SIGNALS_H
#define ZINC_RUNTIME_CORE_SIGNALS_H

#include <stdbool.h>

#define ZSIG_MAX_PATHS 16
#define ZSIG_PATH_MAX 1024

/* Idempotent; thread-safe. */
void zsig_install(void);
/* The last SIGTERM/SIGINT/SIGUSR1 received (0: none). */
int zsig_pending(void);
/* When the first of them arrived: CLOCK_MONOTONIC seconds (0: none). */
double zsig_pending_since(void);
/* Whether zinc's handler is on sig (false: the program's own handler or an ignored signal kept it off). */
bool zsig_handles(int sig);
/* on: the handler only records the first signal (the program polls zsig_pending and ends itself, running
 * its own cleanup); a second signal is handled as when off. off (the default): the handler removes the
 * registered paths and re-raises the signal. */
void zsig_defer(bool on);
/* A path to remove if a signal ends the process: a whole tree (tree) or an empty directory only (an rmdir
 * that fails while other processes still have files there). Returns a slot (>= 0) for zsig_forget, or -1
 * when the path is too long or all slots are taken (then nothing is removed on a signal). */
int zsig_remember(const char *path, bool tree);
void zsig_forget(int slot);
/* What the handler does for the registered paths, callable outside it (tests). */
void zsig_cleanup_now(void);

#endif
