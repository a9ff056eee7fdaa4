/* SGD ("optimizer": {"type": "SGD"}), added through the optimizer recipe (HACKING.md), as torch.optim.SGD
 * computes it (DeepSpeed 0.19.8 builds torch.optim.SGD for this type):
 *   - the kernel equals torch's _single_tensor_sgd written out in float without fused multiply-adds (its
 *     order: maximize, weight decay, the buffer, Nesterov, the update) bit for bit for every option; the
 *     fast kernel equals the reference bit for bit for every gradient and output dtype, with a decay mask,
 *     at 1 and 2 threads; over 50 steps it is within 1e-6 (normwise over the change) of a float64 SGD;
 *   - trained end to end through the public API at ZeRO stages 0-3 on this run's rank count, with the state
 *     in memory, offloaded to the CPU and on NVMe (stages 1-3), for four option sets (momentum with
 *     dampening and weight decay; Nesterov; plain SGD maximizing; momentum, dampening, maximize and decay):
 *     after EVERY step every element is within 1e-6 of a float64 SGD over the same gradients (parameters
 *     ~0.5, lr 0.05: a few fp32 roundings). The first step's buffer is the gradient itself: a reference
 *     that dampens it is 1e-4 away, so the bound tells them apart (checked);
 *   - checkpoints: saved after 3 steps and loaded into a fresh engine with the state kept the other way
 *     (memory <-> NVMe), bitwise the uninterrupted run; with zinc.deterministic_reduction, saved at this
 *     rank count (--save) and resumed at another (--resume-from W, a CTest fixture), at another stage and
 *     offload, bitwise equal to the uninterrupted run at the resuming rank count; an AdamW checkpoint is
 *     refused by an SGD run, an SGD one by an Adagrad run;
 *   - its config: torch's defaults (lr 1e-3, momentum 0, dampening 0, nesterov and maximize false); torch's
 *     refusal of Nesterov without momentum or with dampening; Adam's betas and eps refused by name; a
 *     negative momentum refused with its range.
 * With ZINC_TEST_DEVICE=cuda (the CUDA emulation) the offloaded runs train on the cuda device, and a run that
 * would keep the state on the GPU is refused at zinc_create with the reason (SGD has only CPU kernels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "kernels/cpu_kernels.h"
#include "optim_engine.h"
#include "runtime/engine/engine_internal.h"
#include "zinc.h"
#include "zt.h"

static const double LR = 0.05;

typedef struct variant {
    const char *name;
    double mu, damp, wd;
    int nesterov, maximize;
} variant;

static const variant variants[] = {
    {"momentum 0.9, dampening 0.1, weight decay 0.1", 0.9, 0.1, 0.1, 0, 0},
    {"nesterov 0.9, weight decay 0.1", 0.9, 0.0, 0.1, 1, 0},
    {"no momentum, maximize", 0.0, 0.0, 0.0, 0, 1},
    {"momentum 0.5, dampening 0.3, maximize, weight decay 0.05", 0.5, 0.3, 0.05, 0, 1},
};
enum { NVAR = sizeof variants / sizeof variants[0] };

static const char *g_tag = "np1";

/* ---------------------------------------------------------------- the kernel */
/* torch.optim.SGD's _single_tensor_sgd for one float tensor, in its order and in float (the scalars as
 * ATen converts them: alpha = 1 - dampening and -lr in double, then float). */
static void torch_sgd(size_t n, float *param, const float *grads, float *buf, int first, double lr, double mu,
                      double damp, double wd, int nesterov, int maximize) {
    for (size_t k = 0; k < n; k++) {
        float grad = maximize ? -grads[k] : grads[k];
        if (wd != 0) grad = grad + (float)wd * param[k];
        if (mu != 0) {
            if (first)
                buf[k] = grad;
            else
                buf[k] = buf[k] * (float)mu + (float)(1 - damp) * grad;
            grad = nesterov ? grad + (float)mu * buf[k] : buf[k];
        }
        param[k] = param[k] + (float)-lr * grad;
    }
}

