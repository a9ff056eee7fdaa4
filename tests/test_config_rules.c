/* The ds_config loader's cross-key rules (issue 2): numbers (floats as sizes, huge, negative), the
 * batch triad against DeepSpeed's formula at several world sizes, precision dtypes, overlap_comm with Adam,
 * scheduler and offload rules. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_test.h"
#include "zt.h"

/* ------------------------------------------------------------------ numbers: floats as sizes, huge, negative */

static void test_numbers(void) {
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 5e8}}");
    ZT_CHECK(cfg.zero.reduce_bucket_size == 500000000, "5e8 -> %lld", (long long)cfg.zero.reduce_bucket_size);
    ZT_CHECK(nwarn() == 0, "5e8 warned");
    /* HF fills stage3_prefetch_bucket_size with 0.9 * hidden^2 (DeepSpeed #6525) */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": "
              "15099494.4}}");
    ZT_CHECK(cfg.zero.prefetch_bucket_size == 15099494, "15099494.4 -> %lld", (long long)cfg.zero.prefetch_bucket_size);
    ZT_CHECK(logged(ZINC_LOG_WARN, "zero_optimization.stage3_prefetch_bucket_size", "15099494.4") == 1 &&
                 logged(ZINC_LOG_WARN, "rounded to 15099494", NULL) == 1,
             "no rounding warning naming path, value and result");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 2.5}}");
    ZT_CHECK(cfg.zero.reduce_bucket_size == 3, "2.5 -> %lld", (long long)cfg.zero.reduce_bucket_size);
    EXPECT_OK("{\"train_batch_size\": 8.0, \"zero_optimization\": {\"stage\": 3.0}}");
    ZT_CHECK(cfg.zero.stage == 3 && cfg.train_batch_size == 8, "3.0 accepted as 3");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2.5}}", "zero_optimization.stage", "2.5",
               "whole number");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 4}}", "zero_optimization.stage",
               "4 is out of range", "0 to 3");
    /* huge */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 1e400}}", "not valid JSON");
    EXPECT_ERR("{\"train_batch_size\": 99999999999999999999}", "not valid JSON", "integer");
    EXPECT_ERR("{\"train_batch_size\": -99999999999999999999}", "not valid JSON", "integer");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 1e19}}", "reduce_bucket_size",
               "out of range");
    /* 2^63 as a float is beyond int64 (a conversion that would be undefined behaviour) */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 9223372036854775807.0}}",
               "reduce_bucket_size", "out of range");
    EXPECT_ERR("{\"train_batch_size\": 8, \"steps_per_print\": 9.3e18}", "steps_per_print", "out of range");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 9223372036854775807}}");
    ZT_CHECK(cfg.zero.reduce_bucket_size == INT64_MAX, "INT64_MAX -> %lld", (long long)cfg.zero.reduce_bucket_size);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 9007199254740993}}");
    ZT_CHECK(cfg.zero.reduce_bucket_size == 9007199254740993LL, "2^53+1 exact -> %lld",
             (long long)cfg.zero.reduce_bucket_size);
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"initial_scale_power\": 4294967312}}", "initial_scale_power",
               "out of range");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"hysteresis\": 1e300}}", "fp16.hysteresis", "out of range");
    /* negative */
    EXPECT_ERR("{\"train_batch_size\": -8}", "train_batch_size", "-8 is out of range");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"lr\": -0.001}}}", "optimizer.params.lr",
               "-0.001 is out of range");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"sub_group_size\": -1e9}}", "sub_group_size",
               "out of range");
    EXPECT_OK("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"weight_decay\": -0.0}}}");
    /* a small ranges' text says what is allowed */
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"initial_scale_power\": 70}}", "70 is out of range", "0 to 62");
    EXPECT_ERR("{\"train_batch_size\": 0}", "0 is out of range", "at least 1");
    EXPECT_ERR("{\"train_batch_size\": 8, \"aio\": {\"block_size\": 5000}}", "aio.block_size", "5000",
               "multiple of 4096");
}

/* ------------------------------------------------------------------ the batch triad */

/* DeepSpeed's _set_batch_related_parameters + _batch_assertion (deepspeed/base/config.py). 0 = not
 * given. Returns 0 (ok, out filled), -1 (neither train nor micro given), -2 (the assertion fails). */
static int ds_triad(int64_t tb, int64_t mb, int64_t ga, int64_t W, int64_t out[3]) {
    if (tb && mb && ga) {
    } else if (tb && mb) {
        ga = tb / mb / W;
    } else if (tb && ga) {
        mb = tb / W / ga;
    } else if (mb && ga) {
        tb = mb * ga * W;
    } else if (tb) {
        ga = 1;
        mb = tb / W;
    } else if (mb) {
        ga = 1;
        tb = mb * W;
    } else {
        return -1;
    }
    if (!(tb > 0 && mb > 0 && ga > 0 && tb == mb * ga * W)) return -2;
    out[0] = tb, out[1] = mb, out[2] = ga;
    return 0;
}

