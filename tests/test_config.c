/* The ds_config loader, table-driven (issue 2). Every key in the schema has a row below with its canonical
 * path, the zinc_config field it must land in (offsetof, written by hand so a mis-mapped schema entry is
 * caught), a valid value and its effect, and the default; a coverage check fails when a schema key has no
 * row. Generic checks run per key kind from the schema (wrong JSON types, out-of-range, fractions, "auto",
 * null, round trip through the dump); the semantic rules (batch triad, deprecated spellings, refused keys,
 * scheduler and offload rules, malformed JSON) follow. Warnings are captured through the log callback. */
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

#include "runtime/config/config.h"
#include "runtime/config/config_schema.h"
#include "zt.h"

/* ------------------------------------------------------------------ helpers */

#define CAP_MAX 512
typedef struct {
    int n;
    zinc_log_level level[CAP_MAX];
    char msg[CAP_MAX][600];
} logcap;

static logcap cap;
static zinc_config cfg;

static void cap_fn(void *ud, zinc_log_level lv, int rank, const char *m) {
    logcap *c = ud;
    (void)rank;
    if (c->n >= CAP_MAX) return;
    c->level[c->n] = lv;
    snprintf(c->msg[c->n], sizeof c->msg[0], "%s", m);
    c->n++;
}

static zinc_status load_w(const char *json, int world) {
    cap.n = 0;
    zlog l = {cap_fn, &cap, ZINC_LOG_DEBUG, 0};
    zinc_config tmp;
    memset(&tmp, 0xA5, sizeof tmp); /* poison: a failed load must not write out */
    zinc_status st = zcfg_load_text(json, "t.json", world, &l, &tmp);
    if (st == ZINC_OK) {
        cfg = tmp;
    } else {
        unsigned char poison[sizeof tmp];
        memset(poison, 0xA5, sizeof poison);
        if (memcmp(&tmp, poison, sizeof tmp)) zt_fail_at(__FILE__, __LINE__, "a failed load wrote its output: %.200s", json);
    }
    return st;
}
static zinc_status load(const char *json) { return load_w(json, 1); }

/* Log lines at exactly `lv` containing every non-NULL needle. */
static int logged(zinc_log_level lv, const char *a, const char *b) {
    int k = 0;
    for (int i = 0; i < cap.n; i++)
        if (cap.level[i] == lv && (!a || strstr(cap.msg[i], a)) && (!b || strstr(cap.msg[i], b))) k++;
    return k;
}
static int nwarn(void) { return logged(ZINC_LOG_WARN, NULL, NULL); }

static void dump_log(void) {
    for (int i = 0; i < cap.n; i++) fprintf(stderr, "  log[%d] %d: %s\n", i, cap.level[i], cap.msg[i]);
}

/* Checks the last error contains every needle (NULL-terminated list). */
static void check_msg(const char *file, int line, zinc_status st, zinc_status want, const char *const *needles) {
    const char *m = zinc_last_error();
    if (st != want) {
        zt_fail_at(file, line, "got %s, wanted %s: %s", zinc_status_name(st), zinc_status_name(want), m);
        return;
    }
    for (int i = 0; needles[i]; i++)
        if (!strstr(m, needles[i])) {
            zt_fail_at(file, line, "message lacks \"%s\": %s", needles[i], m);
            return;
        }
    zt_passed++;
}
#define EXPECT_ERR(json, ...) check_msg(__FILE__, __LINE__, load(json), ZINC_ERR_CONFIG, (const char *[]){__VA_ARGS__, NULL})
#define EXPECT_ERR_W(json, w, ...)                                                                          \
    check_msg(__FILE__, __LINE__, load_w(json, w), ZINC_ERR_CONFIG, (const char *[]){__VA_ARGS__, NULL})
#define EXPECT_OK(json) ZT_OK(load(json))

/* Sets `path` (dotted) in `root` to `v` (stolen), creating objects on the way. */
static void jset(json_t *root, const char *path, json_t *v) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *o = root;
    char *seg = buf;
    for (char *dot; (dot = strchr(seg, '.')); seg = dot + 1) {
        *dot = 0;
        json_t *next = json_object_get(o, seg);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(o, seg, next);
        }
        o = next;
    }
    json_object_set_new(o, seg, v);
}

static json_t *jparse(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) {
        fprintf(stderr, "test bug: cannot parse %s: %s\n", text, e.text);
        abort();
    }
    return v;
}