static zsgd_hparams hp_of(const variant *v, double lr, int first, float grad_factor) {
    return (zsgd_hparams){.lr = (float)lr,
                          .momentum = (float)v->mu,
                          .one_minus_dampening = (float)(1 - v->damp),
                          .weight_decay = (float)v->wd,
                          .grad_factor = grad_factor,
                          .nesterov = v->nesterov,
                          .maximize = v->maximize,
                          .first = first};
}

static void test_kernel(uint64_t *rs) {
    enum { KN = 3 * 65536 + 77 };
    float *p = malloc(KN * sizeof(float)), *b = calloc(KN, sizeof(float)), *g = malloc(KN * sizeof(float));
    float *pt = malloc(KN * sizeof(float)), *bt = calloc(KN, sizeof(float));
    double *p64 = malloc(KN * sizeof(double)), *b64 = calloc(KN, sizeof(double)), *p0 = malloc(KN * sizeof(double));
    for (int vi = 0; vi < NVAR; vi++) {
        const variant *v = &variants[vi];
        for (size_t i = 0; i < KN; i++) {
            p[i] = pt[i] = (float)(0.5 * zt_rand_normal(rs));
            p64[i] = p0[i] = p[i];
            b[i] = bt[i] = 0;
            b64[i] = 0;
        }
        const double lr = 1e-2;
        for (int t = 0; t < 50; t++) {
            for (size_t i = 0; i < KN; i++) g[i] = (float)(zt_rand_normal(rs) * (1 + (double)(i % 7)));
            zsgd_hparams h = hp_of(v, lr, t == 0, 1.0f);
            zsgd_step_ref(&h, KN, p, b, g, ZINC_FP32, NULL, ZINC_FP32, NULL);
            torch_sgd(KN, pt, g, bt, t == 0, lr, v->mu, v->damp, v->wd, v->nesterov, v->maximize);
            for (size_t i = 0; i < KN; i++) {
                double gg = v->maximize ? -(double)g[i] : (double)g[i];
                gg += v->wd * p64[i];
                if (v->mu != 0) {
                    b64[i] = t == 0 ? gg : v->mu * b64[i] + (1 - v->damp) * gg;
                    gg = v->nesterov ? gg + v->mu * b64[i] : b64[i];
                }
                p64[i] -= lr * gg;
            }
        }
        ZT_CHECK(!memcmp(p, pt, KN * sizeof(float)) && !memcmp(b, bt, KN * sizeof(float)),
                 "SGD (%s): zinc's kernel equals torch.optim.SGD's formula in float bit for bit", v->name);
        double num = 0, den = 0;
        for (size_t i = 0; i < KN; i++) {
            num += ((double)p[i] - p64[i]) * ((double)p[i] - p64[i]);
            den += (p64[i] - p0[i]) * (p64[i] - p0[i]);
        }
        printf("# SGD kernel (%s), 50 steps: normwise error vs float64 %.3g\n", v->name, sqrt(num / den));
        ZT_CHECK(sqrt(num / den) < 1e-6, "SGD (%s) vs float64: %.3g (want < 1e-6)", v->name, sqrt(num / den));
    }
    /* fast == reference: every dtype pair, a decay mask, the grad factor, the first step and a later one, 1
     * and 2 threads */
    uint8_t *mask = malloc(KN / ZADAM_MASK_GROUP + 1);
    uint16_t *g16 = malloc(KN * sizeof(uint16_t)), *o1 = malloc(KN * 4), *o2 = malloc(KN * 4);
    float *p2 = malloc(KN * sizeof(float)), *b2 = malloc(KN * sizeof(float));
    for (size_t i = 0; i <= KN / ZADAM_MASK_GROUP; i++) mask[i] = (uint8_t)(i % 3 != 0);
    const zinc_dtype dts[] = {ZINC_FP32, ZINC_FP16, ZINC_BF16};
    for (int threads = 1; threads <= 2; threads++) {
        zkernels_set_threads(threads);
        for (int gi = 0; gi < 3; gi++)
            for (int pi = 0; pi < 4; pi++) {
                const variant *v = &variants[(gi + pi + threads) % NVAR];
                zsgd_hparams h = hp_of(v, 1e-2, pi == 1, 0.5f);
                for (size_t i = 0; i < KN; i++) {
                    p[i] = p2[i] = (float)zt_rand_normal(rs);
                    b[i] = b2[i] = (float)zt_rand_normal(rs);
                    g[i] = (float)zt_rand_normal(rs);
                }
                const void *gg = g;
                if (dts[gi] != ZINC_FP32) {
                    zcast_from_f32(g16, dts[gi], g, KN);
                    gg = g16;
                }
                zinc_dtype pdt = pi < 3 ? dts[pi] : ZINC_FP32;
                void *out1 = pi < 3 ? (void *)o1 : NULL, *out2 = pi < 3 ? (void *)o2 : NULL;
                const uint8_t *mk = (gi + pi) % 2 ? mask : NULL;
                zsgd_step_ref(&h, KN, p, b, gg, dts[gi], out1, pdt, mk);
                zsgd_step(&h, KN, p2, b2, gg, dts[gi], out2, pdt, mk);
                ZT_CHECK(!memcmp(p, p2, KN * 4) && !memcmp(b, b2, KN * 4) &&
                             (!out1 || !memcmp(out1, out2, KN * zinc_dtype_size(pdt))),
                         "zsgd_step == zsgd_step_ref bitwise (%s, grad %s, out %s, mask %d, %d threads)", v->name,
                         zinc_dtype_name(dts[gi]), pi < 3 ? zinc_dtype_name(pdt) : "none", mk != NULL, threads);
            }
    }
    zkernels_set_threads(0);
    free(mask), free(g16), free(o1), free(o2), free(p2), free(b2);
    free(p), free(b), free(g), free(pt), free(bt), free(p64), free(b64), free(p0);
}

