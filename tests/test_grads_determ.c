/* zinc.deterministic_reduction's sum (zero/grads_determ.c) on its own: no engine, no model. The zero/
 * fixture (tests/zero_fixture.c) at this run's rank count P (1, 2 or 4 under mpirun), gas = 8 / P
 * micro-steps, so the step always has 8 leaves. Rank r's gradient in micro-step j is leaf m = j x P + r:
 * floats of mixed sign and magnitudes 2^-20..2^20, so every association of the 8 leaves rounds differently
 * somewhere. After zgrads_reduce_boundary the local gradient (stage 0: the full buffer; stages 1-3: the fp32
 * shard) must be, bit for bit, the pairwise tree ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) computed
 * here, and must differ from the sequential sum somewhere (or the check could not tell them apart). Stages 0-3
 * x reduce_bucket_size large and small (the landing buffer) x overlap_comm off and on (ignored: the tree
 * blocks), with prescale_gradients (1/P, exact) at stages 1 and 3; then a second step (the counter starts over),
 * three micro-steps instead of gas, the buffers against the plan, and a reset. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/device/device.h"
#include "zero/grads.h"
#include "zero/sizing.h"
#include "zero_fixture.h"
#include "zt.h"

#define LEAVES 8

typedef zfx_grads fixture;

/* Leaf m's gradient at flat x (step s): a deterministic float of mixed sign and magnitude. */
static float leaf(int64_t x, int m, int s) {
    uint64_t h = (uint64_t)(x + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(m + 17 * s + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    float mant = 1.0f + (float)(h & 0xFFFFF) / (float)(1 << 20);
    int e = (int)((h >> 20) % 41) - 20;
    return ((h >> 61) & 1 ? -1.0f : 1.0f) * mant * (float)ldexp(1.0, e);
}

/* The pairwise tree over leaves [a, b), b - a a power of two. */
static float tree(int64_t x, int s, int a, int b, float scale) {
    if (b - a == 1) return leaf(x, a, s) * scale;
    int h = (a + b) / 2;
    return tree(x, s, a, h, scale) + tree(x, s, h, b, scale);
}

static zinc_status fx_init(fixture *f, zcomm *world, int stage, int64_t bucket, bool overlap, bool prescale) {
    zfx_grads_opts o = {.stage = stage,
                        .dtype = ZINC_FP32,
                        .bucket = bucket,
                        .overlap = overlap,
                        .prescale = prescale,
                        .deterministic = true,
                        .gas = LEAVES / world->size};
    return zfx_grads_init(f, world, &o);
}

/* One micro-step's backward, modules in reverse order, each adding leaf m into its slot. */
static void micro_step(fixture *f, int m, int s) {
    for (int i = ZFX_NMOD - 1; i >= 0; i--) {
        void *p = NULL;
        zmodule *mod = &f->b.mods[i];
        mod->in_phase[ZINC_BACKWARD] = true;
        ZT_OK(zgrads_module_backward_enter(&f->g, i, &p));
        for (int64_t x = mod->flat_begin; x < mod->flat_end; x++) ((float *)p)[x - mod->flat_begin] += leaf(x, m, s);
        mod->in_phase[ZINC_BACKWARD] = false;
        ZT_OK(zgrads_module_backward_exit(&f->g, i, true));
    }
}

/* want(x): the expected bits at flat x; returns mismatches (reported up to 3). */
static int check_local(fixture *f, const char *what, float (*want)(int64_t x, const void *u), const void *u,
                       int *differs_from_sequential, int s) {
    zinc_dtype dt;
    const float *local = zgrads_local(&f->g, &dt);
    int64_t lo = f->g.c.stage == 0 ? 0 : (int64_t)f->b.part.rank * f->b.part.shard;
    int64_t n = f->g.c.stage == 0 ? f->b.part.padded : f->b.part.shard;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = lo + i;
        float w = x < f->b.part.numel ? want(x, u) : 0.0f;
        if (memcmp(&local[i], &w, sizeof w) != 0 && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "%s: flat %lld: got %a, want %a", what, (long long)x, local[i], w);
        if (differs_from_sequential && x < f->b.part.numel) {
            float seq = 0;
            for (int m = 0; m < LEAVES; m++) seq += leaf(x, m, s);
            if (seq != w) *differs_from_sequential = 1;
        }
    }
    if (!bad) zt_passed++;
    return bad;
}

typedef struct want_ctx {
    int s, leaves;
    float scale;
} want_ctx;

static float want_tree(int64_t x, const void *u) {
    const want_ctx *c = u;
    return tree(x, c->s, 0, c->leaves, c->scale);
}

/* Three micro-steps, not gas: the micro-steps' partial sums, earliest first: (T0 + T1) + T2, each Tj the
 * tree over the ranks (also when 3 exceeds gas: the sum is then complete after two, the third added after). */
static float want_three(int64_t x, const void *u) {
    const want_ctx *c = u;
    int P = c->leaves;
    return tree(x, c->s, 0, 2 * P, c->scale) + tree(x, c->s, 2 * P, 3 * P, c->scale);
}

static float want_zero(int64_t x, const void *u) {
    (void)x;
    (void)u;
    return 0.0f;
}

static void test_sum(zcomm *world, int stage, int64_t bucket, bool overlap, bool prescale) {
    char what[160];
    int P = world->size, r = world->rank, gas = LEAVES / P;
    snprintf(what, sizeof what, "stage %d, reduce_bucket_size %lld, overlap_comm %d, prescale %d, %d x gas %d", stage,
             (long long)bucket, overlap, prescale, P, gas);
    fixture f;
    ZT_OK(fx_init(&f, world, stage, bucket, overlap, prescale));
    ZT_OK(zgrads_alloc(&f.g));
    uint64_t shards = (uint64_t)f.plan.determ_shards * f.plan.bytes_determ_shard;
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_GRADS) == f.plan.bytes_grads_full + f.plan.bytes_grads_shard + shards,
             "%s: gradient bytes %llu, the plan says %llu", what, (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_GRADS),
             (unsigned long long)(f.plan.bytes_grads_full + f.plan.bytes_grads_shard + shards));
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_BUCKETS) == zgrads_plan_bucket_bytes(&f.plan) + f.plan.bytes_determ_recv,
             "%s: bucket bytes %llu, the plan says %llu", what, (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_BUCKETS),
             (unsigned long long)(zgrads_plan_bucket_bytes(&f.plan) + f.plan.bytes_determ_recv));
    ZT_OK(zgrads_zero(&f.g));
    float scale = prescale ? 1.0f / (float)P : 1.0f;
    for (int s = 0; s < 2; s++) { /* two steps: the counter and the buffers start over */
        for (int j = 0; j < gas; j++) {
            if (j > 0) ZT_OK(zgrads_flush(&f.g)); /* the engine's next forward */
            micro_step(&f, j * P + r, s);
        }
        ZT_OK(zgrads_reduce_boundary(&f.g));
        want_ctx c = {s, LEAVES, scale};
        int differs = 0;
        check_local(&f, what, want_tree, &c, &differs, s);
        ZT_CHECK(differs, "%s: the tree equals the sequential sum everywhere: the leaves do not tell them apart", what);
        ZT_OK(zgrads_zero(&f.g));
    }
    for (int j = 0; j < 3; j++) {
        if (j > 0) ZT_OK(zgrads_flush(&f.g));
        micro_step(&f, j * P + r, 2);
    }
    ZT_OK(zgrads_reduce_boundary(&f.g));
    want_ctx three = {2, P, scale};
    check_local(&f, what, want_three, &three, NULL, 2);
    ZT_OK(zgrads_zero(&f.g));
    /* zgrads_reset drops a half-done step: a boundary right after it sums nothing */
    micro_step(&f, r, 0);
    ZT_OK(zgrads_flush(&f.g));
    ZT_OK(zgrads_reset(&f.g));
    ZT_OK(zgrads_reduce_boundary(&f.g));
    check_local(&f, what, want_zero, NULL, NULL, 0);
    zgrads_free(&f.g);
    zfx_base_free(&f.b);
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_GRADS) == 0 && zfx_tracked(&f.b, ZINC_MEM_BUCKETS) == 0,
             "%s: bytes left after free", what);
}

int main(void) {
    zt_name = "determinism_grads";
    zlog wlog = {.level = ZINC_LOG_WARN};
    zcomm *world = NULL;
    if (zcomm_create(&wlog, &world) != ZINC_OK) {
        fprintf(stderr, "cannot create the communicator: %s\n", zinc_last_error());
        return 1;
    }
    if (LEAVES % world->size) {
        fprintf(stderr, "determinism_grads: %d ranks do not divide %d leaves\n", world->size, LEAVES);
        return 1;
    }
    const int64_t buckets[] = {1 << 20, 256};
    for (int stage = 0; stage <= 3; stage++)
        for (int b = 0; b < 2; b++)
            for (int ov = 0; ov < 2; ov++) test_sum(world, stage, buckets[b], ov, false);
    test_sum(world, 1, 256, false, true);
    test_sum(world, 3, 256, true, true);
    zcomm_destroy(world);
    return zt_finish();
}
