/* Defaults, and the rules that span keys: the batch triad (DeepSpeed's arithmetic, errors that show it),
 * dtypes, the effective Adam mode, overlap_comm's stage-dependent default, scheduler requirements and
 * the offload combinations zinc can run. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/config/config_internal.h"
#include "base/config/config_schema.h"

void zcfg_defaults(zinc_config *c) {
    memset(c, 0, sizeof *c);
    c->world_size = 1;
    c->optimizer = (zcfg_optimizer){.type = ZOPT_ADAM,
                                    .lr = 1e-3,
                                    .beta1 = 0.9,
                                    .beta2 = 0.999,
                                    .eps = 1e-8,
                                    .bias_correction = true,
                                    .adam_w_mode = true,
                                    .max_coeff = 10.0,
                                    .min_coeff = 0.01};
    c->scheduler = (zcfg_scheduler){.type = ZSCHED_NONE,
                                    .warmup_max_lr = 1e-3,
                                    .warmup_num_steps = 1000,
                                    .warmup_type = ZWARMUP_LOG,
                                    .cos_min_ratio = 1e-4,
                                    .cycle_first_step_size = 2000,
                                    .cycle_second_step_size = -1,
                                    .cycle_second_stair_count = -1,
                                    .cycle_momentum = true,
                                    .cycle_min_mom = 0.8,
                                    .cycle_max_mom = 0.9,
                                    .lr_range_test_min_lr = 1e-3,
                                    .lr_range_test_step_size = 2000,
                                    .lr_range_test_step_rate = 1.0};
    c->fp16 = (zcfg_fp16){.initial_scale_power = 16, .loss_scale_window = 1000, .hysteresis = 2, .min_loss_scale = 1};
    c->zero.contiguous_gradients = true;
    c->zero.reduce_scatter = true;
    c->zero.reduce_bucket_size = 500000000;
    c->zero.allgather_bucket_size = 500000000;
    c->zero.allgather_partitions = true;
    c->zero.offload_optimizer = (zcfg_offload){.buffer_count = 4,
                                               .pin_memory = true,
                                               .ratio = 1.0,
                                               .buffer_size = 100000000,
                                               .max_in_cpu = 1000000000};
    c->zero.offload_param = (zcfg_offload){.buffer_count = 5,
                                           .pin_memory = true,
                                           .ratio = 1.0,
                                           .buffer_size = 100000000,
                                           .max_in_cpu = 1000000000};
    c->zero.sub_group_size = 1000000000;
    c->zero.prefetch_bucket_size = 50000000;
    c->zero.param_persistence_threshold = 100000;
    c->zero.model_persistence_threshold = INT64_MAX;
    c->zero.max_live_parameters = 1000000000;
    c->zero.max_reuse_distance = 1000000000;
    c->zero.ignore_unused_parameters = true;
    c->zero.load_from_fp32_weights = true;
    c->zero.compute_grad_norm = true;
    c->gradient_clipping = 1.0;
    c->bf16_check_grad_overflow = true;
    c->zero.hpz_partition_size = 1;
    c->aio = (zcfg_aio){.block_size = 1048576, .queue_depth = 8, .intra_op_parallelism = 1, .overlap_events = true};
    c->checkpoint.tag_validation = ZTAG_WARN;
    c->checkpoint.writer_io_buffer_size = 64 << 20;
    c->checkpoint.writer_io_buffer_double = true;
    c->comms_logger.prof_all = true;
    zcfg_monitor_defaults(&c->tensorboard);
    zcfg_monitor_defaults(&c->csv_monitor);
    c->gradient_predivide_factor = 1.0;
    c->compute_dtype = c->comm_dtype = c->grad_accum_dtype = c->param_dtype = ZINC_FP32;
    c->device = ZINC_DEVICE_AUTO;
    snprintf(c->source, sizeof c->source, "<defaults>");
}

static bool mul3(int64_t a, int64_t b, int64_t c, int64_t *out) {
    int64_t t;
    return !__builtin_mul_overflow(a, b, &t) && !__builtin_mul_overflow(t, c, out);
}

/* DeepSpeed's _set_batch_related_parameters and _batch_assertion, with the arithmetic in the message. */
/* Advice when train_batch_size tb and the micro batch mb do not fit micro x world_size = m: the rank counts
 * that keep this global batch (gradient_accumulation_steps is derived for each; a resume on one of them
 * trains with the same batch and LR schedule). */
static void usable_worlds(int64_t tb, int64_t mb, int64_t m, char *out, size_t cap) {
    int n = snprintf(out, cap, "Make train_batch_size a multiple of micro x world_size = %" PRId64, m);
    if (tb % mb != 0 || n < 0 || (size_t)n >= cap) return;
    int64_t per = tb / mb; /* micro-batches per step: a usable world size divides it */
    int shown = 0;
    for (int64_t w = 1; w <= per && shown < 12; w++) {
        if (per % w) continue;
        int k = snprintf(out + n, cap - (size_t)n, "%s%" PRId64,
                         shown ? ", "
                               : ", or run on a rank count that keeps "
                                 "it: ",
                         w);
        if (k < 0 || (size_t)k >= cap - (size_t)n) return;
        n += k;
        shown++;
    }
    if (shown == 12 && (size_t)n + 5 < cap) snprintf(out + n, cap - (size_t)n, ", ...");
}