/* ---------------------------------------------------------------- float64 SGD over the model */
/* ref[v][t]: the whole model (oe_total_numel doubles) after step t + 1 of variant v. dampen_first: the wrong
 * first step (the buffer dampened), which the engine comparison must reject. */
static double *ref[NVAR][STEPS], *ref_wrong[STEPS];

static void ref_train(int vi, int dampen_first, double **out) {
    const variant *v = &variants[vi];
    int64_t n = oe_total_numel(), off = 0;
    double *p = malloc((size_t)n * sizeof *p), *buf = calloc((size_t)n, sizeof *buf);
    for (int k = 0; k < 2 * NMOD; k++)
        for (int64_t i = 0; i < oe_numel_of(k); i++) p[off++] = oe_init_value(k, i);
    for (int t = 0; t < STEPS; t++) {
        off = 0;
        for (int k = 0; k < 2 * NMOD; k++)
            for (int64_t i = 0; i < oe_numel_of(k); i++, off++) {
                double g = 0, w = p[off];
                for (int64_t j = 0; j < BATCH; j++) g += oe_grad_fn(k, i, w, (int64_t)t * BATCH + j);
                g /= BATCH;
                if (v->maximize) g = -g;
                if (k % 2 == 0) g += v->wd * w; /* weights decayed, biases not */
                if (v->mu != 0) {
                    buf[off] = t == 0 ? (dampen_first ? (1 - v->damp) * g : g) : v->mu * buf[off] + (1 - v->damp) * g;
                    g = v->nesterov ? g + v->mu * buf[off] : buf[off];
                }
                p[off] = w - LR * g;
            }
        out[t] = malloc((size_t)n * sizeof(double));
        memcpy(out[t], p, (size_t)n * sizeof(double));
    }
    free(p);
    free(buf);
}

/* ---------------------------------------------------------------- the runs */
static const variant *g_var = &variants[0];
static char g_zero[1024];
enum { OFF_NONE = 0, OFF_CPU = 1, OFF_NVME = 2 };
static const char *offload_name(int off) { return off == OFF_NVME ? "nvme" : off == OFF_CPU ? "cpu" : "none"; }

