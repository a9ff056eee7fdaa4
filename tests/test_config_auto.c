/* Configs as people write them (issue 14): --set overrides, "auto" values filled as the Hugging Face
 * Trainer fills them with its default TrainingArguments, the "_filled" list, the one message for every
 * "auto" nothing can fill, and the same through the engine API (zinc_options.config_overrides and
 * total_steps). Table-driven; warnings are captured through the log callback. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config.h"
#include "zt.h"

static zt_logcap cap = {.echo = ZINC_LOG_OFF};
static zinc_config cfg;

static zinc_status load_opts(const char *json, int world, const char *const *sets, int64_t steps) {
    cap.n = 0;
    zlog l = {zt_logcap_fn, &cap, ZINC_LOG_DEBUG, 0};
    zcfg_load_opts o = {.sets = sets, .run_steps = steps};
    return zcfg_load_text_ex(json, "t.json", world, &o, &l, &cfg);
}

static int logged(zinc_log_level lv, const char *a, const char *b) {
    int k = 0;
    for (int i = 0; i < cap.n; i++)
        if (cap.level[i] == lv && (!a || strstr(cap.msg[i], a)) && (!b || strstr(cap.msg[i], b))) k++;
    return k;
}

static void dump_log(void) {
    for (int i = 0; i < cap.n; i++) fprintf(stderr, "  log[%d] %d: %s\n", i, cap.level[i], cap.msg[i]);
}

/* ------------------------------------------------------------------ "auto" as the Trainer fills it */

/* A typical Trainer config: every value the Trainer fills left "auto". */
static const char *hf_all_auto =
    "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", "
    "\"gradient_accumulation_steps\": \"auto\", \"gradient_clipping\": \"auto\", "
    "\"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": \"auto\"}, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\", \"eps\": \"auto\", "
    "\"weight_decay\": \"auto\"}}, "
    "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": \"auto\", \"warmup_max_lr\": "
    "\"auto\", \"warmup_num_steps\": \"auto\", \"total_num_steps\": \"auto\"}}, "
    "\"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": \"auto\", \"stage3_prefetch_bucket_size\": "
    "\"auto\", \"stage3_param_persistence_threshold\": \"auto\"}}";

typedef struct {
    const char *path;
    double want;     /* the value the Trainer's defaults give */
    const char *why; /* a word of the WARN's explanation */
} fill_row;

static const fill_row fills[] = {
    {"train_micro_batch_size_per_gpu", 8, "per_device_train_batch_size"},
    {"gradient_accumulation_steps", 1, "gradient_accumulation_steps"},
    {"train_batch_size", 16, "derived"}, /* world size 2 */
    {"gradient_clipping", 1.0, "max_grad_norm"},
    {"optimizer.params.lr", 5e-5, "learning_rate"},
    {"optimizer.params.eps", 1e-8, "adam_epsilon"},
    {"optimizer.params.weight_decay", 0, "weight_decay"},
    {"scheduler.params.warmup_min_lr", 0, "fills 0"},
    {"scheduler.params.warmup_max_lr", 5e-5, "learning_rate"},
    {"scheduler.params.warmup_num_steps", 0, "warmup_steps"},
    {"scheduler.params.total_num_steps", 300, "--steps"},
    {"fp16.enabled", 0, "fp16=False"},
    {"bf16.enabled", 0, "bf16=False"},
    {"zero_optimization.reduce_bucket_size", 5e8, "hidden_size"},
    {"zero_optimization.stage3_prefetch_bucket_size", 5e7, "hidden_size"},
    {"zero_optimization.stage3_param_persistence_threshold", 1e5, "hidden_size"},
};