/* The triad's "auto"s, as the Hugging Face Trainer fills them (per_device_train_batch_size 8,
 * gradient_accumulation_steps 1, train_batch_size = world x micro x accumulation), except that a value the
 * written batch sizes determine is derived from them rather than contradicting them. */
static void fill_batch_autos(zcfg_loader *L) {
    zinc_config *c = L->c;
    bool a_tb = zcfg_is_auto(L, "train_batch_size"), a_mb = zcfg_is_auto(L, "train_micro_batch_size_per_gpu"),
         a_ga = zcfg_is_auto(L, "gradient_accumulation_steps");
    if (!a_tb && !a_mb && !a_ga) return;
    bool g_tb = zcfg_given(c, "train_batch_size"), g_mb = zcfg_given(c, "train_micro_batch_size_per_gpu");
    if (a_ga && !(g_tb && g_mb))
        zcfg_fill(L, "gradient_accumulation_steps", json_integer(1),
                  "the Hugging Face Trainer's default gradient_accumulation_steps; --set "
                  "gradient_accumulation_steps=N to choose");
    bool g_ga = zcfg_given(c, "gradient_accumulation_steps");
    /* The Trainer's micro-batch wherever the written sizes leave it open (also when train_batch_size is
     * "auto" and the micro-batch is not written: the Trainer computes train_batch_size from its own). */
    if ((a_mb || !g_mb) && !(g_tb && g_ga) && !g_mb)
        zcfg_fill(L, "train_micro_batch_size_per_gpu", json_integer(8),
                  "the Hugging Face Trainer's default per_device_train_batch_size; --set "
                  "train_micro_batch_size_per_gpu=N to choose");
}

static void note_derived(zcfg_loader *L, const char *path, const char *how) {
    if (zcfg_is_auto(L, path)) zcfg_fill(L, path, NULL, how);
}