/* {"train_batch_size": 8} + ctx (merged) + path = value (value NULL: key absent). malloc'd text. */
static char *build(const char *ctx, const char *path, const char *value) {
    json_t *root = jparse("{\"train_batch_size\": 8}");
    if (ctx) {
        json_t *c = jparse(ctx);
        json_object_update_recursive(root, c);
        json_decref(c);
    }
    if (path && value) jset(root, path, jparse(value));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* The schema key at a canonical dotted path. */
static const zkey_key *schema_key(const char *path, const zkey_table **tab) {
    const zkey_table *all[64];
    size_t n = zkey_all_tables(all, 64);
    const char *dot = strrchr(path, '.');
    char prefix[512] = "";
    if (dot) snprintf(prefix, sizeof prefix, "%.*s", (int)(dot - path), path);
    const char *name = dot ? dot + 1 : path;
    for (size_t i = 0; i < n && i < 64; i++)
        if (!strcmp(all[i]->path, prefix)) {
            if (tab) *tab = all[i];
            return zkey_find(all[i], name);
        }
    return NULL;
}

/* The value of key k in c, as JSON (independent of config_dump.c). */
static json_t *field_json(const zinc_config *c, const zkey_key *k) {
    const char *b = (const char *)c + k->off;
    switch (k->kind) {
    case ZKEY_BOOL: return json_boolean(*(const bool *)b);
    case ZKEY_INT: return json_integer(*(const int *)b);
    case ZKEY_I64:
    case ZKEY_SIZE: return json_integer((json_int_t) * (const int64_t *)b);
    case ZKEY_F64: return json_real(*(const double *)b);
    case ZKEY_ENUM: return json_string(k->names[*(const int *)b]);
    case ZKEY_DTYPE: return json_string(zinc_dtype_name(*(const zinc_dtype *)b));
    case ZKEY_STR: return json_string(b);
    case ZKEY_BETAS: return json_pack("[ff]", ((const double *)b)[0], ((const double *)b)[1]);
    default: return NULL;
    }
}

/* Whether the field equals the expected JSON text (numbers compared exactly, enum names case-insensitively). */
static bool field_is(const zinc_config *c, const zkey_key *k, const char *want_text, char *got_out, size_t n) {
    json_t *got = field_json(c, k), *want = jparse(want_text);
    char *gs = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(got_out, n, "%s", gs ? gs : "?");
    free(gs);
    bool eq;
    if (json_is_number(got) && json_is_number(want)) {
        if (json_is_integer(got) && json_is_integer(want)) eq = json_integer_value(got) == json_integer_value(want);
        else eq = json_number_value(got) == json_number_value(want);
    } else if (json_is_string(got) && json_is_string(want)) {
        eq = !strcasecmp(json_string_value(got), json_string_value(want));
    } else if (json_is_array(got) && json_is_array(want) && json_array_size(want) == 2) {
        eq = json_number_value(json_array_get(got, 0)) == json_number_value(json_array_get(want, 0)) &&
             json_number_value(json_array_get(got, 1)) == json_number_value(json_array_get(want, 1));
    } else {
        eq = json_equal(got, want);
    }
    json_decref(got);
    json_decref(want);
    return eq;
}

/* ------------------------------------------------------------------ the key table */

#define F(field) offsetof(zinc_config, field)
#define NOFF ((size_t)-1)
#define REQUIRED 1 /* the key is required in its context: no default / "auto" / null check */
#define SCHED_WLR "{\"scheduler\":{\"type\":\"WarmupLR\"}}"
#define SCHED_WDL "{\"scheduler\":{\"type\":\"WarmupDecayLR\",\"params\":{\"total_num_steps\":5000}}}"
#define SCHED_WCL "{\"scheduler\":{\"type\":\"WarmupCosineLR\",\"params\":{\"total_num_steps\":5000}}}"
#define SCHED_OC "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_min_lr\":0.001,\"cycle_max_lr\":0.01}}}"
#define STAGE2 "{\"zero_optimization\":{\"stage\":2}}"
#define STAGE3 "{\"zero_optimization\":{\"stage\":3}}"
#define OPT_LAMB "{\"optimizer\":{\"type\":\"Lamb\"}}"

typedef struct {
    const char *path;   /* canonical JSON path */
    size_t off;         /* the field it must set */
    const char *ctx;    /* JSON merged into {"train_batch_size": 8} */
    const char *good;   /* a valid value */
    const char *want;   /* its effect, as JSON */
    const char *def;    /* the value when the key is absent (DeepSpeed's default unless noted) */
    int flags;
} key_row;

static const key_row rows[] = {
    /* batch triad (defaults are the resolved values for train_batch_size 8 on one rank) */
    {"train_batch_size", F(train_batch_size), NULL, "16", "16", "8", 0},
    {"train_micro_batch_size_per_gpu", F(train_micro_batch_size_per_gpu), NULL, "4", "4", "8", 0},
    {"gradient_accumulation_steps", F(gradient_accumulation_steps), NULL, "2", "2", "1", 0},
    /* top-level scalars */
    {"gradient_clipping", F(gradient_clipping), NULL, "1.0", "1.0", "0", 0}, /* code default 0, not the docs' 1 */
    {"steps_per_print", F(steps_per_print), NULL, "10", "10", "0", 0},      /* code default None: no report */
    {"wall_clock_breakdown", F(wall_clock_breakdown), NULL, "true", "true", "false", 0},
    {"memory_breakdown", F(memory_breakdown), NULL, "true", "true", "false", 0},
    {"dump_state", F(dump_state), NULL, "true", "true", "false", 0},
    {"communication_data_type", F(comm_dtype), NULL, "\"bf16\"", "\"bf16\"", "\"fp32\"", 0},
    {"prescale_gradients", F(prescale_gradients), NULL, "true", "true", "false", 0},
    {"gradient_predivide_factor", F(gradient_predivide_factor), NULL, "2.0", "2.0", "1.0", 0},
    /* optimizer */
    {"optimizer.type", F(optimizer.type), NULL, "\"adamw\"", "\"AdamW\"", "\"Adam\"", 0},
    {"optimizer.params.lr", F(optimizer.lr), NULL, "0.01", "0.01", "0.001", 0},
    {"optimizer.params.betas", F(optimizer.beta1), NULL, "[0.8, 0.99]", "[0.8, 0.99]", "[0.9, 0.999]", 0},
    {"optimizer.params.eps", F(optimizer.eps), NULL, "1e-6", "1e-6", "1e-8", 0},
    {"optimizer.params.weight_decay", F(optimizer.weight_decay), NULL, "0.1", "0.1", "0.0", 0},
    {"optimizer.params.bias_correction", F(optimizer.bias_correction), NULL, "false", "false", "true", 0},
    {"optimizer.params.adam_w_mode", F(optimizer.adam_w_mode), NULL, "false", "false", "true", 0},
    {"optimizer.params.torch_adam", F(optimizer.torch_adam), NULL, "true", "true", "false", 0},
    {"optimizer.params.max_coeff", F(optimizer.max_coeff), OPT_LAMB, "5.0", "5.0", "10.0", 0},
    {"optimizer.params.min_coeff", F(optimizer.min_coeff), OPT_LAMB, "0.1", "0.1", "0.01", 0},
    {"optimizer.params.eps_inside_sqrt", F(optimizer.eps_inside_sqrt), OPT_LAMB, "true", "true", "false", 0},
    /* scheduler */
    {"scheduler.type", F(scheduler.type), NULL, "\"warmuplr\"", "\"WarmupLR\"", "\"none\"", 0},
    {"scheduler.params.warmup_min_lr", F(scheduler.warmup_min_lr), SCHED_WLR, "1e-5", "1e-5", "0.0", 0},
    {"scheduler.params.warmup_max_lr", F(scheduler.warmup_max_lr), SCHED_WDL, "0.01", "0.01", "0.001", 0},
    {"scheduler.params.warmup_num_steps", F(scheduler.warmup_num_steps), SCHED_WCL, "50", "50", "1000", 0},
    {"scheduler.params.warmup_type", F(scheduler.warmup_type), SCHED_WLR, "\"linear\"", "\"linear\"", "\"log\"", 0},
    {"scheduler.params.total_num_steps", F(scheduler.total_num_steps), "{\"scheduler\":{\"type\":\"WarmupDecayLR\"}}",
     "5000", "5000", "0", REQUIRED},
    {"scheduler.params.warmup_min_ratio", F(scheduler.warmup_min_ratio), SCHED_WCL, "0.1", "0.1", "0.0", 0},
    {"scheduler.params.cos_min_ratio", F(scheduler.cos_min_ratio), SCHED_WCL, "0.01", "0.01", "1e-4", 0},
    {"scheduler.params.cycle_min_lr", F(scheduler.cycle_min_lr),
     "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_max_lr\":0.1}}}", "0.002", "0.002", "0", REQUIRED},
    {"scheduler.params.cycle_max_lr", F(scheduler.cycle_max_lr),
     "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_min_lr\":0.001}}}", "0.1", "0.1", "0", REQUIRED},
    {"scheduler.params.decay_lr_rate", F(scheduler.decay_lr_rate), SCHED_OC, "0.5", "0.5", "0.0", 0},
    {"scheduler.params.cycle_first_step_size", F(scheduler.cycle_first_step_size), SCHED_OC, "100", "100", "2000", 0},
    {"scheduler.params.cycle_second_step_size", F(scheduler.cycle_second_step_size), SCHED_OC, "50", "50", "-1", 0},
    {"scheduler.params.cycle_first_stair_count", F(scheduler.cycle_first_stair_count), SCHED_OC, "4", "4", "0", 0},
    {"scheduler.params.cycle_second_stair_count", F(scheduler.cycle_second_stair_count), SCHED_OC, "4", "4", "0", 0},
    {"scheduler.params.decay_step_size", F(scheduler.decay_step_size), SCHED_OC, "10", "10", "0", 0},
    {"scheduler.params.cycle_momentum", F(scheduler.cycle_momentum), SCHED_OC, "false", "false", "true", 0},
    {"scheduler.params.cycle_min_mom", F(scheduler.cycle_min_mom), SCHED_OC, "0.7", "0.7", "0.8", 0},
    {"scheduler.params.cycle_max_mom", F(scheduler.cycle_max_mom), SCHED_OC, "0.95", "0.95", "0.9", 0},
    {"scheduler.params.decay_mom_rate", F(scheduler.decay_mom_rate), SCHED_OC, "0.1", "0.1", "0.0", 0},
    /* fp16 / bf16 */
    {"fp16.enabled", F(fp16.enabled), NULL, "true", "true", "false", 0},
    {"fp16.auto_cast", F(fp16.auto_cast), NULL, "true", "true", "false", 0},
    {"fp16.loss_scale", F(fp16.loss_scale), NULL, "128", "128.0", "0.0", 0},
    {"fp16.initial_scale_power", F(fp16.initial_scale_power), NULL, "12", "12", "16", 0},
    {"fp16.loss_scale_window", F(fp16.loss_scale_window), NULL, "500", "500", "1000", 0},
    {"fp16.hysteresis", F(fp16.hysteresis), NULL, "4", "4", "2", 0},
    {"fp16.consecutive_hysteresis", F(fp16.consecutive_hysteresis), NULL, "true", "true", "false", 0},
    {"fp16.min_loss_scale", F(fp16.min_loss_scale), NULL, "0.5", "0.5", "1.0", 0},
    {"bf16.enabled", F(bf16_enabled), NULL, "true", "true", "false", 0},
    {"bf16.immediate_grad_update", F(bf16_immediate_grad_update), NULL, "true", "true", "false", 0},
    /* zero_optimization */
    {"zero_optimization.stage", F(zero.stage), NULL, "2", "2", "0", 0},
    {"zero_optimization.contiguous_gradients", F(zero.contiguous_gradients), NULL, "false", "false", "true", 0},
    {"zero_optimization.overlap_comm", F(zero.overlap_comm), NULL, "true", "true", "false", 0},
    {"zero_optimization.reduce_scatter", F(zero.reduce_scatter), NULL, "false", "false", "true", 0},
    {"zero_optimization.reduce_bucket_size", F(zero.reduce_bucket_size), NULL, "5e5", "500000", "500000000", 0},
    {"zero_optimization.allgather_bucket_size", F(zero.allgather_bucket_size), NULL, "2e8", "200000000", "500000000", 0},
    {"zero_optimization.allgather_partitions", F(zero.allgather_partitions), NULL, "false", "false", "true", 0},
    {"zero_optimization.sub_group_size", F(zero.sub_group_size), NULL, "1e6", "1000000", "1000000000", 0},
    {"zero_optimization.stage3_prefetch_bucket_size", F(zero.prefetch_bucket_size), STAGE3, "1e5", "100000",
     "50000000", 0},
    {"zero_optimization.stage3_param_persistence_threshold", F(zero.param_persistence_threshold), STAGE3, "1000",
     "1000", "100000", 0},
    {"zero_optimization.stage3_model_persistence_threshold", F(zero.model_persistence_threshold), STAGE3, "1e9",
     "1000000000", "9223372036854775807", 0},
    {"zero_optimization.stage3_max_live_parameters", F(zero.max_live_parameters), STAGE3, "1e6", "1000000",
     "1000000000", 0},
    {"zero_optimization.stage3_max_reuse_distance", F(zero.max_reuse_distance), STAGE3, "1e6", "1000000",
     "1000000000", 0},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", F(zero.gather_16bit_weights_on_model_save),
     STAGE3, "true", "true", "false", 0},
    {"zero_optimization.round_robin_gradients", F(zero.round_robin_gradients), NULL, "true", "true", "false", 0},
    {"zero_optimization.ignore_unused_parameters", F(zero.ignore_unused_parameters), NULL, "false", "false", "true", 0},
    {"zero_optimization.load_from_fp32_weights", F(zero.load_from_fp32_weights), NULL, "false", "false", "true", 0},
    /* offload_optimizer (DeepSpeed's code default device is "none"; its docs say cpu) */
    {"zero_optimization.offload_optimizer.device", F(zero.offload_optimizer.device), STAGE2, "\"cpu\"", "\"cpu\"",
     "\"none\"", 0},
    {"zero_optimization.offload_optimizer.nvme_path", F(zero.offload_optimizer.nvme_path), STAGE2, "\"/tmp/x\"",
     "\"/tmp/x\"", "\"\"", 0},
    {"zero_optimization.offload_optimizer.buffer_count", F(zero.offload_optimizer.buffer_count), STAGE2, "8", "8",
     "4", 0},
    {"zero_optimization.offload_optimizer.pin_memory", F(zero.offload_optimizer.pin_memory), STAGE2, "true", "true",
     "false", 0},
    {"zero_optimization.offload_optimizer.pipeline_read", F(zero.offload_optimizer.pipeline_read), STAGE2, "true",
     "true", "false", 0},
    {"zero_optimization.offload_optimizer.pipeline_write", F(zero.offload_optimizer.pipeline_write), STAGE2, "true",
     "true", "false", 0},
    {"zero_optimization.offload_optimizer.fast_init", F(zero.offload_optimizer.fast_init), STAGE2, "true", "true",
     "false", 0},
    {"zero_optimization.offload_optimizer.ratio", F(zero.offload_optimizer.ratio), STAGE3, "0.5", "0.5", "1.0", 0},
    /* offload_param */
    {"zero_optimization.offload_param.device", F(zero.offload_param.device), STAGE3, "\"cpu\"", "\"cpu\"", "\"none\"", 0},
    {"zero_optimization.offload_param.nvme_path", F(zero.offload_param.nvme_path), STAGE3, "\"/tmp/p\"", "\"/tmp/p\"",
     "\"\"", 0},
    {"zero_optimization.offload_param.buffer_count", F(zero.offload_param.buffer_count), STAGE3, "3", "3", "5", 0},
    {"zero_optimization.offload_param.buffer_size", F(zero.offload_param.buffer_size), STAGE3, "1e7", "10000000",
     "100000000", 0},
    {"zero_optimization.offload_param.max_in_cpu", F(zero.offload_param.max_in_cpu), STAGE3, "1e8", "100000000",
     "1000000000", 0},
    {"zero_optimization.offload_param.pin_memory", F(zero.offload_param.pin_memory), STAGE3, "true", "true", "false", 0},
    /* aio */
    {"aio.block_size", F(aio.block_size), NULL, "262144", "262144", "1048576", 0},
    {"aio.queue_depth", F(aio.queue_depth), NULL, "16", "16", "8", 0},
    {"aio.intra_op_parallelism", F(aio.intra_op_parallelism), NULL, "4", "4", "1", 0},
    {"aio.single_submit", F(aio.single_submit), NULL, "true", "true", "false", 0},
    {"aio.overlap_events", F(aio.overlap_events), NULL, "false", "false", "true", 0},
    {"aio.use_gds", F(aio.use_gds), NULL, "false", "false", "false", 0}, /* true is an error (tested below) */
    /* checkpoint */
    {"checkpoint.tag_validation", F(checkpoint.tag_validation), NULL, "\"FAIL\"", "\"Fail\"", "\"Warn\"", 0},
    {"checkpoint.load_universal", F(checkpoint.load_universal), NULL, "true", "true", "false", 0},
    {"checkpoint.use_node_local_storage", F(checkpoint.use_node_local_storage), NULL, "true", "true", "false", 0},
    {"checkpoint.parallel_write.pipeline_stage", F(checkpoint.parallel_write_pipeline_stage), NULL, "true", "true",
     "false", 0},
    /* data_types, zinc */
    {"data_types.grad_accum_dtype", F(grad_accum_dtype), NULL, "\"torch.bfloat16\"", "\"bf16\"", "\"fp32\"", 0},
    {"zinc.device", F(device), NULL, "\"cpu\"", "\"cpu\"", "\"auto\"", 0},
    {"zinc.max_skipped_steps", F(fp16.max_skipped_steps), NULL, "10", "10", "0", 0},
    {"zinc.allow_buffered_io", F(aio.allow_buffered_io), NULL, "true", "true", "false", 0},
};
#define NROWS (sizeof rows / sizeof rows[0])

