/* Stage-3 gathering (zero/gather.c) on its own: no engine, no model. A zgather is made from a zgather_ctx
 * holding the cpu device, a memory tracker, the collectives of this run (single rank, or MPI under mpirun:
 * zero_gather_np2), a hand-made module table and this rank's shard of known parameters, as the engine
 * fills it in.
 *
 * - zgather_after_step at build decides persistence (modules up to stage3_param_persistence_threshold) and
 *   gathers the persistent modules; a module entered in either phase has its whole flat range, equal to
 *   the parameters every rank holds a piece of (fp32 and bf16); non-persistent modules are released on
 *   exit and counted as gathered memory only while live.
 * - The first training micro-step records the trace and gathers blocking; the second follows it and
 *   prefetches (stage3_prefetch_bucket_size) within stage3_max_live_parameters, which is never exceeded.
 * - After the shard changes (an optimizer step), zgather_after_step refreshes the persistent modules.
 * - zgather_free leaves no tracked byte; a module without records gives NULL data.
 * - qwZ (zero_quantized_weights, issue 36), at 2 ranks and more: every gather above holds, bitwise, each
 *   rank's piece quantized and dequantized by the kernels' references with DeepSpeed's block size
 *   (zsize_quant_block), this rank's own piece included; the wire is freed once a gather completes (no
 *   gathered bytes after a step) and its bytes are those of zero/sizing.h's layout. At 1 rank nothing is
 *   quantized. zsize_quant_block gives DeepSpeed's CUDAQuantizer group sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/device/device.h"
#include "kernels/cpu_kernels.h"
#include "zero/gather.h"
#include "zero/sizing.h"
#include "zero_fixture.h"
#include "zt.h"

typedef struct fixture {
    zfx_base b;
    zcfg_zero cfg;
    void *shard; /* this rank's compute-dtype parameters, flat [rank * S, (rank + 1) * S) */
    zgather g;
    int64_t rounded; /* qwZ: gathered elements that differ from the parameter (the test sees quantization) */
} fixture;

static int world_size(const fixture *f) { return f->b.part.world; }

static float param_value(int64_t x, int version) { return (float)((x * 3 + version * 11) % 29 - 14); }

static bool qwz; /* the run's gathers are quantized */

/* What a gathered element holds: the parameter, or under qwZ its piece's quantize-dequantize round trip
 * (the references of kernels/quant_cpu.c, the piece's values in the compute dtype). */
static float want_value(const zpartition *part, int64_t a, int64_t b, int64_t x, int version, zinc_dtype cdt) {
    if (!qwz || part->world == 1) return param_value(x, version);
    int64_t lo = a, hi = b;
    for (int r = 0; r < part->world; r++) {
        zpart_intersect(part, r, a, b, &lo, &hi);
        if (x >= lo && x < hi) break;
    }
    size_t n = (size_t)(hi - lo), es = zinc_dtype_size(cdt);
    size_t blk = (size_t)zsize_quant_block((int64_t)n);
    char *v = calloc(n, es), *y = calloc(n, es);
    int8_t *q = calloc(n, 1);
    float *sc = calloc(n / blk + 1, sizeof *sc);
    for (size_t i = 0; i < n; i++) zinc_add_f32(v, cdt, i, param_value(lo + (int64_t)i, version));
    zk_quant_sym_ref(v, cdt, n, blk, 8, q, sc);
    zk_dequant_sym_ref(q, sc, n, blk, y, cdt);
    float out = zinc_load_f32(y, cdt, (size_t)(x - lo));
    free(v), free(y), free(q), free(sc);
    return out;
}

static void fill_shard(fixture *f, zinc_dtype cdt, int version) {
    int64_t lo = (int64_t)f->b.part.rank * f->b.part.shard;
    for (int64_t i = 0; i < f->b.part.shard; i++) {
        size_t bytes = zinc_dtype_size(cdt);
        memset((char *)f->shard + (size_t)i * bytes, 0, bytes);
        zinc_add_f32(f->shard, cdt, (size_t)i, lo + i < f->b.part.numel ? param_value(lo + i, version) : 0.0f);
    }
}

