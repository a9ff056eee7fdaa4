/* GPT-2's GPU path (examples/gpt2/gpt2_cuda.c: cuBLAS and gpt2_kernels.h on the engine's compute stream)
 * against its host path: a tiny model (2 layers, 32 channels, 4 heads, context 16, vocabulary 67 padded to
 * 80) trained 12 steps with gradient accumulation 2 on a cuda engine and on a cpu engine at the same rank
 * count, stages 0 and 3, fp32 / bf16 / fp16 (dynamic loss scaling). Compared per step: the loss and the
 * gradient norm; at the end: every parameter (gpt2_gather_llmc), the validation loss
 * (gpt2_val_loss) and the next-token logits of a sequence (gpt2_next_logits).
 *
 * The optimizer is AdamW with eps 1: while gradients are well below 1 its update is close to lr x the
 * momentum, linear in the gradient, so a gradient dropped or counted twice (any tensor, any part of it)
 * moves its parameters by about as much as training moved them. Parameters are compared per tensor,
 * relative to how far the cpu run moved that tensor: max |cuda - cpu| <= tol x max |cpu - init|, with
 * tol 1e-4 for fp32 (only the summation order of the products differs: the emulation's SGEMM against
 * OpenBLAS; measured 2e-6) and 2e-2 for bf16/fp16 (a parameter rounded to the other side of a 16-bit step
 * changes the forward; measured 2e-3); a dropped or doubled gradient gives 0.1 to 1. Losses: relative
 * 1e-5 (fp32), 5e-4 (16-bit); gradient norms: relative 1e-4, 1e-2; next-token logits: absolute 5e-4,
 * 5e-2.
 *
 * On a real GPU (label gpu) it runs with cuBLAS and gpt2_kernels.cu; on the emulation (label
 * cuda-emulated) with the emulated SGEMM and the host layer functions as kernels
 * (tests/cuda_host/gpt2_kernels_host.c) on lazy streams, so a missing ordering shows up as stale data.
 * Also one micro-step's gradients as the model computed them (the capture hook), per tensor.
 * First, before cuBLAS is loaded: ZINC_CUBLAS_LIBRARY=/nonexistent makes gpt2_create fail with a
 * message that names the file and what to do. Without a GPU (or the CUDA backend) it exits 77.
 * The host path multiplies in float here (OpenBLAS): with bf16 compute and oneDNN it would multiply in
 * bf16 (gpt2_gemm.h), which the GPU path does not, and 16-bit runs would differ by the products' rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "gpt2_gemm.h"
#include "base/device/device.h"
#include "zt.h"

static const gpt2_shape S = {16, 67, 2, 4, 32, 80};
enum { T = 16, BATCH = 8, GAS = 2, STEPS = 12 }; /* the micro batch: BATCH / (GAS x ranks) */

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};
#define g_log zt_logcap_first(&log_cap, ZINC_LOG_ERROR, NULL) /* the first error */

typedef struct result {
    double loss[STEPS], norm[STEPS], val;
    float *init, *final, logits[67];
} result;

static zinc_status make(int cuda, int stage, const char *dtype, zinc_engine **e, gpt2_model **m) {
    char cfg[1024];
    zinc_status st;
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d, \"steps_per_print\": 0,"
             " \"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": 3000,"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"bf16\": {\"enabled\": %s}, \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 12},"
             " \"gradient_clipping\": 10.0,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 5.0, \"eps\": 1.0, \"weight_decay\": 0}}}",
             BATCH, GAS, stage, strcmp(dtype, "bf16") ? "false" : "true", strcmp(dtype, "fp16") ? "false" : "true");
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = cuda ? ZINC_DEVICE_CUDA : ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_WARN;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &log_cap;
    o.cpu_threads = 1;
    o.seed = 7;
    *e = NULL, *m = NULL;
    if ((st = zinc_create(&o, e)) != ZINC_OK) return st;
    gpt2_config c = {.shape = S, .context = T, .init = NULL};
    return gpt2_create(*e, &c, m);
}

