/* zinc_build_ranged (pieces of at most ZINC_INIT_PIECE elements, only what the rank holds) gives the same
 * parameters, bit for bit, as zinc_build with a whole-tensor init_fn, at stages 0-3 in fp32 (zinc_build
 * in place), bf16 and fp16 (through scratch), for tensors smaller than, equal to and larger than a piece;
 * and the values are the initialiser's own, rounded once to the compute dtype. Run at 1-2 ranks. */
#include <stdlib.h>
#include <string.h>

#include "zinc.h"
#include "zt.h"

static float value(uint64_t seed, int64_t i) {
    uint64_t z = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return (float)((double)(z >> 11) / 9007199254740992.0 - 0.5);
}

static int64_t calls, max_piece;
static uint64_t seeds[8];

static zinc_status whole(void *u, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)u;
    seeds[p->index] = seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = value(seed, i);
    return ZINC_OK;
}

static zinc_status ranged(void *u, const zinc_param_info *p, uint64_t seed, int64_t first, int64_t n, float *out) {
    (void)u;
    calls++;
    if (n > max_piece) max_piece = n;
    if (first < 0 || n < 1 || first + n > p->numel) return ZINC_ERR_INVALID_ARG;
    for (int64_t i = 0; i < n; i++) out[i] = value(seed, first + i);
    return ZINC_OK;
}

static zinc_status failing(void *u, const zinc_param_info *p, uint64_t seed, int64_t first, int64_t n, float *out) {
    (void)u, (void)p, (void)seed, (void)first, (void)n, (void)out;
    return ZINC_ERR_INVALID_ARG;
}

static const int64_t SIZES[] = {1000, ZINC_INIT_PIECE, ZINC_INIT_PIECE + ZINC_INIT_PIECE / 2 + 3, 77};
#define NP 4

static zinc_engine *make(int stage, const char *dtype, zinc_param **ps) {
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"train_batch_size\": %s, \"%s\": {\"enabled\": true}, \"zero_optimization\": "
                              "{\"stage\": %d, \"stage3_param_persistence_threshold\": 0}}",
             "2", dtype, stage);
    if (!strcmp(dtype, "fp32"))
        snprintf(cfg, sizeof cfg, "{\"train_batch_size\": 2, \"zero_optimization\": {\"stage\": %d, "
                                  "\"stage3_param_persistence_threshold\": 0}}", stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_level = ZINC_LOG_ERROR;
    o.device = ZINC_DEVICE_CPU;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    if (!e) return NULL;
    char name[32];
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "m%d", i);
        int m = zinc_module_add(e, name);
        snprintf(name, sizeof name, "m%d.w", i);
        ps[i] = zinc_param_add(e, m, name, 1, &SIZES[i], ZINC_PARAM_DECAY);
        ZT_CHECK(ps[i] != NULL, "param %d: %s", i, zinc_last_error());
    }
    return e;
}

static void compare(int stage, const char *dtype) {
    zinc_param *pa[NP], *pb[NP];
    zinc_engine *a = make(stage, dtype, pa), *b = make(stage, dtype, pb);
    if (!a || !b) return;
    ZT_OK(zinc_build(a, whole, NULL));
    calls = max_piece = 0;
    ZT_OK(zinc_build_ranged(b, ranged, NULL));
    ZT_CHECK(calls > 0 && max_piece <= ZINC_INIT_PIECE, "stage %d %s: %lld calls, largest piece %lld", stage, dtype,
             (long long)calls, (long long)max_piece);
    for (int i = 0; i < NP; i++) {
        float *x = malloc((size_t)SIZES[i] * sizeof *x), *y = malloc((size_t)SIZES[i] * sizeof *y);
        ZT_OK(zinc_module_enter(a, i, ZINC_FORWARD));
        ZT_OK(zinc_module_enter(b, i, ZINC_FORWARD));
        ZT_OK(zinc_param_to_f32(pa[i], x));
        ZT_OK(zinc_param_to_f32(pb[i], y));
        ZT_OK(zinc_module_exit(a, i, ZINC_FORWARD));
        ZT_OK(zinc_module_exit(b, i, ZINC_FORWARD));
        ZT_CHECK(memcmp(x, y, (size_t)SIZES[i] * sizeof *x) == 0, "stage %d %s: tensor %d differs", stage, dtype, i);
        /* fp32 holds the initialiser's values exactly (zinc_build writes them in place at stages 0-2). */
        if (!strcmp(dtype, "fp32")) {
            int64_t bad = -1;
            for (int64_t k = 0; k < SIZES[i] && bad < 0; k++)
                if (x[k] != value(seeds[i], k)) bad = k;
            ZT_CHECK(bad < 0, "stage %d fp32: tensor %d element %lld is not the initialiser's", stage, i,
                     (long long)bad);
        }
        free(x);
        free(y);
    }
    zinc_destroy(a);
    zinc_destroy(b);
}

int main(void) {
    zt_name = "init_ranged";
    static const char *dtypes[] = {"fp32", "bf16", "fp16"};
    for (int s = 0; s <= 3; s++)
        for (int d = 0; d < 3; d++) compare(s, dtypes[d]);
    /* A failing initialiser fails the build with its status. */
    zinc_param *p[NP];
    zinc_engine *e = make(3, "bf16", p);
    ZT_ERR(zinc_build_ranged(e, failing, NULL), ZINC_ERR_INVALID_ARG, "");
    zinc_destroy(e);
    e = make(1, "fp32", p);
    ZT_ERR(zinc_build_ranged(e, NULL, NULL), ZINC_ERR_INVALID_ARG, "init_fn is required");
    zinc_destroy(e);
    return zt_finish();
}
