#include "zero/partition.h"

void zpart_init(zpartition *p, int64_t numel, int world, int rank) {
    p->world = world;
    p->rank = rank;
    p->numel = zpart_align_up(numel, ZPART_PARAM_ALIGN);
    int64_t per = (p->numel + world - 1) / world;
    p->shard = zpart_align_up(per > 0 ? per : 1, ZPART_SHARD_ALIGN);
    p->padded = p->shard * world;
}

void zpart_intersect(const zpartition *p, int r, int64_t a, int64_t b, int64_t *lo, int64_t *hi) {
    int64_t s0 = (int64_t)r * p->shard, s1 = s0 + p->shard;
    int64_t l = a > s0 ? a : s0, h = b < s1 ? b : s1;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

size_t zpart_range_split(const zpartition *p, int64_t a, int64_t b, size_t *counts, size_t *displs) {
    for (int r = 0; r < p->world; r++) {
        int64_t lo, hi;
        zpart_intersect(p, r, a, b, &lo, &hi);
        counts[r] = (size_t)(hi - lo);
        displs[r] = (size_t)(hi > lo ? lo - a : (lo > a ? (lo < b ? lo - a : b - a) : 0));
    }
    return counts[p->rank];
}