static void test_batch_triad(void) {
    static const int64_t tbs[] = {0, 1, 6, 8, 12, 16, 24, 32, 48, 60, 64, 96};
    static const int64_t mbs[] = {0, 1, 2, 3, 4, 8};
    static const int64_t gas[] = {0, 1, 2, 3, 4};
    int cases = 0, oks = 0, errs = 0, combos_ok[8] = {0}, combos_err[8] = {0};
    char text[256];
    for (int W = 1; W <= 8; W++)
        for (size_t a = 0; a < sizeof tbs / sizeof tbs[0]; a++)
            for (size_t b = 0; b < sizeof mbs / sizeof mbs[0]; b++)
                for (size_t g = 0; g < sizeof gas / sizeof gas[0]; g++) {
                    int64_t tb = tbs[a], mb = mbs[b], ga = gas[g], want[3];
                    int n = snprintf(text, sizeof text, "{\"steps_per_print\": 1");
                    if (tb)
                        n += snprintf(text + n, sizeof text - (size_t)n, ", \"train_batch_size\": %lld", (long long)tb);
                    if (mb)
                        n += snprintf(text + n, sizeof text - (size_t)n, ", \"train_micro_batch_size_per_gpu\": %lld",
                                      (long long)mb);
                    if (ga)
                        n += snprintf(text + n, sizeof text - (size_t)n, ", \"gradient_accumulation_steps\": %lld",
                                      (long long)ga);
                    snprintf(text + n, sizeof text - (size_t)n, "}");
                    int combo = (tb ? 4 : 0) | (mb ? 2 : 0) | (ga ? 1 : 0);
                    int r = ds_triad(tb, mb, ga, W, want);
                    zinc_status st = load_w(text, W);
                    const char *m = zinc_last_error();
                    cases++;
                    if (r == 0) {
                        combos_ok[combo]++;
                        ZT_CHECK(st == ZINC_OK, "W=%d %s: %s", W, text, m);
                        if (st == ZINC_OK) {
                            oks++;
                            ZT_CHECK(cfg.train_batch_size == want[0] && cfg.train_micro_batch_size_per_gpu == want[1] &&
                                         cfg.gradient_accumulation_steps == want[2] && cfg.world_size == W,
                                     "W=%d %s: got %lld/%lld/%lld want %lld/%lld/%lld", W, text,
                                     (long long)cfg.train_batch_size, (long long)cfg.train_micro_batch_size_per_gpu,
                                     (long long)cfg.gradient_accumulation_steps, (long long)want[0], (long long)want[1],
                                     (long long)want[2]);
                            /* derived values are logged with the world size */
                            if (combo != 7)
                                ZT_CHECK(logged(ZINC_LOG_INFO, "batch sizes for world size", NULL) == 1,
                                         "W=%d %s: derivation not logged", W, text);
                        }
                    } else {
                        combos_err[combo]++;
                        ZT_CHECK(st == ZINC_ERR_CONFIG, "W=%d %s: accepted, DeepSpeed refuses", W, text);
                        if (st != ZINC_ERR_CONFIG) continue;
                        errs++;
                        ZT_CHECK(strstr(m, "t.json: train_batch_size") != NULL, "no path: %s", m);
                        if (r == -1) {
                            ZT_CHECK(strstr(m, "give train_batch_size or train_micro_batch_size_per_gpu") != NULL,
                                     "none given: %s", m);
                        } else {
                            /* the arithmetic, with the given numbers and the world size */
                            char need[160];
                            snprintf(need, sizeof need, "world_size %d", W);
                            ZT_CHECK(strstr(m, need) != NULL, "W=%d %s: no world size in %s", W, text, m);
                            if (tb) {
                                snprintf(need, sizeof need, "train_batch_size %lld must equal", (long long)tb);
                                ZT_CHECK(strstr(m, need) != NULL, "W=%d %s: no arithmetic in %s", W, text, m);
                            }
                            if (mb) {
                                snprintf(need, sizeof need, "train_micro_batch_size_per_gpu %lld", (long long)mb);
                                ZT_CHECK(strstr(m, need) != NULL, "W=%d %s: micro missing in %s", W, text, m);
                            }
                            ZT_CHECK(strstr(m, combo == 7 ? "Set train_batch_size to" : "multiple of") != NULL,
                                     "W=%d %s: no advice in %s", W, text, m);
                        }
                    }
                }
    printf("batch triad: %d cases, %d valid, %d refused\n", cases, oks, errs);
    /* all six given-combinations reached both outcomes (where possible), and "none"/"gas only" always fail */
    for (int c = 2; c < 8; c++) {
        ZT_CHECK(combos_ok[c] > 0, "combination %d never valid", c);
        /* with train_batch_size given, some sizes do not divide; micro (+ gas) alone always derive one */
        if (c & 4)
            ZT_CHECK(combos_err[c] > 0, "combination %d never refused", c);
        else
            ZT_CHECK(combos_err[c] == 0, "combination %d refused", c);
    }
    ZT_CHECK(combos_ok[0] == 0 && combos_ok[1] == 0 && combos_err[0] > 0 && combos_err[1] > 0, "none / gas only");

    /* hand-checked cases */
    ZT_OK(load_w("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 4}", 2));
    ZT_CHECK(cfg.gradient_accumulation_steps == 4, "32/4/2 -> gas %lld", (long long)cfg.gradient_accumulation_steps);
    ZT_OK(load_w("{\"train_batch_size\": 48, \"gradient_accumulation_steps\": 3}", 4));
    ZT_CHECK(cfg.train_micro_batch_size_per_gpu == 4, "48/4/3 -> micro %lld",
             (long long)cfg.train_micro_batch_size_per_gpu);
    ZT_OK(load_w("{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 5}", 7));
    ZT_CHECK(cfg.train_batch_size == 105, "3*5*7 -> %lld", (long long)cfg.train_batch_size);
    EXPECT_ERR_W("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": "
                 "2}",
                 1,
                 "train_batch_size 10 must equal train_micro_batch_size_per_gpu 4 x gradient_accumulation_steps 2 x "
                 "world_size 1 = 8",
                 "Set train_batch_size to 8");
    EXPECT_ERR_W("{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 16}", 8, "world_size 8",
                 "multiple of micro x world_size = 128");
    EXPECT_ERR_W("{\"train_batch_size\": 30, \"gradient_accumulation_steps\": 4}", 2, "train_batch_size 30",
                 "multiple of world_size x gradient_accumulation_steps = 8");
    EXPECT_ERR_W("{\"train_batch_size\": 6}", 4, "train_batch_size 6", "multiple of world_size 4");
    EXPECT_ERR("{\"gradient_accumulation_steps\": 4}", "give train_batch_size or train_micro_batch_size_per_gpu");
    EXPECT_ERR("{}", "give train_batch_size or train_micro_batch_size_per_gpu");
    /* products beyond int64 are an error, not an overflow */
    EXPECT_ERR_W("{\"train_micro_batch_size_per_gpu\": 4611686018427387904, \"gradient_accumulation_steps\": 4}", 2,
                 "train_batch_size", "too large");
    EXPECT_ERR_W("{\"train_micro_batch_size_per_gpu\": 9223372036854775807}", 3, "train_batch_size", "too large");
    EXPECT_ERR_W("{\"train_batch_size\": 9223372036854775807, \"train_micro_batch_size_per_gpu\": 3074457345618258602, "
                 "\"gradient_accumulation_steps\": 3}",
                 1, "train_batch_size");
    /* consistent, but above zinc's limit of 2^24 samples per step (issue 23) */
    EXPECT_ERR_W("{\"train_batch_size\": 9223372036854775807, \"train_micro_batch_size_per_gpu\": 9223372036854775807}",
                 1, "train_batch_size", "2^24");
    /* world size is checked */
    ZT_ERR(zcfg_load_text("{\"train_batch_size\": 8}", NULL, 0, NULL, &cfg), ZINC_ERR_INVALID_ARG, "world size 0");
    /* "auto" batch sizes are derived */
    ZT_OK(load_w("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 4, "
                 "\"gradient_accumulation_steps\": 2}",
                 2));
    ZT_CHECK(cfg.train_batch_size == 16, "auto train -> %lld", (long long)cfg.train_batch_size);
    ZT_CHECK(logged(ZINC_LOG_INFO, "train_batch_size 16", NULL) == 1, "auto derivation not logged");
    ZT_CHECK(logged(ZINC_LOG_WARN, "train_batch_size: \"auto\" -> 16", "derived") == 1, "auto derivation not warned");
    ZT_OK(load_w("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": \"auto\", "
                 "\"gradient_accumulation_steps\": \"auto\"}",
                 2));
    ZT_CHECK(cfg.train_micro_batch_size_per_gpu == 16 && cfg.gradient_accumulation_steps == 1, "auto micro/gas");
    /* all three "auto": the Hugging Face Trainer's defaults, micro 8 and accumulation 1 (test_config_auto.c) */
    ZT_OK(load_w("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", "
                 "\"gradient_accumulation_steps\": \"auto\"}",
                 2));
    ZT_CHECK(cfg.train_batch_size == 16 && cfg.train_micro_batch_size_per_gpu == 8, "all auto");
}

