/* Memory accounting: every allocation the engine makes is tagged with a category and a memory kind and
 * counted, current and peak. This is what zinc_memory_get and `zinc mem measure` report and what the
 * tests compare with the estimator. */
#ifndef ZINC_RUNTIME_MEMTRACK_H
#define ZINC_RUNTIME_MEMTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

typedef struct zmemtrack {
    uint64_t current[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t peak[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT];
    uint64_t current_total[ZINC_MEMKIND_COUNT];
    uint64_t peak_total[ZINC_MEMKIND_COUNT];
} zmemtrack;

/* Records `bytes` more (or less, for release) of a kind and category. */
void zmem_add(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, uint64_t bytes);
void zmem_sub(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, uint64_t bytes);

/* Host allocations, 64-byte aligned and zeroed, counted under (kind, cat). `what` names the buffer in
 * the out-of-memory message. */
zinc_status zmem_host_alloc(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes, const char *what,
                            void **out);
/* The same, not touched here: the pages read zero and become resident as they are first written (a buffer
 * that another thread fills, whose page faults are then that thread's and not the caller's). Counted in full
 * now, as zmem_host_alloc's; freed by zmem_host_free. */
zinc_status zmem_host_alloc_lazy(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes,
                                 const char *what, void **out);
void zmem_host_free(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, void *p, size_t bytes);

void zmem_report(const zmemtrack *t, zinc_memory_report *out);

/* This process's resident memory from /proc/self/status: VmRSS (now) and VmHWM (the peak), in bytes.
 * Returns false where /proc is not readable. */
bool zmem_proc_rss(uint64_t *rss, uint64_t *hwm);

/* Resets VmHWM to the current VmRSS (writes "5" to /proc/self/clear_refs, Linux 4.0+), so a later VmHWM
 * is the peak since this call. Returns false where the kernel does not allow it. */
bool zmem_proc_reset_peak(void);

#endif
