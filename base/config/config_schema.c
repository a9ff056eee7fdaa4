/* The ds_config schema tables (see config_schema.h). Ranges are zinc's: DeepSpeed validates only the
 * zero_optimization block, and a value it would accept but that cannot work is refused here with the
 * range instead. */
#include "base/config/config_schema.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

#define F(field) offsetof(zinc_config, field)
#define IMPL "implemented"
#define BIG ((double)INT64_MAX)

#define BOOL(n, fld, m)                                                                                                \
    { .name = n, .kind = ZKEY_BOOL, .off = F(fld), .meaning = m, .status = IMPL }
#define INT(n, fld, a, b, m)                                                                                           \
    { .name = n, .kind = ZKEY_INT, .off = F(fld), .lo = a, .hi = b, .meaning = m, .status = IMPL }
#define I64(n, fld, a, b, m)                                                                                           \
    { .name = n, .kind = ZKEY_I64, .off = F(fld), .lo = a, .hi = b, .meaning = m, .status = IMPL }
#define SIZE(n, fld, a, b, m)                                                                                          \
    { .name = n, .kind = ZKEY_SIZE, .off = F(fld), .lo = a, .hi = b, .meaning = m, .status = IMPL }
#define DBL(n, fld, a, b, m)                                                                                           \
    { .name = n, .kind = ZKEY_F64, .off = F(fld), .lo = a, .hi = b, .meaning = m, .status = IMPL }
#define ENUM(n, fld, nm, m)                                                                                            \
    { .name = n, .kind = ZKEY_ENUM, .off = F(fld), .names = nm, .meaning = m, .status = IMPL }
#define STR(n, fld, m)                                                                                                 \
    { .name = n, .kind = ZKEY_STR, .off = F(fld), .meaning = m, .status = IMPL }
#define OBJ(n, tbl, m)                                                                                                 \
    { .name = n, .kind = ZKEY_OBJECT, .sub = &tbl, .meaning = m, .status = IMPL }
#define ALIAS(n, t)                                                                                                    \
    { .name = n, .kind = ZKEY_ALIAS, .target = t, .status = IMPL }
#define DEPR(n, t)                                                                                                     \
    { .name = n, .kind = ZKEY_ALIAS, .target = t, .deprecated = 1, .status = IMPL }
#define LEGACY(n, t)                                                                                                   \
    { .name = n, .kind = ZKEY_LEGACY, .target = t, .status = IMPL }
#define IGNORED(n, why)                                                                                                \
    { .name = n, .kind = ZKEY_IGNORED, .status = why }
#define REFUSED(n, why)                                                                                                \
    { .name = n, .kind = ZKEY_REFUSED, .status = why }
#define TABLE(var, p, arr) const zkey_table var = {p, arr, sizeof arr / sizeof arr[0]}

const char *const zkey_optimizer_names[] = {"Adam", "AdamW", "Lion", "Lamb", "Adagrad", "SGD", "Muon", NULL};
const char *const zkey_scheduler_names[] = {"none",        "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle",
                                            "LRRangeTest", NULL};
static const char *const ns_method_names[] = {"gram", "standard", NULL};
static const char *const warmup_names[] = {"log", "linear", NULL};
static const char *const offload_names[] = {"none", "cpu", "nvme", NULL};
static const char *const tag_names[] = {"Warn", "Ignore", "Fail", NULL};
static const char *const writer_type_names[] = {"FAST", "PYTHON", "MOCK", NULL};
static const char *const writer_dp_names[] = {"none", "REPLICA", "SOCKET", "MACHINE", NULL};
static const char *const ckpt_busy_names[] = {"wait", "skip", NULL};
static const char *const device_names[] = {"auto", "cpu", "cuda", NULL};
const char *const zkey_comm_op_names[] = {"all_reduce",        "reduce_scatter",    "all_gather",
                                          "all_gather_object", "broadcast",         "barrier",
                                          "send_recv",         "all_to_all_single", NULL};

/* ------------------------------------------------------------------ optimizer */
/* Which optimizer takes which parameter is stated here once (the key's mask: the optimizer types
 * (1 << type) that take it, 0 = all): the loader refuses a key its optimizer does not take, as DeepSpeed's
 * constructors raise a TypeError on it, and the dump leaves it out. */