/* ------------------------------------------------------------------ cross-key rules */

static void test_precision_dtypes(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
               "bf16.enabled", "both enabled");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": true}}",
               "both enabled");
    /* compute / communication / accumulation dtypes (DeepSpeed engine.get_data_types, communication_data_type) */
    static const struct {
        const char *prec;
        int stage;
        zinc_dtype compute, comm, accum;
    } m[] = {
        {"", 0, ZINC_FP32, ZINC_FP32, ZINC_FP32},
        {"", 3, ZINC_FP32, ZINC_FP32, ZINC_FP32},
        {"\"fp16\": {\"enabled\": true}", 0, ZINC_FP16, ZINC_FP16, ZINC_FP16},
        {"\"fp16\": {\"enabled\": true}", 2, ZINC_FP16, ZINC_FP16, ZINC_FP16},
        {"\"bf16\": {\"enabled\": true}", 0, ZINC_BF16, ZINC_BF16,
         ZINC_BF16}, /* bf16 without ZeRO: the model dtype (DeepSpeed 0.19.8's engine.get_data_types) */
        {"\"bf16\": {\"enabled\": true}", 1, ZINC_BF16, ZINC_BF16, ZINC_BF16},
        {"\"bf16\": {\"enabled\": true}", 3, ZINC_BF16, ZINC_BF16, ZINC_BF16},
    };
    char text[256];
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d}%s%s}", m[i].stage,
                 *m[i].prec ? ", " : "", m[i].prec);
        ZT_OK(load(text));
        ZT_CHECK(cfg.compute_dtype == m[i].compute && cfg.comm_dtype == m[i].comm && cfg.grad_accum_dtype == m[i].accum,
                 "%s: compute %d comm %d accum %d", text, cfg.compute_dtype, cfg.comm_dtype, cfg.grad_accum_dtype);
        ZT_CHECK(!cfg.comm_dtype_set && !cfg.grad_accum_dtype_set, "%s: dtypes marked set", text);
        /* explicit settings win */
        snprintf(text, sizeof text,
                 "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d}%s%s, "
                 "\"communication_data_type\": \"fp32\", \"data_types\": {\"grad_accum_dtype\": \"fp16\"}}",
                 m[i].stage, *m[i].prec ? ", " : "", m[i].prec);
        if (m[i].stage == 0 && m[i].compute != ZINC_FP16) { /* without ZeRO only the model dtype accumulates */
            ZT_CHECK(load(text) == ZINC_ERR_CONFIG && strstr(zinc_last_error(), "data_types.grad_accum_dtype") &&
                         strstr(zinc_last_error(), "NotImplementedError"),
                     "%s: accepted, or the message does not say why: %s", text, zinc_last_error());
            continue;
        }
        ZT_OK(load(text));
        ZT_CHECK(cfg.comm_dtype == ZINC_FP32 && cfg.grad_accum_dtype == ZINC_FP16 && cfg.comm_dtype_set &&
                     cfg.grad_accum_dtype_set,
                 "%s: explicit dtypes", text);
    }
    static const struct {
        const char *s;
        zinc_dtype t;
    } names[] = {{"fp32", ZINC_FP32},          {"float32", ZINC_FP32}, {"torch.float32", ZINC_FP32},
                 {"float", ZINC_FP32},         {"FP16", ZINC_FP16},    {"torch.float16", ZINC_FP16},
                 {"half", ZINC_FP16},          {"bf16", ZINC_BF16},    {"bfloat16", ZINC_BF16},
                 {"torch.bfloat16", ZINC_BF16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"communication_data_type\": \"%s\"}", names[i].s);
        ZT_OK(load(text));
        ZT_CHECK(cfg.comm_dtype == names[i].t, "%s -> %d", names[i].s, cfg.comm_dtype);
    }
    EXPECT_ERR("{\"train_batch_size\": 8, \"communication_data_type\": \"torch.int8\"}", "communication_data_type",
               "\"torch.int8\" is not a dtype", "\"fp32\", \"fp16\", \"bf16\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"communication_data_type\": \"torch.\"}", "is not a dtype");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"min_loss_scale\": 1e9, "
               "\"initial_scale_power\": 16}}",
               "fp16.min_loss_scale", "initial_scale_power");
}

