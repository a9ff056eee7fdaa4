#include "zero/sizing.h"

float zsize_pre_scale(bool prescale_gradients, double predivide_factor, int world) {
    if (prescale_gradients) return 1.0f / (float)world;
    return (float)(1.0 / predivide_factor);
}

bool zsize_send_needs_copy(zinc_dtype comm_dtype, zinc_dtype grad_dtype, bool prescale_gradients,
                           double predivide_factor, int world) {
    return comm_dtype != grad_dtype || zsize_pre_scale(prescale_gradients, predivide_factor, world) != 1.0f;
}

void zgrads_plan_make(const zgrads_plan_in *in, zgrads_plan *out) {
    const zpartition *part = in->part;
    size_t gsz = zinc_dtype_size(in->grad_dtype), csz = zinc_dtype_size(in->comm_dtype);
    *out = (zgrads_plan){0};
    out->biggest_module = in->biggest_module;
    if (in->stage <= 1) out->bytes_grads_full = (size_t)part->padded * gsz;
    if (in->stage >= 1 && !in->shard_elsewhere) out->bytes_grads_shard = (size_t)part->shard * sizeof(float);
    if (in->deterministic) {
        int levels = 0;
        while (((int64_t)1 << levels) < in->gas) levels++;
        out->determ_shards = 1 + levels + (in->stage == 0);
        out->bytes_determ_shard = (size_t)part->shard * sizeof(float);
        /* the partner's piece at one level of the tree over the ranks: at most a shard (stages 0-1 reduce the
         * whole buffer at once); at stages 2-3 at most a bucket's piece (below) */
        if (in->world > 1) out->bytes_determ_recv = out->bytes_determ_shard;
    }
    if (in->stage == 0 && !in->send_needs_copy) return;

    /* Bucket capacity: reduce_bucket_size elements, at least one shard alignment unit and at most the
     * whole buffer. A module's gradients are handed out as one piece, so modules larger than a bucket
     * get the landing buffer instead. */
    int64_t cap = in->reduce_bucket_size;
    if (cap < ZPART_SHARD_ALIGN) cap = ZPART_SHARD_ALIGN;
    if (cap > part->padded) cap = part->padded;
    out->bucket_cap = zpart_align_up(cap, ZPART_PARAM_ALIGN);
    out->nbuckets = in->overlap_comm && in->world > 1 ? 2 : 1;
    int64_t recv_n = out->bucket_cap < part->shard ? out->bucket_cap : part->shard;
    if (in->stage == 0) recv_n = 0; /* stage 0 all-reduces in the send buffer */
    out->bytes_bucket_grads = in->stage >= 2 ? (size_t)out->bucket_cap * gsz : 0;
    out->bytes_bucket_send = in->send_needs_copy ? (size_t)out->bucket_cap * csz : 0;
    out->bytes_bucket_recv = (size_t)recv_n * csz;
    if (in->stage >= 2 && in->biggest_module > out->bucket_cap) out->bytes_landing = (size_t)in->biggest_module * gsz;
    if (in->deterministic && in->world > 1 && in->stage >= 2) out->bytes_determ_recv = (size_t)recv_n * sizeof(float);
}

size_t zgrads_plan_bucket_bytes(const zgrads_plan *p) {
    return (size_t)p->nbuckets * (p->bytes_bucket_grads + p->bytes_bucket_send + p->bytes_bucket_recv) +
           p->bytes_landing;
}

bool zsize_persistent(int64_t n, int64_t *total, int64_t param_threshold, int64_t model_threshold) {
    bool keep = n <= param_threshold && *total + n <= model_threshold;
    if (keep) *total += n;
    return keep;
}

int64_t zsize_quant_block(int64_t n) {
    if (n <= 0) return 0;
    if (n % 8) return n < ZSIZE_QUANT_TARGET_GROUP ? n : ZSIZE_QUANT_TARGET_GROUP;
    int64_t groups = (n + ZSIZE_QUANT_TARGET_GROUP - 1) / ZSIZE_QUANT_TARGET_GROUP;
    while (groups < n && n % (8 * groups)) groups++; /* ends by n / 8 at the latest */
    while (n % (16 * groups) == 0 && n / groups > ZSIZE_QUANT_TARGET_GROUP) groups *= 2;
    return n / groups;
}

size_t zsize_quant_wire_bytes(int64_t n) {
    if (n <= 0) return 0;
    int64_t b = zsize_quant_block(n), nb = (n + b - 1) / b;
    return (size_t)zpart_align_up(nb * 4 + n, 4);
}