static double field(const char *path) {
    const zinc_config *c = &cfg;
    if (!strcmp(path, "train_micro_batch_size_per_gpu")) return (double)c->train_micro_batch_size_per_gpu;
    if (!strcmp(path, "gradient_accumulation_steps")) return (double)c->gradient_accumulation_steps;
    if (!strcmp(path, "train_batch_size")) return (double)c->train_batch_size;
    if (!strcmp(path, "gradient_clipping")) return c->gradient_clipping;
    if (!strcmp(path, "optimizer.params.lr")) return c->optimizer.lr;
    if (!strcmp(path, "optimizer.params.eps")) return c->optimizer.eps;
    if (!strcmp(path, "optimizer.params.weight_decay")) return c->optimizer.weight_decay;
    if (!strcmp(path, "scheduler.params.warmup_min_lr")) return c->scheduler.warmup_min_lr;
    if (!strcmp(path, "scheduler.params.warmup_max_lr")) return c->scheduler.warmup_max_lr;
    if (!strcmp(path, "scheduler.params.warmup_num_steps")) return (double)c->scheduler.warmup_num_steps;
    if (!strcmp(path, "scheduler.params.total_num_steps")) return (double)c->scheduler.total_num_steps;
    if (!strcmp(path, "fp16.enabled")) return c->fp16.enabled;
    if (!strcmp(path, "bf16.enabled")) return c->bf16_enabled;
    if (!strcmp(path, "zero_optimization.reduce_bucket_size")) return (double)c->zero.reduce_bucket_size;
    if (!strcmp(path, "zero_optimization.stage3_prefetch_bucket_size")) return (double)c->zero.prefetch_bucket_size;
    if (!strcmp(path, "zero_optimization.stage3_param_persistence_threshold"))
        return (double)c->zero.param_persistence_threshold;
    return NAN;
}

static void test_hf_fills(void) {
    zinc_status st = load_opts(hf_all_auto, 2, NULL, 300);
    ZT_CHECK(st == ZINC_OK, "the Trainer config: %s", zinc_last_error());
    if (st != ZINC_OK) return;
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++) {
        const fill_row *r = &fills[i];
        ZT_CHECK(field(r->path) == r->want, "%s: got %.17g, want %.17g", r->path, field(r->path), r->want);
        char key[300];
        snprintf(key, sizeof key, "%s: \"auto\" -> ", r->path);
        ZT_CHECK(logged(ZINC_LOG_WARN, key, r->why) == 1, "%s: no one WARN naming it and \"%s\"", r->path, r->why);
        if (strcmp(r->path, "train_batch_size")) {
            char flag[300];
            snprintf(flag, sizeof flag, "--set %s=", r->path);
            ZT_CHECK(logged(ZINC_LOG_WARN, key, flag) == 1, "%s: the WARN does not name %s", r->path, flag);
        }
        ZT_CHECK(strstr(cfg.filled, r->path) != NULL, "%s: not in _filled", r->path);
    }
    ZT_CHECK(cfg.optimizer.beta1 == 0.9 && cfg.optimizer.beta2 == 0.999, "betas %g %g", cfg.optimizer.beta1,
             cfg.optimizer.beta2);
    ZT_CHECK(cfg.compute_dtype == ZINC_FP32, "fp16/bf16 auto must be off");
    /* the dump lists them under _filled with how each was chosen, and not under _defaults */
    char *s = zcfg_dump_json(&cfg);
    json_t *root = s ? json_loads(s, 0, NULL) : NULL;
    json_t *filled = json_object_get(root, "_filled");
    ZT_CHECK(json_is_object(filled) && json_object_size(filled) == sizeof fills / sizeof fills[0] + 1,
             "_filled has %zu entries", json_object_size(filled));
    ZT_CHECK(json_is_string(json_object_get(filled, "optimizer.params.lr")) &&
                 strstr(json_string_value(json_object_get(filled, "optimizer.params.lr")), "learning_rate"),
             "_filled lr");
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(root, "_defaults"), i, d)
        ZT_CHECK(!json_object_get(filled, json_string_value(d)), "%s both filled and default", json_string_value(d));
    json_decref(root);
    free(s);
    if (zt_failed) dump_log();
}