#define O_ADAM ((1u << ZOPT_ADAM) | (1u << ZOPT_ADAMW))
#define O_LION (1u << ZOPT_LION)
#define O_LAMB (1u << ZOPT_LAMB)
#define O_ADAGRAD (1u << ZOPT_ADAGRAD)
#define O_SGD (1u << ZOPT_SGD)
#define O_MUON (1u << ZOPT_MUON)
static const zkey_key optimizer_params_keys[] = {
    DBL("lr", optimizer.lr, 0, 1e3, "learning rate (the schedulers' WarmupCosineLR scales it)"),
    {.name = "betas",
     .kind = ZKEY_BETAS,
     .off = F(optimizer.beta1),
     .lo = 0,
     .hi = 1 - DBL_EPSILON,
     .optimizers = O_ADAM | O_LION | O_LAMB | O_MUON,
     .meaning = "[beta1, beta2], each in [0, 1) (Muon: its AdamW half's)",
     .status = IMPL},
    {.name = "eps",
     .kind = ZKEY_F64,
     .off = F(optimizer.eps),
     .lo = 0,
     .hi = 1,
     .optimizers = O_ADAM | O_LAMB | O_ADAGRAD | O_MUON,
     .meaning = "added after the (bias-corrected) square root (Muon: its AdamW half's)",
     .status = IMPL},
    DBL("weight_decay", optimizer.weight_decay, 0, 1e3, "decoupled (AdamW mode, Lion) or L2 (Adam mode, SGD)"),
    {.name = "bias_correction",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.bias_correction),
     .optimizers = O_ADAM | O_LAMB,
     .meaning = "divide the moments by 1 - beta^t",
     .status = IMPL},
    {.name = "adam_w_mode",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.adam_w_mode),
     .optimizers = O_ADAM | O_MUON,
     .meaning = "decoupled weight decay; DeepSpeed's default true makes \"Adam\" behave as AdamW (Muon: its Adam half)",
     .status = IMPL},
    {.name = "torch_adam",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.torch_adam),
     .optimizers = O_ADAM,
     .meaning = "accepted: zinc's kernels compute torch's Adam math",
     .status = IMPL},
    {.name = "max_coeff",
     .kind = ZKEY_F64,
     .off = F(optimizer.max_coeff),
     .lo = 0,
     .hi = 1e6,
     .optimizers = O_LAMB,
     .meaning = "Lamb: upper clamp of the trust ratio ||p|| / ||u||",
     .status = IMPL},
    {.name = "min_coeff",
     .kind = ZKEY_F64,
     .off = F(optimizer.min_coeff),
     .lo = 0,
     .hi = 1e6,
     .optimizers = O_LAMB,
     .meaning = "Lamb: lower clamp of the trust ratio ||p|| / ||u||",
     .status = IMPL},
    {.name = "eps_inside_sqrt",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.eps_inside_sqrt),
     .optimizers = O_LAMB,
     .meaning = "Lamb: sqrt(v + eps) instead of sqrt(v) + eps",
     .status = IMPL},
    {.name = "momentum",
     .kind = ZKEY_F64,
     .off = F(optimizer.momentum),
     .lo = 0,
     .hi = 1,
     .optimizers = O_SGD | O_MUON,
     .meaning = "SGD: momentum factor mu (buf = mu * buf + (1 - dampening) * g; 0: no momentum buffer used); Muon: "
                "its half's momentum beta (buf = lerp(buf, g, 1 - beta), Nesterov)",
     .status = IMPL},
    {.name = "dampening",
     .kind = ZKEY_F64,
     .off = F(optimizer.dampening),
     .lo = 0,
     .hi = 1,
     .optimizers = O_SGD,
     .meaning = "SGD: dampening tau of the momentum (not applied at the first step, as torch.optim.SGD)",
     .status = IMPL},
    {.name = "nesterov",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.nesterov),
     .optimizers = O_SGD,
     .meaning = "SGD: Nesterov momentum (g + mu * buf); needs momentum > 0 and dampening 0",
     .status = IMPL},
    {.name = "maximize",
     .kind = ZKEY_BOOL,
     .off = F(optimizer.maximize),
     .optimizers = O_SGD,
     .meaning = "SGD: ascend the objective (the gradient negated)",
     .status = IMPL},
    {.name = "muon_lr",
     .kind = ZKEY_F64,
     .off = F(optimizer.muon_lr),
     .lo = 0,
     .hi = 1e3,
     .optimizers = O_MUON,
     .meaning = "Muon: the lr of the Muon half (unset: lr where given, else 0.02)",
     .status = IMPL},
    {.name = "adam_lr",
     .kind = ZKEY_F64,
     .off = F(optimizer.adam_lr),
     .lo = 0,
     .hi = 1e3,
     .optimizers = O_MUON,
     .meaning = "Muon: the lr of the AdamW half (unset: lr where given, else 3e-4)",
     .status = IMPL},
    {.name = "ns_method",
     .kind = ZKEY_ENUM,
     .off = F(optimizer.ns_method),
     .names = ns_method_names,
     .optimizers = O_MUON,
     .meaning = "Muon: Newton-Schulz method, gram or standard (the same iteration in exact arithmetic; zinc runs "
                "both in fp32 with double accumulation)",
     .status = IMPL},
    REFUSED("amsgrad", "not implemented: DeepSpeed's FusedAdam refuses amsgrad too"),
    REFUSED("max_grad_norm", "not an optimizer parameter: use the top-level gradient_clipping"),
};
/* An optimizer's own defaults where its DeepSpeed class differs from Adam's (zcfg_defaults): applied to
 * the keys the file does not give. */
const zkey_optimizer_default zkey_optimizer_defaults[] = {
    {ZOPT_ADAGRAD, "lr", 1e-2}, /* DeepSpeedCPUAdagrad(lr=1e-2, eps=1e-10) */
    {ZOPT_ADAGRAD, "eps", 1e-10},
    {ZOPT_MUON, "momentum", 0.95}, /* MuonWithAuxAdam: momentum 0.95, Adam half betas (0.9, 0.95), eps 1e-10 */
    {ZOPT_MUON, "eps", 1e-10},
    {ZOPT_COUNT, NULL, 0},
};
TABLE(zkey_optimizer_params, "optimizer.params", optimizer_params_keys);
bool zkey_optimizer_takes(zcfg_optimizer_type type, const zkey_key *k) {
    return !k->optimizers || (k->optimizers & (1u << type));
}

static const zkey_key optimizer_keys[] = {
    ENUM("type", optimizer.type, zkey_optimizer_names,
         "Adam, AdamW, Lion, Lamb, Adagrad, SGD or Muon (case-insensitive)"),
    OBJ("params", zkey_optimizer_params, "the optimizer's parameters"),
};
static TABLE(optimizer_tbl, "optimizer", optimizer_keys);