static void test_overlap_adam(void) {
    char text[200];
    for (int stage = 0; stage <= 3; stage++) {
        snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d}}", stage);
        ZT_OK(load(text));
        ZT_CHECK(cfg.zero.overlap_comm == (stage == 3), "stage %d: overlap_comm %d (DeepSpeed: true only for stage 3)",
                 stage, cfg.zero.overlap_comm);
        ZT_CHECK(!zcfg_given(&cfg, "zero_optimization.overlap_comm"), "overlap_comm given");
        for (int v = 0; v < 2; v++) {
            snprintf(text, sizeof text,
                     "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d, "
                     "\"overlap_comm\": %s}}",
                     stage, v ? "true" : "false");
            ZT_OK(load(text));
            ZT_CHECK(cfg.zero.overlap_comm == v, "stage %d written %d: got %d", stage, v, cfg.zero.overlap_comm);
        }
    }
    /* effective AdamW mode: type == adamw || adam_w_mode (default true) */
    static const struct {
        const char *type, *mode;
        bool want;
    } a[] = {{"Adam", NULL, true},  {"Adam", "false", false}, {"Adam", "true", true},
             {"AdamW", NULL, true}, {"AdamW", "false", true}, {"ADAMW", "true", true}};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        if (a[i].mode)
            snprintf(text, sizeof text,
                     "{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"%s\", \"params\": "
                     "{\"adam_w_mode\": %s}}}",
                     a[i].type, a[i].mode);
        else
            snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"%s\"}}", a[i].type);
        ZT_OK(load(text));
        ZT_CHECK(cfg.optimizer.adam_w_mode == a[i].want, "%s: adam_w_mode %d", text, cfg.optimizer.adam_w_mode);
    }
    ZT_OK(load("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"weight_decay\": 0.1}}}"));
    ZT_CHECK(logged(ZINC_LOG_INFO, "decoupled", "adam_w_mode") == 1,
             "Adam + weight_decay: the AdamW surprise not logged");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"MuSGD\"}}", "optimizer.type", "\"MuSGD\"",
               "\"SGD\" or \"Muon\"", "not implemented");
    /* OneCycle cycles betas[0]; SGD has none: warned, as DeepSpeed warns, and the momentum stays the config's */
    ZT_OK(load("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"momentum\": 0.9}}, "
               "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01, "
               "\"cycle_max_mom\": 1.0}}}"));
    ZT_CHECK(logged(ZINC_LOG_WARN, "cycle_momentum", "no betas") == 1 && cfg.optimizer.momentum == 0.9,
             "SGD + OneCycle: the momentum not cycled, with one warning (and cycle_max_mom 1, which would be beta1 1, "
             "not refused)");
}