/* The batch triad: which "auto"s get the Trainer's defaults and which are derived from written sizes. */
typedef struct {
    const char *json;
    int world;
    int64_t tb, mb, ga;
} triad_row;

static const triad_row triads[] = {
    {"{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", \"gradient_accumulation_steps\": "
     "\"auto\"}", 4, 32, 8, 1},
    {"{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": \"auto\"}",
     3, 6, 2, 1},
    {"{\"train_batch_size\": \"auto\", \"gradient_accumulation_steps\": 4}", 2, 64, 8, 4},
    {"{\"train_batch_size\": \"auto\"}", 1, 8, 8, 1},
    {"{\"train_micro_batch_size_per_gpu\": \"auto\", \"gradient_accumulation_steps\": 2}", 2, 32, 8, 2},
    {"{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": \"auto\", \"gradient_accumulation_steps\": 2}", 2,
     64, 16, 2},
    {"{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": \"auto\"}", 2,
     64, 4, 8},
};

static void test_triad(void) {
    for (size_t i = 0; i < sizeof triads / sizeof triads[0]; i++) {
        const triad_row *r = &triads[i];
        zinc_status st = load_opts(r->json, r->world, NULL, 0);
        ZT_CHECK(st == ZINC_OK, "%s: %s", r->json, zinc_last_error());
        if (st != ZINC_OK) continue;
        ZT_CHECK(cfg.train_batch_size == r->tb && cfg.train_micro_batch_size_per_gpu == r->mb &&
                     cfg.gradient_accumulation_steps == r->ga,
                 "%s at world %d: %lld = %lld x %lld, want %lld = %lld x %lld", r->json, r->world,
                 (long long)cfg.train_batch_size, (long long)cfg.train_micro_batch_size_per_gpu,
                 (long long)cfg.gradient_accumulation_steps, (long long)r->tb, (long long)r->mb, (long long)r->ga);
    }
    /* a written value that contradicts: the message shows which values were derived */
    zinc_status st = load_opts("{\"train_batch_size\": 4}", 8, NULL, 0);
    ZT_ERR(st, ZINC_ERR_CONFIG, "train_micro_batch_size_per_gpu 0 (derived)");
    ZT_CHECK(!strstr(zinc_last_error(), "train_batch_size 4 (derived)"), "a written value shown as derived: %s",
             zinc_last_error());
    st = load_opts("{\"optimizer\": {\"type\": \"Adam\"}}", 1, NULL, 0);
    ZT_ERR(st, ZINC_ERR_CONFIG, "the file writes neither");
}

/* Every "auto" nothing fills: one message naming each key and the flag that fills it. */
static void test_unresolvable(void) {
    zinc_status st = load_opts(hf_all_auto, 1, NULL, 0);
    ZT_ERR(st, ZINC_ERR_CONFIG, "scheduler.params.total_num_steps (give the run length: --steps N");
    st = load_opts("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
                   "\"auto\", \"cycle_max_lr\": \"auto\"}}}",
                   1, NULL, 0);
    ZT_ERR(st, ZINC_ERR_CONFIG, "nothing fills these \"auto\" values here: scheduler.params.cycle_min_lr");
    ZT_CHECK(strstr(zinc_last_error(), "--set scheduler.params.cycle_max_lr=") != NULL, "cycle_max_lr not named: %s",
             zinc_last_error());
    ZT_CHECK(strstr(zinc_last_error(), "(1 problem)") != NULL, "not one message: %s", zinc_last_error());
    ZT_CHECK(!strstr(zinc_last_error(), ".c:"), "internal trail in a config error: %s", zinc_last_error());
    /* --set fills them */
    const char *sets[] = {"scheduler.params.cycle_min_lr=1e-5", "scheduler.params.cycle_max_lr=1e-3", NULL};
    st = load_opts("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
                   "\"auto\", \"cycle_max_lr\": \"auto\"}}}",
                   1, sets, 0);
    ZT_CHECK(st == ZINC_OK && cfg.scheduler.cycle_min_lr == 1e-5 && cfg.scheduler.cycle_max_lr == 1e-3, "%s",
             zinc_last_error());
}

