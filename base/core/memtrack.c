#include "base/core/memtrack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/core/error.h"

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

/* Buffers of at least this many bytes are mapped directly, so that freeing one returns its pages to the
 * kernel at once: through malloc, freeing a large block raises glibc's mmap threshold and later blocks of
 * that size come from the heap, where freed pages can stay resident (the real peak then exceeds the
 * counted bytes; docs/mem.md). */
#define ZMEM_MMAP_MIN ((size_t)256 << 10)

static zinc_status host_alloc(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes, const char *what,
                              bool touch, void **out) {
    *out = NULL;
    if (bytes == 0) return ZINC_OK;
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded >= ZMEM_MMAP_MIN) {
        p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
    } else if (posix_memalign(&p, 64, rounded) != 0) {
        p = NULL;
    }
    if (!p)
        return ZERR(ZINC_ERR_NOMEM, "out of host memory allocating %zu bytes for %s (%s)", bytes, what,
                    zinc_mem_category_name(cat));
    /* resident now, as counted (mapped pages are zero but not yet resident); lazy: as first written */
    if (touch || rounded < ZMEM_MMAP_MIN) memset(p, 0, rounded);
    zmem_add(t, kind, cat, bytes);
    *out = p;
    return ZINC_OK;
}

zinc_status zmem_host_alloc(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes, const char *what,
                            void **out) {
    return host_alloc(t, kind, cat, bytes, what, true, out);
}

zinc_status zmem_host_alloc_lazy(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, size_t bytes,
                                 const char *what, void **out) {
    return host_alloc(t, kind, cat, bytes, what, false, out);
}

void zmem_host_free(zmemtrack *t, zinc_mem_kind kind, zinc_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded >= ZMEM_MMAP_MIN)
        munmap(p, rounded);
    else
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
    static const char *names[ZINC_MEM_CATEGORY_COUNT] = {"params",     "grads",       "master", "exp_avg",
                                                         "exp_avg_sq", "buckets",     "gather", "staging",
                                                         "other",      "activations", "scratch"};
    return (unsigned)c < ZINC_MEM_CATEGORY_COUNT ? names[c] : "?";
}

const char *zinc_mem_kind_name(zinc_mem_kind k) {
    static const char *names[ZINC_MEMKIND_COUNT] = {"device", "host", "pinned", "nvme"};
    return (unsigned)k < ZINC_MEMKIND_COUNT ? names[k] : "?";
}

bool zmem_proc_rss(uint64_t *rss, uint64_t *hwm) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return false;
    char line[256];
    int found = 0;
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            *rss = (uint64_t)kb * 1024, found |= 1;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            *hwm = (uint64_t)kb * 1024, found |= 2;
    }
    fclose(f);
    return found == 3;
}

bool zmem_proc_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    if (fclose(f) != 0) ok = false;
    return ok;
}