/* Other spellings: alias path -> canonical path, whether it warns. */
typedef struct {
    const char *path, *canon, *ctx, *value, *want;
    int deprecated;
} alias_row;
static const alias_row aliases[] = {
    {"zero_optimization.prefetch_bucket_size", "zero_optimization.stage3_prefetch_bucket_size", STAGE3, "1e5", "100000", 0},
    {"zero_optimization.param_persistence_threshold", "zero_optimization.stage3_param_persistence_threshold", STAGE3,
     "77", "77", 0},
    {"zero_optimization.model_persistence_threshold", "zero_optimization.stage3_model_persistence_threshold", STAGE3,
     "78", "78", 0},
    {"zero_optimization.max_live_parameters", "zero_optimization.stage3_max_live_parameters", STAGE3, "79", "79", 0},
    {"zero_optimization.max_reuse_distance", "zero_optimization.stage3_max_reuse_distance", STAGE3, "80", "80", 0},
    {"zero_optimization.gather_16bit_weights_on_model_save", "zero_optimization.stage3_gather_16bit_weights_on_model_save",
     STAGE3, "true", "true", 0},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save",
     "zero_optimization.stage3_gather_16bit_weights_on_model_save", STAGE3, "true", "true", 1},
    {"aio.thread_count", "aio.intra_op_parallelism", NULL, "4", "4", 1},
    {"bfloat16", "bf16.enabled", NULL, "{\"enabled\": true}", "true", 1},
};

/* Keys with their own translation (ZKEY_LEGACY). */
static const char *const legacy_paths[] = {"zero_optimization.cpu_offload", "zero_optimization.cpu_offload_param",
                                           "zero_optimization.cpu_offload_use_pin_memory"};