static void optimizer_json(const oe_run *r, char *buf, size_t cap) {
    if (r->type) /* the defaults test and the other optimizers: the type alone */
        snprintf(buf, cap, "{\"type\": \"%s\"}", r->type);
    else
        snprintf(buf, cap,
                 "{\"type\": \"SGD\", \"params\": {\"lr\": %g, \"momentum\": %g, \"dampening\": %g, "
                 "\"weight_decay\": %g, \"nesterov\": %s, \"maximize\": %s}}",
                 LR, g_var->mu, g_var->damp, g_var->wd, g_var->nesterov ? "true" : "false",
                 g_var->maximize ? "true" : "false");
}
static const oe_optimizer optimizer = {optimizer_json, ""};

/* A run's zero_optimization members: the offload, and the top-level "zinc" section (opened after
 * zero_optimization closes; the config template's braces close it) for NVMe's buffered IO and the
 * deterministic reduction. Every rank builds the same text. */
static oe_run make_run(int stage, int gas, int off, int determ) {
    size_t n = 0;
    g_zero[0] = 0;
    if (off == OFF_CPU)
        n += (size_t)snprintf(g_zero + n, sizeof g_zero - n, ", \"offload_optimizer\": {\"device\": \"cpu\"}");
    if (off == OFF_NVME)
        n += (size_t)snprintf(g_zero + n, sizeof g_zero - n,
                              ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", "
                              "\"nvme_path\": \"%s/sgd_nvme_%s\"}",
                              zt_build_dir(), g_tag);
    if (off == OFF_NVME || determ)
        snprintf(g_zero + n, sizeof g_zero - n, "}, \"zinc\": {\"allow_buffered_io\": true%s",
                 determ ? ", \"deterministic_reduction\": true" : "");
    return (oe_run){.stage = stage, .gas = gas, .bucket = gas == 1 ? 100 : 1000, .zero_json = g_zero};
}

static int on_cuda(void) {
    const char *d = getenv("ZINC_TEST_DEVICE");
    return d && !strcmp(d, "cuda");
}

/* Max |x - r| over the model; *bad counts the elements beyond tol. */
static double worst_diff(const float *x, const double *r, double tol, size_t *bad) {
    double worst = 0;
    *bad = 0;
    for (int64_t i = 0; i < oe_total_numel(); i++) {
        double d = fabs((double)x[i] - r[i]);
        if (!(d <= worst)) worst = d;
        *bad += !(d <= tol);
    }
    return worst;
}

/* Trains STEPS steps, comparing the master weights with the float64 SGD after every step. */
static void train_compare(int vi, oe_run *r, const char *what) {
    float *x = malloc((size_t)oe_total_numel() * sizeof *x);
    oe_model md;
    zinc_status st = oe_model_create(&optimizer, r, &md);
    if (on_cuda() && !strstr(r->zero_json, "offload_optimizer")) {
        ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(zinc_last_error(), "optimizer SGD has only CPU") &&
                     strstr(zinc_last_error(), "offload_optimizer.device"),
                 "%s on cuda: refused with the reason (%s: %s)", what, zinc_status_name(st), zinc_last_error());
        if (md.e) zinc_destroy(md.e);
        free(x);
        return;
    }
    ZT_CHECK(st == ZINC_OK, "%s: %s (%s)", what, zinc_status_name(st), zinc_last_error());
    for (int t = 0; st == ZINC_OK && t < STEPS; t++) {
        st = oe_train_steps(&md, r, t, t + 1);
        if (st == ZINC_OK) st = zinc_gather_master(md.e, x, (size_t)oe_total_numel());
        ZT_CHECK(st == ZINC_OK, "%s step %d: %s (%s)", what, t + 1, zinc_status_name(st), zinc_last_error());
        if (st != ZINC_OK) break;
        size_t bad;
        double worst = worst_diff(x, ref[vi][t], 1e-6, &bad);
        ZT_CHECK(bad == 0, "%s, after step %d: %zu elements differ from the float64 SGD by more than 1e-6 (worst %.3g)",
                 what, t + 1, bad, worst);
        if (vi == 0) { /* the first step's buffer not dampened: a reference that dampens it is far away */
            double wrong = worst_diff(x, ref_wrong[t], 1e-6, &bad);
            ZT_CHECK(wrong > 1e-5,
                     "%s, after step %d: only %.3g from a float64 SGD that dampens the first step's "
                     "buffer: the comparison cannot tell them apart",
                     what, t + 1, wrong);
        }
    }
    if (md.e) zinc_destroy(md.e);
    free(x);
}