static void resolve_batch(zcfg_loader *L) {
    zinc_config *c = L->c;
    if (zcfg_had_problem(L, "train_batch_size") || zcfg_had_problem(L, "train_micro_batch_size_per_gpu") ||
        zcfg_had_problem(L, "gradient_accumulation_steps"))
        return; /* the key's own problem says it; the arithmetic would only repeat it */
    fill_batch_autos(L);
    int64_t W = c->world_size, tb = c->train_batch_size, mb = c->train_micro_batch_size_per_gpu,
            ga = c->gradient_accumulation_steps, prod = 0;
    const char *how;
    char advice[400];
    if (tb && mb && ga) {
        how = "all three given";
        bool ok = mul3(mb, ga, W, &prod);
        if (ok)
            snprintf(advice, sizeof advice,
                     "Set train_batch_size to %" PRId64 ", or leave one of the three out to have it derived", prod);
        else
            snprintf(advice, sizeof advice, "Lower train_micro_batch_size_per_gpu or gradient_accumulation_steps");
    } else if (tb && mb) {
        ga = tb / mb / W;
        how = "gradient_accumulation_steps = train_batch_size / micro / world_size";
        int64_t m;
        if (__builtin_mul_overflow(mb, W, &m))
            snprintf(advice, sizeof advice, "Lower train_micro_batch_size_per_gpu");
        else
            usable_worlds(tb, mb, m, advice, sizeof advice);
    } else if (tb && ga) {
        mb = tb / W / ga;
        how = "train_micro_batch_size_per_gpu = train_batch_size / world_size / gradient_accumulation_steps";
        int64_t m;
        if (__builtin_mul_overflow(ga, W, &m))
            snprintf(advice, sizeof advice, "Lower gradient_accumulation_steps");
        else
            snprintf(advice, sizeof advice,
                     "Make train_batch_size a multiple of world_size x gradient_accumulation_steps = %" PRId64, m);
    } else if (mb && ga) {
        how = "train_batch_size = micro * gradient_accumulation_steps * world_size";
        if (!mul3(mb, ga, W, &tb)) {
            zcfg_problem(L, "train_batch_size",
                         "train_micro_batch_size_per_gpu %" PRId64 " x gradient_accumulation_steps %" PRId64
                         " x world_size %" PRId64 " is too large (above 2^63 - 1)",
                         mb, ga, W);
            return;
        }
        snprintf(advice, sizeof advice, "(internal: derived values always fit)");
    } else if (tb) {
        ga = 1;
        mb = tb / W;
        how = "gradient_accumulation_steps = 1, micro = train_batch_size / world_size";
        snprintf(advice, sizeof advice, "Make train_batch_size a multiple of world_size %" PRId64, W);
    } else if (mb) {
        ga = 1;
        how = "gradient_accumulation_steps = 1, train_batch_size = micro * world_size";
        if (__builtin_mul_overflow(mb, W, &tb)) {
            zcfg_problem(L, "train_batch_size",
                         "train_micro_batch_size_per_gpu %" PRId64 " x world_size %" PRId64
                         " is too large (above 2^63 - 1)",
                         mb, W);
            return;
        }
        snprintf(advice, sizeof advice, "(internal: derived values always fit)");
    } else {
        zcfg_problem(L, "train_batch_size",
                     "give train_batch_size or train_micro_batch_size_per_gpu (or both, with "
                     "gradient_accumulation_steps); the file writes neither");
        return;
    }
    bool fits = mul3(mb, ga, W, &prod);
    if (mb < 1 || ga < 1 || !fits || tb != prod) {
        char eq[64];
        if (fits)
            snprintf(eq, sizeof eq, "%" PRId64, prod);
        else
            snprintf(eq, sizeof eq, "a product too large for 64 bits");
        /* a value derived here is shown as derived, not as if the file wrote it */
        bool d_tb = !zcfg_given(c, "train_batch_size"), d_mb = !zcfg_given(c, "train_micro_batch_size_per_gpu"),
             d_ga = !zcfg_given(c, "gradient_accumulation_steps");
        zcfg_problem(L, "train_batch_size",
                     "the batch sizes do not fit the world size: train_batch_size %" PRId64
                     "%s must equal train_micro_batch_size_per_gpu %" PRId64 "%s x gradient_accumulation_steps %" PRId64
                     "%s x world_size %" PRId64 " = %s (%s). %s",
                     tb, d_tb ? " (derived)" : "", mb, d_mb ? " (derived)" : "", ga, d_ga ? " (derived)" : "", W, eq,
                     how, advice);
        return;
    }
    if (tb > ZCFG_MAX_TRAIN_BATCH) {
        zcfg_problem(L, "train_batch_size",
                     "%" PRId64 " samples per optimizer step is above zinc's limit of 2^24 = %lld (train_micro_batch_"
                     "size_per_gpu %" PRId64 " x gradient_accumulation_steps %" PRId64 " x world_size %" PRId64
                     "); one step would take hours: lower the micro batch or the accumulation steps",
                     tb, (long long)ZCFG_MAX_TRAIN_BATCH, mb, ga, W);
        return;
    }
    c->train_batch_size = tb;
    c->train_micro_batch_size_per_gpu = mb;
    c->gradient_accumulation_steps = ga;
    char derived[200];
    snprintf(derived, sizeof derived, "derived: %s", how);
    note_derived(L, "train_batch_size", derived);
    note_derived(L, "train_micro_batch_size_per_gpu", derived);
    note_derived(L, "gradient_accumulation_steps", derived);
    if (L->autos[0] || !zcfg_given(c, "train_batch_size") || !zcfg_given(c, "train_micro_batch_size_per_gpu") ||
        !zcfg_given(c, "gradient_accumulation_steps"))
        ZLOG_INFO(L->log,
                  "%s: batch sizes for world size %d: train_batch_size %" PRId64 ", micro %" PRId64
                  ", gradient_accumulation_steps %" PRId64,
                  L->origin, c->world_size, tb, mb, ga);
}

