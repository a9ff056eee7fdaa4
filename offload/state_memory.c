/* The in-memory optimizer-state store: three arrays in the compute device's memory (no offload) or in
 * host memory (offload_optimizer.device "cpu"), visited in sub_group_size chunks. */
#include <stdlib.h>

#include "engine_internal.h"
#include "error.h"
#include "state.h"

typedef struct zstate_memory {
    zstate base;
    zinc_mem_kind kind;
    size_t bytes;
    float *master, *m, *v;
} zstate_memory;

static zinc_status mem_pass_begin(zstate *s, zstate_mode mode) {
    (void)s, (void)mode;
    return ZINC_OK;
}

static zinc_status mem_acquire(zstate *s, int64_t chunk, zstate_view *out) {
    zstate_memory *z = (zstate_memory *)s;
    int64_t lo = chunk * s->chunk, n = s->n - lo < s->chunk ? s->n - lo : s->chunk;
    *out = (zstate_view){.lo = lo, .n = n, .master = z->master + lo, .m = z->m + lo, .v = z->v + lo};
    return ZINC_OK;
}

static zinc_status mem_release(zstate *s, int64_t chunk) {
    (void)s, (void)chunk;
    return ZINC_OK;
}

static zinc_status mem_pass_end(zstate *s) {
    (void)s;
    return ZINC_OK;
}

static void mem_pass_abort(zstate *s) { (void)s; }

static void mem_destroy(zstate *s) {
    zstate_memory *z = (zstate_memory *)s;
    zmemtrack *t = &s->e->mem;
    zmem_host_free(t, z->kind, ZINC_MEM_MASTER, z->master, z->bytes);
    zmem_host_free(t, z->kind, ZINC_MEM_EXP_AVG, z->m, z->bytes);
    zmem_host_free(t, z->kind, ZINC_MEM_EXP_AVG_SQ, z->v, z->bytes);
    free(z);
}

static const zstate_ops memory_ops = {"memory", mem_pass_begin, mem_acquire, mem_release,
                                      mem_pass_end, mem_pass_abort, mem_destroy};

zinc_status zstate_create_memory(zinc_engine *e, int64_t n, zinc_mem_kind kind, int64_t chunk, zstate **out) {
    zinc_status st = ZINC_OK;
    zstate_memory *z = NULL;
    TRY_ALLOC(z, 1, "the optimizer state store");
    z->base = (zstate){.ops = &memory_ops, .e = e, .n = n, .chunk = chunk > 0 ? chunk : 1};
    z->base.nchunks = n > 0 ? (n + z->base.chunk - 1) / z->base.chunk : 0;
    z->kind = kind;
    z->bytes = (size_t)n * sizeof(float);
    TRY(zmem_host_alloc(&e->mem, kind, ZINC_MEM_MASTER, z->bytes, "fp32 master weights", (void **)&z->master));
    TRY(zmem_host_alloc(&e->mem, kind, ZINC_MEM_EXP_AVG, z->bytes, "Adam exp_avg", (void **)&z->m));
    TRY(zmem_host_alloc(&e->mem, kind, ZINC_MEM_EXP_AVG_SQ, z->bytes, "Adam exp_avg_sq", (void **)&z->v));
    *out = &z->base;
    return ZINC_OK;
fail:
    if (z) mem_destroy(&z->base);
    return st;
}
