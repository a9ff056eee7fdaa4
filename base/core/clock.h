/* The monotonic clock in seconds, for durations the library and the zinc program report (a checkpoint
 * save's time, the NVMe store's IO waits, training throughput). */
#ifndef ZINC_RUNTIME_CORE_CLOCK_H
#define ZINC_RUNTIME_CORE_CLOCK_H

/* CLOCK_MONOTONIC in seconds: only differences mean anything. */
double zclock_now_s(void);

/* The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): a rate over it is what the core does
 * while the thread runs, whatever else shares the machine. */
double zclock_thread_cpu_s(void);

#endif