static void resolve_scheduler(zcfg_loader *L) {
    zinc_config *c = L->c;
    zcfg_scheduler *s = &c->scheduler;
    if (zcfg_had_problem(L, "scheduler")) return; /* its own problems say it */
    /* DeepSpeed 0.19.8 builds the scheduler as scheduler(optimizer, **params) (engine.py _scheduler_from_config),
     * which raises TypeError when the block has no params (config.py get_scheduler_params returns None) */
    if (s->type != ZSCHED_NONE && !zcfg_given(c, "scheduler.params") && !zcfg_had_problem(L, "scheduler.params")) {
        zcfg_problem(L, "scheduler.params",
                     "missing: a %s scheduler block needs its \"params\" object (DeepSpeed 0.19.8 fails on this "
                     "block: it calls the scheduler with **params); give \"params\": {} for the schedule's defaults",
                     zkey_scheduler_names[s->type]);
        return;
    }
    /* DeepSpeed 0.19.8 (lr_schedules.py, OneCycle._initialize_momentum): an optimizer without betas (SGD,
     * Adagrad) turns cycle_momentum off, with a warning; their hparams never read a cycled beta1 */
    if (s->type == ZSCHED_ONE_CYCLE && s->cycle_momentum &&
        !zkey_optimizer_takes(c->optimizer.type, zkey_find(&zkey_optimizer_params, "betas"))) {
        s->cycle_momentum = false;
        ZLOG_WARN(L->log,
                  "%s: scheduler.params.cycle_momentum turned off: %s has no betas to cycle (as DeepSpeed 0.19.8 "
                  "does); set \"cycle_momentum\": false to silence this",
                  L->origin, zkey_optimizer_names[c->optimizer.type]);
    }
    /* an unfilled "auto" is reported once, with the flags that fill it (config_auto.c) */
    if ((s->type == ZSCHED_WARMUP_DECAY_LR || s->type == ZSCHED_WARMUP_COSINE_LR) &&
        !zcfg_given(c, "scheduler.params.total_num_steps") && !zcfg_is_auto(L, "scheduler.params.total_num_steps"))
        zcfg_problem(L, "scheduler.params.total_num_steps", "required by %s; set it to the run's optimizer steps",
                     zkey_scheduler_names[s->type]);
    if ((s->type == ZSCHED_WARMUP_DECAY_LR || s->type == ZSCHED_WARMUP_COSINE_LR) &&
        zcfg_given(c, "scheduler.params.total_num_steps") && s->total_num_steps < s->warmup_num_steps)
        ZLOG_WARN(L->log,
                  "%s: scheduler.params.total_num_steps %" PRId64 " is below warmup_num_steps %" PRId64
                  ": the decay never starts",
                  L->origin, s->total_num_steps, s->warmup_num_steps);
    /* DeepSpeed >= 0.17.2: WarmupLR without warmup_max_lr warms up to the optimizer's lr (WarmupDecayLR keeps
     * its 0.001 default) */
    if (s->type == ZSCHED_WARMUP_LR && !zcfg_given(c, "scheduler.params.warmup_max_lr")) {
        s->warmup_max_lr = c->optimizer.lr;
        ZLOG_INFO(L->log,
                  "%s: scheduler.params.warmup_max_lr not given: WarmupLR warms up to the optimizer's lr %g, "
                  "as DeepSpeed >= 0.17.2",
                  L->origin, c->optimizer.lr);
    }
    /* DeepSpeed 0.19.6: an explicit negative cycle_second_stair_count means no stairs in the falling half (it
     * quantises only for a count above 0); left out, the falling half has as many stairs as the rising one */
    if (!zcfg_given(c, "scheduler.params.cycle_second_stair_count"))
        s->cycle_second_stair_count = s->cycle_first_stair_count; /* effective, so the dump reads back the same */
    else if (s->cycle_second_stair_count < 0)
        s->cycle_second_stair_count = 0;
    if (s->type == ZSCHED_ONE_CYCLE) {
        if (zcfg_is_auto(L, "scheduler.params.cycle_min_lr") || zcfg_is_auto(L, "scheduler.params.cycle_max_lr"))
            ; /* reported with the other unfilled "auto"s */
        else if (!zcfg_given(c, "scheduler.params.cycle_min_lr") || !zcfg_given(c, "scheduler.params.cycle_max_lr"))
            zcfg_problem(L, "scheduler.params", "OneCycle needs cycle_min_lr and cycle_max_lr");
        else if (s->cycle_min_lr > s->cycle_max_lr)
            zcfg_problem(L, "scheduler.params.cycle_min_lr", "%g is above cycle_max_lr %g", s->cycle_min_lr,
                         s->cycle_max_lr);
        if (s->cycle_min_mom > s->cycle_max_mom)
            zcfg_problem(L, "scheduler.params.cycle_min_mom", "%g is above cycle_max_mom %g", s->cycle_min_mom,
                         s->cycle_max_mom);
    }
    if ((s->type == ZSCHED_WARMUP_LR || s->type == ZSCHED_WARMUP_DECAY_LR) && s->warmup_min_lr > s->warmup_max_lr)
        ZLOG_WARN(L->log, "%s: scheduler.params.warmup_min_lr %g is above warmup_max_lr %g: the warmup decreases",
                  L->origin, s->warmup_min_lr, s->warmup_max_lr);
}