/* Accepted-and-ignored (warn when active) and refused (error when active) keys: an active and an inactive value. */
typedef struct {
    const char *path, *ctx, *on, *off;
} onoff_row;
static const onoff_row ignored[] = {
    {"scheduler.params.last_batch_iteration", SCHED_WLR, "10", NULL},
    {"bf16.check_grad_overflow", NULL, "true", "false"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", NULL, "true", "false"},
    {"zero_optimization.stage3_module_granularity_threshold", STAGE3, "100", "0"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", STAGE3, "true", "false"},
    {"zero_optimization.memory_efficient_linear", NULL, "true", "false"},
    {"zero_optimization.override_module_apply", NULL, "true", "false"},
    {"zero_optimization.log_trace_cache_warnings", NULL, "true", "false"},
    {"zero_optimization.elastic_checkpoint", NULL, "true", "false"},
    {"zero_optimization.pipeline_loading_checkpoint", NULL, "true", "false"},
    {"zero_optimization.mics_hierarchical_params_gather", NULL, "true", "false"},
    {"tensorboard", NULL, "{\"enabled\": true, \"output_path\": \"/tmp/tb\"}", "{\"enabled\": false}"},
    {"wandb", NULL, "{\"enabled\": true, \"project\": \"p\"}", "{\"enabled\": false}"},
    {"csv_monitor", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"comet", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"flops_profiler", NULL, "{\"enabled\": true, \"profile_step\": 1}", "{\"enabled\": false, \"profile_step\": 1}"},
    {"activation_checkpointing.partition_activations", NULL, "true", "false"},
    {"activation_checkpointing.cpu_checkpointing", NULL, "true", "false"},
    {"activation_checkpointing.number_checkpoints", NULL, "4", "null"},
    {"activation_checkpointing.contiguous_memory_optimization", NULL, "true", "false"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", NULL, "true", "false"},
    {"activation_checkpointing.profile", NULL, "true", "false"},
    {"autotuning", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"zero_allow_untested_optimizer", NULL, "true", "false"},
    {"zero_force_ds_cpu_optimizer", NULL, "true", "false"},
    {"disable_allgather", NULL, "true", "false"},
    {"gradient_accumulation_dtype", NULL, "\"fp32\"", NULL},
    {"seq_parallel_communication_data_type", NULL, "\"fp32\"", NULL},
    {"pipeline", NULL, "{\"stages\": \"auto\"}", "{}"},
    {"comms_logger", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"timers", NULL, "{\"throughput\": {\"enabled\": true}}", "{\"throughput\": {\"enabled\": false}}"},
    {"nebula", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"zero_force_ds_cpu_initialization", NULL, "true", "false"},
    /* newer DeepSpeed keys (release 0.19.6) */
    {"compile", NULL, "{\"deepcompile\": true}", "{}"},
    {"hybrid_engine", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"torch_autocast", NULL, "{\"enabled\": true, \"dtype\": \"bfloat16\"}", "{\"enabled\": false}"},
    {"dataloader_drop_last", NULL, "true", "false"},
    {"eigenvalue", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"comms_config", NULL, "{\"verbose\": true}", "{}"},
    {"graph_harvesting", NULL, "true", "false"},
    {"log_level", NULL, "\"info\"", NULL},
    {"lower_precision_safe_modules", NULL, "[\"torch.nn.Linear\"]", "[]"},
    {"use_data_before_expert_parallelism", NULL, "true", "false"},
    {"weight_quantization", NULL, "{\"post_init_quant\": {\"fc\": {\"num_bits\": 8}}}", "{}"},
    {"zero_optimization.allgather_sequential", NULL, "true", "false"},
    {"zero_optimization.enable_sanity_checks", NULL, "true", "false"},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", NULL, "true", "false"},
    {"zero_optimization.leaf_module", NULL, "{\"classes\": [\"MoE\"]}", "{}"},
    {"zero_optimization.offload_optimizer.super_offload", NULL, "true", "false"},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", NULL, "50", "0"},
};
static const onoff_row refused[] = {
    {"optimizer.params.amsgrad", NULL, "true", "false"},
    {"optimizer.params.max_grad_norm", NULL, "1.0", "null"},
    {"fp16.fp16_master_weights_and_grads", NULL, "true", "false"},
    {"zero_optimization.zero_quantized_weights", STAGE3, "true", "false"},
    {"zero_optimization.zero_quantized_nontrainable_weights", STAGE3, "true", "false"},
    {"zero_optimization.zero_quantized_gradients", STAGE3, "true", "false"},
    {"zero_optimization.zero_hpz_partition_size", STAGE3, "8", "1"},
    {"zero_optimization.mics_shard_size", STAGE3, "4", "-1"},
    {"zero_optimization.zeropp_loco_param", STAGE3, "{\"err_beta\": 0.8, \"reset_T\": 1024}", "null"},
    {"zero_optimization.legacy_stage1", NULL, "true", "false"},
    {"amp", NULL, "{\"enabled\": true, \"opt_level\": \"O1\"}", "{\"enabled\": false}"},
    {"elasticity", NULL, "{\"enabled\": true, \"max_train_batch_size\": 64}", "{\"enabled\": false}"},
    {"sparse_gradients", NULL, "true", "false"},
    {"curriculum_learning", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"data_efficiency", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"compression_training", NULL, "{\"weight_quantization\": {\"shared_parameters\": {\"enabled\": true}}}",
     "{\"weight_quantization\": {\"shared_parameters\": {\"enabled\": false}}}"},
    {"sparse_attention", NULL, "{\"mode\": \"fixed\"}", "{}"},
    {"fp32_allreduce", NULL, "true", "false"},
    {"tensor_parallel", NULL, "{\"autotp_size\": 2}", "{}"},
    {"quantize_training", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"progressive_layer_drop", NULL, "{\"enabled\": true, \"theta\": 0.5}", "{\"enabled\": false}"},
    {"expert_parallel", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"fp8", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"bf16.bf16_master_weights_and_grads", NULL, "true", "false"},
    {"bf16.bf16_optimizer_states", NULL, "true", "false"},
    {"zero_optimization.zenflow", STAGE3, "{\"topk_ratio\": 0.1}", "null"},
};

static const key_row *find_row(const char *path) {
    for (size_t i = 0; i < NROWS; i++)
        if (!strcmp(rows[i].path, path)) return &rows[i];
    return NULL;
}

/* ------------------------------------------------------------------ coverage: every schema key has a row */

static void join_path(char *out, size_t n, const char *prefix, const char *name) {
    if (*prefix) snprintf(out, n, "%s.%s", prefix, name);
    else snprintf(out, n, "%s", name);
}

static int in_list(const char *path, int which) {
    switch (which) {
    case ZKEY_ALIAS:
        for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
            if (!strcmp(aliases[i].path, path)) return 1;
        return 0;
    case ZKEY_LEGACY:
        for (size_t i = 0; i < sizeof legacy_paths / sizeof legacy_paths[0]; i++)
            if (!strcmp(legacy_paths[i], path)) return 1;
        return 0;
    case ZKEY_IGNORED:
        for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
            if (!strcmp(ignored[i].path, path)) return 1;
        return 0;
    case ZKEY_REFUSED:
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
            if (!strcmp(refused[i].path, path)) return 1;
        return 0;
    default: return find_row(path) != NULL;
    }
}

static void test_coverage(void) {
    const zkey_table *all[64];
    size_t n = zkey_all_tables(all, 64);
    ZT_CHECK(n > 10 && n <= 64, "zkey_all_tables returned %zu", n);
    int keys = 0;
    for (size_t t = 0; t < n && t < 64; t++)
        for (size_t i = 0; i < all[t]->nkeys; i++) {
            const zkey_key *k = &all[t]->keys[i];
            if (k->kind == ZKEY_OBJECT) continue;
            char path[512];
            join_path(path, sizeof path, all[t]->path, k->name);
            keys++;
            ZT_CHECK(in_list(path, k->kind), "schema key %s (kind %d) has no row in test_config.c", path, (int)k->kind);
        }
    /* and every row names a schema key of the right kind */
    for (size_t i = 0; i < NROWS; i++) {
        const zkey_key *k = schema_key(rows[i].path, NULL);
        ZT_CHECK(k && k->kind != ZKEY_ALIAS && k->kind != ZKEY_IGNORED && k->kind != ZKEY_REFUSED, "row %s: not a schema key",
                 rows[i].path);
        if (k) ZT_CHECK(k->off == rows[i].off, "%s: the schema maps it to offset %zu, the test expects %zu",
                        rows[i].path, k->off, rows[i].off);
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const zkey_key *k = schema_key(aliases[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_ALIAS && k->deprecated == aliases[i].deprecated, "%s: alias row mismatch",
                 aliases[i].path);
    }
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        const zkey_key *k = schema_key(ignored[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_IGNORED, "%s: not an ignored key", ignored[i].path);
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const zkey_key *k = schema_key(refused[i].path, NULL);
        ZT_CHECK(k && k->kind == ZKEY_REFUSED, "%s: not a refused key", refused[i].path);
    }
    printf("schema: %zu tables, %d keys\n", n, keys);
}

/* ------------------------------------------------------------------ per-key: default, valid value, auto, null */

static void test_key_rows(void) {
    char got[256];
    for (size_t i = 0; i < NROWS; i++) {
        const key_row *r = &rows[i];
        const zkey_key *k = schema_key(r->path, NULL);
        if (!k) continue; /* reported by test_coverage */
        /* the valid value, and no warning for it */
        char *j = build(r->ctx, r->path, r->good);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, r->good, zinc_last_error());
        if (st == ZINC_OK) {
            ZT_CHECK(field_is(&cfg, k, r->want, got, sizeof got), "%s = %s: got %s, want %s", r->path, r->good, got,
                     r->want);
            ZT_CHECK(zcfg_given(&cfg, r->path), "%s: not recorded as given", r->path);
            ZT_CHECK(nwarn() == 0, "%s = %s: unexpected warning %s", r->path, r->good, cap.n ? cap.msg[0] : "");
        }
        free(j);
        if (r->flags & REQUIRED) continue;
        /* absent: the default, recorded as not given */
        j = build(r->ctx, NULL, NULL);
        st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s default: %s", r->path, zinc_last_error());
        if (st == ZINC_OK) {
            ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s default: got %s, want %s", r->path, got, r->def);
            if (strcmp(r->path, "train_batch_size"))
                ZT_CHECK(!zcfg_given(&cfg, r->path), "%s: given without being written", r->path);
        }
        free(j);
        /* null: the default, silently */
        j = build(r->ctx, r->path, "null");
        if (strncmp(r->path, "train_", 5) && strncmp(r->path, "gradient_acc", 12)) {
            st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = null: %s", r->path, zinc_last_error());
            if (st == ZINC_OK)
                ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s = null: got %s, want %s", r->path, got, r->def);
        }
        free(j);
        /* "auto": the default, or the Hugging Face Trainer's value for the keys it fills (those values are
         * checked in test_config_auto.c; batch sizes are derived, tested below); one WARN naming the key and
         * the --set that chooses it */
        if (strncmp(r->path, "train_", 5) && strncmp(r->path, "gradient_acc", 12)) {
            static const char *const hf[] = {"gradient_clipping", "optimizer.params.lr", "optimizer.params.betas",
                                             "optimizer.params.eps", "scheduler.params.warmup_max_lr",
                                             "scheduler.params.warmup_num_steps"};
            bool by_hf = false;
            for (size_t h = 0; h < sizeof hf / sizeof hf[0]; h++) by_hf |= !strcmp(r->path, hf[h]);
            j = build(r->ctx, r->path, "\"auto\"");
            st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = \"auto\": %s", r->path, zinc_last_error());
            if (st == ZINC_OK) {
                if (!by_hf)
                    ZT_CHECK(field_is(&cfg, k, r->def, got, sizeof got), "%s = auto: got %s, want %s", r->path, got,
                             r->def);
                char flag[600];
                snprintf(flag, sizeof flag, "--set %s=", r->path);
                ZT_CHECK(logged(ZINC_LOG_WARN, r->path, flag) == 1, "%s = auto: not one WARN naming it", r->path);
                ZT_CHECK(strstr(cfg.filled, r->path) != NULL, "%s = auto: not in _filled", r->path);
            }
            free(j);
        }
    }
}

/* ------------------------------------------------------------------ per-kind invalid values, from the schema */

static void expect_bad(const key_row *r, const char *value, const char *n1, const char *n2) {
    char *j = build(r->ctx, r->path, value);
    zinc_status st = load(j);
    const char *m = zinc_last_error();
    ZT_CHECK(st == ZINC_ERR_CONFIG, "%s = %s: accepted (%s)", r->path, value, zinc_status_name(st));
    if (st == ZINC_ERR_CONFIG) {
        /* every error names the file, the JSON path, the value and what is allowed */
        char pathneedle[600];
        snprintf(pathneedle, sizeof pathneedle, "t.json: %s", r->path);
        ZT_CHECK(strstr(m, pathneedle) != NULL, "%s = %s: message lacks the path: %s", r->path, value, m);
        ZT_CHECK(!n1 || strstr(m, n1), "%s = %s: message lacks \"%s\": %s", r->path, value, n1, m);
        ZT_CHECK(!n2 || strstr(m, n2), "%s = %s: message lacks \"%s\": %s", r->path, value, n2, m);
        ZT_CHECK(strstr(m, "(1 problem)") != NULL, "%s = %s: one mistake, several problems: %s", r->path, value, m);
    }
    free(j);
}

static void test_bad_values(void) {
    char v[64], shown[96];
    for (size_t i = 0; i < NROWS; i++) {
        const key_row *r = &rows[i];
        const zkey_key *k = schema_key(r->path, NULL);
        if (!k) continue;
        expect_bad(r, "{\"x\": 1}", "{\"x\":1}", NULL); /* an object where a scalar belongs */
        switch (k->kind) {
        case ZKEY_BOOL:
            expect_bad(r, "\"yes\"", "\"yes\"", "true or false");
            expect_bad(r, "1", "got 1", "true or false");
            break;
        case ZKEY_INT:
        case ZKEY_I64:
        case ZKEY_SIZE:
        case ZKEY_F64: {
            expect_bad(r, "\"ten\"", "\"ten\"", "expected a number");
            expect_bad(r, "true", "got true", "expected a number");
            expect_bad(r, "[1]", "[1]", "expected a number");
            double below = floor(k->lo) == k->lo ? k->lo - 1 : floor(k->lo);
            snprintf(v, sizeof v, "%.0f", below);
            snprintf(shown, sizeof shown, "%s is out of range", v);
            expect_bad(r, v, shown, "allowed");
            if (k->hi < 1e15) {
                double above = floor(k->hi) + 1;
                snprintf(v, sizeof v, "%.0f", above);
                snprintf(shown, sizeof shown, "%s is out of range", v);
                expect_bad(r, v, shown, "allowed");
            } else {
                expect_bad(r, "1e300", "out of range", "allowed");
            }
            if (k->kind == ZKEY_INT || k->kind == ZKEY_I64) {
                snprintf(v, sizeof v, "%.1f", k->lo + 0.5);
                expect_bad(r, v, v, "whole number");
            }
            break;
        }
        case ZKEY_ENUM: {
            char first[64];
            snprintf(first, sizeof first, "\"%s\"", k->names[0]);
            expect_bad(r, "\"bogus\"", "\"bogus\" is not one of", first);
            expect_bad(r, "3", "3 is not one of", first);
            break;
        }
        case ZKEY_DTYPE:
            expect_bad(r, "\"int8\"", "\"int8\" is not a dtype", "\"bf16\"");
            expect_bad(r, "16", "16 is not a dtype", "\"fp16\"");
            break;
        case ZKEY_STR:
            expect_bad(r, "5", "got 5", "expected a string");
            expect_bad(r, "false", "got false", "expected a string");
            break;
        case ZKEY_BETAS:
            expect_bad(r, "0.9", "got 0.9", "expected [beta1, beta2]");
            expect_bad(r, "[0.9]", "got [0.9]", "expected [beta1, beta2]");
            expect_bad(r, "[0.9, 0.99, 0.999]", "0.999]", "expected [beta1, beta2]");
            expect_bad(r, "[0.9, 1.5]", "betas[1]", "out of range");
            expect_bad(r, "[-0.1, 0.9]", "betas[0]", "out of range");
            expect_bad(r, "[0.9, \"x\"]", "\"x\"", "expected a number");
            break;
        default: break;
        }
        /* sizes accept floats and round them with a warning; other integers refuse fractions */
        if (k->kind == ZKEY_SIZE && k->lo + 0.4 <= k->hi) {
            snprintf(v, sizeof v, "%.1f", k->lo + 0.4);
            char *j = build(r->ctx, r->path, v);
            zinc_status st = load(j);
            ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, v, zinc_last_error());
            if (st == ZINC_OK) {
                char want[64], got[128];
                snprintf(want, sizeof want, "%.0f", k->lo);
                ZT_CHECK(field_is(&cfg, k, want, got, sizeof got), "%s = %s: got %s, want %s", r->path, v, got, want);
                ZT_CHECK(logged(ZINC_LOG_WARN, r->path, "rounded to") == 1, "%s = %s: no rounding warning", r->path, v);
            }
            free(j);
        }
    }
    /* objects given as scalars */
    const char *objs[] = {"optimizer", "optimizer.params", "scheduler", "scheduler.params", "fp16", "bf16",
                          "zero_optimization.offload_optimizer", "zero_optimization.offload_param", "aio",
                          "checkpoint", "checkpoint.parallel_write", "data_types", "zinc"};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        key_row r = {objs[i], 0, !strcmp(objs[i], "scheduler.params") ? SCHED_WLR : NULL, NULL, NULL, NULL, 0};
        expect_bad(&r, "5", "got 5", "expected an object");
        expect_bad(&r, "[{}]", "got [{}]", "expected an object");
        expect_bad(&r, "\"x\"", "got \"x\"", "expected an object");
    }
}

