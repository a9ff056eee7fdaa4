/* Memory accounting: every allocation the engine makes is tagged with a category and a memory kind and
 * counted, current and peak. This is what zinc_memory_get and `zinc mem measure` report and what the
 * tests compare with the estimator. */
#ifndef ZINC_RUNTIME_MEMTRACK_H
#define ZINC_RUNTIME_MEMTRACK_H

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
zinc_status zmem_host_alloc(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes,
                            const char *what, void **out);
void zmem_host_free(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, void *p, size_t bytes);

void zmem_report(const zmemtrack *t, zinc_memory_report *out);

#endif