static void resolve_offload(zcfg_loader *L) {
    zinc_config *c = L->c;
    zcfg_offload *oo = &c->zero.offload_optimizer, *op = &c->zero.offload_param;
    if (oo->device == ZOFFLOAD_NVME && !oo->nvme_path[0])
        zcfg_problem(L, "zero_optimization.offload_optimizer.nvme_path",
                     "required when device is \"nvme\": the directory for the swap files");
    if (op->device == ZOFFLOAD_NVME && !op->nvme_path[0])
        zcfg_problem(L, "zero_optimization.offload_param.nvme_path",
                     "required when device is \"nvme\": the directory for the swap files");
    /* DeepSpeed resolves a relative nvme_path against each rank's working directory; zinc refuses it, so that
     * every rank, the swap directory's cleanup after a signal and the stale-run sweep name one place. */
    const zcfg_offload *both[2] = {oo, op};
    const char *keys[2] = {"zero_optimization.offload_optimizer.nvme_path",
                           "zero_optimization.offload_param.nvme_path"};
    for (int i = 0; i < 2; i++)
        if (both[i]->device == ZOFFLOAD_NVME && both[i]->nvme_path[0] && both[i]->nvme_path[0] != '/')
            zcfg_problem(L, keys[i],
                         "\"%s\" is a relative path: give an absolute directory (e.g. /local_nvme/zinc); a relative "
                         "one would depend on each rank's working directory",
                         both[i]->nvme_path);
    /* DeepSpeed ignores offload_param below stage 3; it does not change the math, so neither does zinc */
    if (op->device != ZOFFLOAD_NONE && c->zero.stage != 3) {
        ZLOG_WARN(L->log,
                  "%s: zero_optimization.offload_param: ignored at stage %d (parameter offload needs stage 3; "
                  "DeepSpeed ignores it there too)",
                  L->origin, c->zero.stage);
        op->device = ZOFFLOAD_NONE;
    }
    if (op->device == ZOFFLOAD_NVME && op->buffer_size < 1)
        zcfg_problem(L, "zero_optimization.offload_param.buffer_size",
                     "%" PRId64 " is out of range for device \"nvme\"; allowed: at least 1 (elements per swap buffer)",
                     op->buffer_size);
    if (oo->device == ZOFFLOAD_NVME && oo->buffer_count < ZCFG_NVME_MIN_BUFFERS)
        zcfg_problem(L, "zero_optimization.offload_optimizer.buffer_count",
                     "%d is out of range for device \"nvme\"; allowed: at least %d (the NVMe pipeline holds one chunk "
                     "being read, one being updated and one being written back)",
                     oo->buffer_count, ZCFG_NVME_MIN_BUFFERS);
    if (oo->device != ZOFFLOAD_NONE && c->zero.stage == 0)
        zcfg_problem(L, "zero_optimization.offload_optimizer.device",
                     "optimizer offload needs stage 1, 2 or 3 (stage is 0)");
    if (oo->ratio < 1.0 && oo->device != ZOFFLOAD_NONE)
        zcfg_problem(L, "zero_optimization.offload_optimizer.ratio",
                     "%g: partial offload is not implemented; zinc offloads all of the optimizer state (1.0)",
                     oo->ratio);
    if (c->aio.use_gds) zcfg_problem(L, "aio.use_gds", "GPUDirect Storage is not implemented; set it to false");
    if (c->aio.block_size % 4096)
        zcfg_problem(L, "aio.block_size", "%" PRId64 " is not a multiple of 4096 (needed for O_DIRECT)",
                     c->aio.block_size);
}

zinc_dtype zcfg_grad_dtype(const zinc_config *c) { return c->zero.stage <= 1 ? c->grad_accum_dtype : c->compute_dtype; }

void zcfg_set_stage(zinc_config *c, int stage) {
    c->zero.stage = stage;
    if (!zcfg_given(c, "zero_optimization.overlap_comm")) c->zero.overlap_comm = stage == 3;
}

/* Each optimizer takes the keyword arguments of its DeepSpeed class (FusedAdam, FusedLion / DeepSpeedCPULion,
 * FusedLamb, DeepSpeedCPUAdagrad, torch.optim.SGD); their constructors raise a TypeError on any other, so
 * DeepSpeed refuses these too. Which optimizer takes which key is the schema's (zkey_key.optimizers); an
 * optimizer's own defaults are zkey_optimizer_defaults. Lion's weight decay is always decoupled. */