/* ------------------------------------------------------------------ aliases, deprecated and legacy spellings */

static void test_aliases(void) {
    char got[128];
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const alias_row *a = &aliases[i];
        const zkey_key *k = schema_key(a->canon, NULL);
        char *j = build(a->ctx, a->path, a->value);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s: %s", a->path, zinc_last_error());
        if (st == ZINC_OK && k) {
            ZT_CHECK(field_is(&cfg, k, a->want, got, sizeof got), "%s: %s got %s", a->path, a->canon, got);
            const char *canon_name = strrchr(a->canon, '.') ? strrchr(a->canon, '.') + 1 : a->canon;
            if (!strcmp(a->path, "bfloat16")) canon_name = "bf16";
            if (a->deprecated)
                ZT_CHECK(logged(ZINC_LOG_WARN, a->path, canon_name) == 1, "%s: no deprecation warning naming %s",
                         a->path, canon_name);
            else ZT_CHECK(nwarn() == 0, "%s: a plain alias warned", a->path);
        }
        free(j);
        /* alias and canonical key together: one setting given twice, in either order */
        if (strcmp(a->path, "bfloat16")) {
            const char *an = strrchr(a->path, '.') + 1, *cn = strrchr(a->canon, '.') + 1;
            char parent[256];
            snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(a->path, '.') - a->path), a->path);
            char text[1024];
            snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}, \"%s\": "
                                        "{\"%s\": %s, \"%s\": %s}}",
                     parent, an, a->value, cn, a->value);
            if (!strcmp(parent, "zero_optimization"))
                snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"%s\": %s, "
                                            "\"%s\": %s}}",
                         an, a->value, cn, a->value);
            EXPECT_ERR(text, an, cn, "keep one");
            if (!strcmp(parent, "zero_optimization"))
                snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"%s\": %s, "
                                            "\"%s\": %s}}",
                         cn, a->value, an, a->value);
            else
                snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"%s\": {\"%s\": %s, \"%s\": %s}}", parent, cn,
                         a->value, an, a->value);
            EXPECT_ERR(text, an, cn, "keep one");
        }
    }
    /* bf16 and its legacy spelling bfloat16 together, in either order */
    EXPECT_ERR("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": false}}",
               "bfloat16", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"bfloat16\": {\"enabled\": true}, \"bf16\": {\"immediate_grad_update\": true}}",
               "bf16", "keep one");

    /* legacy ZeRO offload flags */
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_CPU, "cpu_offload: device %d", cfg.zero.offload_optimizer.device);
    ZT_CHECK(logged(ZINC_LOG_WARN, "zero_optimization.cpu_offload", "offload_optimizer") == 1,
             "cpu_offload: no warning naming offload_optimizer");
    ZT_CHECK(zcfg_given(&cfg, "zero_optimization.offload_optimizer.device"), "cpu_offload: device not given");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": false}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_NONE, "cpu_offload false: device %d",
             cfg.zero.offload_optimizer.device);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"cpu_offload_param\": true}}");
    ZT_CHECK(cfg.zero.offload_param.device == ZOFFLOAD_CPU, "cpu_offload_param: device %d", cfg.zero.offload_param.device);
    ZT_CHECK(logged(ZINC_LOG_WARN, "cpu_offload_param", "offload_param") == 1, "cpu_offload_param: no warning");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"cpu_offload_use_pin_memory\": true}}");
    ZT_CHECK(cfg.zero.offload_optimizer.pin_memory && cfg.zero.offload_param.pin_memory, "cpu_offload_use_pin_memory");
    ZT_CHECK(logged(ZINC_LOG_WARN, "cpu_offload_use_pin_memory", "pin_memory") == 1, "pin memory: no warning");
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": null}}");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": 1}}",
               "zero_optimization.cpu_offload", "got 1", "true or false", "offload_optimizer");
    /* a legacy flag and the key that replaces it, in either order: conflicting settings are an error */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true, "
               "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}}}",
               "offload_optimizer.device", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, "
               "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}, \"cpu_offload\": true}}",
               "zero_optimization.cpu_offload", "offload_optimizer.device", "keep one");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"pin_memory\": "
               "false}, \"cpu_offload_use_pin_memory\": true}}",
               "cpu_offload_use_pin_memory", "keep one");

    /* DeepSpeed's deprecated boolean ZeRO block: true is stage 1 */
    zinc_status st = load("{\"train_batch_size\": 8, \"zero_optimization\": true}");
    ZT_CHECK(st == ZINC_OK && cfg.zero.stage == 1, "zero_optimization: true -> stage %d: %s", cfg.zero.stage,
             zinc_last_error());
    ZT_CHECK(logged(ZINC_LOG_WARN, "zero_optimization", "stage") == 1, "boolean zero_optimization: no warning");
    st = load("{\"train_batch_size\": 8, \"zero_optimization\": false}");
    ZT_CHECK(st == ZINC_OK && cfg.zero.stage == 0, "zero_optimization: false -> stage %d", cfg.zero.stage);
}

/* ------------------------------------------------------------------ ignored and refused keys */