static zinc_status fx_init(fixture *f, zcomm *world, zinc_dtype cdt, int64_t prefetch, int64_t max_live) {
    memset(f, 0, sizeof *f);
    zinc_status st = zfx_base_init(&f->b, world);
    if (st != ZINC_OK) return st;
    zinc_config c;
    zcfg_defaults(&c);
    f->cfg = c.zero;
    f->cfg.param_persistence_threshold = 64; /* modules 0, 2 and 4 stay gathered */
    f->cfg.prefetch_bucket_size = prefetch;
    f->cfg.max_live_parameters = max_live;
    f->cfg.max_reuse_distance = -1; /* no module counts as reused soon: every exit releases */
    f->cfg.quantized_weights = qwz;
    f->shard = calloc((size_t)f->b.part.shard, zinc_dtype_size(cdt));
    fill_shard(f, cdt, 0);
    zgather_ctx ctx = {.dev = f->b.dev,
                       .dcomm = f->b.dcomm,
                       .log = &f->b.log,
                       .part = &f->b.part,
                       .rank = world->rank,
                       .world = world->size,
                       .compute_dtype = cdt,
                       .params_shard = f->shard,
                       .own_lo = (int64_t)world->rank * f->b.part.shard,
                       .cfg = &f->cfg,
                       .modules = f->b.mods,
                       .nmodules = ZFX_NMOD};
    zgather_init(&f->g, &ctx);
    return ZINC_OK;
}

static void fx_free(fixture *f) {
    zgather_free(&f->g);
    free(f->shard);
    zfx_base_free(&f->b);
}

/* Enters module i in `phase`, checks its gathered copy against parameter version `version`, exits. */
static void visit(fixture *f, int i, int phase, bool new_micro_step, int version, const char *what) {
    f->b.mods[i].in_phase[phase] = true;
    ZT_OK(zgather_module_enter(&f->g, i, phase, new_micro_step));
    const void *d = zgather_module_data(&f->g, i);
    ZT_CHECK(d != NULL, "%s: module %d entered but not gathered", what, i);
    int bad = 0;
    const zmodule *m = &f->b.mods[i];
    for (int64_t x = m->flat_begin; d && x < m->flat_end; x++) {
        float got = zinc_load_f32(d, f->g.c.compute_dtype, (size_t)(x - m->flat_begin));
        float want = want_value(&f->b.part, m->flat_begin, m->flat_end, x, version, f->g.c.compute_dtype);
        if (memcmp(&got, &want, sizeof got) && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "%s: module %d, flat %lld: got %.9g, want %.9g", what, i, (long long)x, got,
                       want);
        if (qwz && world_size(f) > 1 && got != param_value(x, version)) f->rounded++;
    }
    if (!bad) zt_passed++;
    ZT_CHECK(f->g.live_numel <= f->cfg.max_live_parameters + zfx_sizes[i], "%s: %lld elements live, limit %lld", what,
             (long long)f->g.live_numel, (long long)f->cfg.max_live_parameters);
    f->b.mods[i].in_phase[phase] = false;
    ZT_OK(zgather_module_exit(&f->g, i, phase));
    if (!zgather_module_persistent(&f->g, i))
        ZT_CHECK(zgather_module_data(&f->g, i) == NULL, "%s: module %d still gathered after its exit", what, i);
}

/* One micro-step: forward in order, backward in reverse. */
static void micro_step(fixture *f, int version, const char *what) {
    for (int i = 0; i < ZFX_NMOD; i++) visit(f, i, ZINC_FORWARD, i == 0, version, what);
    for (int i = ZFX_NMOD - 1; i >= 0; i--) visit(f, i, ZINC_BACKWARD, false, version, what);
}