static zinc_status train(int cuda, int stage, const char *dtype, const gpt2_tokens *data, result *r) {
    zinc_engine *e;
    gpt2_model *m;
    int64_t n = gpt2_num_params(&S);
    r->init = malloc((size_t)n * sizeof(float));
    r->final = malloc((size_t)n * sizeof(float));
    zinc_status st = make(cuda, stage, dtype, &e, &m);
    if (st == ZINC_OK) st = gpt2_gather_llmc(m, r->init);
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) {
        zinc_step_info info;
        st = gpt2_train_step(m, data, s, &info, &r->loss[s]);
        r->norm[s] = info.grad_norm;
    }
    if (st == ZINC_OK) st = gpt2_gather_llmc(m, r->final);
    if (st == ZINC_OK) st = gpt2_val_loss(m, data, 2, &r->val);
    static const uint16_t prompt[5] = {3, 1, 4, 1, 5};
    if (st == ZINC_OK) st = gpt2_next_logits(m, prompt, 5, r->logits);
    gpt2_destroy(m);
    zinc_destroy(e);
    return st;
}

static void result_free(result *r) {
    free(r->init);
    free(r->final);
}

/* Every tensor's max |got - ref| relative to how far the reference moved it; returns the largest. */
static double compare_params(const result *got, const result *ref, const char *what, double tol) {
    double worst = 0;
    for (int k = 0; k < GPT2_NKINDS; k++) {
        int layers = k >= GPT2_LN1W && k <= GPT2_FCPROJB ? S.layers : 1;
        for (int l = 0; l < layers; l++) {
            int64_t off = gpt2_llmc_offset(&S, k, l), n = gpt2_kind_numel(&S, k);
            double moved = 0, diff = 0;
            for (int64_t i = off; i < off + n; i++) {
                double mv = fabs((double)ref->final[i] - ref->init[i]), d = fabs((double)got->final[i] - ref->final[i]);
                if (mv > moved) moved = mv;
                if (!(d <= diff)) diff = d; /* NaN propagates */
            }
            double rel = diff / (moved > 0 ? moved : 1e-30);
            if (diff == 0) rel = 0;
            ZT_CHECK(rel <= tol,
                     "%s: %s layer %d: max |cuda - cpu| %.3g is %.3g of how far training moved it (%.3g); "
                     "tolerance %.3g",
                     what, gpt2_kind_name(k), l, diff, rel, moved, tol);
            if (!(rel <= worst)) worst = rel;
        }
    }
    return worst;
}

/* One micro-step's float gradients as each path computed them (gpt2_capture_grads, copied back from
 * the device on cuda), fp32 stage 0: per tensor, max |cuda - cpu| <= 1e-4 x max |cpu|. */
static void check_grads(const gpt2_tokens *data) {
    int64_t n = gpt2_num_params(&S);
    float *g[2] = {calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(float))};
    uint16_t win[2 * (T + 1)];
    for (int b = 0; b < 2; b++) gpt2_window(data, T, BATCH, b, win + b * (T + 1));
    for (int cuda = 0; cuda < 2; cuda++) {
        zinc_engine *e;
        gpt2_model *m;
        double loss = 0;
        ZT_OK(make(cuda, 0, "fp32", &e, &m));
        if (m) {
            gpt2_capture_grads(m, g[cuda]);
            ZT_OK(gpt2_microstep(m, win, 2, &loss));
        }
        gpt2_destroy(m);
        zinc_destroy(e);
    }
    double worst = 0;
    for (int k = 0; k < GPT2_NKINDS; k++)
        for (int l = 0; l < (k >= GPT2_LN1W && k <= GPT2_FCPROJB ? S.layers : 1); l++) {
            int64_t off = gpt2_llmc_offset(&S, k, l), cnt = gpt2_kind_numel(&S, k);
            double mag = 0, diff = 0;
            for (int64_t i = off; i < off + cnt; i++) {
                mag = fmax(mag, fabs(g[0][i]));
                double d = fabs((double)g[1][i] - g[0][i]);
                if (!(d <= diff)) diff = d;
            }
            ZT_CHECK(mag > 0 && diff <= 1e-4 * mag,
                     "micro-step gradient of %s layer %d: max |cuda - cpu| %.3g, "
                     "max |cpu| %.3g",
                     gpt2_kind_name(k), l, diff, mag);
            worst = fmax(worst, diff / (mag > 0 ? mag : 1));
        }
    printf("one micro-step's gradients, fp32: max |cuda - cpu| per tensor %.2g of its largest\n", worst);
    free(g[0]);
    free(g[1]);
}