static void resolve_optimizer_keys(zcfg_loader *L) {
    zinc_config *c = L->c;
    zcfg_optimizer_type me = c->optimizer.type;
    const zkey_table *t = &zkey_optimizer_params;
    char path[64];
    for (size_t i = 0; i < t->nkeys; i++) {
        const zkey_key *k = &t->keys[i];
        snprintf(path, sizeof path, "optimizer.params.%s", k->name);
        if (zkey_optimizer_takes(me, k) || !zcfg_given(c, path) || zcfg_had_problem(L, path)) continue;
        char takes[160] = "";
        size_t n = 0;
        int left = 0;
        for (int o = 0; o < ZOPT_COUNT; o++) left += zkey_optimizer_takes((zcfg_optimizer_type)o, k);
        for (int o = 0; o < ZOPT_COUNT && n < sizeof takes - 16; o++)
            if (zkey_optimizer_takes((zcfg_optimizer_type)o, k)) {
                const char *sep = !n ? "" : left == 1 ? " and " : ", ";
                n += (size_t)snprintf(takes + n, sizeof takes - n, "%s%s", sep, zkey_optimizer_names[o]);
                left--;
            }
        zcfg_problem(L, path, "not a parameter of %s (only %s take it; DeepSpeed refuses it too): remove it",
                     zkey_optimizer_names[me], takes);
    }
    for (const zkey_optimizer_default *d = zkey_optimizer_defaults; d->type != ZOPT_COUNT; d++) {
        snprintf(path, sizeof path, "optimizer.params.%s", d->key);
        const zkey_key *k = zkey_find(t, d->key);
        if (d->type == me && k && k->kind == ZKEY_F64 && !zcfg_given(c, path))
            *(double *)((char *)c + k->off) = d->value;
    }
    if (c->optimizer.type == ZOPT_LAMB && c->optimizer.min_coeff > c->optimizer.max_coeff &&
        !zcfg_had_problem(L, "optimizer.params.min_coeff"))
        zcfg_problem(L, "optimizer.params.min_coeff",
                     "%g is above max_coeff %g; the trust ratio is clamped to "
                     "[min_coeff, max_coeff]",
                     c->optimizer.min_coeff, c->optimizer.max_coeff);
    /* torch.optim.SGD's own refusal ("Nesterov momentum requires a momentum and zero dampening"). */
    if (c->optimizer.type == ZOPT_SGD && c->optimizer.nesterov &&
        (c->optimizer.momentum <= 0 || c->optimizer.dampening != 0) &&
        !zcfg_had_problem(L, "optimizer.params.momentum") && !zcfg_had_problem(L, "optimizer.params.dampening"))
        zcfg_problem(L, "optimizer.params.nesterov",
                     "true needs momentum above 0 and dampening 0 (momentum %g, dampening %g), as torch.optim.SGD "
                     "requires: set momentum (e.g. 0.9) and dampening 0, or nesterov false",
                     c->optimizer.momentum, c->optimizer.dampening);
    if (c->optimizer.type == ZOPT_LION) c->optimizer.adam_w_mode = true; /* p *= 1 - lr*wd */
    /* torch_adam builds torch.optim.AdamW (decoupled mode), whose weight_decay default is 0.01
     * (engine.py get_optimizer_configuration); torch.optim.Adam's is 0 as FusedAdam's. */
    bool decoupled = me == ZOPT_ADAMW || c->optimizer.adam_w_mode;
    if ((me == ZOPT_ADAM || me == ZOPT_ADAMW) && c->optimizer.torch_adam && decoupled &&
        !zcfg_given(c, "optimizer.params.weight_decay"))
        c->optimizer.weight_decay = 0.01;
}

/* Muon (DeepSpeed 0.19.8 engine._muon_param_groups, MuonWithAuxAdam): each half's lr is muon_lr / adam_lr,
 * else the shared lr where the file gives it, else the class defaults 0.02 and 3e-4; the AdamW half's betas
 * default to (0.9, 0.95). zinc's lr (the schedules' base, the dump) becomes the Muon half's. offload_optimizer
 * cpu and nvme run (the momentum is read from the state store like any pass, runtime/engine/engine_muon.c).
 * What zinc cannot run exactly yet is refused with the reason. */
static void resolve_muon(zcfg_loader *L) {
    zinc_config *c = L->c;
    zcfg_optimizer *o = &c->optimizer;
    bool lr_given = zcfg_given(c, "optimizer.params.lr");
    if (!zcfg_given(c, "optimizer.params.muon_lr")) o->muon_lr = lr_given ? o->lr : 0.02;
    if (!zcfg_given(c, "optimizer.params.adam_lr")) o->adam_lr = lr_given ? o->lr : 3e-4;
    if (!zcfg_given(c, "optimizer.params.betas")) o->beta2 = 0.95;
    o->lr = o->muon_lr;
    if (c->zero.offload_param.device != ZOFFLOAD_NONE)
        zcfg_problem(L, "zero_optimization.offload_param.device",
                     "\"%s\" with optimizer Muon is not implemented yet (the whole-matrix step writes the parameter "
                     "shard in device memory); use \"none\"",
                     c->zero.offload_param.device == ZOFFLOAD_CPU ? "cpu" : "nvme");
    if (c->scheduler.type == ZSCHED_ONE_CYCLE)
        zcfg_problem(L, "scheduler.type",
                     "OneCycle with optimizer Muon is not implemented (its momentum cycling would have to cycle the "
                     "Muon momentum and the AdamW betas apart); use WarmupLR, WarmupDecayLR or WarmupCosineLR");
}

/* DeepSpeed 0.19.8's engine.get_data_types: gradients accumulate in the model dtype unless
 * data_types.grad_accum_dtype says otherwise, and without ZeRO no other is allowed
 * (_do_optimizer_sanity_check raises NotImplementedError); _assert_valid_mixed_precision_config asserts that
 * a written param_dtype is the model dtype. */