static void test_ignored_refused(void) {
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        const onoff_row *r = &ignored[i];
        const zkey_key *k = schema_key(r->path, NULL);
        char *j = build(r->ctx, r->path, r->on);
        zinc_status st = load(j);
        ZT_CHECK(st == ZINC_OK, "%s = %s: %s", r->path, r->on, zinc_last_error());
        ZT_CHECK(logged(ZINC_LOG_WARN, r->path, k ? k->status : "ignored") == 1, "%s = %s: no warning saying why",
                 r->path, r->on);
        free(j);
        if (r->off) {
            j = build(r->ctx, r->path, r->off);
            ZT_OK(load(j));
            ZT_CHECK(nwarn() == 0, "%s = %s (off): warned", r->path, r->off);
            free(j);
        }
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const onoff_row *r = &refused[i];
        char *j = build(r->ctx, r->path, r->on);
        zinc_status st = load(j);
        const char *m = zinc_last_error();
        ZT_CHECK(st == ZINC_ERR_CONFIG, "%s = %s: accepted", r->path, r->on);
        if (st == ZINC_ERR_CONFIG) {
            ZT_CHECK(strstr(m, r->path) != NULL, "%s: message lacks the path: %s", r->path, m);
            ZT_CHECK(strstr(m, "does not implement") != NULL && strstr(m, "switch it off") != NULL,
                     "%s: message does not say what to do: %s", r->path, m);
        }
        free(j);
        j = build(r->ctx, r->path, r->off);
        ZT_OK(load(j));
        ZT_CHECK(nwarn() == 0, "%s = %s (off): warned", r->path, r->off);
        free(j);
    }
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"zero_quantized_gradients\": true}}",
               "zero_optimization.zero_quantized_gradients", "true is set", "ZeRO++");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"max_grad_norm\": 1.0}}}",
               "optimizer.params.max_grad_norm", "gradient_clipping");
    EXPECT_ERR("{\"train_batch_size\": 8, \"aio\": {\"use_gds\": true}}", "aio.use_gds", "set it to false");
}

/* ------------------------------------------------------------------ unknown keys */

static void test_unknown(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimisation\": {\"stage\": 2}}", "t.json: zero_optimisation",
               "did you mean \"zero_optimization\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpus\": 2}",
               "did you mean \"train_micro_batch_size_per_gpu\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage3_prefetch_bucket_sise\": 5}}",
               "zero_optimization.stage3_prefetch_bucket_sise", "did you mean \"stage3_prefetch_bucket_size\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enable\": true}}", "fp16.enable", "did you mean \"enabled\"?");
    EXPECT_ERR("{\"train_batch_size\": 8, \"Fp16\": {\"enabled\": true}}", "did you mean \"fp16\"?");
    /* a key in the wrong place: say where it belongs (DeepSpeed issue #2721) */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"aio\": {\"block_size\": 4096}}}",
               "t.json: zero_optimization.aio", "\"aio\" belongs at the top level");
    EXPECT_ERR("{\"train_batch_size\": 8, \"lr\": 0.1}", "t.json: lr", "belongs inside \"optimizer.params\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"ratio\": 0.5}}}",
               "zero_optimization.offload_param.ratio", "belongs inside \"zero_optimization.offload_optimizer\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"stage\": 2}", "belongs inside \"zero_optimization\"");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 16, "
               "\"stage3_max_live_parameters\": 5}}",
               "fp16.stage3_max_live_parameters", "belongs inside \"zero_optimization\"");
    /* nothing close: at the top level a warning (DeepSpeed ignores unknown top-level keys); in a section, list
     * what is allowed */
    EXPECT_OK("{\"train_batch_size\": 8, \"completely_unrelated\": 1}");
    ZT_CHECK(logged(ZINC_LOG_WARN, "completely_unrelated", "DeepSpeed ignores unknown top-level keys") == 1,
             "unknown top-level key not warned");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"learning_rate_value\": 1}}}",
               "optimizer.params.learning_rate_value", "allowed in \"optimizer.params\" are:", "lr, betas");
    /* problems are collected: three mistakes, three lines */
    zinc_status st = load("{\"train_batch_size\": 8, \"zero_optimisation\": {}, \"fp16\": {\"enabled\": 3}, "
                          "\"steps_per_print\": -5, \"_comment\": \"a note\"}");
    const char *m = zinc_last_error();
    ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(m, "(3 problems)") && strstr(m, "zero_optimisation") &&
                 strstr(m, "fp16.enabled") && strstr(m, "steps_per_print"),
             "three problems: %s", m);
    int lines = 0;
    for (const char *p = m; (p = strstr(p, "\nt.json: ")); p++) lines++;
    ZT_CHECK(lines == 3, "three problems on %d lines: %s", lines, m);
    /* an empty key still names a path */
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"\": 1}}", "t.json: optimizer.\"\"", "unknown key");
    /* a very long key does not overflow anything */
    char *big = malloc(200000);
    strcpy(big, "{\"train_batch_size\": 8, \"fp16\": {\"");
    size_t n = strlen(big);
    memset(big + n, 'k', 100000);
    strcpy(big + n + 100000, "\": 1}}");
    EXPECT_ERR(big, "unknown key");
    free(big);
    /* many unknown keys: all reported, the message stays bounded */
    char *many = malloc(400000);
    size_t len = (size_t)sprintf(many, "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": false");
    for (int i = 0; i < 5000; i++) len += (size_t)sprintf(many + len, ", \"junk_%d\": %d", i, i);
    strcpy(many + len, "}}");
    EXPECT_ERR(many, "(5000 problems)", "junk_0");
    free(many);
}

/* ------------------------------------------------------------------ duplicates */

static void test_duplicates(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"train_batch_size\": 16}", "t.json:1:", "duplicate", "once per object");
    EXPECT_ERR("{\"train_batch_size\": 8,\n \"zero_optimization\": {\"stage\": 1,\n \"stage\": 2}}", "t.json:3:",
               "duplicate");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"fp16\": {\"enabled\": false}}", "duplicate");
}

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

/* DeepSpeed's _set_batch_related_parameters + _batch_assertion (deepspeed/runtime/config.py). 0 = not
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
                    if (tb) n += snprintf(text + n, sizeof text - (size_t)n, ", \"train_batch_size\": %lld", (long long)tb);
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
        if (c & 4) ZT_CHECK(combos_err[c] > 0, "combination %d never refused", c);
        else ZT_CHECK(combos_err[c] == 0, "combination %d refused", c);
    }
    ZT_CHECK(combos_ok[0] == 0 && combos_ok[1] == 0 && combos_err[0] > 0 && combos_err[1] > 0, "none / gas only");

    /* hand-checked cases */
    ZT_OK(load_w("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 4}", 2));
    ZT_CHECK(cfg.gradient_accumulation_steps == 4, "32/4/2 -> gas %lld", (long long)cfg.gradient_accumulation_steps);
    ZT_OK(load_w("{\"train_batch_size\": 48, \"gradient_accumulation_steps\": 3}", 4));
    ZT_CHECK(cfg.train_micro_batch_size_per_gpu == 4, "48/4/3 -> micro %lld", (long long)cfg.train_micro_batch_size_per_gpu);
    ZT_OK(load_w("{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 5}", 7));
    ZT_CHECK(cfg.train_batch_size == 105, "3*5*7 -> %lld", (long long)cfg.train_batch_size);
    EXPECT_ERR_W("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 2}", 1,
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
                 "\"gradient_accumulation_steps\": 3}", 1, "train_batch_size");
    ZT_OK(load_w("{\"train_batch_size\": 9223372036854775807, \"train_micro_batch_size_per_gpu\": 9223372036854775807}", 1));
    /* world size is checked */
    ZT_ERR(zcfg_load_text("{\"train_batch_size\": 8}", NULL, 0, NULL, &cfg), ZINC_ERR_INVALID_ARG, "world size 0");
    /* "auto" batch sizes are derived */
    ZT_OK(load_w("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 4, "
                 "\"gradient_accumulation_steps\": 2}", 2));
    ZT_CHECK(cfg.train_batch_size == 16, "auto train -> %lld", (long long)cfg.train_batch_size);
    ZT_CHECK(logged(ZINC_LOG_INFO, "train_batch_size 16", NULL) == 1, "auto derivation not logged");
    ZT_CHECK(logged(ZINC_LOG_WARN, "train_batch_size: \"auto\" -> 16", "derived") == 1, "auto derivation not warned");
    ZT_OK(load_w("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": \"auto\", "
                 "\"gradient_accumulation_steps\": \"auto\"}", 2));
    ZT_CHECK(cfg.train_micro_batch_size_per_gpu == 16 && cfg.gradient_accumulation_steps == 1, "auto micro/gas");
    /* all three "auto": the Hugging Face Trainer's defaults, micro 8 and accumulation 1 (test_config_auto.c) */
    ZT_OK(load_w("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", "
                 "\"gradient_accumulation_steps\": \"auto\"}", 2));
    ZT_CHECK(cfg.train_batch_size == 16 && cfg.train_micro_batch_size_per_gpu == 8, "all auto");
}

/* ------------------------------------------------------------------ cross-key rules */

