#include "engine_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mlp_config eu_model(void) {
    mlp_config c = mlp_default_config();
    c.in_dim = 16;
    c.hidden = 48;
    c.depth = 2;
    c.classes = 5;
    c.data_seed = 7;
    return c;
}

const char *eu_dtype_name(zinc_dtype t) { return zinc_dtype_name(t); }

void eu_config(const eu_run *r, char *buf, size_t cap) {
    int tb = r->train_batch ? r->train_batch : 24, gas = r->gas ? r->gas : 2;
    snprintf(buf, cap,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": %s,"
             " \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 8%s%s},"
             " \"bf16\": {\"enabled\": %s%s%s},"
             " \"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": %d, \"overlap_comm\": %s,"
             " \"stage3_prefetch_bucket_size\": 2500, \"stage3_param_persistence_threshold\": 100%s%s}"
             "%s%s%s}",
             tb, gas,
             r->optimizer ? r->optimizer : "{\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}}",
             r->dtype == ZINC_FP16 ? "true" : "false", r->fp16_extra ? ", " : "",
             r->fp16_extra ? r->fp16_extra : "", r->dtype == ZINC_BF16 ? "true" : "false", r->bf16_extra ? ", " : "",
             r->bf16_extra ? r->bf16_extra : "", r->stage,
             r->bucket ? r->bucket : 3000, r->overlap_comm ? "true" : "false", r->zero_extra ? ", " : "", r->zero_extra ? r->zero_extra : "",
             r->extra ? ", " : "", r->extra ? r->extra : "",
             /* the float64 references of the engine tests clip only where a test asks for it */
             r->extra && strstr(r->extra, "gradient_clipping") ? "" : ", \"gradient_clipping\": 0");
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_WARN};

zinc_device_kind eu_device(const eu_run *r) {
    const char *d = getenv("ZINC_TEST_DEVICE");
    if (!(r && r->cuda) && !(d && !strcmp(d, "cuda"))) return ZINC_DEVICE_CPU;
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    return ZINC_DEVICE_CUDA;
}

zinc_status eu_create(const eu_run *r, zinc_engine **e, mlp_model **m) {
    char cfg[8192];
    eu_config(r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = eu_device(r);
    o.log_fn = zt_logcap_fn;
    o.log_userdata = r->log ? r->log : &quiet_log_cap;
    o.cpu_threads = 1;
    if (r->nonfinite_skip) o.nonfinite = ZINC_NONFINITE_SKIP;
    zinc_status st = zinc_create(&o, e);
    if (st != ZINC_OK) return st;
    mlp_config mc = eu_model();
    mc.compute = r->mlp_compute;
    const char *mlp = getenv("ZINC_TEST_MLP"); /* "host": the MLP's host path on any device (bitwise the cpu's) */
    if (mlp && !strcmp(mlp, "host")) mc.compute = MLP_COMPUTE_HOST;
    st = mlp_create(*e, &mc, m);
    if (st != ZINC_OK) {
        zinc_destroy(*e);
        *e = NULL;
    }
    return st;
}

zinc_status eu_train(const eu_run *r, int steps, float **out, size_t *n) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = eu_create(r, &e, &m);
    if (st != ZINC_OK) return st;
    for (int s = 0; s < steps && st == ZINC_OK; s++) st = mlp_train_step(m, s, NULL, NULL);
    if (st == ZINC_OK) {
        *n = (size_t)zinc_numel_total(e);
        *out = malloc(*n * sizeof(float));
        st = *out ? zinc_gather_master(e, *out, *n) : ZINC_ERR_NOMEM;
    }
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}