static void test_gather(zcomm *world, zinc_dtype cdt, int64_t prefetch, int64_t max_live) {
    char what[160];
    snprintf(what, sizeof what, "%s, prefetch_bucket_size %lld, max_live_parameters %lld, %d rank%s",
             zinc_dtype_name(cdt), (long long)prefetch, (long long)max_live, world->size, world->size == 1 ? "" : "s");
    fixture f;
    ZT_OK(fx_init(&f, world, cdt, prefetch, max_live));
    ZT_CHECK(zgather_module_data(&f.g, 0) == NULL, "%s: data before the build", what);
    ZT_OK(zgather_after_step(&f.g)); /* at build */
    size_t csz = zinc_dtype_size(cdt);
    uint64_t persistent_bytes = (uint64_t)(40 + 8 + 64) * csz;
    for (int i = 0; i < ZFX_NMOD; i++)
        ZT_CHECK(zgather_module_persistent(&f.g, i) == (zfx_sizes[i] <= 64),
                 "%s: module %d (%lld elements) persistent: %d", what, i, (long long)zfx_sizes[i],
                 zgather_module_persistent(&f.g, i));
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_PARAMS) == persistent_bytes && zfx_tracked(&f.b, ZINC_MEM_GATHER) == 0,
             "%s: after build %llu persistent bytes (want %llu), %llu gathered", what,
             (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_PARAMS), (unsigned long long)persistent_bytes,
             (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_GATHER));

    micro_step(&f, 0, what); /* records the trace */
    int64_t blocking_first = f.g.stat_gather_blocking;
    ZT_CHECK(blocking_first == 6 && f.g.stat_prefetch == 0,
             "%s: first micro-step: %lld blocking gathers (want 6: the non-persistent modules, twice), %lld "
             "prefetches",
             what, (long long)blocking_first, (long long)f.g.stat_prefetch);
    micro_step(&f, 0, what); /* follows it */
    if (prefetch >= 2504 && max_live >= 2504)
        ZT_CHECK(f.g.stat_prefetch > 0, "%s: the second micro-step prefetched nothing", what);
    if (prefetch == 0)
        ZT_CHECK(f.g.stat_prefetch == 0 && f.g.stat_gather_blocking == 2 * blocking_first,
                 "%s: prefetch_bucket_size 0 still prefetched (%lld)", what, (long long)f.g.stat_prefetch);

    /* An optimizer step changed the shard: the persistent modules are refreshed, the others gathered anew. */
    fill_shard(&f, cdt, 1);
    ZT_OK(zgather_after_step(&f.g));
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_GATHER) == 0, "%s: %llu gathered bytes after the step", what,
             (unsigned long long)zfx_tracked(&f.b, ZINC_MEM_GATHER));
    micro_step(&f, 1, what);
    if (qwz && world->size > 1) {
        ZT_CHECK(f.rounded > 0, "%s: qwZ gathered every element exactly: nothing was quantized", what);
        /* the wire of every gather so far: build + after-step refresh of the persistent modules, 3 micro-steps
         * of the others (each gathered in forward and in backward, max_reuse_distance -1) */
        int64_t want = 0;
        for (int i = 0; i < ZFX_NMOD; i++) {
            int64_t w = (int64_t)zsize_quant_range_bytes(&f.b.part, f.b.mods[i].flat_begin, f.b.mods[i].flat_end);
            want += zgather_module_persistent(&f.g, i) ? 2 * w : 6 * w;
        }
        ZT_CHECK(f.g.stat_wire_bytes == want, "%s: %lld wire bytes all-gathered, want %lld", what,
                 (long long)f.g.stat_wire_bytes, (long long)want);
    }
    zgather_free(&f.g);
    ZT_CHECK(zfx_tracked(&f.b, ZINC_MEM_PARAMS) == 0 && zfx_tracked(&f.b, ZINC_MEM_GATHER) == 0,
             "%s: bytes left after free", what);
    ZT_CHECK(zgather_module_data(&f.g, 0) == NULL && !zgather_module_persistent(&f.g, 0),
             "%s: module records after free", what);
    fx_free(&f);
}

int main(void) {
    zt_name = "zero_gather";
    zlog wlog = {.level = ZINC_LOG_WARN};
    zcomm *world = NULL;
    if (zcomm_create(&wlog, &world) != ZINC_OK) {
        fprintf(stderr, "cannot create the communicator: %s\n", zinc_last_error());
        return 1;
    }
    test_gather(world, ZINC_FP32, 1 << 20, 1 << 20); /* prefetch everything */
    test_gather(world, ZINC_BF16, 1 << 20, 1 << 20);
    test_gather(world, ZINC_FP32, 1000, 3000); /* prefetch some, within the live limit */
    test_gather(world, ZINC_FP32, 0, 1 << 20); /* no prefetch */
    qwz = true;
    test_gather(world, ZINC_FP32, 1 << 20, 1 << 20);
    test_gather(world, ZINC_BF16, 1 << 20, 1 << 20);
    test_gather(world, ZINC_FP32, 1000, 3000);
    test_gather(world, ZINC_FP16, 0, 1 << 20);
    qwz = false;
    /* DeepSpeed's CUDAQuantizer group sizes (partition_parameters.py's loop, run by hand) */
    const int64_t n[] = {8, 768, 8008, 16000, 24000, 589824, 38597376, 2 * 2304 * 768};
    const int64_t blk[] = {8, 768, 1144, 8000, 8000, 6144, 7424, 6912};
    for (int k = 0; k < 8; k++)
        ZT_CHECK(zsize_quant_block(n[k]) == blk[k], "zsize_quant_block(%lld) = %lld, want %lld", (long long)n[k],
                 (long long)zsize_quant_block(n[k]), (long long)blk[k]);
    ZT_CHECK(zsize_quant_block(0) == 0 && zsize_quant_block(12) == 12 && zsize_quant_block(20004) == 8000,
             "pieces that are not multiples of 8: %lld %lld", (long long)zsize_quant_block(12),
             (long long)zsize_quant_block(20004));
    ZT_CHECK(zsize_quant_wire_bytes(768) == 772 && zsize_quant_wire_bytes(8008) == 8008 + 28 &&
                 zsize_quant_wire_bytes(6) == 12,
             "wire bytes: %zu %zu %zu", zsize_quant_wire_bytes(768), zsize_quant_wire_bytes(8008),
             zsize_quant_wire_bytes(6));
    zcomm_destroy(world);
    return zt_finish();
}