/* ------------------------------------------------------------------ scheduler */
#define S_WLR (1u << ZSCHED_WARMUP_LR)
#define S_WDL (1u << ZSCHED_WARMUP_DECAY_LR)
#define S_WCL (1u << ZSCHED_WARMUP_COSINE_LR)
#define S_OC (1u << ZSCHED_ONE_CYCLE)
#define S_LRT (1u << ZSCHED_LR_RANGE_TEST)
static const zkey_key scheduler_params_keys[] = {
    {.name = "warmup_min_lr",
     .kind = ZKEY_F64,
     .off = F(scheduler.warmup_min_lr),
     .lo = 0,
     .hi = 1e3,
     .mask = S_WLR | S_WDL,
     .meaning = "lr at step 0 of the warmup",
     .status = IMPL},
    {.name = "warmup_max_lr",
     .kind = ZKEY_F64,
     .off = F(scheduler.warmup_max_lr),
     .lo = 0,
     .hi = 1e3,
     .mask = S_WLR | S_WDL,
     .meaning = "lr at the end of the warmup",
     .status = IMPL},
    {.name = "warmup_num_steps",
     .kind = ZKEY_I64,
     .off = F(scheduler.warmup_num_steps),
     .lo = 0,
     .hi = BIG,
     .mask = S_WLR | S_WDL | S_WCL,
     .meaning = "warmup length in optimizer steps",
     .status = IMPL},
    {.name = "warmup_type",
     .kind = ZKEY_ENUM,
     .off = F(scheduler.warmup_type),
     .names = warmup_names,
     .mask = S_WLR | S_WDL | S_WCL,
     .meaning = "log or linear warmup",
     .status = IMPL},
    {.name = "total_num_steps",
     .kind = ZKEY_I64,
     .off = F(scheduler.total_num_steps),
     .lo = 1,
     .hi = BIG,
     .mask = S_WDL | S_WCL,
     .meaning = "steps at which the decay reaches its end (required)",
     .status = IMPL},
    {.name = "warmup_min_ratio",
     .kind = ZKEY_F64,
     .off = F(scheduler.warmup_min_ratio),
     .lo = 0,
     .hi = 1,
     .mask = S_WCL,
     .meaning = "lr ratio at step 0 of the warmup",
     .status = IMPL},
    {.name = "cos_min_ratio",
     .kind = ZKEY_F64,
     .off = F(scheduler.cos_min_ratio),
     .lo = 0,
     .hi = 1,
     .mask = S_WCL,
     .meaning = "lr ratio at the end of the cosine",
     .status = IMPL},
    {.name = "cycle_min_lr",
     .kind = ZKEY_F64,
     .off = F(scheduler.cycle_min_lr),
     .lo = 0,
     .hi = 1e3,
     .mask = S_OC,
     .meaning = "lowest lr of the cycle (required)",
     .status = IMPL},
    {.name = "cycle_max_lr",
     .kind = ZKEY_F64,
     .off = F(scheduler.cycle_max_lr),
     .lo = 0,
     .hi = 1e3,
     .mask = S_OC,
     .meaning = "highest lr of the cycle (required)",
     .status = IMPL},
    {.name = "decay_lr_rate",
     .kind = ZKEY_F64,
     .off = F(scheduler.decay_lr_rate),
     .lo = 0,
     .hi = 1e3,
     .mask = S_OC,
     .meaning = "lr decay rate after the cycle",
     .status = IMPL},
    {.name = "cycle_first_step_size",
     .kind = ZKEY_I64,
     .off = F(scheduler.cycle_first_step_size),
     .lo = 1,
     .hi = BIG,
     .mask = S_OC,
     .meaning = "steps of the rising half",
     .status = IMPL},
    {.name = "cycle_second_step_size",
     .kind = ZKEY_I64,
     .off = F(scheduler.cycle_second_step_size),
     .lo = -1,
     .hi = BIG,
     .mask = S_OC,
     .meaning = "steps of the falling half (-1: same as the first)",
     .status = IMPL},
    {.name = "cycle_first_stair_count",
     .kind = ZKEY_I64,
     .off = F(scheduler.cycle_first_stair_count),
     .lo = 0,
     .hi = BIG,
     .mask = S_OC,
     .meaning = "stairs in the rising half (0: smooth)",
     .status = IMPL},
    {.name = "cycle_second_stair_count",
     .kind = ZKEY_I64,
     .off = F(scheduler.cycle_second_stair_count),
     .lo = -1,
     .hi = BIG,
     .mask = S_OC,
     .meaning = "stairs in the falling half (-1: as the first)",
     .status = IMPL},
    {.name = "decay_step_size",
     .kind = ZKEY_I64,
     .off = F(scheduler.decay_step_size),
     .lo = 0,
     .hi = BIG,
     .mask = S_OC,
     .meaning = "steps per decay interval after the cycle (0: no decay)",
     .status = IMPL},
    {.name = "cycle_momentum",
     .kind = ZKEY_BOOL,
     .off = F(scheduler.cycle_momentum),
     .mask = S_OC,
     .meaning = "cycle beta1 inversely to the lr; beta2 is then 0.99, as DeepSpeed sets it (off with a warning for "
                "Adagrad, which has no betas)",
     .status = IMPL},
    {.name = "cycle_min_mom",
     .kind = ZKEY_F64,
     .off = F(scheduler.cycle_min_mom),
     .lo = 0,
     .hi = 1,
     .mask = S_OC,
     .meaning = "lowest beta1 of the cycle",
     .status = IMPL},
    {.name = "cycle_max_mom",
     .kind = ZKEY_F64,
     .off = F(scheduler.cycle_max_mom),
     .lo = 0,
     .hi = 1,
     .mask = S_OC,
     .meaning = "highest beta1 of the cycle",
     .status = IMPL},
    {.name = "decay_mom_rate",
     .kind = ZKEY_F64,
     .off = F(scheduler.decay_mom_rate),
     .lo = 0,
     .hi = 1e3,
     .mask = S_OC,
     .meaning = "momentum decay rate after the cycle",
     .status = IMPL},
    {.name = "lr_range_test_min_lr",
     .kind = ZKEY_F64,
     .off = F(scheduler.lr_range_test_min_lr),
     .lo = 0,
     .hi = 1e3,
     .mask = S_LRT,
     .meaning = "lr of the first step of the range test",
     .status = IMPL},
    {.name = "lr_range_test_step_size",
     .kind = ZKEY_I64,
     .off = F(scheduler.lr_range_test_step_size),
     .lo = 1,
     .hi = BIG,
     .mask = S_LRT,
     .meaning = "steps per increase of the lr",
     .status = IMPL},
    {.name = "lr_range_test_step_rate",
     .kind = ZKEY_F64,
     .off = F(scheduler.lr_range_test_step_rate),
     .lo = 0,
     .hi = 1e6,
     .mask = S_LRT,
     .meaning = "lr = min_lr * (1 + step_rate * steps / step_size)",
     .status = IMPL},
    {.name = "lr_range_test_staircase",
     .kind = ZKEY_BOOL,
     .off = F(scheduler.lr_range_test_staircase),
     .mask = S_LRT,
     .meaning = "raise the lr in stairs of step_size steps instead of continuously",
     .status = IMPL},
    {.name = "last_batch_iteration",
     .kind = ZKEY_IGNORED,
     .mask = S_WLR | S_WDL | S_WCL | S_OC | S_LRT,
     .status = "ignored: zinc restores the schedule position from its checkpoint"},
};
static TABLE(scheduler_params, "scheduler.params", scheduler_params_keys);

