/* See train_memory.h. */
#include "cli/train/train_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fnv_sum {
    uint64_t h;
    double sq;
} fnv_sum;

static zinc_status add_piece(void *u, int param, int64_t offset, const float *v, int64_t n) {
    (void)param, (void)offset;
    fnv_sum *s = u;
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < (size_t)n * sizeof *v; i++) s->h = (s->h ^ b[i]) * 1099511628211ull;
    for (int64_t i = 0; i < n; i++) s->sq += (double)v[i] * v[i];
    return ZINC_OK;
}

zinc_status zcli_param_checksum(zinc_engine *e, uint64_t *sum, double *l2_norm) {
    fnv_sum s = {1469598103934665603ull, 0};
    zinc_status st = zinc_master_foreach(e, add_piece, &s);
    if (st != ZINC_OK) return st;
    *sum = s.h;
    if (l2_norm) *l2_norm = sqrt(s.sq);
    return ZINC_OK;
}

uint64_t zcli_vmhwm_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtoull(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

json_t *zcli_vmhwm_all(zinc_engine *e) {
    int W = zinc_world_size(e);
    double *v = calloc((size_t)W, sizeof *v);
    if (!v) return NULL;
    v[zinc_rank(e)] = (double)zcli_vmhwm_bytes();
    json_t *a = NULL;
    if (zinc_allreduce_sum(e, v, W) == ZINC_OK && (a = json_array()))
        for (int r = 0; r < W; r++) json_array_append_new(a, json_integer((json_int_t)v[r]));
    free(v);
    return a;
}