static void test_scheduler(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"total_num_steps\": "
               "10}}}",
               "scheduler.params.total_num_steps", "not a parameter of the WarmupLR schedule");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"params\": {\"warmup_min_lr\": 0.1}, \"type\": "
               "\"OneCycle\"}}",
               "scheduler.params.warmup_min_lr", "not a parameter of the OneCycle schedule");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {}}}",
               "scheduler.params.total_num_steps", "required by WarmupDecayLR");
    /* a scheduler block without params: DeepSpeed 0.19.8 calls scheduler(optimizer, **None), a TypeError */
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupDecayLR\"}}", "scheduler.params", "missing",
               "\"params\": {}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": null}}",
               "scheduler.params", "missing", "**params");
    EXPECT_OK("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {}}}");
    /* LRRangeTest, with DeepSpeed's keys and defaults */
    EXPECT_OK("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {}}}");
    ZT_CHECK(cfg.scheduler.type == ZSCHED_LR_RANGE_TEST && cfg.scheduler.lr_range_test_min_lr == 1e-3 &&
                 cfg.scheduler.lr_range_test_step_size == 2000 && cfg.scheduler.lr_range_test_step_rate == 1.0 &&
                 !cfg.scheduler.lr_range_test_staircase,
             "LRRangeTest defaults");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"LRRangeTest\", \"params\": "
               "{\"lr_range_test_step_size\": 0}}}",
               "scheduler.params.lr_range_test_step_size");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"LRRangeTest\", \"params\": "
               "{\"warmup_num_steps\": 5}}}",
               "not a parameter of the LRRangeTest schedule", "lr_range_test_min_lr");
    /* OneCycle + Adagrad: cycle_momentum off with a warning, as DeepSpeed 0.19.8 (no betas to cycle); even
     * cycle_max_mom 1, refused when it becomes a beta1, is then accepted */
    ZT_OK(
        load("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adagrad\"}, \"scheduler\": {\"type\": "
             "\"OneCycle\", \"params\": {\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01, \"cycle_max_mom\": 1.0}}}"));
    ZT_CHECK(!cfg.scheduler.cycle_momentum, "OneCycle + Adagrad: cycle_momentum stays on");
    ZT_CHECK(logged(ZINC_LOG_WARN, "cycle_momentum turned off", "Adagrad") == 1, "OneCycle + Adagrad not warned");
    ZT_OK(load(
        "{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adagrad\"}, \"scheduler\": {\"type\": "
        "\"OneCycle\", \"params\": {\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01, \"cycle_momentum\": false}}}"));
    ZT_CHECK(nwarn() == 0, "cycle_momentum false with Adagrad warned");
    ZT_OK(load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
               "0.001, \"cycle_max_lr\": 0.01}}}"));
    ZT_CHECK(cfg.scheduler.cycle_momentum && nwarn() == 0, "OneCycle + Adam keeps cycle_momentum");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": "
               "{\"total_num_steps\": "
               "\"auto\"}}}",
               "scheduler.params.total_num_steps", "nothing fills these \"auto\"", "--steps N");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
               "0.1}}}",
               "scheduler.params", "cycle_min_lr and cycle_max_lr");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {}}}",
               "cycle_min_lr and cycle_max_lr");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.1, "
               "\"cycle_max_lr\": 0.01}}}",
               "scheduler.params.cycle_min_lr", "above cycle_max_lr");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.01, "
               "\"cycle_max_lr\": 0.1, \"cycle_min_mom\": 0.95, \"cycle_max_mom\": 0.9}}}",
               "scheduler.params.cycle_min_mom", "above cycle_max_mom");
    /* parameters without a (valid) type: one clear problem about the type */
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"params\": {\"warmup_min_lr\": 0}}}", "scheduler.type",
               "\"WarmupLR\"");
    /* no type and no parameters: no scheduler, as DeepSpeed */
    EXPECT_OK("{\"train_batch_size\": 8, \"scheduler\": {}}");
    ZT_CHECK(cfg.scheduler.type == ZSCHED_NONE, "empty scheduler block");
    EXPECT_OK("{\"train_batch_size\": 8, \"scheduler\": {\"type\": null, \"params\": {}}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"Cosine\", \"params\": {\"warmup_num_steps\": 5, "
               "\"total_num_steps\": 50}}}",
               "scheduler.type", "\"Cosine\" is not one of", "\"OneCycle\"");
    zinc_status st = load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"Cosine\", \"params\": "
                          "{\"warmup_num_steps\": 5, \"total_num_steps\": 50}}}");
    ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(zinc_last_error(), "(1 problem)"),
             "a bad scheduler type is one problem, not one per parameter: %s", zinc_last_error());
    ZT_OK(
        load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"warmupdecaylr\", \"params\": {\"total_num_steps\": "
             "10, \"warmup_num_steps\": 20}}}"));
    ZT_CHECK(cfg.scheduler.type == ZSCHED_WARMUP_DECAY_LR, "case-insensitive type");
    ZT_CHECK(logged(ZINC_LOG_WARN, "total_num_steps 10", "warmup_num_steps 20") == 1, "decay-never-starts warning");
    ZT_OK(load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0.1, "
               "\"warmup_max_lr\": 0.01}}}"));
    ZT_CHECK(logged(ZINC_LOG_WARN, "warmup_min_lr", "decreases") == 1, "decreasing warmup warning");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": "
               "\"cosine\"}}}",
               "scheduler.params.warmup_type", "\"cosine\" is not one of", "\"linear\"");
    EXPECT_OK("{\"train_batch_size\": 8, \"scheduler\": null}");
    ZT_CHECK(cfg.scheduler.type == ZSCHED_NONE, "scheduler null");
}

