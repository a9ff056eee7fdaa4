#include "memtrack.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

void zmem_add(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, uint64_t bytes) {
    t->current[kind][cat] += bytes;
    if (t->current[kind][cat] > t->peak[kind][cat]) t->peak[kind][cat] = t->current[kind][cat];
    t->current_total[kind] += bytes;
    if (t->current_total[kind] > t->peak_total[kind]) t->peak_total[kind] = t->current_total[kind];
}

void zmem_sub(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, uint64_t bytes) {
    t->current[kind][cat] -= bytes;
    t->current_total[kind] -= bytes;
}

zinc_status zmem_host_alloc(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes,
                            const char *what, void **out) {
    *out = NULL;
    if (bytes == 0) return ZINC_OK;
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded) != 0 || !p)
        return ZERR(ZINC_ERR_NOMEM, "out of host memory allocating %zu bytes for %s (%s)", bytes, what,
                    zinc_mem_category_name(cat));
    memset(p, 0, rounded);
    zmem_add(t, kind, cat, bytes);
    *out = p;
    return ZINC_OK;
}

void zmem_host_free(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    free(p);
    zmem_sub(t, kind, cat, bytes);
}

void zmem_report(const zmemtrack *t, zinc_memory_report *out) {
    memset(out, 0, sizeof *out);
    memcpy(out->current, t->current, sizeof out->current);
    memcpy(out->peak, t->peak, sizeof out->peak);
    memcpy(out->current_total, t->current_total, sizeof out->current_total);
    memcpy(out->peak_total, t->peak_total, sizeof out->peak_total);
}

const char *zinc_mem_category_name(zinc_mem_category c) {
    static const char *names[ZINC_MEM_CATEGORY_COUNT] = {
        "params", "grads", "master", "exp_avg", "exp_avg_sq", "buckets", "gather", "staging", "other"};
    return (unsigned)c < ZINC_MEM_CATEGORY_COUNT ? names[c] : "?";
}

const char *zinc_mem_kind_name(zinc_mem_kind k) {
    static const char *names[ZINC_MEMKIND_COUNT] = {"device", "host", "pinned", "nvme"};
    return (unsigned)k < ZINC_MEMKIND_COUNT ? names[k] : "?";
}