static void test_precision_dtypes(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}", "bf16.enabled",
               "both enabled");
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
        {"\"bf16\": {\"enabled\": true}", 0, ZINC_BF16, ZINC_BF16, ZINC_FP32}, /* bf16 without ZeRO: fp32 accumulation */
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
        snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d}%s%s, "
                                    "\"communication_data_type\": \"fp32\", \"data_types\": {\"grad_accum_dtype\": \"fp16\"}}",
                 m[i].stage, *m[i].prec ? ", " : "", m[i].prec);
        ZT_OK(load(text));
        ZT_CHECK(cfg.comm_dtype == ZINC_FP32 && cfg.grad_accum_dtype == ZINC_FP16 && cfg.comm_dtype_set &&
                     cfg.grad_accum_dtype_set,
                 "%s: explicit dtypes", text);
    }
    static const struct {
        const char *s;
        zinc_dtype t;
    } names[] = {{"fp32", ZINC_FP32}, {"float32", ZINC_FP32}, {"torch.float32", ZINC_FP32}, {"float", ZINC_FP32},
                 {"FP16", ZINC_FP16}, {"torch.float16", ZINC_FP16}, {"half", ZINC_FP16},   {"bf16", ZINC_BF16},
                 {"bfloat16", ZINC_BF16}, {"torch.bfloat16", ZINC_BF16}};
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
            snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": %d, "
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
    } a[] = {{"Adam", NULL, true}, {"Adam", "false", false}, {"Adam", "true", true},
             {"AdamW", NULL, true}, {"AdamW", "false", true}, {"ADAMW", "true", true}};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        if (a[i].mode)
            snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"%s\", \"params\": "
                                        "{\"adam_w_mode\": %s}}}",
                     a[i].type, a[i].mode);
        else snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"%s\"}}", a[i].type);
        ZT_OK(load(text));
        ZT_CHECK(cfg.optimizer.adam_w_mode == a[i].want, "%s: adam_w_mode %d", text, cfg.optimizer.adam_w_mode);
    }
    ZT_OK(load("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"weight_decay\": 0.1}}}"));
    ZT_CHECK(logged(ZINC_LOG_INFO, "decoupled", "adam_w_mode") == 1, "Adam + weight_decay: the AdamW surprise not logged");
    EXPECT_ERR("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adagrad\"}}", "optimizer.type", "\"Adagrad\"",
               "\"Lion\" or \"Lamb\"", "not implemented");
}

static void test_scheduler(void) {
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"total_num_steps\": 10}}}",
               "scheduler.params.total_num_steps", "not a parameter of the WarmupLR schedule");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"params\": {\"warmup_min_lr\": 0.1}, \"type\": \"OneCycle\"}}",
               "scheduler.params.warmup_min_lr", "not a parameter of the OneCycle schedule");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupDecayLR\"}}", "scheduler.params.total_num_steps",
               "required by WarmupDecayLR");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": "
               "\"auto\"}}}",
               "scheduler.params.total_num_steps", "nothing fills these \"auto\"", "--steps N");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.1}}}",
               "scheduler.params", "cycle_min_lr and cycle_max_lr");
    EXPECT_ERR("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\"}}", "cycle_min_lr and cycle_max_lr");
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
    ZT_OK(load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"warmupdecaylr\", \"params\": {\"total_num_steps\": "
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
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"cpu\"}}}");
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
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\", "
              "\"nvme_path\": \"/tmp/zïnc\"}, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}}}");
    ZT_CHECK(!strcmp(cfg.zero.offload_param.nvme_path, "/tmp/zïnc"), "utf-8 path: %s", cfg.zero.offload_param.nvme_path);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": "
              "\"CPU\"}}}");
    ZT_CHECK(cfg.zero.offload_optimizer.device == ZOFFLOAD_CPU, "device case-insensitive");
    char *longp = malloc(6000);
    strcpy(longp, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"nvme_path\": \"");
    size_t n = strlen(longp);
    memset(longp + n, 'p', 4096);
    strcpy(longp + n + 4096, "\"}}}");
    EXPECT_ERR(longp, "zero_optimization.offload_param.nvme_path", "4096 bytes", "at most 4095");
    free(longp);
}

/* ------------------------------------------------------------------ malformed JSON */

static void test_malformed(void) {
    const char *full = "{\"train_batch_size\":64,\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":0.003,\"betas\":"
                       "[0.9,0.999]}},\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":\"nvme\","
                       "\"nvme_path\":\"/tmp/z\"}},\"fp16\":{\"enabled\":true}}";
    ZT_OK(load(full));
    /* every truncation fails cleanly, with a position */
    size_t len = strlen(full);
    char *buf = malloc(len + 1);
    int bad = 0;
    for (size_t i = 0; i < len; i++) {
        memcpy(buf, full, i);
        buf[i] = 0;
        zinc_status st = load(buf);
        if (st != ZINC_ERR_CONFIG || !strstr(zinc_last_error(), "not valid JSON") || !strstr(zinc_last_error(), "t.json:1:"))
            bad++, fprintf(stderr, "prefix %zu: %s %s\n", i, zinc_status_name(st), zinc_last_error());
    }
    ZT_CHECK(bad == 0, "%d truncations not reported as invalid JSON", bad);
    free(buf);
    /* not an object */
    const char *notobj[] = {"[]", "[{\"train_batch_size\": 8}]", "8", "\"x\"", "null", "true", "", "   \n\t", "{} {}",
                            "{\"train_batch_size\": 8} x", "{'train_batch_size': 8}", "{train_batch_size: 8}",
                            "{\"train_batch_size\": 8,}", "{\"train_batch_size\": 08}", "{\"train_batch_size\": .5}",
                            "{\"train_batch_size\": NaN}", "{\"train_batch_size\": Infinity}", "\xef\xbb\xbf{}"};
    for (size_t i = 0; i < sizeof notobj / sizeof notobj[0]; i++) {
        zinc_status st = load(notobj[i]);
        ZT_CHECK(st == ZINC_ERR_CONFIG, "\"%s\" accepted", notobj[i]);
        ZT_CHECK(strstr(zinc_last_error(), "t.json") != NULL, "\"%s\": no origin: %s", notobj[i], zinc_last_error());
    }
    EXPECT_ERR("[1, 2]", "the top level must be a JSON object");
    /* comments (DeepSpeed reads ds_configs with hjson, which allows them) */
    EXPECT_OK("// a comment\n{\"train_batch_size\": 8, /* block\n comment */ \"steps_per_print\": 3 # hash\n}");
    ZT_CHECK(cfg.steps_per_print == 3, "comments: steps_per_print %lld", (long long)cfg.steps_per_print);
    EXPECT_OK("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\", "
              "\"nvme_path\": \"/a//b/*c*/#d\"}}}");
    ZT_CHECK(!strcmp(cfg.zero.offload_param.nvme_path, "/a//b/*c*/#d"), "comment markers inside strings: %s",
             cfg.zero.offload_param.nvme_path);
    EXPECT_ERR("{\"train_batch_size\": 8 /* unterminated", "not valid JSON", "unterminated comment");
    EXPECT_ERR("{\"train_batch_size\":\n 8,\n \"x\": tru}", "t.json:3:");
    /* wrong types in nested places */
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": [3]}", "zero_optimization", "expected an object");
    EXPECT_ERR("{\"train_batch_size\": \"8\"}", "train_batch_size", "\"8\"", "expected a number");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": \"true\"}}", "fp16.enabled", "\"true\"",
               "true or false");
    /* deep nesting: refused by the parser's depth limit, no stack overflow */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 64);
    size_t k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"tensorboard\": ");
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    strcpy(deep + k, "}");
    EXPECT_ERR(deep, "not valid JSON");
    k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"tensorboard\": ");
    for (size_t i = 0; i < 1000; i++) k += (size_t)sprintf(deep + k, "{\"a\":");
    k += (size_t)sprintf(deep + k, "{\"enabled\": true}");
    for (size_t i = 0; i < 1000; i++) deep[k++] = '}';
    strcpy(deep + k, "}");
    ZT_OK(load(deep)); /* 1000 levels inside an ignored block: fine, and found "enabled" */
    ZT_CHECK(logged(ZINC_LOG_WARN, "tensorboard", NULL) == 1, "deep tensorboard: no warning");
    k = (size_t)sprintf(deep, "{\"train_batch_size\": 8, \"zero_optimization\": ");
    for (size_t i = 0; i < 1000; i++) k += (size_t)sprintf(deep + k, "{\"stage\":");
    k += (size_t)sprintf(deep + k, "1");
    for (size_t i = 0; i < 1000; i++) deep[k++] = '}';
    strcpy(deep + k, "}");
    EXPECT_ERR(deep, "zero_optimization.stage", "expected a number");
    free(deep);
    /* invalid UTF-8 and bad escapes, in keys and values */
    const char *utf[] = {
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"nvme_path\": \"\xff\"}}}",
        "{\"train_batch_size\": 8, \"\xc0\xaf\": 1}",                      /* overlong '/' */
        "{\"train_batch_size\": 8, \"aio\": {\"block_size\": 4096, \"\xe2\x82\": 1}}", /* truncated sequence */
        "{\"train_batch_size\": 8, \"x\": \"\xed\xa0\x80\"}",             /* UTF-8-encoded surrogate */
        "{\"train_batch_size\": 8, \"x\": \"\xf4\x90\x80\x80\"}",         /* beyond U+10FFFF */
        "{\"train_batch_size\": 8, \"x\": \"\\ud800\"}",                   /* lone surrogate escape */
        "{\"train_batch_size\": 8, \"x\": \"\\u0000\"}",                   /* NUL inside a string */
        "{\"train_batch_size\": 8, \"x\": \"\\q\"}",                       /* unknown escape */
        "{\"train_batch_size\": 8, \"x\": \"a\tb\"}",                      /* raw control character */
        "{\"train_batch_size\": 8, \"x\": \"abc}",                         /* unterminated string */
    };
    for (size_t i = 0; i < sizeof utf / sizeof utf[0]; i++) {
        zinc_status st = load(utf[i]);
        ZT_CHECK(st == ZINC_ERR_CONFIG && strstr(zinc_last_error(), "not valid JSON"), "utf case %zu: %s %s", i,
                 zinc_status_name(st), zinc_last_error());
    }
    /* a non-ASCII value in an error message is not cut inside a character */
    char text[600];
    int n = snprintf(text, sizeof text, "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": \"");
    for (int i = 0; i < 40; i++) n += snprintf(text + n, sizeof text - (size_t)n, "\xc3\xa9");
    snprintf(text + n, sizeof text - (size_t)n, "\"}}");
    ZT_CHECK(load(text) == ZINC_ERR_CONFIG, "string bool accepted");
    json_error_t je;
    char quoted[4200] = "[\"";
    size_t q = 2;
    for (const char *p = zinc_last_error(); *p && q < sizeof quoted - 4; p++)
        quoted[q++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? ' ' : *p;
    strcpy(quoted + q, "\"]");
    json_t *probe = json_loads(quoted, 0, &je);
    ZT_CHECK(probe != NULL, "the message is not valid UTF-8: %s", je.text);
    json_decref(probe);
    /* NULL arguments */
    ZT_ERR(zcfg_load_text(NULL, NULL, 1, NULL, &cfg), ZINC_ERR_INVALID_ARG, NULL);
    ZT_ERR(zcfg_load_text("{}", NULL, 1, NULL, NULL), ZINC_ERR_INVALID_ARG, NULL);
    ZT_ERR(zcfg_load_text("{", NULL, 1, NULL, &cfg), ZINC_ERR_CONFIG, "<json text>");
}

