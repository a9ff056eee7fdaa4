/* Gradient placement and reduction (zero/grads.c) on their own: no engine, no model. A zgrads is made from
 * a zgrads_ctx holding the cpu device, a memory tracker, the collectives of this run (single rank, or MPI
 * under mpirun: zero_grads_np2), a hand-made module table and the sizes zgrads_plan_make gives, as the
 * engine fills it in.
 *
 * Every rank writes known gradients (small integers, so every sum is exact in fp32 and bf16) into the
 * slots zgrads_module_backward_enter hands out, over two micro-steps with backward in reverse module
 * order, and after zgrads_reduce_boundary its local gradient (stage 0: the full all-reduced buffer;
 * stages 1-3: its fp32 shard) must equal the sum over ranks and micro-steps, element for element, padding
 * zero. Matrix: stages 0-3 x fp32/bf16 gradients x reduce_bucket_size large (one bucket holds several
 * modules) and small (a module larger than a bucket goes through the landing buffer) x overlap_comm off
 * and on. At stages 2-3 also a module entered twice in one backward (a tied weight: its own buffer, reduced
 * once) and a module entered inside another open one (a scratch buffer). Then: the buffers are exactly the
 * plan's bytes in the tracker and return to zero; zgrads_reset drops everything; module calls before
 * zgrads_alloc and an alloc without sizes are refused with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/device/device.h"
#include "zero/grads.h"
#include "zero/sizing.h"
#include "zero_fixture.h"
#include "zt.h"

typedef zfx_grads fixture;

/* The gradient rank r writes for flat element x in micro-step mu: a small integer. */
static float grad_value(int64_t x, int r, int mu) { return (float)((x * 7 + r * 13 + mu * 5) % 17 - 8); }

static zinc_status fx_init(fixture *f, zcomm *world, int stage, zinc_dtype gdt, int64_t bucket, bool overlap) {
    zfx_grads_opts o = {.stage = stage, .dtype = gdt, .bucket = bucket, .overlap = overlap};
    return zfx_grads_init(f, world, &o);
}

static void fx_free(fixture *f) { zfx_grads_free(f); }

/* Adds rank r's gradient of micro-step mu for module m into the slot at p (grad dtype). */
static void write_grads(void *p, zinc_dtype gdt, const zmodule *m, int r, int mu) {
    for (int64_t x = m->flat_begin; x < m->flat_end; x++)
        zinc_add_f32(p, gdt, (size_t)(x - m->flat_begin), grad_value(x, r, mu));
}

/* One module's backward as the engine drives it: open, write, close. */
static void backward(fixture *f, int i, int r, int mu, bool none_open_after) {
    void *p = NULL;
    f->b.mods[i].in_phase[ZINC_BACKWARD] = true;
    ZT_OK(zgrads_module_backward_enter(&f->g, i, &p));
    if (p) write_grads(p, f->g.c.grad_dtype, &f->b.mods[i], r, mu);
    f->b.mods[i].in_phase[ZINC_BACKWARD] = false;
    ZT_OK(zgrads_module_backward_exit(&f->g, i, none_open_after));
}

/* Expected local gradient at flat x: the sum over ranks and micro-steps, times the entries per micro-step. */
static float expected(const fixture *f, int64_t x, int micro_steps, const int *entries) {
    if (x >= f->b.part.numel) return 0.0f;
    int mod = 0;
    while (f->b.mods[mod].flat_end <= x) mod++;
    float s = 0;
    for (int mu = 0; mu < micro_steps; mu++)
        for (int r = 0; r < f->b.part.world; r++) s += (float)entries[mod] * grad_value(x, r, mu);
    return s;
}

/* Compares the local gradient (zgrads_local) with the expected sums; returns mismatches. */
static int check_local(fixture *f, int micro_steps, const int *entries, const char *what) {
    zinc_dtype dt;
    const void *local = zgrads_local(&f->g, &dt);
    int64_t lo = f->g.c.stage == 0 ? 0 : (int64_t)f->b.part.rank * f->b.part.shard;
    int64_t n = f->g.c.stage == 0 ? f->b.part.padded : f->b.part.shard;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float got = zinc_load_f32(local, dt, (size_t)i), want = expected(f, lo + i, micro_steps, entries);
        if (got != want && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "%s: flat %lld: got %g, want %g", what, (long long)(lo + i), got, want);
    }
    if (!bad) zt_passed++;
    return bad;
}

