/* The whole GPT-2 (examples/gpt2) through the engine at a tiny size (2 layers, 8 channels, 2 heads,
 * context 5, vocabulary 11 padded to 16): the gradient the model hands to the engine for every parameter
 * kind, the tied embedding included, against central finite differences of the loss the model computes
 * through the engine (gpt2_eval on a model built from perturbed parameters), fp32, stage 0.
 * Tolerance per element: |g - fd| <= 1e-3 + 3e-2 |fd| (float forward passes, step 1e-3: 5e-3 failed on
 * one seed in ~40 from the truncation error, 1e-3 passed 40 of 40), and the cosine of
 * the checked gradient vector with the finite differences >= 0.9999. Padding rows of wte get exactly 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "zt.h"

static const gpt2_shape S = {6, 11, 2, 2, 8, 16};
enum { T = 5, B = 2 };
static uint16_t win[B * (T + 1)];

static const char *cfg_json =
    "{\"train_batch_size\": 2, \"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": 0},"
    " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";

static zinc_status build(const float *params, zinc_engine **e, gpt2_model **m) {
    zinc_options o = zinc_default_options();
    o.config_json = cfg_json;
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = 1;
    zinc_status st = zinc_create(&o, e);
    if (st != ZINC_OK) return st;
    gpt2_config c = {.shape = S, .context = T, .init = params};
    return gpt2_create(*e, &c, m);
}

static double loss_at(const float *params) {
    zinc_engine *e = NULL;
    gpt2_model *m = NULL;
    double sum = 0;
    if (build(params, &e, &m) != ZINC_OK || gpt2_eval(m, win, B, &sum) != ZINC_OK) sum = NAN;
    gpt2_destroy(m);
    zinc_destroy(e);
    return sum / (B * T);
}

int main(void) {
    zt_name = "gpt2_grad";
    uint64_t rng = zt_seed();
    int64_t n = gpt2_num_params(&S);
    float *p = malloc((size_t)n * sizeof *p), *g = calloc((size_t)n, sizeof *g);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(zt_rand_normal(&rng) * 0.3);
    for (int l = 0; l < S.layers; l++) /* LayerNorm gains near 1 */
        for (int k = GPT2_LN1W; k <= GPT2_LN2W; k += GPT2_LN2W - GPT2_LN1W)
            for (int c = 0; c < S.channels; c++) p[gpt2_llmc_offset(&S, k, l) + c] += 1.0f;
    for (int c = 0; c < S.channels; c++) p[gpt2_llmc_offset(&S, GPT2_LNFW, 0) + c] += 1.0f;
    for (int i = 0; i < B * (T + 1); i++) win[i] = (uint16_t)(zt_rand_u64(&rng) % (uint64_t)S.vocab);

    zinc_engine *e = NULL;
    gpt2_model *m = NULL;
    ZT_OK(build(p, &e, &m));
    if (!m) return zt_finish();
    double sum = 0;
    gpt2_capture_grads(m, g);
    ZT_OK(gpt2_microstep(m, win, B, &sum));
    gpt2_destroy(m);
    zinc_destroy(e);
    double l0 = loss_at(p);
    ZT_NEAR(sum / (B * T), l0, 1e-6, 1e-6, "training and eval losses agree: %.9g vs %.9g", sum / (B * T), l0);

    /* padding rows of wte: no gradient from the loss */
    int pad_zero = 1;
    for (int64_t i = (int64_t)S.vocab * S.channels; i < (int64_t)S.padded_vocab * S.channels; i++)
        pad_zero &= g[i] == 0.0f;
    ZT_CHECK(pad_zero, "padding rows of wte have a non-zero gradient");

    double dot = 0, ng = 0, nf = 0, h = 1e-3;
    int checked[GPT2_NKINDS] = {0}, bad = 0;
    for (int k = 0; k < GPT2_NKINDS; k++) {
        int per = k >= GPT2_LN1W && k <= GPT2_FCPROJB;
        for (int l = 0; l < (per ? S.layers : 1); l++) {
            int64_t off = gpt2_llmc_offset(&S, k, l), cnt = gpt2_kind_numel(&S, k);
            if (k == GPT2_WTE) cnt = (int64_t)S.vocab * S.channels; /* padding rows checked above */
            for (int64_t j = 0; j < cnt; j++) {
                int64_t i = off + j;
                float keep = p[i];
                p[i] = keep + (float)h;
                double lp = loss_at(p);
                p[i] = keep - (float)h;
                double lm = loss_at(p);
                p[i] = keep;
                double fd = (lp - lm) / (2 * h);
                dot += fd * g[i], ng += (double)g[i] * g[i], nf += fd * fd;
                checked[k]++;
                if (!zt_near(g[i], fd, 1e-3, 3e-2) && bad++ < 8)
                    zt_fail_at(__FILE__, __LINE__, "%s layer %d element %lld: gradient %.6g, finite difference %.6g",
                               gpt2_kind_name(k), l, (long long)j, g[i], fd);
            }
        }
    }
    ZT_CHECK(bad == 0, "%d elements outside tolerance", bad);
    double cosine = dot / sqrt(ng * nf);
    ZT_CHECK(cosine >= 0.9999, "cosine of gradient and finite differences %.6f", cosine);
    int total = 0;
    for (int k = 0; k < GPT2_NKINDS; k++) total += checked[k];
    printf("gpt2_grad: %d elements of all %d kinds checked, cosine %.7f, loss %.6f\n", total, GPT2_NKINDS, cosine, l0);
    free(p);
    free(g);
    zinc_finalize();
    return zt_finish();
}