/* ------------------------------------------------------------------ --set */

typedef struct {
    const char *json;
    const char *set[3];
    const char *expect; /* NULL: accepted; else a substring of the error */
    const char *log;    /* a substring of an INFO line (accepted rows) */
} set_row;

static const set_row sets[] = {
    {"{\"train_micro_batch_size_per_gpu\": \"auto\"}", {"train_micro_batch_size_per_gpu=4"}, NULL,
     "train_micro_batch_size_per_gpu = 4 (--set fills its \"auto\")"},
    {"{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"lr\": 0.001}}}", {"optimizer.params.lr=3e-4"}, NULL,
     "optimizer.params.lr = 3e-4 (--set overrides the file's 0.001)"},
    {"{\"train_batch_size\": 8}", {"zero_optimization.stage=2"}, NULL,
     "zero_optimization.stage = 2 (--set; the file does not have this key)"},
    {"{\"train_batch_size\": 8}", {"optimizer.type=AdamW"}, NULL, "optimizer.type = AdamW"},
    {"{\"train_batch_size\": 8}", {"optimizer.params.betas=[0.9,0.95]"}, NULL, "betas"},
    {"{\"train_batch_size\": 8}", {"train_batch_size=16", "train_batch_size=32"}, NULL, "the file's 16"},
    {"{\"train_batch_size\": 8}", {"bfloat16.enabled=true"}, NULL, "bfloat16.enabled = true"},
    {"{\"train_batch_size\": 8}", {"tensorboard.enabled=false"}, NULL, "tensorboard.enabled"},
    /* refused: the override is validated like the file's value, and its own syntax is checked */
    {"{\"train_batch_size\": 8}", {"zero_optimization.stage=7"}, "zero_optimization.stage: 7 is out of range", NULL},
    {"{\"train_batch_size\": 8}", {"optimizer.params.lrr=1"}, "--set optimizer.params.lrr=1: \"lrr\" is not a key", NULL},
    {"{\"train_batch_size\": 8}", {"train_batch_size"}, "expected PATH=VALUE", NULL},
    {"{\"train_batch_size\": 8}", {"=4"}, "expected PATH=VALUE", NULL},
    {"{\"train_batch_size\": 8}", {"optimizer..lr=4"}, "empty part", NULL},
    {"{\"train_batch_size\": 8}", {"train_batch_size="}, "not valid JSON (it is empty)", NULL},
    {"{\"train_batch_size\": 8}", {"optimizer.params.betas=[0.9,"}, "not valid JSON", NULL},
    {"{\"train_batch_size\": 8}", {"train_batch_size.x=1"}, "is a value, not a section", NULL},
    {"{\"train_batch_size\": 8, \"zero_optimization\": true}", {"zero_optimization.stage=2"},
     "zero_optimization is true in the config, not an object", NULL},
    {"{\"train_batch_size\": 8}", {"train_batch_size=\"auto\""}, NULL, NULL},
    /* two problems of one run, both reported */
    {"{\"train_batch_size\": 8}", {"zero_optimization.stage=9", "fp16.enabled=maybe"}, "(2 problems)", NULL},
};