static const zkey_key scheduler_keys[] = {
    ENUM("type", scheduler.type, zkey_scheduler_names,
         "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest"),
    OBJ("params", scheduler_params, "the schedule's parameters"),
};
static TABLE(scheduler_tbl, "scheduler", scheduler_keys);

/* ------------------------------------------------------------------ fp16 / bf16 */
static const zkey_key fp16_keys[] = {
    BOOL("enabled", fp16.enabled, "fp16 parameters and gradients, fp32 master weights"),
    BOOL("auto_cast", fp16.auto_cast, "accepted; zinc does not cast model inputs (the model owns its math)"),
    DBL("loss_scale", fp16.loss_scale, 0, 1e38, "0: dynamic loss scaling; otherwise a static scale"),
    INT("initial_scale_power", fp16.initial_scale_power, 0, 62, "the dynamic scale starts at 2^this"),
    I64("loss_scale_window", fp16.loss_scale_window, 1, BIG, "clean steps before the scale doubles"),
    INT("hysteresis", fp16.hysteresis, 1, 1 << 30, "overflows tolerated before the scale halves"),
    BOOL("consecutive_hysteresis", fp16.consecutive_hysteresis, "refill hysteresis on every clean step"),
    DBL("min_loss_scale", fp16.min_loss_scale, 0, 1e38,
        "the scale never goes below this: a whole number, at least 1 with dynamic scaling (as DeepSpeed 0.19.8)"),
    REFUSED("fp16_master_weights_and_grads", "not implemented: zinc always keeps fp32 master weights"),
};
static TABLE(fp16_tbl, "fp16", fp16_keys);

static const zkey_key bf16_keys[] = {
    BOOL("enabled", bf16_enabled, "bf16 parameters and gradients, fp32 master weights, no loss scaling"),
    BOOL("immediate_grad_update", bf16_immediate_grad_update,
         "accepted; zinc accumulates into the reduced gradient as soon as a bucket is reduced"),
    BOOL("check_grad_overflow", bf16_check_grad_overflow,
         "skip a step whose gradients are not finite, as fp16 does (stages 0 and 3 always do, as DeepSpeed's); "
         "false at stages 1-2 stops the run instead"),
    REFUSED("bf16_master_weights_and_grads", "not implemented: zinc always keeps fp32 master weights and gradients"),
    REFUSED("bf16_optimizer_states", "not implemented: zinc keeps the optimizer state in fp32"),
};
static TABLE(bf16_tbl, "bf16", bf16_keys);

/* ------------------------------------------------------------------ zero_optimization */
static const zkey_key offload_opt_keys[] = {
    ENUM("device", zero.offload_optimizer.device, offload_names, "none, cpu or nvme"),
    STR("nvme_path", zero.offload_optimizer.nvme_path, "directory for the NVMe swap files (device nvme)"),
    INT("buffer_count", zero.offload_optimizer.buffer_count, 0, 1 << 20, "swap buffers for the NVMe pipeline"),
    BOOL("pin_memory", zero.offload_optimizer.pin_memory, "page-locked host memory for the offloaded state"),
    BOOL("pipeline_read", zero.offload_optimizer.pipeline_read, "overlap NVMe reads with the update"),
    BOOL("pipeline_write", zero.offload_optimizer.pipeline_write, "overlap NVMe writes with the update"),
    BOOL("fast_init", zero.offload_optimizer.fast_init, "accepted; zinc initialises swap files lazily"),
    DBL("ratio", zero.offload_optimizer.ratio, 0, 1, "fraction of the state offloaded (stage 3)"),
    IGNORED("super_offload", "ignored: zinc's CPU update is its own offload path (the same Adam math)"),
    IGNORED("cpuadam_cores_perc", "ignored: zinc sizes its CPU threads with --threads / cpu_threads"),
};
static TABLE(offload_opt_tbl, "zero_optimization.offload_optimizer", offload_opt_keys);