/* ------------------------------------------------------------------ files */

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        abort();
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_files(void) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/test_config_tmp_%d", zt_build_dir(), (int)getpid());
    mkdir(dir, 0755);
    zlog l = {cap_fn, &cap, ZINC_LOG_DEBUG, 0};
    snprintf(path, sizeof path, "%s/ok.json", dir);
    const char *ok = "{\"train_batch_size\": 8, \"bfloat16\": {\"enabled\": true}}";
    write_file(path, ok, strlen(ok));
    cap.n = 0;
    ZT_OK(zcfg_load_file(path, 2, &l, &cfg));
    ZT_CHECK(cfg.bf16_enabled && cfg.train_micro_batch_size_per_gpu == 4 && !strcmp(cfg.source, path), "file load");
    ZT_CHECK(logged(ZINC_LOG_WARN, path, "bfloat16") == 1, "warnings name the file");
    snprintf(path, sizeof path, "%s/nul.json", dir);
    write_file(path, "{\"train_batch_size\": 8}\0 ", 25);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "NUL byte");
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char *bad = "{\n\"train_batch_size\": 8,\n\"zero_optimization\": {\"stage\": 9}}";
    write_file(path, bad, strlen(bad));
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "bad.json: zero_optimization.stage: 9 is out of range");
    snprintf(path, sizeof path, "%s/empty.json", dir);
    write_file(path, "", 0);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_CONFIG, "empty.json");
    snprintf(path, sizeof path, "%s/missing.json", dir);
    ZT_ERR(zcfg_load_file(path, 1, &l, &cfg), ZINC_ERR_IO, "missing.json");
    ZT_ERR(zcfg_load_file(dir, 1, &l, &cfg), ZINC_ERR_IO, "not a regular file");
    ZT_ERR(zcfg_load_file(NULL, 1, &l, &cfg), ZINC_ERR_INVALID_ARG, NULL);
    const char *names[] = {"ok.json", "nul.json", "bad.json", "empty.json"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------ the dump, and its round trip */

/* Reloads the dump (without its "_" keys) and checks every field comes back identical. */
static void roundtrip(const char *what, int world) {
    zinc_config a = cfg;
    char *s = zcfg_dump_json(&a);
    ZT_CHECK(s != NULL, "%s: dump failed", what);
    if (!s) return;
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    ZT_CHECK(root != NULL, "%s: the dump is not JSON: %s", what, je.text);
    if (!root) {
        free(s);
        return;
    }
    ZT_CHECK(json_integer_value(json_object_get(root, "_world_size")) == world, "%s: _world_size", what);
    json_t *defaults = json_object_get(root, "_defaults");
    ZT_CHECK(json_is_array(defaults), "%s: no _defaults", what);
    /* _defaults lists exactly the dumped keys the file did not write */
    size_t i;
    json_t *d;
    json_array_foreach(defaults, i, d) {
        ZT_CHECK(!zcfg_given(&a, json_string_value(d)), "%s: %s is given but listed in _defaults", what,
                 json_string_value(d));
    }
    const char *drop[] = {"_source", "_world_size", "_compute_dtype", "_defaults", "_filled"};
    for (size_t j = 0; j < 5; j++) json_object_del(root, drop[j]);
    char *again = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    zinc_status st = load_w(again, world);
    ZT_CHECK(st == ZINC_OK, "%s: the dump does not load: %s\n%s", what, zinc_last_error(), s);
    if (st == ZINC_OK) {
        const zkey_table *all[64];
        size_t nt = zkey_all_tables(all, 64);
        char g1[256], g2[256];
        for (size_t t = 0; t < nt && t < 64; t++)
            for (size_t k = 0; k < all[t]->nkeys; k++) {
                const zkey_key *key = &all[t]->keys[k];
                json_t *v1 = field_json(&a, key);
                if (!v1) continue;
                char *t1 = json_dumps(v1, JSON_ENCODE_ANY | JSON_COMPACT);
                bool same = t1 && field_is(&cfg, key, t1, g2, sizeof g2);
                snprintf(g1, sizeof g1, "%s", t1 ? t1 : "?");
                ZT_CHECK(same, "%s: %s.%s changed through the dump: %s -> %s", what, all[t]->path, key->name, g1, g2);
                free(t1);
                json_decref(v1);
            }
        ZT_CHECK(cfg.compute_dtype == a.compute_dtype && cfg.comm_dtype == a.comm_dtype &&
                     cfg.grad_accum_dtype == a.grad_accum_dtype && cfg.world_size == a.world_size,
                 "%s: resolved fields changed through the dump", what);
    }
    free(again);
    free(s);
}

static void test_dump(void) {
    ZT_OK(load_w("{\"train_batch_size\": 16, \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": 2}}", 2));
    char *s = zcfg_dump_json(&cfg);
    ZT_CHECK(s && strstr(s, "\"_defaults\"") && strstr(s, "\"optimizer.params.lr\"") &&
                 strstr(s, "\"zero_optimization.overlap_comm\""),
             "dump lacks _defaults entries: %s", s ? s : "NULL");
    ZT_CHECK(s && !strstr(s, "\"gradient_clipping\",") && !strstr(s, "\"zero_optimization.stage\""),
             "written keys listed as defaults");
    /* numbers print short where that is exact */
    ZT_CHECK(s && strstr(s, "\"lr\": 0.001") && strstr(s, "\"eps\": 1e-8") && strstr(s, "0.999"),
             "dump numbers: %s", s ? s : "");
    free(s);
    roundtrip("simple", 2);
    /* every row's valid config survives the round trip */
    for (size_t i = 0; i < NROWS; i++) {
        char *j = build(rows[i].ctx, rows[i].path, rows[i].good);
        if (load(j) == ZINC_OK) roundtrip(rows[i].path, 1);
        free(j);
    }
    /* values that need all 17 digits */
    ZT_OK(load("{\"train_batch_size\": 8, \"optimizer\": {\"params\": {\"lr\": 0.1234567890123456789, \"betas\": "
               "[0.1, 0.99999999999999978]}}}"));
    roundtrip("17 digits", 1);
    ZT_OK(load("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
               "0.0003, \"cycle_max_lr\": 0.003}}, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3, "
               "\"offload_param\": {\"device\": \"cpu\", \"nvme_path\": \"/tmp/\\\"q\\\"\"}}}"));
    roundtrip("onecycle nvme", 1);
}

/* ------------------------------------------------------------------ the library never prints */

static void test_silent(void) {
    fflush(stderr);
    fflush(stdout);
    char path[1100];
    snprintf(path, sizeof path, "%s/test_config_silent_%d.txt", zt_build_dir(), (int)getpid());
    FILE *f = fopen(path, "w+");
    if (!f) return;
    int saved_err = dup(2), saved_out = dup(1);
    dup2(fileno(f), 2);
    dup2(fileno(f), 1);
    zinc_config c;
    zcfg_load_text("{\"train_batch_size\": 8, \"bfloat16\": {}, \"wandb\": {\"enabled\": true}, \"zero_optimization\": "
                   "{\"reduce_bucket_size\": 1.5}}",
                   NULL, 1, NULL, &c);
    zcfg_load_text("{\"x\": 1}", NULL, 1, NULL, &c);
    zlog off = {0};
    zcfg_load_text("{\"train_batch_size\": 8, \"bfloat16\": {}}", NULL, 1, &off, &c);
    fflush(stderr);
    fflush(stdout);
    dup2(saved_err, 2);
    dup2(saved_out, 1);
    close(saved_err);
    close(saved_out);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    unlink(path);
    ZT_CHECK(n == 0, "the loader printed %ld bytes without a log callback", n);
}

int main(void) {
    zt_name = "test_config";
    test_coverage();
    test_key_rows();
    test_bad_values();
    test_aliases();
    test_ignored_refused();
    test_unknown();
    test_duplicates();
    test_numbers();
    test_batch_triad();
    test_precision_dtypes();
    test_overlap_adam();
    test_scheduler();
    test_offload();
    test_malformed();
    test_files();
    test_dump();
    test_silent();
    if (zt_failed) dump_log();
    return zt_finish();
}
