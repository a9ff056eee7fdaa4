/* zinc train --model mlp (the default): the example MLP (examples/mlp) on its synthetic classification task,
 * as a model of the training driver (train.h). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/core/clock.h"
#include "base/core/env.h"
#include "cli/common/cli_files.h"
#include "cli/train/train.h"
#include "cli/train/train_flops.h"
#include "examples/mlp/mlp.h"

typedef struct mlp_opts {
    int64_t data_seed, hidden, depth, in_dim, classes;
} mlp_opts;

typedef struct mlp_run {
    mlp_model *m;
    mlp_metrics met, first;
    double t_last;
    int64_t last_step;
    bool bar, have_first;
} mlp_run;

#define O(f) offsetof(mlp_opts, f)
static const zcli_opt mlp_options[] = {{"--data-seed", ZCLI_INT, O(data_seed), "S", 0, INT64_MAX, NULL,
                                        "the synthetic task's seed"},
                                       {"--hidden", ZCLI_INT, O(hidden), "N", 1, 65536, NULL, "hidden width"},
                                       {"--depth", ZCLI_INT, O(depth), "N", 0, 65536, NULL, "hidden layers"},
                                       {"--in-dim", ZCLI_INT, O(in_dim), "N", 1, 512, NULL, "input features"},
                                       {"--classes", ZCLI_INT, O(classes), "N", 2, 65536, NULL, "output classes"},
                                       {0}};
#undef O
static const zcli_table mlp_table = {"model (the MLP):", mlp_options, NULL};

static void mlp_defaults(void *p) {
    mlp_config d = mlp_default_config();
    *(mlp_opts *)p =
        (mlp_opts){.data_seed = 42, .hidden = d.hidden, .depth = d.depth, .in_dim = d.in_dim, .classes = d.classes};
}

static mlp_config config_of(const mlp_opts *mo) {
    mlp_config mc = mlp_default_config();
    mc.hidden = (int)mo->hidden, mc.depth = (int)mo->depth, mc.in_dim = (int)mo->in_dim;
    mc.classes = (int)mo->classes, mc.data_seed = (uint64_t)mo->data_seed;
    return mc;
}

/* zinc mem estimate --model mlp: the parameters in registration order (examples/mlp/mlp.c: one module per
 * layer, weight then bias) and mlp_memory's declaration. */
static int mlp_memory_of(const void *model_opts, const zcli_train_opts *o, const zinc_config *cfg, int threads,
                         zcli_model_memory *out) {
    (void)o, (void)threads;
    mlp_config c = config_of(model_opts);
    int layers = c.depth + 1, n = 2 * layers;
    out->numel = calloc((size_t)n, sizeof *out->numel);
    out->module = calloc((size_t)n, sizeof *out->module);
    out->muon_rows = calloc((size_t)n, sizeof *out->muon_rows);
    if (!out->numel || !out->module || !out->muon_rows) return -1;
    for (int l = 0; l < layers; l++) {
        int in = l == 0 ? c.in_dim : c.hidden, outs = l == layers - 1 ? c.classes : c.hidden;
        out->numel[2 * l] = (int64_t)outs * in, out->module[2 * l] = l;
        out->muon_rows[2 * l] = l + 1 < layers ? outs : 0; /* examples/mlp/mlp.c: Muon on all but the last */
        out->numel[2 * l + 1] = outs, out->module[2 * l + 1] = l;
    }
    out->nparams = n;
    if (mlp_memory(&c, cfg->train_micro_batch_size_per_gpu, &out->activations, &out->scratch) != ZINC_OK) {
        fprintf(stderr, "zinc mem estimate: the model's memory cannot be sized for these options and this batch\n");
        return -1;
    }
    snprintf(out->describe, sizeof out->describe, "mlp: %d inputs, %d hidden layers of %d, %d classes", c.in_dim,
             c.depth, c.hidden, c.classes);
    return 0;
}

static int mlp_prepare(zcli_train *t) {
    t->model = calloc(1, sizeof(mlp_run));
    return t->model ? 0 : 1;
}

static int mlp_build(zcli_train *t) {
    const mlp_opts *mo = t->model_opts;
    mlp_run *r = t->model;
    mlp_config mc = config_of(mo);
    if (zcli_agree(t->e, "--data-seed", &mo->data_seed, sizeof mo->data_seed)) return -1;
    if (mlp_create(t->e, &mc, &r->m) != ZINC_OK) return zcli_train_fail("building the model failed");
    return 0;
}

static int mlp_start(zcli_train *t) {
    mlp_run *r = t->model;
    t->every = zinc_steps_per_print(t->e);
    r->bar = zinc_rank(t->e) == 0 && !t->o->quiet && isatty(2) && t->every == 0;
    r->t_last = zclock_now_s();
    r->last_step = t->start;
    return 0;
}