static const zkey_key offload_param_keys[] = {
    ENUM("device", zero.offload_param.device, offload_names, "none, cpu or nvme (stage 3 only)"),
    STR("nvme_path", zero.offload_param.nvme_path, "directory for the NVMe swap files (device nvme)"),
    INT("buffer_count", zero.offload_param.buffer_count, 0, 1 << 20, "parameter swap buffers"),
    SIZE("buffer_size", zero.offload_param.buffer_size, 0, BIG, "elements per parameter swap buffer"),
    SIZE("max_in_cpu", zero.offload_param.max_in_cpu, 0, BIG, "parameter elements kept in host memory"),
    BOOL("pin_memory", zero.offload_param.pin_memory, "page-locked host memory for offloaded parameters"),
};
static TABLE(offload_param_tbl, "zero_optimization.offload_param", offload_param_keys);

static const zkey_key zero_keys[] = {
    INT("stage", zero.stage, 0, 3, "0: data parallel; 1: shard optimizer state; 2: + gradients; 3: + parameters"),
    BOOL("contiguous_gradients", zero.contiguous_gradients, "accepted; zinc's gradient shard is always contiguous"),
    BOOL("overlap_comm", zero.overlap_comm, "non-blocking reductions overlapping backward (default: stage 3 only)"),
    BOOL("reduce_scatter", zero.reduce_scatter, "accepted; zinc always reduce-scatters in stages 1-3"),
    SIZE("reduce_bucket_size", zero.reduce_bucket_size, 0, BIG, "elements per gradient reduction bucket"),
    SIZE("allgather_bucket_size", zero.allgather_bucket_size, 0, BIG,
         "accepted; zinc all-gathers the flat buffer in place in one call"),
    BOOL("allgather_partitions", zero.allgather_partitions, "accepted (DeepSpeed parses it and never reads it)"),
    OBJ("offload_optimizer", offload_opt_tbl, "optimizer state in host memory or on NVMe"),
    OBJ("offload_param", offload_param_tbl, "stage-3 parameter shards in host memory or on NVMe"),
    SIZE("sub_group_size", zero.sub_group_size, 0, BIG,
         "elements per optimizer update chunk (offload); 0: the smallest chunks, as DeepSpeed's one parameter per "
         "group"),
    SIZE("stage3_prefetch_bucket_size", zero.prefetch_bucket_size, 0, BIG, "elements prefetched ahead (stage 3)"),
    SIZE("stage3_param_persistence_threshold", zero.param_persistence_threshold, 0, BIG,
         "modules with fewer elements stay gathered (stage 3)"),
    SIZE("stage3_model_persistence_threshold", zero.model_persistence_threshold, 0, BIG,
         "cap on the total persistent elements (stage 3)"),
    SIZE("stage3_max_live_parameters", zero.max_live_parameters, 0, BIG, "cap on gathered elements (stage 3)"),
    SIZE("stage3_max_reuse_distance", zero.max_reuse_distance, 0, BIG,
         "keep a module gathered if it is reused within this many elements (stage 3)"),
    BOOL("stage3_gather_16bit_weights_on_model_save", zero.gather_16bit_weights_on_model_save,
         "accepted; zinc checkpoints are resharded on load and exported with zinc checkpoint export"),
    BOOL("round_robin_gradients", zero.round_robin_gradients, "accepted; zinc's reduce-scatter already balances"),
    BOOL("ignore_unused_parameters", zero.ignore_unused_parameters, "a parameter without a gradient reduces as zero"),
    BOOL("load_from_fp32_weights", zero.load_from_fp32_weights, "accepted; zinc always loads fp32 master weights"),
    BOOL("compute_grad_norm", zero.compute_grad_norm,
         "true: the global gradient norm is computed each step (false is refused: zinc's one statistics pass "
         "finds the norm and the non-finite gradients together)"),
    IGNORED("parameter_alignment", "ignored: zinc's flat buffers align each rank's shard, and a CPU run has no "
                                   "16-byte copy requirement"),
    IGNORED("stage3_allgather_sequential", "ignored: zinc all-gathers each module's parameters in one call"),
    ALIAS("prefetch_bucket_size", "stage3_prefetch_bucket_size"),
    ALIAS("param_persistence_threshold", "stage3_param_persistence_threshold"),
    ALIAS("model_persistence_threshold", "stage3_model_persistence_threshold"),
    ALIAS("max_live_parameters", "stage3_max_live_parameters"),
    ALIAS("max_reuse_distance", "stage3_max_reuse_distance"),
    ALIAS("gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"),
    DEPR("stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"),
    LEGACY("cpu_offload", "offload_optimizer"),
    LEGACY("cpu_offload_param", "offload_param"),
    LEGACY("cpu_offload_use_pin_memory", "offload_optimizer.pin_memory and offload_param.pin_memory"),
    IGNORED("use_multi_rank_bucket_allreduce", "ignored: zinc reduce-scatters"),
    IGNORED("stage3_module_granularity_threshold", "ignored: zinc gathers per registered module"),
    IGNORED("stage3_use_all_reduce_for_fetch_params", "ignored: zinc gathers with all-gather"),
    IGNORED("memory_efficient_linear", "ignored: a PyTorch autograd detail"),
    IGNORED("override_module_apply", "ignored: a PyTorch module detail"),
    IGNORED("log_trace_cache_warnings", "ignored"),
    IGNORED("elastic_checkpoint", "ignored: no longer supported by DeepSpeed either"),
    IGNORED("pipeline_loading_checkpoint", "ignored"),
    IGNORED("mics_hierarchical_params_gather", "ignored: zinc does not implement MiCS"),
    BOOL("zero_quantized_weights", zero.quantized_weights,
         "ZeRO++ qwZ: stage-3 all-gathers send INT8 blocks and fp32 scales (stage 3 only)"),
    BOOL("zero_quantized_nontrainable_weights", zero.quantized_nontrainable_weights,
         "accepted; no effect: every zinc parameter trains, so none is stored quantized"),
    BOOL("zero_quantized_gradients", zero.quantized_gradients,
         "ZeRO++ qgZ: INT4 all-to-all gradient reduction (stage 3, reduce_scatter true)"),
    INT("zero_hpz_partition_size", zero.hpz_partition_size, 0, 1 << 30,
        "ZeRO++ hpZ: ranks of the secondary parameter partition (0, 1: none; stage 3 only)"),
    REFUSED("mics_shard_size", "not implemented: MiCS (-1 is accepted)"),
    REFUSED("zeropp_loco_param", "not implemented: ZeRO++ LoCo"),
    REFUSED("legacy_stage1", "not implemented (DeepSpeed refuses it too)"),
    REFUSED("zenflow", "not implemented: ZenFlow's stale-gradient CPU updates change the math"),
    IGNORED("allgather_sequential", "ignored: zinc all-gathers the flat buffer in one call"),
    IGNORED("enable_sanity_checks", "ignored: zinc always validates its buffers"),
    BOOL("save_muon_momentum_buffer_in_memory", zero.save_muon_momentum_buffer_in_memory,
         "Muon with NVMe offload: keep the momentum in memory (accepted; zinc refuses Muon with offload so far)"),
    IGNORED("leaf_module", "ignored: zinc gathers per registered module"),
};
static TABLE(zero_tbl, "zero_optimization", zero_keys);