static void check_cublas_missing(void) {
    setenv("ZINC_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.13", 1);
    zinc_engine *e;
    gpt2_model *m;
    zt_logcap_clear(&log_cap);
    zinc_status st = make(1, 0, "fp32", &e, &m);
    ZT_CHECK(st == ZINC_ERR_DEVICE && !m, "gpt2 on cuda with no cuBLAS: status %d, want ZINC_ERR_DEVICE", (int)st);
    ZT_CHECK(strstr(g_log, "gpt2 (cuda) needs cuBLAS: cannot load ZINC_CUBLAS_LIBRARY=/nonexistent/libcublas.so.13") &&
                 strstr(g_log, "--device cpu"),
             "the message names the library and what to do: %s", g_log);
    gpt2_destroy(m);
    zinc_destroy(e);
    unsetenv("ZINC_CUBLAS_LIBRARY");
}

int main(void) {
    zt_name = "gpt2_cuda";
    if (zdev_cuda_count() == 0) return zt_skip("no GPU (or zinc built without the CUDA backend)");
    gpt2_gemm_select(GPT2_GEMM_OPENBLAS);
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    check_cublas_missing();

    uint64_t rng = 99;
    gpt2_tokens data = {malloc(3000 * sizeof(uint16_t)), 3000};
    /* a learnable stream: a cycle through the vocabulary, one token in 6 random */
    for (int64_t i = 0; i < data.n; i++)
        data.tok[i] =
            (uint16_t)(zt_rand_u64(&rng) % 6 ? (uint64_t)((i * 7) % S.vocab) : zt_rand_u64(&rng) % (uint64_t)S.vocab);
    check_grads(&data);
    const char *dtypes[] = {"fp32", "bf16", "fp16"};
    const double ptol[] = {1e-4, 2e-2, 2e-2}, ltol[] = {1e-5, 5e-4, 5e-4}, ntol[] = {1e-4, 1e-2, 1e-2},
                 gtol[] = {5e-4, 5e-2, 5e-2};
    for (int d = 0; d < 3; d++)
        for (int stage = 0; stage <= 3; stage += 3) {
            result ref = {0}, got = {0};
            char what[64];
            snprintf(what, sizeof what, "%s stage %d", dtypes[d], stage);
            ZT_OK(train(0, stage, dtypes[d], &data, &ref));
            zt_logcap_clear(&log_cap);
            zinc_status st = train(1, stage, dtypes[d], &data, &got);
            ZT_CHECK(st == ZINC_OK, "%s on cuda: %s", what, g_log);
            if (st == ZINC_OK) {
                ZT_CHECK(ref.loss[STEPS - 1] < 0.9 * ref.loss[0], "%s: the cpu run does not learn (%.4f -> %.4f)", what,
                         ref.loss[0], ref.loss[STEPS - 1]);
                double wl = 0, wn = 0, wlog = 0;
                for (int s = 0; s < STEPS; s++) {
                    ZT_NEAR(got.loss[s], ref.loss[s], 0, ltol[d], "%s step %d: loss %.9g on cuda, %.9g on cpu", what,
                            s + 1, got.loss[s], ref.loss[s]);
                    ZT_NEAR(got.norm[s], ref.norm[s], 0, ntol[d], "%s step %d: gradient norm %.9g on cuda, %.9g on cpu",
                            what, s + 1, got.norm[s], ref.norm[s]);
                    wl = fmax(wl, fabs(got.loss[s] - ref.loss[s]) / ref.loss[s]);
                    wn = fmax(wn, fabs(got.norm[s] - ref.norm[s]) / ref.norm[s]);
                }
                double wp = compare_params(&got, &ref, what, ptol[d]);
                ZT_NEAR(got.val, ref.val, 0, ltol[d], "%s: validation loss %.9g on cuda, %.9g on cpu", what, got.val,
                        ref.val);
                for (int v = 0; v < S.vocab; v++) {
                    double dv = fabs((double)got.logits[v] - ref.logits[v]);
                    if (!(dv <= wlog)) wlog = dv;
                }
                ZT_CHECK(wlog <= gtol[d], "%s: next-token logits differ by up to %.3g (tolerance %.3g)", what, wlog,
                         gtol[d]);
                printf("%-12s: loss %.5f -> %.5f; cuda vs cpu: losses %.2g, gradient norms %.2g (relative), "
                       "parameters %.2g of their movement, logits %.2g\n",
                       what, ref.loss[0], ref.loss[STEPS - 1], wl, wn, wp, wlog);
            }
            result_free(&ref);
            result_free(&got);
        }
    free(data.tok);
    return zt_finish();
}