static void test_reduction(zcomm *world, int stage, zinc_dtype gdt, int64_t bucket, bool overlap) {
    char what[160];
    snprintf(what, sizeof what, "stage %d, %s, reduce_bucket_size %lld, overlap_comm %d, %d rank%s", stage,
             zinc_dtype_name(gdt), (long long)bucket, overlap, world->size, world->size == 1 ? "" : "s");
    fixture f;
    ZT_OK(fx_init(&f, world, stage, gdt, bucket, overlap));
    ZT_OK(zgrads_alloc(&f.g));
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_GRADS) == f.plan.bytes_grads_full + f.plan.bytes_grads_shard,
             "%s: gradient bytes %llu, the plan says %zu", what, (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_GRADS),
             f.plan.bytes_grads_full + f.plan.bytes_grads_shard);
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_BUCKETS) == zgrads_plan_bucket_bytes(&f.plan),
             "%s: bucket bytes %llu, plan %zu", what, (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_BUCKETS),
             zgrads_plan_bucket_bytes(&f.plan));
    /* overlap_comm: two buckets alternate, so a reduce-scatter runs while the next bucket fills */
    int want_buckets = f.plan.nbuckets == 0 ? 0 : overlap && world->size > 1 ? 2 : 1;
    ZT_CHECK(f.g.nbuckets == want_buckets, "%s: %d buckets, want %d", what, f.g.nbuckets, want_buckets);
    ZT_OK(zgrads_zero(&f.g));
    int entries[ZFX_NMOD];
    for (int i = 0; i < ZFX_NMOD; i++) entries[i] = 1;
    int r = world->rank;
    for (int mu = 0; mu < 2; mu++) {
        if (mu > 0) ZT_OK(zgrads_flush(&f.g)); /* the engine's next forward */
        for (int i = ZFX_NMOD - 1; i >= 0; i--) backward(&f, i, r, mu, true);
    }
    ZT_OK(zgrads_reduce_boundary(&f.g));
    check_local(&f, 2, entries, what);
    if (stage >= 2 && bucket < 1000)
        ZT_CHECK(f.g.stat_rs_sends > ZFX_NMOD, "%s: only %lld reduce-scatters with small buckets", what,
                 (long long)f.g.stat_rs_sends);

    /* zgrads_reset drops everything: a boundary right after it reduces zeros. */
    ZT_OK(zgrads_reset(&f.g));
    ZT_OK(zgrads_reduce_boundary(&f.g));
    int none[ZFX_NMOD] = {0};
    check_local(&f, 1, none, what);
    fx_free(&f);
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_GRADS) == 0 && zfx_tracked(&f.b, ZINC_MEM_BUCKETS) == 0,
             "%s: bytes left after free", what);
}

/* Stages 2-3: a module entered twice in one backward (a tied embedding) and one entered while another is
 * open (nested), over two micro-steps: the learned buffers give the same sums. */
static void test_reentry(zcomm *world, int stage, int64_t bucket) {
    char what[120];
    snprintf(what, sizeof what, "re-entry, stage %d, reduce_bucket_size %lld, %d ranks", stage, (long long)bucket,
             world->size);
    fixture f;
    ZT_OK(fx_init(&f, world, stage, ZINC_FP32, bucket, true));
    ZT_OK(zgrads_alloc(&f.g));
    ZT_OK(zgrads_zero(&f.g));
    int entries[ZFX_NMOD];
    for (int i = 0; i < ZFX_NMOD; i++) entries[i] = 1;
    entries[0] = 2; /* module 0 (the "embedding") is entered again at the end of backward */
    int r = world->rank;
    for (int mu = 0; mu < 2; mu++) {
        if (mu > 0) ZT_OK(zgrads_flush(&f.g));
        backward(&f, 0, r, mu, false); /* the output projection's use of the tied weight comes first */
        for (int i = ZFX_NMOD - 1; i >= 3; i--) {
            if (i == 4) { /* module 3 is entered inside module 4's open backward */
                void *p4 = NULL;
                f.b.mods[4].in_phase[ZINC_BACKWARD] = true;
                ZT_OK(zgrads_module_backward_enter(&f.g, 4, &p4));
                backward(&f, 3, r, mu, false);
                write_grads(p4, ZINC_FP32, &f.b.mods[4], r, mu);
                f.b.mods[4].in_phase[ZINC_BACKWARD] = false;
                ZT_OK(zgrads_module_backward_exit(&f.g, 4, true));
                i = 3;
                continue;
            }
            backward(&f, i, r, mu, true);
        }
        for (int i = 2; i >= 0; i--) backward(&f, i, r, mu, true);
    }
    ZT_OK(zgrads_reduce_boundary(&f.g));
    check_local(&f, 2, entries, what);
    ZT_CHECK(f.g.mods[0].hold, "%s: the twice-entered module does not keep a buffer of its own", what);
    if (bucket < 1000) /* module 3 does not fit in module 4's bucket: a scratch buffer, and 4 holds its own */
        ZT_CHECK(f.g.mods[4].hold, "%s: the enclosing module does not keep a buffer of its own", what);
    fx_free(&f);
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_BUCKETS) == 0, "%s: bucket bytes left after free", what);
}

static void test_errors(zcomm *world) {
    fixture f;
    ZT_OK(fx_init(&f, world, 2, ZINC_FP32, 1 << 20, false));
    void *p = NULL;
    ZT_ERR(zgrads_module_backward_enter(&f.g, 0, &p), ZINC_ERR_INTERNAL, "before zgrads_alloc");
    ZT_ERR(zgrads_module_backward_exit(&f.g, 0, true), ZINC_ERR_INTERNAL, "before zgrads_alloc");
    f.g.c.sizes = NULL;
    ZT_ERR(zgrads_alloc(&f.g), ZINC_ERR_INTERNAL, "no sizes from the sizing plan");
    f.g.c.sizes = &f.plan;
    ZT_OK(zgrads_alloc(&f.g));
    ZT_ERR(zgrads_module_backward_enter(&f.g, ZFX_NMOD, &p), ZINC_ERR_INTERNAL, "module 6 of 6");
    fx_free(&f);
}

int main(void) {
    zt_name = "zero_grads";
    zlog wlog = {.level = ZINC_LOG_WARN};
    zcomm *world = NULL;
    if (zcomm_create(&wlog, &world) != ZINC_OK) {
        fprintf(stderr, "cannot create the communicator: %s\n", zinc_last_error());
        return 1;
    }
    const zinc_dtype dts[] = {ZINC_FP32, ZINC_BF16};
    const int64_t buckets[] = {1 << 20, 256};
    for (int stage = 0; stage <= 3; stage++)
        for (int d = 0; d < 2; d++)
            for (int b = 0; b < 2; b++)
                for (int ov = 0; ov < 2; ov++) test_reduction(world, stage, dts[d], buckets[b], ov);
    for (int stage = 2; stage <= 3; stage++)
        for (int b = 0; b < 2; b++) test_reentry(world, stage, buckets[b]);
    test_errors(world);
    zcomm_destroy(world);
    return zt_finish();
}