/* ------------------------------------------------------------------ aio, checkpoint, data_types, zinc */
static const zkey_key aio_keys[] = {
    SIZE("block_size", aio.block_size, 4096, 1 << 30, "bytes per IO request (a multiple of 4096)"),
    INT("queue_depth", aio.queue_depth, 1, 32768, "IO requests in flight per file"),
    INT("intra_op_parallelism", aio.intra_op_parallelism, 1, 1024, "IO requests a swap is split into"),
    DEPR("thread_count", "intra_op_parallelism"),
    BOOL("single_submit", aio.single_submit, "accepted; io_uring submits in batches either way"),
    BOOL("overlap_events", aio.overlap_events, "accepted; completions are reaped as they arrive"),
    BOOL("use_gds", aio.use_gds, "GPUDirect Storage: not implemented, true is an error"),
};
static TABLE(aio_tbl, "aio", aio_keys);

static const zkey_key parallel_write_keys[] = {
    BOOL("pipeline_stage", checkpoint.parallel_write_pipeline_stage, "accepted; zinc has no pipeline stages"),
};
static TABLE(parallel_write_tbl, "checkpoint.parallel_write", parallel_write_keys);

static const zkey_key writer_keys[] = {
    ENUM("type", checkpoint.writer_type, writer_type_names,
         "accepted (FAST, PYTHON, MOCK); zinc has one writer, the safe checkpoint writer"),
    BOOL("decoupled", checkpoint.writer_decoupled,
         "a save snapshots the shard and returns; a writer thread per rank writes it, the next step publishes it"),
    SIZE("io_buffer_size", checkpoint.writer_io_buffer_size, 4096, BIG,
         "bytes per write and per snapshot piece of the writer thread (rounded down to 4 KiB)"),
    BOOL("io_buffer_double", checkpoint.writer_io_buffer_double,
         "two write slots of io_buffer_size (one when false) where memory is short for a full snapshot"),
    BOOL("show_statistics", checkpoint.writer_show_statistics, "logs each save's bytes, GB/s and blocked time"),
    ENUM("data_parallel", checkpoint.writer_data_parallel, writer_dp_names,
         "accepted (REPLICA, SOCKET, MACHINE); every zinc rank writes its own shard"),
    IGNORED("io_multiplier", "ignored: zinc writes each byte once"),
};
static TABLE(writer_tbl, "checkpoint.writer", writer_keys);

static const zkey_key checkpoint_keys[] = {
    ENUM("tag_validation", checkpoint.tag_validation, tag_names,
         "Warn, Ignore or Fail on tags that differ across ranks"),
    BOOL("load_universal", checkpoint.load_universal, "accepted; every zinc checkpoint loads on any rank count"),
    BOOL("use_node_local_storage", checkpoint.use_node_local_storage, "each node writes its own ranks' shards"),
    OBJ("parallel_write", parallel_write_tbl, "pipeline-parallel write options"),
    OBJ("writer", writer_tbl, "DeepSpeed's checkpoint writer (decoupled: saves that do not stop training)"),
};
static TABLE(checkpoint_tbl, "checkpoint", checkpoint_keys);

static const zkey_key data_types_keys[] = {
    {.name = "grad_accum_dtype",
     .kind = ZKEY_DTYPE,
     .off = F(grad_accum_dtype),
     .aux_off = F(grad_accum_dtype_set),
     .meaning = "dtype of the stage 0-1 gradient accumulation buffer (default: the compute dtype; at stage 0 it "
                "must be the compute dtype, as DeepSpeed)",
     .status = IMPL},
    {.name = "param_dtype",
     .kind = ZKEY_DTYPE,
     .off = F(param_dtype),
     .aux_off = F(param_dtype_set),
     .meaning = "the parameters' dtype: must match fp16/bf16 (DeepSpeed asserts the same)",
     .status = IMPL},
    IGNORED("buffer_dtype", "ignored: zinc's models own their non-parameter buffers and their dtypes"),
    REFUSED("keep_in_fp32_modules", "not implemented: zinc's models choose each module's dtype themselves ([] and "
                                    "\"auto\", its default, are accepted)"),
};
static TABLE(data_types_tbl, "data_types", data_types_keys);