size_t zsize_quant_range_bytes(const zpartition *p, int64_t a, int64_t b) {
    size_t sum = 0;
    for (int r = 0; r < p->world; r++) {
        int64_t lo, hi;
        zpart_intersect(p, r, a, b, &lo, &hi);
        sum += zsize_quant_wire_bytes(hi - lo);
    }
    return sum;
}

int64_t zsize_qgz_group(int ndim, const int64_t *shape, int64_t numel, int world) {
    if (ndim < 2 || numel <= 0 || numel % (2 * (int64_t)world)) return 0;
    int64_t m = shape[0] > shape[1] ? shape[0] : shape[1];
    if (m < world) m = world;
    return numel / m;
}

zsize_qgz_seg zsize_qgz_next(const zsize_qgz_layout *L, int *idx, int64_t lo, int64_t hi) {
    zsize_qgz_seg g = {.s = lo, .e = hi};
    if (!L->n || lo < L->begin[0]) {
        if (L->n && L->begin[0] < hi) g.e = L->begin[0];
        return g;
    }
    int i = *idx >= 0 && *idx < L->n && L->begin[*idx] <= lo ? *idx : 0;
    while (i + 1 < L->n && L->begin[i + 1] <= lo) i++;
    *idx = i;
    int64_t end = i + 1 < L->n ? L->begin[i + 1] : L->total;
    if (end > lo && end < hi) g.e = end;
    g.group = end > lo ? L->group[i] : 0;
    if (g.group) {
        int64_t off = (lo - L->begin[i]) % g.group;
        g.head = off ? (g.e - lo < g.group - off ? g.e - lo : g.group - off) : 0;
    }
    return g;
}

size_t zsize_qgz_seg_bytes(const zsize_qgz_seg *g, size_t raw_size) {
    int64_t n = g->e - g->s;
    if (n <= 0) return 0;
    if (!g->group) return (size_t)zpart_align_up(n * (int64_t)raw_size, 4);
    int64_t nb = (g->head ? 1 : 0) + (n - g->head + g->group - 1) / g->group;
    return (size_t)zpart_align_up(4 * nb + (n + 1) / 2, 4);
}

size_t zsize_qgz_wire_bytes(const zsize_qgz_layout *L, int64_t lo, int64_t hi, size_t raw_size) {
    size_t sum = 0;
    int idx = 0;
    while (lo < hi) {
        zsize_qgz_seg g = zsize_qgz_next(L, &idx, lo, hi);
        sum += zsize_qgz_seg_bytes(&g, raw_size);
        lo = g.e;
    }
    return sum;
}

/* An upper bound of the wire bytes of n elements in at most k pieces: at most min(n, raw) raw elements at 4
 * bytes, the rest at half a byte plus a scale for every gmin elements, and per segment (at most a tensor
 * boundary or a piece boundary apart: T + k of them) two partial groups' scales and 4 bytes of padding. */
static size_t qgz_ub(int64_t n, int64_t k, int64_t raw, int64_t gmin, int64_t T) {
    int64_t q = gmin ? n / 2 + 1 + (4 * n + gmin - 1) / gmin : 0;
    return (size_t)(4 * (n < raw ? n : raw) + q + 12 * (T + k));
}

static size_t up8(size_t x) { return (x + 7) / 8 * 8; }

void zsize_qgz_scratch(int64_t cap, int64_t shard, int world, int local, const zsize_qgz_layout *L, zsize_qgz *out) {
    int64_t N = world / local, P = cap < shard ? cap : shard, M = N * P < cap ? N * P : cap;
    int64_t raw = L->n ? L->begin[0] : L->total, gmin = 0, T = L->n + 1;
    for (int i = 0; i < L->n; i++) {
        int64_t end = i + 1 < L->n ? L->begin[i + 1] : L->total;
        if (!L->group[i])
            raw += end - L->begin[i];
        else if (!gmin || L->group[i] < gmin)
            gmin = L->group[i];
    }
    out->s1_send = up8(qgz_ub(cap, world, raw, gmin, T));
    out->s1_recv = up8((size_t)local * qgz_ub(M, N, raw, gmin, T));
    out->partial = up8((size_t)M * sizeof(float));
    out->s2_send = up8(qgz_ub(M, N, raw, gmin, T));
    out->s2_recv = up8((size_t)N * qgz_ub(P, 1, raw, gmin, T));
    out->sum = up8((size_t)P * sizeof(float));
    out->qtmp = up8((size_t)M);
    out->total = out->s1_send + out->s1_recv + out->partial + out->s2_send + out->s2_recv + out->sum + out->qtmp;
}
