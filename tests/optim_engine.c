/* The optimizer engine tests' model and training loop (optim_engine.h). */
#include "optim_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"

int oe_rank, oe_world = 1;

float oe_init_value(int k, int64_t i) { return 0.5f * sinf(0.37f * (float)i + 0.11f * (float)k); }

double oe_grad_fn(int k, int64_t i, double w, int64_t s) {
    double a = 0.05 * (double)(1 + s % 5);
    return w * a + 0.01 * cos(0.13 * (double)i + 0.7 * (double)k + 0.29 * (double)s);
}

int64_t oe_numel_of(int k) { return k % 2 == 0 ? ROWS * WIDTH : WIDTH; }
int64_t oe_total_numel(void) { return NMOD * (ROWS * WIDTH + WIDTH); }

static zinc_status init_fn(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud;
    (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = oe_init_value(p->index, i);
    return ZINC_OK;
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_WARN};

zinc_status oe_model_create(const oe_optimizer *opt, const oe_run *r, oe_model *md) {
    char cfg[4096], optim[1024];
    opt->json(r, optim, sizeof optim);
    snprintf(cfg, sizeof cfg,
             /* the float64 references do not clip (DeepSpeed's default 1.0 is off here) */
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d, \"optimizer\": %s, "
             "\"gradient_clipping\": 0, "
             "\"zero_optimization\": {\"stage\": %d, \"reduce_bucket_size\": %d, "
             "\"stage3_param_persistence_threshold\": 0%s%s}}",
             BATCH, r->gas, optim, r->stage, r->bucket, r->offload ? opt->offload_json : "",
             r->zero_json ? r->zero_json : "");
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = eu_device(NULL);
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    memset(md, 0, sizeof *md);
    zinc_status st = zinc_create(&o, &md->e);
    if (st != ZINC_OK) return st;
    char name[64];
    for (int m = 0; m < NMOD; m++) {
        snprintf(name, sizeof name, "m%d", m);
        md->mod[m] = zinc_module_add(md->e, name);
        snprintf(name, sizeof name, "m%d.w", m);
        md->p[2 * m] = zinc_param_add(md->e, md->mod[m], name, 2, (int64_t[]){ROWS, WIDTH}, ZINC_PARAM_DECAY);
        snprintf(name, sizeof name, "m%d.b", m);
        md->p[2 * m + 1] = zinc_param_add(md->e, md->mod[m], name, 1, (int64_t[]){WIDTH}, 0);
        if (md->mod[m] < 0 || !md->p[2 * m] || !md->p[2 * m + 1]) return ZINC_ERR_INTERNAL;
    }
    st = zinc_build(md->e, init_fn, NULL);
    if (st != ZINC_OK) return st;
    md->rank = zinc_rank(md->e);
    md->world = zinc_world_size(md->e);
    oe_rank = md->rank;
    oe_world = md->world;
    md->micro = BATCH / (md->world * r->gas);
    return ZINC_OK;
}

#define T(x)                                                                                                 \
    do {                                                                                                     \
        zinc_status s_ = (x);                                                                                \
        if (s_ != ZINC_OK) return s_;                                                                        \
    } while (0)

/* The engine computes in fp32 here, so the parameter and its gradient are fp32 buffers in the engine's
 * device memory: read through zinc_copy_to_host, add on the host (loss scale 1: the same bits as the
 * engine's axpy), write back with zinc_copy_from_host. The same code runs on cpu and on the (emulated)
 * cuda device. */
static zinc_status add_grad(oe_model *md, int k, int step, int micro) {
    zinc_param_info info;
    T(zinc_param_get_info(md->p[k], &info));
    size_t bytes = (size_t)info.numel * sizeof(float);
    float *w = malloc(bytes), *g = malloc(bytes);
    const void *pd = zinc_param_data(md->p[k]);
    void *gd = zinc_param_grad(md->p[k]);
    zinc_status st = (w && g) ? ZINC_OK : ZINC_ERR_NOMEM;
    if (st == ZINC_OK && (!pd || !gd || zinc_compute_dtype(md->e) != ZINC_FP32 || zinc_loss_scale(md->e) != 1.0f))
        st = ZINC_ERR_INTERNAL;
    if (st == ZINC_OK) st = zinc_copy_to_host(md->e, w, pd, bytes);
    if (st == ZINC_OK) st = zinc_copy_to_host(md->e, g, gd, bytes);
    for (int64_t i = 0; st == ZINC_OK && i < info.numel; i++) {
        double acc = 0;
        for (int j = 0; j < md->micro; j++) {
            int64_t s = (int64_t)step * BATCH + (int64_t)micro * md->world * md->micro + (int64_t)md->rank * md->micro + j;
            acc += oe_grad_fn(info.index, i, (double)w[i], s);
        }
        g[i] = g[i] + (float)(acc / md->micro);
    }
    if (st == ZINC_OK) st = zinc_copy_from_host(md->e, gd, g, bytes);
    free(w);
    free(g);
    return st;
}

zinc_status oe_train_steps(oe_model *md, const oe_run *r, int from, int to) {
    for (int t = from; t < to; t++) {
        for (int micro = 0; micro < r->gas; micro++) {
            for (int m = 0; m < NMOD; m++) {
                T(zinc_module_enter(md->e, md->mod[m], ZINC_FORWARD));
                T(zinc_module_exit(md->e, md->mod[m], ZINC_FORWARD));
            }
            for (int m = NMOD - 1; m >= 0; m--) {
                T(zinc_module_enter(md->e, md->mod[m], ZINC_BACKWARD));
                T(add_grad(md, 2 * m, t, micro));
                T(add_grad(md, 2 * m + 1, t, micro));
                T(zinc_module_exit(md->e, md->mod[m], ZINC_BACKWARD));
            }
        }
        zinc_step_info info;
        T(zinc_step(md->e, &info));
        if (!info.taken) return ZINC_ERR_INTERNAL;
    }
    return ZINC_OK;
}

zinc_status oe_train(const oe_optimizer *opt, const oe_run *r, float *out) {
    oe_model md;
    zinc_status st = oe_model_create(opt, r, &md);
    if (st == ZINC_OK) st = oe_train_steps(&md, r, 0, STEPS);
    if (st == ZINC_OK) st = zinc_gather_master(md.e, out, (size_t)oe_total_numel());
    zinc_destroy(md.e);
    return st;
}