static void test_matrix(void) {
    int runs = 0;
    for (int vi = 0; vi < NVAR; vi++)
        for (int stage = 0; stage <= 3; stage++)
            for (int off = OFF_NONE; off <= (stage > 0 ? OFF_NVME : OFF_NONE); off++) {
                int gas = 1 + (stage + vi) % 2;
                g_var = &variants[vi];
                oe_run r = make_run(stage, gas, off, 0);
                char what[160];
                snprintf(what, sizeof what, "SGD (%s) stage %d gas %d offload %s", variants[vi].name, stage, gas,
                         offload_name(off));
                train_compare(vi, &r, what);
                runs++;
            }
    if (oe_rank == 0) fprintf(stderr, "sgd engine: %d runs compared with float64 after every step\n", runs);
}

/* Save after 3 steps, load into a fresh engine with the state kept the same way and the other way (memory
 * <-> NVMe), 3 more: bitwise the uninterrupted run (the momentum buffer and the step count restored). */
static void test_checkpoint_same_ranks(void) {
    if (on_cuda()) return; /* the emulation trains the offloaded runs only; checkpoints are checked on cpu */
    int64_t n = oe_total_numel();
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (int stage = 1; stage <= 3; stage += 2)
        for (int off = OFF_NONE; off <= OFF_NVME; off += 2) {
            g_var = &variants[stage == 1 ? 0 : 1];
            oe_run r = make_run(stage, 1, off, 0);
            oe_model md;
            ZT_OK(oe_model_create(&optimizer, &r, &md));
            ZT_OK(oe_train_steps(&md, &r, 0, STEPS));
            ZT_OK(zinc_gather_master(md.e, a, (size_t)n));
            zinc_destroy(md.e);
            char dir[512], path[600];
            snprintf(dir, sizeof dir, "%s/sgd_ckpt_%s_s%d_%s", zt_build_dir(), g_tag, stage, offload_name(off));
            ZT_OK(oe_model_create(&optimizer, &r, &md));
            ZT_OK(oe_train_steps(&md, &r, 0, 3));
            ZT_OK(zinc_save_checkpoint(md.e, dir, "step3"));
            zinc_destroy(md.e);
            snprintf(path, sizeof path, "%s/step3", dir);
            for (int l = 0; l < 2; l++) {
                int loff = l ? OFF_NVME - off : off;
                oe_run rl = make_run(stage, 1, loff, 0);
                ZT_OK(oe_model_create(&optimizer, &rl, &md));
                ZT_OK(zinc_load_checkpoint(md.e, path));
                ZT_CHECK(zinc_step_count(md.e) == 3, "stage %d: step count after load %lld", stage,
                         (long long)zinc_step_count(md.e));
                ZT_OK(oe_train_steps(&md, &rl, 3, STEPS));
                ZT_OK(zinc_gather_master(md.e, b, (size_t)n));
                zinc_destroy(md.e);
                ZT_CHECK(!memcmp(a, b, (size_t)n * sizeof *a),
                         "stage %d: SGD saved with offload %s, resumed with offload %s, differs from the "
                         "uninterrupted run",
                         stage, offload_name(off), offload_name(loff));
            }
            /* an SGD checkpoint into Adagrad, an AdamW one into SGD: refused */
            oe_run ada = r;
            ada.type = "Adagrad";
            ZT_OK(oe_model_create(&optimizer, &ada, &md));
            ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG,
                   "saved by the SGD optimizer, this run uses Adagrad");
            ada.type = "AdamW";
            zinc_destroy(md.e);
            ZT_OK(oe_model_create(&optimizer, &ada, &md));
            ZT_OK(oe_train_steps(&md, &ada, 0, 1));
            ZT_OK(zinc_save_checkpoint(md.e, dir, "adamw"));
            zinc_destroy(md.e);
            ZT_OK(oe_model_create(&optimizer, &r, &md));
            snprintf(path, sizeof path, "%s/adamw", dir);
            ZT_ERR(zinc_load_checkpoint(md.e, path), ZINC_ERR_CONFIG,
                   "saved by the AdamW optimizer, this run uses SGD");
            zinc_destroy(md.e);
        }
    free(a);
    free(b);
}