/* The test hook ZINC_TEST_INF_GRAD_STEPS: is step `step` (from 1) in its comma-separated list? */
static bool inf_grad_step(int64_t step) {
    const char *v = zenv_get(ZENV_TEST_INF_GRAD_STEPS);
    while (v && *v) {
        char *end;
        long long k = strtoll(v, &end, 10);
        if (end == v) return false;
        if (k == step) return true;
        v = *end == ',' ? end + 1 : end;
    }
    return false;
}

static int mlp_micro(zcli_train *t, int64_t step, int64_t j) {
    if (j == 0 && zinc_rank(t->e) == zinc_world_size(t->e) - 1 && inf_grad_step(step + 1))
        mlp_inject_grad(((mlp_run *)t->model)->m, INFINITY);
    return mlp_microstep(((mlp_run *)t->model)->m, step, j) == ZINC_OK ? 0 : -1;
}

static int mlp_step_end(zcli_train *t, double *loss) {
    mlp_run *r = t->model;
    if (mlp_step_metrics(r->m, &r->met) != ZINC_OK) return -1;
    if (!r->have_first) r->first = r->met, r->have_first = true;
    *loss = r->met.loss;
    return 0;
}

static void progress_bar(int64_t done, int64_t total, double loss, double rate) {
    int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %" PRId64 "/%" PRId64 " loss %.4f %.0f samples/s ", bar, done, total, loss, rate);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* Every steps_per_print steps a log line; without steps_per_print, a progress bar on a terminal. */
static int mlp_after_step(zcli_train *t, int64_t s) {
    mlp_run *r = t->model;
    double now = zclock_now_s(), B = (double)zinc_train_batch_size(t->e);
    const zinc_step_info *i = &t->info;
    if (t->every > 0 && ((s + 1) % t->every == 0 || s + 1 == t->o->steps)) {
        char flops[64];
        zcli_flops_text(t, (double)(s + 1 - r->last_step) * B, now - r->t_last, flops, sizeof flops);
        zinc_log(t->e, ZINC_LOG_INFO,
                 "step %6" PRId64 " | loss %.4f | acc %.3f | lr %.3e | loss scale %g | skipped %" PRId64
                 " | grad norm %.4f | %.0f samples/s%s",
                 s + 1, r->met.loss, r->met.accuracy, i->lr, (double)i->loss_scale, i->steps_skipped, i->grad_norm,
                 (double)(s + 1 - r->last_step) * B / (now - r->t_last), flops);
        r->t_last = now;
        r->last_step = s + 1;
    }
    if (r->bar) progress_bar(s + 1, t->o->steps, r->met.loss, (double)(s + 1 - t->start) * B / (now - t->t0));
    return 0;
}

static int64_t mlp_numel(zcli_train *t) { return zinc_numel_total(t->e); }

static void mlp_summary(zcli_train *t, double elapsed, double norm, uint64_t sum) {
    const mlp_run *r = t->model;
    const zinc_step_info *i = &t->info;
    if (t->o->steps <= t->start) {
        fprintf(stderr,
                "zinc train: no steps run (the checkpoint is at step %" PRId64 ", --steps %" PRId64
                "); parameter norm %.6f, checksum %016" PRIx64 "\n",
                t->start, t->o->steps, norm, sum);
        return;
    }
    double rate = elapsed > 0 ? (double)((t->o->steps - t->start) * zinc_train_batch_size(t->e)) / elapsed : 0.0;
    fprintf(stderr,
            "zinc train: %" PRId64 " steps (%" PRId64 " taken, %" PRId64 " skipped) in %.2f s, %.0f samples/s; "
            "loss %.4f -> %.4f, accuracy %.3f -> %.3f; loss scale %g; parameter norm %.6f, checksum %016" PRIx64 "\n",
            i->step, i->steps_taken, i->steps_skipped, elapsed, rate, r->first.loss, r->met.loss, r->first.accuracy,
            r->met.accuracy, (double)i->loss_scale, norm, sum);
}

static int mlp_report(zcli_train *t, json_t *j, double elapsed) {
    (void)elapsed;
    const mlp_run *r = t->model;
    return json_object_set_new(j, "final_accuracy", json_real(zcli_real(r->met.accuracy)));
}

static void mlp_free(zcli_train *t) {
    mlp_run *r = t->model;
    if (r) mlp_destroy(r->m);
    free(r);
}

const zcli_train_model zcli_model_mlp = {
    .name = "mlp",
    .options = &mlp_table,
    .opts_size = sizeof(mlp_opts),
    .usage = "usage: zinc train [--model mlp] --config FILE [options]   (GPT-2: zinc train --model gpt2 --help)",
    .about = "Trains the example MLP (examples/mlp) on its synthetic classification task with a DeepSpeed\n"
             "ds_config.json. Run under mpirun/srun for several ranks: mpirun -np 4 zinc train ...",
    .defaults = mlp_defaults,
    .prepare = mlp_prepare,
    .build = mlp_build,
    .start = mlp_start,
    .micro_step = mlp_micro,
    .step_end = mlp_step_end,
    .after_step = mlp_after_step,
    .numel = mlp_numel,
    .summary = mlp_summary,
    .report = mlp_report,
    .destroy = mlp_free,
    .memory = mlp_memory_of,
};