static void test_sets(void) {
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        const set_row *r = &sets[i];
        const char *list[4] = {r->set[0], r->set[1], r->set[2], NULL};
        zinc_status st = load_opts(r->json, 1, list, 0);
        if (!r->expect) {
            ZT_CHECK(st == ZINC_OK, "--set %s: %s", r->set[0], zinc_last_error());
            if (r->log) ZT_CHECK(logged(ZINC_LOG_INFO, r->log, NULL) == 1, "--set %s: no INFO \"%s\"", r->set[0], r->log);
        } else {
            ZT_ERR(st, ZINC_ERR_CONFIG, r->expect);
        }
    }
    const char *l1[] = {"optimizer.params.betas=[0.9,0.95]", "zero_optimization.stage=2", NULL};
    ZT_OK(load_opts("{\"train_batch_size\": 8}", 1, l1, 0));
    ZT_CHECK(cfg.optimizer.beta2 == 0.95 && cfg.zero.stage == 2, "values not applied");
    ZT_CHECK(zcfg_given(&cfg, "zero_optimization.stage"), "an override counts as written");
    const char *l2[] = {"optimizer.type=AdamW", NULL};
    ZT_OK(load_opts("{\"train_batch_size\": 8}", 1, l2, 0));
    ZT_CHECK(cfg.optimizer.type == ZOPT_ADAMW, "a bare word is a string");
}

/* Random --set strings (pieces of real paths, dots, '=', JSON fragments): each is applied or refused with a
 * message, never a crash, and a refused one never loads. Run under the sanitizers by scripts/sanitize.sh. */