static void test_offload(void) {
    /* below stage 3 DeepSpeed ignores offload_param: a warning, and no offload */
    EXPECT_OK(
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"cpu\"}}}");
    ZT_CHECK(cfg.zero.offload_param.device == ZOFFLOAD_NONE && logged(ZINC_LOG_WARN, "offload_param", "stage 2") == 1,
             "offload_param below stage 3 not warned and dropped");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": "
               "\"nvme\"}}}",
               "zero_optimization.offload_optimizer.nvme_path", "required when device is \"nvme\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": "
               "\"nvme\", \"nvme_path\": \"\"}}}",
               "zero_optimization.offload_param.nvme_path", "required");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 0, \"offload_optimizer\": {\"device\": "
               "\"cpu\"}}}",
               "zero_optimization.offload_optimizer.device", "stage 1, 2 or 3");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": "
               "\"cpu\", \"ratio\": 0.3}}}",
               "zero_optimization.offload_optimizer.ratio", "0.3", "partial offload");
    EXPECT_OK(
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\", "
        "\"nvme_path\": \"/tmp/zïnc\"}, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}}}");
    ZT_CHECK(!strcmp(cfg.zero.offload_param.nvme_path, "/tmp/zïnc"), "utf-8 path: %s",
             cfg.zero.offload_param.nvme_path);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": "
              "\"CPU\"}}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_CPU, "device case-insensitive");
    char *longp = malloc(6000);
    strcpy(longp,
           "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"nvme_path\": \"");
    size_t n = strlen(longp);
    memset(longp + n, 'p', 4096);
    strcpy(longp + n + 4096, "\"}}}");
    EXPECT_ERR(longp, "zero_optimization.offload_param.nvme_path", "4096 bytes", "at most 4095");
    free(longp);
}

