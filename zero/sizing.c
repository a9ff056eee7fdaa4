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

size_t zsize_qgz_wire_bytes(int64_t n) {
    if (n <= 0) return 0;
    int64_t nb = (n + ZSIZE_QGZ_BLOCK - 1) / ZSIZE_QGZ_BLOCK;
    return (size_t)zpart_align_up(4 * nb + (n + 1) / 2, 4);
}

/* An upper bound of the wire bytes of n elements in at most k pieces. */
static size_t qgz_ub(int64_t n, int64_t k) { return (size_t)(4 * (n / ZSIZE_QGZ_BLOCK + 1) + n / 2 + 1 + 8 * k); }

static size_t up8(size_t x) { return (x + 7) / 8 * 8; }

void zsize_qgz_scratch(int64_t cap, int64_t shard, int world, int local, zsize_qgz *out) {
    int64_t N = world / local, P = cap < shard ? cap : shard, M = N * P < cap ? N * P : cap;
    out->s1_send = up8(qgz_ub(cap, world));
    out->s1_recv = up8((size_t)local * qgz_ub(M, N));
    out->partial = up8((size_t)M * sizeof(float));
    out->s2_send = up8(qgz_ub(M, N));
    out->s2_recv = up8((size_t)N * qgz_ub(P, 1));
    out->sum = up8((size_t)P * sizeof(float));
    out->qtmp = up8((size_t)M);
    out->total = out->s1_send + out->s1_recv + out->partial + out->s2_send + out->s2_recv + out->sum + out->qtmp;
}