static void test_sets_random(void) {
    static const char *const keys[] = {"zero_optimization", "stage", "offload_optimizer", "device", "optimizer",
                                       "params", "betas", "lr", "train_batch_size", "scheduler", "type",
                                       "tensorboard", "enabled", "fp16", "loss_scale", "x", ""};
    static const char *const values[] = {"1", "2", "\"cpu\"", "cpu", "[0.9,0.95]", "[", "{}", "{\"a\":1}", "auto",
                                         "\"auto\"", "-1e400", "null", "true", "1e-4", "\"", "OneCycle", "",
                                         "\"\\u0000\"", "0.5"};
    const size_t nk = sizeof keys / sizeof keys[0], nv = sizeof values / sizeof values[0];
    uint64_t r = 0x9E3779B97F4A7C15ull;
#define NEXT() (r = r * 6364136223846793005ull + 1442695040888963407ull, r >> 33)
    int ok = 0, refused = 0;
    for (int it = 0; it < 5000; it++) {
        char buf[300];
        size_t n = 0;
        int depth = 1 + (int)(NEXT() % 3);
        for (int q = 0; q < depth; q++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", q ? "." : "", keys[NEXT() % nk]);
        if (NEXT() % 8) n += (size_t)snprintf(buf + n, sizeof buf - n, "=");
        snprintf(buf + n, sizeof buf - n, "%s", values[NEXT() % nv]);
        const char *list[] = {buf, NULL};
        zinc_status st = load_opts("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1}}", 1, list, 0);
        if (st == ZINC_OK) ok++;
        else {
            refused++;
            ZT_CHECK(st == ZINC_ERR_CONFIG && zinc_last_error()[0], "random --set %s -> %s", buf, zinc_status_name(st));
        }
    }
#undef NEXT
    printf("random --set: %d applied, %d refused\n", ok, refused);
    ZT_CHECK(ok > 0 && refused > 0, "random --set: %d applied, %d refused", ok, refused);
}

/* ------------------------------------------------------------------ accepted, warned, refused */

typedef struct {
    const char *json;
    const char *err;  /* NULL: accepted */
    const char *warn; /* accepted rows: a substring of a WARN line; NULL: no warning at all */
    const char *lacks; /* a substring the error must not contain */
} verdict_row;

#define TB "{\"train_batch_size\": 8, "
static const verdict_row verdicts[] = {
    /* DeepSpeed accepts these: so does zinc */
    {TB "\"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 0}}", NULL, NULL, NULL},
    {TB "\"fp16\": {\"enabled\": true, \"loss_scale\": 1024, \"min_loss_scale\": 1, \"hysteresis\": 2}}", NULL,
     "fp16.hysteresis, fp16.min_loss_scale: no effect with the static fp16.loss_scale 1024", NULL},
    {TB "\"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"cpu\"}}}", NULL,
     "offload_param: ignored at stage 2", NULL},
    {TB "\"zero_optimization\": {\"stage\": 1, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/x\"}}}",
     NULL, "ignored at stage 1", NULL},
    {TB "\"cuda_visible_devices\": \"0,1\"}", NULL, "cuda_visible_devices: unknown key, ignored", NULL},
    {TB "\"_comment\": \"tuned for 8 GPUs\"}", NULL, "_comment: unknown key, ignored", NULL},
    {TB "\"compile\": {\"deepcompile\": true}, \"dataloader_drop_last\": true}", NULL, "compile", NULL},
    {TB "\"hybrid_engine\": {\"enabled\": false}, \"torch_autocast\": {\"enabled\": false}}", NULL, NULL, NULL},
    /* near-typos stay errors; sections stay strict */
    {TB "\"gradient_clippping\": 1.0}", "did you mean \"gradient_clipping\"", NULL, NULL},
    {TB "\"zero_optimisation\": {\"stage\": 2}}", "did you mean \"zero_optimization\"", NULL, NULL},
    {TB "\"zero_optimization\": {\"stage\": 2, \"my_note\": 1}}", "zero_optimization.my_note: unknown key", NULL,
     NULL},
    /* refused optimizers: one line, their parameters are not reported */
    {TB "\"optimizer\": {\"type\": \"OneBitAdam\", \"params\": {\"lr\": 1e-3, \"freeze_step\": 400, "
     "\"cuda_aware\": false, \"comm_backend_name\": \"nccl\"}}}",
     "(1 problem)", NULL, "freeze_step"},
    {TB "\"optimizer\": {\"type\": \"ZeroOneAdam\", \"params\": {\"var_freeze_step\": 100}}}",
     "0/1 Adam compresses the gradient communication", NULL, "unknown key"},
    /* Lamb (DeepSpeed's FusedLamb): its own keys accepted, refused under the others, and Adam's mode keys refused */
    {TB "\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"lr\": 1e-3, \"weight_decay\": 0.01, "
     "\"bias_correction\": false, \"max_coeff\": 0.3, \"min_coeff\": 0.01}}}", NULL, NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"LAMB\", \"params\": {\"eps_inside_sqrt\": true, \"eps\": 1e-6}}}", NULL, NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"adam_w_mode\": true}}}",
     "optimizer.params.adam_w_mode: not a parameter of Lamb", NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"max_coeff\": 0.1, \"min_coeff\": 0.2}}}",
     "optimizer.params.min_coeff: 0.2 is above max_coeff 0.1", NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"max_coeff\": 10}}}",
     "optimizer.params.max_coeff: not a parameter of AdamW (only Lamb take it", NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"Lion\", \"params\": {\"min_coeff\": 0.1}}}",
     "optimizer.params.min_coeff: not a parameter of Lion", NULL, NULL},
    /* Lion (DeepSpeed's FusedLion / DeepSpeedCPULion): lr, betas, weight_decay; Adam's own keys refused as there */
    {TB "\"optimizer\": {\"type\": \"Lion\", \"params\": {\"lr\": 1e-4, \"betas\": [0.9, 0.99], "
     "\"weight_decay\": 0.1}}}", NULL, NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"lion\"}}", NULL, NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"Lion\", \"params\": {\"lr\": 1e-4, \"eps\": 1e-8, \"bias_correction\": true}}}",
     "optimizer.params.eps: not a parameter of Lion", NULL, NULL},
    {TB "\"optimizer\": {\"type\": \"Lion\", \"params\": {\"adam_w_mode\": false}}}",
     "optimizer.params.adam_w_mode: not a parameter of Lion", NULL, NULL},
    /* compression_training names what is switched on */
    {TB "\"compression_training\": {\"weight_quantization\": {\"shared_parameters\": {\"enabled\": true}}, "
     "\"sparse_pruning\": {\"shared_parameters\": {\"enabled\": false}}}}",
     "compression_training.weight_quantization is switched on", NULL, "sparse_pruning"},
    {TB "\"compression_training\": {\"layer_reduction\": {\"enabled\": true}, \"head_pruning\": "
     "{\"shared_parameters\": {\"enabled\": true}}}}",
     "compression_training.layer_reduction, compression_training.head_pruning are switched on", NULL, NULL},
    {TB "\"tensor_parallel\": {\"autotp_size\": 2}}", "tensor parallelism", NULL, NULL},
    /* configs that cannot learn (issue 18): key, value, range and why */
    {TB "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"eps\": 0}}}",
     "optimizer.params.eps: 0 is out of range; allowed: above 0", NULL, NULL},
    {TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4, \"cycle_max_lr\": 1e-3, "
     "\"cycle_max_mom\": 1}}}",
     "scheduler.params.cycle_max_mom: 1 is out of range with cycle_momentum; allowed: 0 to below 1", NULL, NULL},
    {TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4, \"cycle_max_lr\": 1e-3, "
     "\"cycle_max_mom\": 1, \"cycle_min_mom\": 0.9, \"cycle_momentum\": false}}}",
     NULL, NULL, NULL},
    {TB "\"fp16\": {\"enabled\": true, \"loss_scale\": 131072}}",
     "fp16.loss_scale: 131072 is out of range for a static scale; allowed: 0 (dynamic) or up to 65504", NULL, NULL},
    {TB "\"fp16\": {\"enabled\": true, \"loss_scale\": 65504}}", NULL, NULL, NULL},
    {TB "\"bf16\": {\"enabled\": true}, \"fp16\": {\"loss_scale\": 131072}}", NULL, NULL, NULL},
    {TB "\"gradient_predivide_factor\": 1e30}",
     "gradient_predivide_factor: 1e+30 is out of range; allowed: 1/65536 to 65536", NULL, NULL},
    {TB "\"gradient_predivide_factor\": 8}", NULL, NULL, NULL},
    {TB "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": "
     "\"/tmp\", \"buffer_count\": 2}}}",
     "zero_optimization.offload_optimizer.buffer_count: 2 is out of range for device \"nvme\"; allowed: at least 3",
     NULL, NULL},
    {TB "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\", \"buffer_count\": 0}}}",
     NULL, NULL, NULL},
    {TB "\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/x\"}}}",
     NULL, NULL, NULL},
    {TB "\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/x\", "
     "\"buffer_size\": 0}}}",
     "zero_optimization.offload_param.buffer_size: 0 is out of range for device \"nvme\"", NULL, NULL},
    /* every problem of a file in one run: batch sizes with key problems, no cascade from a bad key */
    {"{\"train_batch_size\": 7, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, "
     "\"fp16\": {\"enabled\": 3}}",
     "(2 problems)", NULL, NULL},
    {"{\"train_batch_size\": -1, \"fp16\": {\"enabled\": true}}", "(1 problem)", NULL, "neither"},
};

/* Today's DeepSpeed semantics that the loader resolves (release 0.19.6). */
static void test_semantics(void) {
    /* WarmupLR without warmup_max_lr: the optimizer's lr (DeepSpeed >= 0.17.2); WarmupDecayLR keeps 0.001 */
    ZT_OK(load_opts(TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}, \"scheduler\": "
                    "{\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10}}}",
                    1, NULL, 0));
    ZT_CHECK(cfg.scheduler.warmup_max_lr == 3e-4, "WarmupLR max lr %g", cfg.scheduler.warmup_max_lr);
    ZT_OK(load_opts(TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}, \"scheduler\": "
                    "{\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 100}}}",
                    1, NULL, 0));
    ZT_CHECK(cfg.scheduler.warmup_max_lr == 1e-3, "WarmupDecayLR max lr %g", cfg.scheduler.warmup_max_lr);
    ZT_OK(load_opts(TB "\"optimizer\": {\"params\": {\"lr\": 3e-4}}, \"scheduler\": {\"type\": \"WarmupLR\", "
                    "\"params\": {\"warmup_max_lr\": 0.01}}}",
                    1, NULL, 0));
    ZT_CHECK(cfg.scheduler.warmup_max_lr == 0.01, "written WarmupLR max lr %g", cfg.scheduler.warmup_max_lr);
    /* OneCycle: an explicit cycle_second_stair_count -1 is no stairs; left out, as many as the first half */
    const char *oc = TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4, "
                        "\"cycle_max_lr\": 1e-3, \"cycle_first_stair_count\": 4%s}}}";
    char j[600];
    snprintf(j, sizeof j, oc, ", \"cycle_second_stair_count\": -1");
    ZT_OK(load_opts(j, 1, NULL, 0));
    ZT_CHECK(cfg.scheduler.cycle_second_stair_count == 0, "explicit -1 -> %lld",
             (long long)cfg.scheduler.cycle_second_stair_count);
    snprintf(j, sizeof j, oc, "");
    ZT_OK(load_opts(j, 1, NULL, 0));
    ZT_CHECK(cfg.scheduler.cycle_second_stair_count == 4, "left out -> %lld (same as the first)",
             (long long)cfg.scheduler.cycle_second_stair_count);
}