static const zkey_key zinc_keys[] = {
    ENUM("device", device, device_names, "auto, cpu or cuda"),
    I64("max_skipped_steps", fp16.max_skipped_steps, 0, BIG,
        "error after this many consecutive overflow-skipped steps (0: never)"),
    BOOL("allow_buffered_io", aio.allow_buffered_io,
         "NVMe offload falls back to buffered IO where O_DIRECT is refused"),
    ENUM("checkpoint_busy", checkpoint.writer_busy, ckpt_busy_names,
         "a save while the previous decoupled save is still being written: wait for it, or skip with a warning"),
    BOOL("deterministic_reduction", deterministic_reduction,
         "fp32 gradients summed over the step's micro-batches by one fixed binary tree over the global "
         "micro-batch index: the same bits for every power-of-two ranks x gradient_accumulation_steps split of "
         "the batch (cpu, fp32, not Lamb)"),
};
static TABLE(zinc_tbl, "zinc", zinc_keys);

static const zkey_key comms_logger_keys[] = {
    BOOL("enabled", comms_logger.enabled, "count every collective: per op and message size, latency and bandwidth"),
    BOOL("verbose", comms_logger.verbose,
         "also log each collective as it completes, and the table every steps_per_print"),
    BOOL("prof_all", comms_logger.prof_all, "log every collective (false: only those in prof_ops)"),
    {.name = "prof_ops",
     .kind = ZKEY_NAMES,
     .off = F(comms_logger.prof_ops),
     .names = zkey_comm_op_names,
     .meaning = "the collectives logged when prof_all is false",
     .status = IMPL},
    BOOL("debug", comms_logger.debug, "add the calling function to each op's name"),
};
static TABLE(comms_logger_tbl, "comms_logger", comms_logger_keys);

/* DeepSpeed's activation checkpointing configures what its checkpoint() does; the model calls it. In zinc
 * the block's presence tells the model to recompute (zinc_activation_checkpointing; zinc train --model gpt2
 * keeps each block's input and recomputes the block in backward). These keys have no meaning in zinc: */
static const zkey_key activation_ckpt_keys[] = {
    IGNORED("partition_activations", "no effect in zinc: there is no model parallelism, each rank already holds "
                                     "only its own micro-batch's checkpoints"),
    IGNORED("cpu_checkpointing", "no effect in zinc: the CPU models' checkpoints are in host memory already"),
    IGNORED("contiguous_memory_optimization", "no effect in zinc: the checkpoints are one buffer per block already"),
    IGNORED("number_checkpoints", "no effect in zinc: the model checkpoints every block"),
    IGNORED("synchronize_checkpoint_boundary", "no effect in zinc: the CPU compute is synchronous"),
    IGNORED("profile", "no effect in zinc: no checkpoint profiler"),
};
static TABLE(activation_ckpt_tbl, "activation_checkpointing", activation_ckpt_keys);

/* DeepSpeed's monitors (deepspeed/monitor/config.py; runtime/monitor/monitor.h writes the files) */
static const zkey_key tensorboard_keys[] = {
    BOOL("enabled", tensorboard.enabled, "write TensorBoard event files (rank 0)"),
    STR("output_path", tensorboard.output_path, "where the job's directory goes (\"\": the working directory)"),
    STR("job_name", tensorboard.job_name, "the directory inside output_path that holds the event files"),
};
static TABLE(tensorboard_tbl, "tensorboard", tensorboard_keys);

static const zkey_key csv_monitor_keys[] = {
    BOOL("enabled", csv_monitor.enabled, "write one CSV file per scalar (rank 0)"),
    STR("output_path", csv_monitor.output_path, "where the job's directory goes (\"\": the working directory)"),
    STR("job_name", csv_monitor.job_name, "the directory inside output_path that holds the CSV files"),
};
static TABLE(csv_monitor_tbl, "csv_monitor", csv_monitor_keys);