/* The monitors' directory is output_path/job_name: job_name names a directory inside it (DeepSpeed's
 * os.path.join would drop output_path for an absolute job_name). */
static void test_monitors(void) {
    EXPECT_OK("{\"train_batch_size\": 8, \"tensorboard\": {\"enabled\": true, \"job_name\": \"a/b\"}}");
    EXPECT_OK("{\"train_batch_size\": 8, \"csv_monitor\": {\"enabled\": true, \"job_name\": \"\"}}");
    EXPECT_OK("{\"train_batch_size\": 8, \"csv_monitor\": {\"job_name\": \"x..y\"}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"tensorboard\": {\"enabled\": true, \"job_name\": \"/abs\"}}",
               "tensorboard.job_name", "\"/abs\" is an absolute path", "tensorboard.output_path");
    EXPECT_ERR("{\"train_batch_size\": 8, \"csv_monitor\": {\"job_name\": \"a/../../b\"}}", "csv_monitor.job_name",
               "contains \"..\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"csv_monitor\": {\"job_name\": \"..\"}}", "csv_monitor.job_name");
    EXPECT_ERR("{\"train_batch_size\": 8, \"tensorboard\": {\"enabled\": \"yes\"}}", "tensorboard.enabled",
               "true or false");
    EXPECT_ERR("{\"train_batch_size\": 8, \"tensorboard\": {\"output_path\": 3}}", "tensorboard.output_path",
               "expected a string");
    EXPECT_ERR("{\"train_batch_size\": 8, \"csv_monitor\": {\"enabeld\": true}}", "csv_monitor", "enabeld");
}

/* Issue 34: DeepSpeed 0.19.8's effective values where they are decided by a rule rather than a key's default
 * (tests/test_ds_parity.py compares every key with DeepSpeedConfig itself where deepspeed is installed). */
static void test_deepspeed_0198(void) {
    /* torch_adam builds torch.optim.AdamW, whose weight_decay default is 0.01; torch.optim.Adam's is 0 */
    EXPECT_OK("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}");
    ZT_CHECK(cfg.optimizer.weight_decay == 0.01, "torch_adam AdamW: weight_decay %g", cfg.optimizer.weight_decay);
    EXPECT_OK("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true, "
              "\"adam_w_mode\": false}}}");
    ZT_CHECK(cfg.optimizer.weight_decay == 0, "torch_adam Adam: weight_decay %g", cfg.optimizer.weight_decay);
    EXPECT_OK("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"torch_adam\": true, "
              "\"weight_decay\": 0.1}}}");
    ZT_CHECK(cfg.optimizer.weight_decay == 0.1, "written weight_decay %g", cfg.optimizer.weight_decay);
    EXPECT_OK("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\"}}");
    ZT_CHECK(cfg.optimizer.weight_decay == 0, "FusedAdam: weight_decay %g", cfg.optimizer.weight_decay);
    /* no optimizer block: said once, naming the key */
    EXPECT_OK("{\"train_batch_size\": 8}");
    ZT_CHECK(logged(ZINC_LOG_INFO, "no \"optimizer\" block", "Adam") == 1, "no word about the missing optimizer");
    ZT_CHECK(cfg.gradient_clipping == 1.0 && cfg.bf16_check_grad_overflow, "clipping %g check %d",
             cfg.gradient_clipping, cfg.bf16_check_grad_overflow);
    /* comms_logger: the block's presence turns it on (DeepSpeed never reads "enabled"); an explicit false is
     * honoured with a warning */
    EXPECT_OK("{\"train_batch_size\": 8, \"comms_logger\": {\"verbose\": true}}");
    ZT_CHECK(cfg.comms_logger.enabled, "comms_logger block without enabled: off");
    EXPECT_OK("{\"train_batch_size\": 8, \"comms_logger\": {\"enabled\": false}}");
    ZT_CHECK(!cfg.comms_logger.enabled && logged(ZINC_LOG_WARN, "comms_logger.enabled false", "DeepSpeed 0.19.8") == 1,
             "explicit enabled false: on %d, or no warning", cfg.comms_logger.enabled);
    EXPECT_OK("{\"train_batch_size\": 8}");
    ZT_CHECK(!cfg.comms_logger.enabled, "no block: on");
    /* offload: pin_memory true when the block is there */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": "
              "{\"device\": \"cpu\"}}}");
    ZT_CHECK(cfg.zero.offload_optimizer.pin_memory, "offload_optimizer.pin_memory default false");
    /* keys DeepSpeed takes at their defaults, and what it refuses */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"compute_grad_norm\": true, "
              "\"parameter_alignment\": false, \"stage3_allgather_sequential\": false}, \"data_types\": "
              "{\"param_dtype\": \"fp32\", \"buffer_dtype\": null, \"keep_in_fp32_modules\": \"auto\"}}");
    ZT_CHECK(nwarn() == 0, "keys at their defaults warned");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"compute_grad_norm\": false}}",
               "zero_optimization.compute_grad_norm", "not implemented", "gradient_clipping 0");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"compute_grad_norm\": false}}",
               "zero_optimization.compute_grad_norm", "only at stages 1 and 2");
    EXPECT_ERR("{\"train_batch_size\": 8, \"data_types\": {\"param_dtype\": \"bf16\"}}", "data_types.param_dtype",
               "\"bf16\" conflicts", "fp32");
    EXPECT_OK("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"data_types\": {\"param_dtype\": "
              "\"bfloat16\"}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"data_types\": {\"keep_in_fp32_modules\": null}}",
               "data_types.keep_in_fp32_modules", "null is not allowed");
    EXPECT_ERR("{\"train_batch_size\": 8, \"data_types\": {\"keep_in_fp32_modules\": [\"lm_head\"]}}",
               "data_types.keep_in_fp32_modules", "not implemented");
    EXPECT_ERR("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"data_types\": {\"grad_accum_dtype\": "
               "\"fp32\"}}",
               "data_types.grad_accum_dtype", "stage 1 or above");
}