/* Across rank counts (zinc.deterministic_reduction: 1 rank x gas 2 and 2 ranks x gas 1 train to the same
 * bits): scenario s is saved by the world-W run at (stage, offload) and resumed by the other rank count at
 * (stage', offload'). */
static const struct {
    int vi, stage, off, rstage, roff;
} xscen[] = {
    {0, 1, OFF_CPU, 3, OFF_NVME},
    {1, 3, OFF_NVME, 2, OFF_NONE},
    {3, 2, OFF_NONE, 1, OFF_CPU},
    {0, 0, OFF_NONE, 0, OFF_NONE},
};
enum { NXSCEN = sizeof xscen / sizeof xscen[0] };

static void xdir(char *out, size_t cap, int world, int s) {
    snprintf(out, cap, "%s/sgd_xckpt_from_np%d_s%d", zt_build_dir(), world, s);
}

static void save_for_other_ranks(void) {
    for (int s = 0; s < NXSCEN; s++) {
        g_var = &variants[xscen[s].vi];
        oe_model md;
        /* the global batch's micro-batches: 1 x 2 or 2 x 1 (oe_world: of the matrix's engines) */
        oe_run r = make_run(xscen[s].stage, 2 / oe_world, xscen[s].off, 1);
        ZT_OK(oe_model_create(&optimizer, &r, &md));
        ZT_OK(oe_train_steps(&md, &r, 0, 3));
        char dir[512];
        xdir(dir, sizeof dir, md.world, s);
        ZT_OK(zinc_save_checkpoint(md.e, dir, "step3"));
        zinc_destroy(md.e);
    }
}

static void resume_from_other_ranks(int from) {
    int64_t n = oe_total_numel();
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    oe_model probe; /* this run's rank count */
    oe_run pr = make_run(0, 1, OFF_NONE, 0);
    ZT_OK(oe_model_create(&optimizer, &pr, &probe));
    int world = probe.world;
    zinc_destroy(probe.e);
    ZT_CHECK(world != from && (world == 1 || world == 2),
             "--resume-from %d runs at another rank count (1 or 2), not %d", from, world);
    for (int s = 0; s < NXSCEN; s++) {
        g_var = &variants[xscen[s].vi];
        oe_run r = make_run(xscen[s].rstage, 2 / world, xscen[s].roff, 1);
        oe_model md;
        ZT_OK(oe_model_create(&optimizer, &r, &md));
        ZT_OK(oe_train_steps(&md, &r, 0, STEPS));
        ZT_OK(zinc_gather_master(md.e, a, (size_t)n));
        zinc_destroy(md.e);
        size_t bad;
        double worst = worst_diff(a, ref[xscen[s].vi][STEPS - 1], 1e-6, &bad);
        ZT_CHECK(bad == 0,
                 "deterministic run (%s, stage %d): %zu elements off the float64 SGD by more than 1e-6 "
                 "(worst %.3g)",
                 variants[xscen[s].vi].name, xscen[s].rstage, bad, worst);
        char dir[512], path[600];
        xdir(dir, sizeof dir, from, s);
        snprintf(path, sizeof path, "%s/step3", dir);
        ZT_OK(oe_model_create(&optimizer, &r, &md));
        ZT_OK(zinc_load_checkpoint(md.e, path));
        ZT_OK(oe_train_steps(&md, &r, 3, STEPS));
        ZT_OK(zinc_gather_master(md.e, b, (size_t)n));
        zinc_destroy(md.e);
        ZT_CHECK(!memcmp(a, b, (size_t)n * sizeof *a),
                 "SGD (%s) saved at %d ranks (stage %d, offload %s), resumed at %d ranks (stage %d, offload %s): "
                 "differs from the uninterrupted run",
                 variants[xscen[s].vi].name, from, xscen[s].stage, offload_name(xscen[s].off), world, xscen[s].rstage,
                 offload_name(xscen[s].roff));
    }
    if (oe_rank == 0) fprintf(stderr, "sgd: %d checkpoints from %d ranks resumed bitwise\n", NXSCEN, from);
    free(a);
    free(b);
}