/* ------------------------------------------------------------------ top level */
static const zkey_key top_keys[] = {
    SIZE("train_batch_size", train_batch_size, 1, BIG, "samples per optimizer step over all ranks"),
    SIZE("train_micro_batch_size_per_gpu", train_micro_batch_size_per_gpu, 1, BIG, "samples per micro-step per rank"),
    SIZE("gradient_accumulation_steps", gradient_accumulation_steps, 1, BIG, "micro-steps per optimizer step"),
    OBJ("optimizer", optimizer_tbl, "Adam, AdamW, Lion or Lamb and its parameters"),
    OBJ("scheduler", scheduler_tbl, "learning-rate schedule"),
    DBL("gradient_clipping", gradient_clipping, 0, 1e38,
        "clip the global gradient norm to this (0: off; DeepSpeed's default 1.0)"),
    OBJ("fp16", fp16_tbl, "fp16 mixed precision and loss scaling"),
    OBJ("bf16", bf16_tbl, "bf16 mixed precision"),
    DEPR("bfloat16", "bf16"),
    OBJ("zero_optimization", zero_tbl, "ZeRO stage and its buffers"),
    OBJ("aio", aio_tbl, "NVMe IO settings"),
    I64("steps_per_print", steps_per_print, 0, BIG, "log a progress line every this many steps (0: never)"),
    BOOL("wall_clock_breakdown", wall_clock_breakdown,
         "DeepSpeed's timer lines per micro-step and step, and the five Train/Samples/elapsed_time_ms_* monitor "
         "scalars"),
    BOOL("memory_breakdown", memory_breakdown, "log the memory report with each progress line"),
    BOOL("dump_state", dump_state, "log the resolved config at start"),
    OBJ("checkpoint", checkpoint_tbl, "checkpoint options"),
    {.name = "communication_data_type",
     .kind = ZKEY_DTYPE,
     .off = F(comm_dtype),
     .aux_off = F(comm_dtype_set),
     .meaning = "dtype of gradient reductions (default: the compute dtype)",
     .status = IMPL},
    BOOL("prescale_gradients", prescale_gradients, "divide gradients by the world size before reducing"),
    DBL("gradient_predivide_factor", gradient_predivide_factor, 1e-30, 1e30,
        "divide by this before the reduction and by world/this after"),
    OBJ("data_types", data_types_tbl, "gradient accumulation and parameter dtypes"),
    OBJ("zinc", zinc_tbl, "zinc's own settings"),
    OBJ("tensorboard", tensorboard_tbl, "TensorBoard event files of the training scalars (docs/monitors.md)"),
    IGNORED("wandb", "ignored: Weights & Biases sends the run to a network service, and zinc needs none; "
                     "tensorboard and csv_monitor write the same scalars to local files (docs/monitors.md)"),
    OBJ("csv_monitor", csv_monitor_tbl, "CSV files of the training scalars (docs/monitors.md)"),
    IGNORED("comet", "ignored: Comet sends the run to a network service, and zinc needs none; "
                     "tensorboard and csv_monitor write the same scalars to local files (docs/monitors.md)"),
    IGNORED("flops_profiler", "ignored: no profiler in zinc"),
    OBJ("activation_checkpointing", activation_ckpt_tbl,
        "present: the model recomputes activations in backward (zinc train --model gpt2: every block)"),
    IGNORED("autotuning", "ignored: no autotuner in zinc"),
    IGNORED("zero_allow_untested_optimizer",
            "ignored: zinc runs only its own optimizers, each tested under ZeRO (DeepSpeed needs it for SGD)"),
    IGNORED("zero_force_ds_cpu_optimizer", "ignored: zinc has only its own Adam/AdamW, Lion and LAMB"),
    IGNORED("disable_allgather", "ignored"),
    IGNORED("gradient_accumulation_dtype", "ignored: use data_types.grad_accum_dtype"),
    IGNORED("seq_parallel_communication_data_type", "ignored: no sequence parallelism in zinc"),
    IGNORED("pipeline", "ignored: no pipeline parallelism in zinc"),
    OBJ("comms_logger", comms_logger_tbl, "communication figures per collective (docs/comms.md)"),
    IGNORED("timers", "ignored"),
    IGNORED("nebula", "ignored"),
    IGNORED("zero_force_ds_cpu_initialization", "ignored"),
    REFUSED("amp", "not implemented: NVIDIA apex amp; use fp16 or bf16"),
    REFUSED("elasticity",
            "removed in DeepSpeed 0.19, which refuses it too: set train_batch_size and train_micro_batch_size_per_gpu "
            "directly. zinc keeps the global batch on any rank count without it: give those two and leave "
            "gradient_accumulation_steps out, and a run resumed on another rank count re-derives it (same batch, "
            "same LR schedule; docs/checkpoints.md), and `zinc launch --min-ranks M` restarts a failed job on the "
            "largest such count"),
    REFUSED("sparse_gradients", "not implemented: sparse gradients"),
    REFUSED("curriculum_learning", "not implemented: curriculum learning changes the data the model sees"),
    REFUSED("data_efficiency", "not implemented: data sampling and routing"),
    REFUSED("compression_training", "not implemented: compression changes the math"),
    REFUSED("sparse_attention", "not implemented: a model feature outside the optimizer"),
    REFUSED("fp32_allreduce", "not implemented as a key: use communication_data_type \"fp32\""),
    /* newer DeepSpeed keys (deepspeed/base/config.py of release 0.19.6) */
    IGNORED("compile", "ignored: torch.compile is a PyTorch feature; zinc's kernels are compiled C/CUDA"),
    IGNORED("hybrid_engine", "ignored: the RLHF inference engine does not change training"),
    IGNORED("torch_autocast", "ignored: the model owns its casts in zinc (as fp16.auto_cast)"),
    IGNORED("dataloader_drop_last", "ignored: zinc has no data loader; the model feeds its batches"),
    IGNORED("eigenvalue", "ignored: the eigenvalue estimate only informs progressive layer drop and quantization"),
    IGNORED("comms_config", "ignored: zinc logs communication through its log callback"),
    IGNORED("graph_harvesting", "ignored: a CUDA-graph capture detail of DeepSpeed"),
    IGNORED("log_level", "ignored: zinc's log level is zinc_options.log_level / --quiet"),
    IGNORED("lower_precision_safe_modules", "ignored: a PyTorch module detail"),
    IGNORED("use_data_before_expert_parallelism", "ignored: zinc has no expert parallelism"),
    IGNORED("weight_quantization", "ignored: inference-time weight quantization"),
    REFUSED("tensor_parallel", "not implemented: tensor parallelism splits the model's math across ranks"),
    REFUSED("quantize_training", "not implemented: quantization-aware training changes the math"),
    REFUSED("progressive_layer_drop", "not implemented: progressive layer drop skips layers"),
    REFUSED("expert_parallel", "not implemented: mixture-of-experts parallelism"),
    REFUSED("fp8", "not implemented: fp8 mixed precision; use fp16 or bf16"),
};
TABLE(zkey_top, "", top_keys);

const zkey_key *zkey_find(const zkey_table *t, const char *name) {
    for (size_t i = 0; i < t->nkeys; i++)
        if (!strcmp(t->keys[i].name, name)) return &t->keys[i];
    return NULL;
}

static size_t collect(const zkey_table *t, const zkey_table **out, size_t n, size_t max) {
    if (n < max) out[n] = t;
    n++;
    for (size_t i = 0; i < t->nkeys; i++)
        if (t->keys[i].kind == ZKEY_OBJECT) n = collect(t->keys[i].sub, out, n, max);
    return n;
}

size_t zkey_all_tables(const zkey_table **out, size_t max) { return collect(&zkey_top, out, 0, max); }