/* ZeRO++: DeepSpeed 0.19.8's constraints (config_zeropp.c), each refused with its reason and the fix. */
static void test_zeropp(void) {
    static const char *const on[][2] = {
        {"\"zero_quantized_weights\": true", "zero_optimization.zero_quantized_weights"},
        {"\"zero_quantized_gradients\": true", "zero_optimization.zero_quantized_gradients"},
        {"\"zero_hpz_partition_size\": 2", "zero_optimization.zero_hpz_partition_size"},
    };
    char j[300];
    for (int stage = 0; stage <= 2; stage++)
        for (int i = 0; i < 3; i++) {
            snprintf(j, sizeof j, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d, %s}}", stage,
                     on[i][0]);
            char st[16];
            snprintf(st, sizeof st, "at stage %d", stage);
            EXPECT_ERR(j, on[i][1], st, "stage 3 only", "runtime/zero/stage3.py", "Set zero_optimization.stage to 3");
        }
    /* off at stage 0-2: accepted, nothing to say */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"zero_quantized_weights\": false, "
              "\"zero_quantized_gradients\": false, \"zero_hpz_partition_size\": 1}}");
    ZT_CHECK(nwarn() == 0, "ZeRO++ switched off at stage 2 warned");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"zero_hpz_partition_size\": 0}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": -1}}",
               "zero_optimization.zero_hpz_partition_size");
    /* qgZ needs reduce_scatter (stage3.py's assertion, quoted) */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"zero_quantized_gradients\": true, "
               "\"reduce_scatter\": false}}",
               "zero_optimization.zero_quantized_gradients", "reduce_scatter should also be enabled", "set it true");
    /* hpZ: min(size, world) divides the world (utils/groups.py) */
    const char *hpz3 =
        "{\"train_batch_size\": 12, \"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 3}}";
    const char *hpz2 =
        "{\"train_batch_size\": 12, \"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 2}}";
    EXPECT_ERR_W(hpz3, 4, "zero_optimization.zero_hpz_partition_size", "3 does not divide the 4 ranks",
                 "4 is not divisible by 3", "divisor");
    EXPECT_ERR_W(hpz2, 3, "zero_optimization.zero_hpz_partition_size", "3 is not divisible by 2");
    ZT_OK(load_w(hpz2, 4));
    ZT_CHECK(cfg.zero.hpz_partition_size == 2, "hpz %d", cfg.zero.hpz_partition_size);
    ZT_OK(load_w(hpz3, 3));
    ZT_OK(load_w(hpz3, 6));
    ZT_OK(load_w(hpz2, 1)); /* min(2, 1) = 1 divides 1, as DeepSpeed */
}

int main(void) {
    zt_name = "test_config_rules";
    test_deepspeed_0198();
    test_monitors();
    test_zeropp();
    test_numbers();
    test_batch_triad();
    test_precision_dtypes();
    test_overlap_adam();
    test_scheduler();
    test_offload();
    if (zt_failed) dump_log();
    return zt_finish();
}
