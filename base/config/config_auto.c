/* "auto" values, resolved the way the Hugging Face Trainer resolves them with its default
 * TrainingArguments (transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process
 * and trainer_config_finalize): configs written for the Trainer leave these to it, and under zinc nobody else
 * is there to fill them. Every value chosen this way is a WARN naming the key, the value and the flag that
 * changes it; `zinc config check` lists them under "_filled". The batch triad is filled in
 * config_resolve.c, where the written batch sizes are known. */
#include <stdio.h>
#include <string.h>

#include "base/config/config_internal.h"

#define CHOOSE "--set %s=VALUE to choose"

typedef struct {
    const char *path;
    double value;    /* a number, or the boolean (0/1) for BOOL keys */
    const char *why; /* the Trainer argument it mirrors */
} hf_rule;

/* TrainingArguments defaults: learning_rate 5e-5, adam_beta1 0.9, adam_beta2 0.999, adam_epsilon 1e-8,
 * weight_decay 0, max_grad_norm 1.0, warmup_steps 0 (warmup_ratio 0), fp16/bf16 false. */
static const hf_rule rules[] = {
    {"gradient_clipping", 1.0, "the Hugging Face Trainer's default max_grad_norm"},
    {"optimizer.params.lr", 5e-5, "the Hugging Face Trainer's default learning_rate"},
    {"optimizer.params.eps", 1e-8, "the Hugging Face Trainer's default adam_epsilon"},
    {"optimizer.params.weight_decay", 0, "the Hugging Face Trainer's default weight_decay"},
    {"scheduler.params.warmup_min_lr", 0, "the Hugging Face Trainer always fills 0"},
    {"scheduler.params.warmup_num_steps", 0, "the Hugging Face Trainer's default warmup_steps (warmup_ratio 0)"},
    {"fp16.enabled", 0, "the Hugging Face Trainer's default fp16=False"},
    {"bf16.enabled", 0, "the Hugging Face Trainer's default bf16=False"},
};

static void note_unresolved(zcfg_loader *L, const char *path, const char *flags) {
    size_t n = strlen(L->unresolved);
    snprintf(L->unresolved + n, sizeof L->unresolved - n, "%s%s (%s)", n ? "; " : "", path, flags);
}

void zcfg_fill_autos(zcfg_loader *L) {
    zinc_config *c = L->c;
    char how[400];
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (!zcfg_is_auto(L, rules[i].path)) continue;
        const zkey_key *k = zcfg_lookup(rules[i].path);
        json_t *v = k && k->kind == ZKEY_BOOL ? json_boolean(rules[i].value != 0) : json_real(rules[i].value);
        snprintf(how, sizeof how, "%s; " CHOOSE, rules[i].why, rules[i].path);
        zcfg_fill(L, rules[i].path, v, how);
    }
    if (zcfg_is_auto(L, "optimizer.params.betas")) {
        snprintf(how, sizeof how, "the Hugging Face Trainer's default adam_beta1, adam_beta2; " CHOOSE,
                 "optimizer.params.betas");
        zcfg_fill(L, "optimizer.params.betas", json_pack("[ff]", 0.9, 0.999), how);
    }
    /* The Trainer fills warmup_max_lr from the same learning_rate as the optimizer's lr. */
    if (zcfg_is_auto(L, "scheduler.params.warmup_max_lr")) {
        snprintf(how, sizeof how,
                 "the optimizer's lr, as the Hugging Face Trainer fills both from learning_rate; " CHOOSE,
                 "scheduler.params.warmup_max_lr");
        zcfg_fill(L, "scheduler.params.warmup_max_lr", json_real(c->optimizer.lr), how);
    }
    if (zcfg_is_auto(L, "scheduler.params.total_num_steps")) {
        if (L->opts->run_steps > 0) {
            snprintf(how, sizeof how, "%s, as the Hugging Face Trainer fills its num_training_steps; " CHOOSE,
                     L->opts->run_steps_from ? L->opts->run_steps_from : "the run's --steps",
                     "scheduler.params.total_num_steps");
            zcfg_fill(L, "scheduler.params.total_num_steps", json_integer((json_int_t)L->opts->run_steps), how);
        } else {
            note_unresolved(L, "scheduler.params.total_num_steps",
                            "give the run length: --steps N, zinc_options.total_steps in the API, or --set "
                            "scheduler.params.total_num_steps=N");
        }
    }
    /* OneCycle's bounds have no default anywhere: the Trainer does not fill them either. */
    static const char *const required[] = {"scheduler.params.cycle_min_lr", "scheduler.params.cycle_max_lr"};
    for (size_t i = 0; i < 2; i++)
        if (zcfg_is_auto(L, required[i]) && c->scheduler.type == ZSCHED_ONE_CYCLE) {
            snprintf(how, sizeof how, "nothing fills it; --set %s=VALUE", required[i]);
            note_unresolved(L, required[i], how);
        }
}

void zcfg_report_default_autos(zcfg_loader *L) {
    char how[1024], path[512];
    for (const char *p = L->autos; *p;) {
        if (*p == '|') {
            p++;
            continue;
        }
        const char *bar = strchr(p, '|');
        if (!bar) break;
        snprintf(path, sizeof path, "%.*s", (int)(bar - p), p);
        p = bar + 1;
        if (!zcfg_is_auto(L, path) || zcfg_had_problem(L, path) || strstr(L->unresolved, path)) continue;
        const zkey_key *k = zcfg_lookup(path);
        if (!k) continue;
        if (!strcmp(path, "zero_optimization.reduce_bucket_size") ||
            !strcmp(path, "zero_optimization.stage3_prefetch_bucket_size") ||
            !strcmp(path, "zero_optimization.stage3_param_persistence_threshold"))
            snprintf(how, sizeof how,
                     "DeepSpeed's default: the Hugging Face Trainer derives it from the model's "
                     "hidden_size, which a ds_config does not give; " CHOOSE,
                     path);
        else
            snprintf(how, sizeof how, "the default: the Hugging Face Trainer does not fill this key; " CHOOSE, path);
        zcfg_fill(L, path, NULL, how);
    }
    if (L->unresolved[0]) zcfg_problem(L, "\"auto\"", "nothing fills these \"auto\" values here: %s", L->unresolved);
}