static void resolve_dtypes(zcfg_loader *L) {
    zinc_config *c = L->c;
    const char *model = zinc_dtype_name(c->compute_dtype);
    if (!c->grad_accum_dtype_set) c->grad_accum_dtype = c->compute_dtype;
    if (c->zero.stage == 0 && c->grad_accum_dtype != c->compute_dtype && !zcfg_had_problem(L, "data_types"))
        zcfg_problem(L, "data_types.grad_accum_dtype",
                     "\"%s\" with %s parameters at ZeRO stage 0: without ZeRO gradients accumulate in the model "
                     "dtype (DeepSpeed 0.19.8 raises NotImplementedError on this mix too); remove the key, or use "
                     "zero_optimization.stage 1 or above to accumulate in %s",
                     zinc_dtype_name(c->grad_accum_dtype), model, zinc_dtype_name(c->grad_accum_dtype));
    if (c->param_dtype_set && c->param_dtype != c->compute_dtype && !zcfg_had_problem(L, "data_types"))
        zcfg_problem(L, "data_types.param_dtype",
                     "\"%s\" conflicts with the precision mode, whose parameters are %s; set the matching "
                     "fp16/bf16 \"enabled\" or remove the key (DeepSpeed asserts the same)",
                     zinc_dtype_name(c->param_dtype), model);
    c->param_dtype = c->compute_dtype;
    if (!c->zero.compute_grad_norm && !zcfg_had_problem(L, "zero_optimization.compute_grad_norm"))
        zcfg_problem(L, "zero_optimization.compute_grad_norm",
                     "false is not implemented: zinc finds the gradient norm and the non-finite gradients in one "
                     "pass over the gradients, and the norm costs nothing more%s; remove the key (set "
                     "gradient_clipping 0 to turn clipping off)",
                     c->zero.stage == 1 || c->zero.stage == 2 ? ""
                                                              : " (DeepSpeed allows false only at stages 1 and 2)");
}

/* Values inside their key's range that cannot train: refused with the reason (issue 18). */
static void resolve_learnable(zcfg_loader *L) {
    zinc_config *c = L->c;
    if (c->optimizer.eps <= 0 && !zcfg_had_problem(L, "optimizer.params.eps"))
        zcfg_problem(L, "optimizer.params.eps",
                     "%g is out of range; allowed: above 0, up to 1. Adam divides by "
                     "sqrt(v) + eps, and v is 0 wherever the gradient has been 0, so eps 0 "
                     "makes those updates 0/0 = NaN (1e-8 is the usual value)",
                     c->optimizer.eps);
    /* (an optimizer without betas has cycle_momentum off by now: resolve_scheduler) */
    if (c->scheduler.type == ZSCHED_ONE_CYCLE && c->scheduler.cycle_momentum && c->scheduler.cycle_max_mom >= 1 &&
        !zcfg_had_problem(L, "scheduler"))
        zcfg_problem(L, "scheduler.params.cycle_max_mom",
                     "%g is out of range with cycle_momentum; allowed: 0 to below 1. It becomes Adam's beta1, and "
                     "beta1 1 makes the bias correction 1 - beta1^t zero (a division by zero) and freezes the first "
                     "moment",
                     c->scheduler.cycle_max_mom);
    if (c->fp16.enabled && c->fp16.loss_scale > 65504)
        zcfg_problem(L, "fp16.loss_scale",
                     "%g is out of range for a static scale; allowed: 0 (dynamic) or up to 65504. The backward pass "
                     "starts from the loss gradient times the scale, which in fp16 above 65504 (its largest finite "
                     "value) is inf: every step would overflow and be skipped",
                     c->fp16.loss_scale);
    if (c->fp16.enabled && c->fp16.loss_scale > 0) {
        static const char *const dyn[] = {"fp16.initial_scale_power", "fp16.loss_scale_window", "fp16.hysteresis",
                                          "fp16.consecutive_hysteresis", "fp16.min_loss_scale"};
        char list[300] = "";
        size_t n = 0;
        for (size_t i = 0; i < sizeof dyn / sizeof dyn[0]; i++)
            if (zcfg_given(c, dyn[i])) n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", dyn[i]);
        if (n)
            ZLOG_WARN(L->log,
                      "%s: %s: no effect with the static fp16.loss_scale %g (DeepSpeed reads them only for "
                      "dynamic scaling, loss_scale 0)",
                      L->origin, list, c->fp16.loss_scale);
    }
    /* 2^16 either way: beyond it the pre-division shifts fp16 gradients (largest finite 65504, smallest normal
     * 6.1e-5) past their whole range, so they overflow or flush to zero; zinc runs no more ranks than that. */
    double f = c->gradient_predivide_factor;
    if ((f < 0x1p-16 || f > 0x1p16) && !zcfg_had_problem(L, "gradient_predivide_factor"))
        zcfg_problem(L, "gradient_predivide_factor",
                     "%g is out of range; allowed: 1/65536 to 65536. Gradients are divided by it before the "
                     "reduction and multiplied back after, and a factor beyond 2^16 moves fp16 gradients past their "
                     "whole range (they overflow or flush to zero); the useful value is at most the rank count",
                     f);
}