static void expect_refused(const char *params, const char *key, const char *text) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"train_batch_size\": 24, \"optimizer\": {\"type\": \"SGD\", \"params\": %s}}", params);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    zinc_engine *e = NULL;
    zinc_status st = zinc_create(&o, &e);
    ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(zinc_last_error(), key) && strstr(zinc_last_error(), text),
             "SGD %s refused naming %s and \"%s\" (%s: %s)", params, key, text, zinc_status_name(st),
             zinc_last_error());
    if (e) zinc_destroy(e);
}

static void test_config(void) {
    oe_model md;
    oe_run r = make_run(1, 1, OFF_CPU, 0);
    r.type = "SGD";
    zinc_status st = oe_model_create(&optimizer, &r, &md);
    ZT_CHECK(st == ZINC_OK, "SGD with no params: %s (%s)", zinc_status_name(st), zinc_last_error());
    if (st == ZINC_OK) {
        const zcfg_optimizer *o = &md.e->cfg.optimizer;
        ZT_CHECK(o->type == ZOPT_SGD && o->lr == 1e-3 && o->momentum == 0 && o->dampening == 0 &&
                     o->weight_decay == 0 && !o->nesterov && !o->maximize,
                 "SGD's defaults are torch.optim.SGD's (lr %g momentum %g dampening %g weight_decay %g nesterov %d "
                 "maximize %d)",
                 o->lr, o->momentum, o->dampening, o->weight_decay, o->nesterov, o->maximize);
        ZT_CHECK(md.e->state_ctx.tensors == 2, "SGD's store keeps 2 arrays (master, momentum buffer), not %d",
                 md.e->state_ctx.tensors);
        zinc_destroy(md.e);
    }
    expect_refused("{\"nesterov\": true}", "optimizer.params.nesterov", "needs momentum above 0 and dampening 0");
    expect_refused("{\"nesterov\": true, \"momentum\": 0.9, \"dampening\": 0.1}", "optimizer.params.nesterov",
                   "dampening 0.1");
    expect_refused("{\"betas\": [0.9, 0.99]}", "optimizer.params.betas", "not a parameter of SGD");
    expect_refused("{\"eps\": 1e-8}", "optimizer.params.eps", "not a parameter of SGD");
    expect_refused("{\"momentum\": -0.5}", "optimizer.params.momentum", "-0.5");
}

int main(int argc, char **argv) {
    zt_name = "engine_sgd";
    int save = 0, from = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tag") && i + 1 < argc)
            g_tag = argv[++i];
        else if (!strcmp(argv[i], "--save"))
            save = 1;
        else if (!strcmp(argv[i], "--resume-from") && i + 1 < argc)
            from = atoi(argv[++i]);
    }
    uint64_t rs = zt_seed();
    for (int vi = 0; vi < NVAR; vi++) ref_train(vi, 0, ref[vi]);
    ref_train(0, 1, ref_wrong);
    if (from) {
        resume_from_other_ranks(from);
    } else {
        test_kernel(&rs);
        test_matrix();
        test_checkpoint_same_ranks();
        test_config();
        if (save) save_for_other_ranks();
    }
    for (int vi = 0; vi < NVAR; vi++)
        for (int t = 0; t < STEPS; t++) free(ref[vi][t]);
    for (int t = 0; t < STEPS; t++) free(ref_wrong[t]);
    return zt_finish();
}