static void test_verdicts(void) {
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
        const verdict_row *r = &verdicts[i];
        zinc_status st = load_opts(r->json, 1, NULL, 0);
        if (!r->err) {
            ZT_CHECK(st == ZINC_OK, "%s: %s", r->json, zinc_last_error());
            if (r->warn) ZT_CHECK(logged(ZINC_LOG_WARN, r->warn, NULL) == 1, "%s: no WARN \"%s\"", r->json, r->warn);
            else ZT_CHECK(logged(ZINC_LOG_WARN, NULL, NULL) == 0, "%s: unexpected warning", r->json);
            if (zt_failed) dump_log();
        } else {
            ZT_ERR(st, ZINC_ERR_CONFIG, r->err);
            if (r->lacks)
                ZT_CHECK(!strstr(zinc_last_error(), r->lacks), "%s: the error has \"%s\": %s", r->json, r->lacks,
                         zinc_last_error());
            ZT_CHECK(!strstr(zinc_last_error(), ".c:"), "internal trail: %s", zinc_last_error());
        }
    }
}

/* ------------------------------------------------------------------ the engine API */

#ifndef ZT_LOADER_ONLY
static void test_engine_api(void) {
    const char *overrides[] = {"train_micro_batch_size_per_gpu=2", "optimizer.params.lr=0.01", NULL};
    zinc_options o = zinc_default_options();
    o.config_json = hf_all_auto;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &cap;
    o.device = ZINC_DEVICE_CPU;
    cap.n = 0;
    zinc_engine *e = NULL;
    /* the run length is not known: one error naming it */
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_CONFIG, "zinc_options.total_steps");
    o.config_overrides = overrides;
    o.total_steps = 40;
    ZT_OK(zinc_create(&o, &e));
    if (e) {
        ZT_CHECK(zinc_train_batch_size(e) == 2 * zinc_world_size(e), "batch %lld", (long long)zinc_train_batch_size(e));
        ZT_CHECK(logged(ZINC_LOG_INFO, "optimizer.params.lr = 0.01 (--set fills its \"auto\")", NULL) == 1,
                 "override not logged");
        ZT_CHECK(logged(ZINC_LOG_WARN, "scheduler.params.total_num_steps: \"auto\" -> 40", NULL) == 1,
                 "total_steps not used");
        zinc_destroy(e);
    }
    o.total_steps = -1;
    ZT_ERR(zinc_create(&o, &e), ZINC_ERR_INVALID_ARG, "total_steps is -1");
}

#endif

int main(void) {
    zt_name = "test_config_auto";
    test_hf_fills();
    test_triad();
    test_unresolvable();
    test_sets();
    test_sets_random();
    test_verdicts();
    test_semantics();
#ifndef ZT_LOADER_ONLY /* defined when the loader alone is built under sanitizers, without the engine */
    test_engine_api();
#endif
    return zt_finish();
}
