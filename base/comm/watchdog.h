/* The collective watchdog: a rank that waits in a collective longer than ZINC_COLLECTIVE_TIMEOUT_S seconds
 * (library default: off; the zinc program sets 1800 unless the variable is set; 0 turns it off) because another rank died, stopped or disagrees logs an error naming the
 * collective and ends its process with exit status ZWATCH_EXIT (113); the launcher (mpirun, srun) then ends the job.
 * A hang would otherwise hold every node of the job forever. Armed only around blocking collectives of a
 * communicator with more than one rank; the cost is two atomic stores and a clock read per collective. */
#ifndef ZINC_RUNTIME_WATCHDOG_H
#define ZINC_RUNTIME_WATCHDOG_H

#include "base/core/log.h"

/* Where the timeout message goes (the first engine's log) and this process's rank. */
#define ZWATCH_EXIT 113

void zwatch_configure(const zlog *log, int rank);
void zwatch_arm(const char *what);
void zwatch_disarm(void);
/* The timeout in seconds (0: off), from ZINC_COLLECTIVE_TIMEOUT_S. */
double zwatch_timeout_s(void);

#endif