void zcfg_resolve(zcfg_loader *L) {
    zinc_config *c = L->c;
    resolve_batch(L);
    if (c->fp16.enabled && c->bf16_enabled)
        zcfg_problem(L, "bf16.enabled", "fp16 and bf16 are both enabled; enable one of them");
    c->compute_dtype = c->fp16.enabled ? ZINC_FP16 : c->bf16_enabled ? ZINC_BF16 : ZINC_FP32;
    if (!c->comm_dtype_set) c->comm_dtype = c->compute_dtype;
    resolve_dtypes(L);
    resolve_optimizer_keys(L);
    if (c->optimizer.type == ZOPT_MUON) resolve_muon(L);
    c->optimizer.adam_w_mode = c->optimizer.type == ZOPT_ADAMW || c->optimizer.adam_w_mode;
    if (c->optimizer.type == ZOPT_ADAM && c->optimizer.adam_w_mode && c->optimizer.weight_decay > 0 &&
        !zcfg_given(c, "optimizer.params.adam_w_mode"))
        ZLOG_INFO(L->log,
                  "%s: optimizer \"Adam\" with weight_decay %g uses decoupled decay (AdamW), as "
                  "DeepSpeed's adam_w_mode default; set optimizer.params.adam_w_mode false for L2 decay",
                  L->origin, c->optimizer.weight_decay);
    zcfg_set_stage(c, c->zero.stage);
    /* DeepSpeedFP16Config (0.19.8) types min_loss_scale int and requires > 0 for dynamic scaling. */
    if (zcfg_given(c, "fp16.min_loss_scale") && c->fp16.min_loss_scale != floor(c->fp16.min_loss_scale) &&
        !zcfg_had_problem(L, "fp16.min_loss_scale"))
        zcfg_problem(L, "fp16.min_loss_scale",
                     "%g is not a whole number; DeepSpeed 0.19.8 reads it as an integer and refuses a fraction: use "
                     "1 (the default) or another whole power of two",
                     c->fp16.min_loss_scale);
    else if (c->fp16.enabled && c->fp16.loss_scale == 0 && c->fp16.min_loss_scale <= 0 &&
             !zcfg_had_problem(L, "fp16.min_loss_scale"))
        zcfg_problem(L, "fp16.min_loss_scale",
                     "%g is out of range with dynamic loss scaling (loss_scale 0); allowed: 1 or more. The floor of "
                     "the "
                     "scale must be positive (DeepSpeed 0.19.8 refuses it too); the default is 1",
                     c->fp16.min_loss_scale);
    if (c->fp16.enabled && c->fp16.loss_scale == 0 && c->fp16.min_loss_scale > ldexp(1.0, c->fp16.initial_scale_power))
        zcfg_problem(L, "fp16.min_loss_scale",
                     "%g is above the initial scale 2^%d; lower it or raise "
                     "initial_scale_power",
                     c->fp16.min_loss_scale, c->fp16.initial_scale_power);
    /* A static scale below 2^-24 (fp16's smallest subnormal) makes every fp16 gradient underflow to zero, and
     * unscaling by it overflows the fp32 factor: every update would be non-finite. (Above 65504 is refused
     * with the values that cannot train.) */
    if (c->fp16.enabled && c->fp16.loss_scale != 0 && c->fp16.loss_scale < ZCFG_MIN_STATIC_LOSS_SCALE)
        zcfg_problem(L, "fp16.loss_scale",
                     "%g is below 2^-24 (5.96e-08), the smallest static loss scale (0 selects dynamic scaling); "
                     "use 0, or a power of two such as 1024",
                     c->fp16.loss_scale);
    resolve_scheduler(L);
    resolve_offload(L);
    resolve_learnable(L);
    /* DeepSpeed 0.19.8 logs whenever the block is present (comm/config.py reads only its presence, never
     * "enabled"); zinc does the same unless "enabled": false is written, which it honours and says so. */
    if (zcfg_given(c, "comms_logger") && !zcfg_given(c, "comms_logger.enabled"))
        c->comms_logger.enabled = true;
    else if (zcfg_given(c, "comms_logger") && !c->comms_logger.enabled)
        ZLOG_WARN(L->log,
                  "%s: comms_logger.enabled false: zinc logs no collectives, while DeepSpeed 0.19.8 would log them "
                  "(it turns the logger on whenever the comms_logger block is present); remove the block to match",
                  L->origin);
    /* DeepSpeed counts every op while prof_all is true, whatever prof_ops says */
    if (c->comms_logger.enabled && c->comms_logger.prof_all && c->comms_logger.prof_ops &&
        !zcfg_had_problem(L, "comms_logger"))
        ZLOG_WARN(L->log,
                  "%s: comms_logger.prof_ops has no effect while comms_logger.prof_all is true (the default): every "
                  "collective is logged; set prof_all false to log only the ops listed",
                  L->origin);
    if (!zcfg_given(c, "optimizer"))
        ZLOG_INFO(L->log,
                  "%s: no \"optimizer\" block: zinc trains with Adam (decoupled weight decay 0, lr 1e-3, betas "
                  "[0.9, 0.999], eps 1e-8). DeepSpeed would use the optimizer passed to deepspeed.initialize (and "
                  "refuses to run ZeRO without one); add an \"optimizer\" block to choose",
                  L->origin);
    zcfg_resolve_monitors(L);
    zcfg_resolve_determinism(L);
    zcfg_resolve_zeropp(L);
    zcfg_report_default_autos(L);
}
