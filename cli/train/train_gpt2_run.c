/* zinc train --model gpt2, the run's hooks (train_gpt2.h): the data against the batch size, the shape file
 * beside the checkpoints, progress lines, validation, samples, the summary and the report's keys. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/clock.h"
#include "cli/common/cli_files.h"
#include "cli/checkpoint/gpt2_cli.h"
#include "cli/train/train_flops.h"
#include "cli/train/train_gpt2.h"
#include "examples/gpt2/gpt2_gemm.h"

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtod(line + 6, NULL);
    if (f) fclose(f);
    return kb / 1024.0;
}

/* Whether the data holds one global batch: training must, validation is turned off when it does not. */
static int check_batches(zcli_train *t, gpt2_run *r) {
    int64_t B = zinc_train_batch_size(t->e);
    if (gpt2_batches_per_pass(&r->train, (int)r->context, B) < 1) {
        fprintf(stderr,
                "zinc train: %s has %lld tokens, fewer than one global batch needs (train_batch_size %lld x "
                "context %lld + 1)\n",
                r->train_name, (long long)r->train.n, (long long)B, (long long)r->context);
        return -1;
    }
    if (r->val.n && gpt2_batches_per_pass(&r->val, (int)r->context, B) < 1) {
        fprintf(stderr,
                "zinc train: the validation data (%s) has %lld tokens, fewer than one global batch needs "
                "(%lld x %lld + 1); validation is off\n",
                r->val_name, (long long)r->val.n, (long long)B, (long long)r->context);
        gpt2_tokens_free(&r->val);
    }
    return 0;
}

int zcli_gpt2_start(zcli_train *t) {
    const gpt2_opts *g = t->model_opts;
    gpt2_run *r = t->model;
    const gpt2_shape *s = &r->s;
    char err[1024];
    int64_t steps = t->o->steps, B = zinc_train_batch_size(t->e);
    if (check_batches(t, r)) return -1;
    if (zinc_rank(t->e) == 0 && t->o->save_dir && zcli_gpt2_shape_save(t->o->save_dir, s, err, sizeof err) != 0) {
        fprintf(stderr, "zinc train: %s\n", err);
        return -1;
    }
    t->every = zinc_steps_per_print(t->e);
    if (t->every <= 0) t->every = steps - t->start > 20 ? (steps - t->start) / 20 : 1;
    r->val_every = g->val_every ? g->val_every : t->every;
    r->rng = (uint64_t)t->o->seed ^ 0x5eed5eedull;
    r->prompt = g->text ? '\n' : (uint16_t)(s->vocab > 50256 ? 50256 : 0);
    r->last_val = NAN;
    r->last_step = t->start;
    r->t_last = zclock_now_s();
    if (zinc_rank(t->e) == 0)
        zinc_log(t->e, ZINC_LOG_INFO,
                 "gpt2: %d layers, %d channels, %d heads, vocabulary %d (padded %d), context %lld, %lld parameters; "
                 "%lld training tokens, %lld validation tokens; %lld tokens per step",
                 s->layers, s->channels, s->heads, s->vocab, s->padded_vocab, (long long)r->context,
                 (long long)gpt2_num_params(s), (long long)r->train.n, (long long)r->val.n,
                 (long long)(B * r->context));
    return 0;
}

/* The largest resident size over the ranks, in MiB (collective). */
static int rss_max(zinc_engine *e, double *mx) {
    int W = zinc_world_size(e);
    double *rss = calloc((size_t)W, sizeof *rss);
    if (!rss) return -1;
    rss[zinc_rank(e)] = rss_mib();
    int bad = zinc_allreduce_sum(e, rss, W) != ZINC_OK;
    *mx = 0;
    for (int i = 0; i < W; i++) *mx = rss[i] > *mx ? rss[i] : *mx;
    free(rss);
    return bad ? -1 : 0;
}

static int progress(zcli_train *t, gpt2_run *r, int64_t st) {
    double mx, now = zclock_now_s(), dt = now - r->t_last;
    if (rss_max(t->e, &mx)) return -1;
    int64_t steps = t->o->steps, done = st + 1 - r->last_step;
    double tps = (double)(done * zinc_train_batch_size(t->e) * r->context) / dt, ms = 1e3 * dt / (double)done;
    double eta = (double)(steps - st - 1) * ms / 1e3;
    char etas[48] = "";
    if (eta >= 60) snprintf(etas, sizeof etas, " | ETA %dm%02ds", (int)(eta / 60), (int)eta % 60);
    char flops[64];
    zcli_flops_text(t, (double)(done * zinc_train_batch_size(t->e)), dt, flops, sizeof flops);
    if (zinc_rank(t->e) == 0 && !t->o->quiet)
        fprintf(stderr,
                "step %6" PRId64 "/%" PRId64 " | loss %.4f | lr %.3e | %.0f tokens/s | %.1f ms/step%s | "
                "loss scale %g | grad norm %.3f | rss max %.0f MiB/rank%s\n",
                st + 1, steps, t->loss, t->info.lr, tps, ms, flops, (double)t->info.loss_scale, t->info.grad_norm, mx,
                etas);
    r->t_last = zclock_now_s();
    r->last_step = st + 1;
    return 0;
}

static int validate(zcli_train *t, gpt2_run *r, int64_t st) {
    const gpt2_opts *g = t->model_opts;
    if (gpt2_val_loss(r->m, &r->val, g->val_batches, &r->last_val) != ZINC_OK)
        return zcli_train_fail("validation failed");
    if (zinc_rank(t->e) == 0 && !t->o->quiet)
        fprintf(stderr, "step %6" PRId64 " | val loss %.4f\n", st + 1, r->last_val);
    /* a model that went non-finite has no loss for the monitors (the report marks it) */
    if (isfinite(r->last_val) && zinc_record_eval_loss(t->e, r->last_val) != ZINC_OK)
        return zcli_train_fail("recording the validation loss");
    json_array_append_new(r->val_losses,
                          json_pack("{s:I, s:f}", "step", (json_int_t)(st + 1), "loss", zcli_real(r->last_val)));
    r->t_last = zclock_now_s();
    return 0;
}

int zcli_gpt2_after_step(zcli_train *t, int64_t st) {
    const gpt2_opts *g = t->model_opts;
    gpt2_run *r = t->model;
    bool last = st + 1 == t->o->steps;
    if (((st + 1) % t->every == 0 || last) && progress(t, r, st)) return -1;
    if (r->val.n && ((st + 1) % r->val_every == 0 || last) && validate(t, r, st)) return -1;
    if (g->sample_every && ((st + 1) % g->sample_every == 0 || last)) {
        if (zcli_gpt2_sample(t->e, r->m, (int)g->sample_tokens, r->prompt, &r->rng, &r->sample_text)) return -1;
        r->t_last = zclock_now_s();
    }
    return 0;
}

/* A report without --sample-every still gets one sample, taken at the end. */
int zcli_gpt2_finish(zcli_train *t) {
    const gpt2_opts *g = t->model_opts;
    gpt2_run *r = t->model;
    if (g->sample_every || !t->o->report) return 0;
    return zcli_gpt2_sample(t->e, r->m, (int)g->sample_tokens, r->prompt, &r->rng, &r->sample_text);
}

static double tokens_per_s(const zcli_train *t, const gpt2_run *r) {
    double tokens = (double)((t->o->steps - t->start) * zinc_train_batch_size(t->e) * r->context);
    return t->train_s > 0 ? tokens / t->train_s : 0;
}

void zcli_gpt2_summary(zcli_train *t, double elapsed, double norm, uint64_t sum) {
    (void)norm;
    const gpt2_run *r = t->model;
    if (t->o->steps > t->start)
        fprintf(stderr,
                "zinc train: gpt2, %" PRId64 " steps in %.1f s; loss %.4f -> %.4f; %.0f tokens/s (training steps "
                "only); checksum %016" PRIx64 "\n",
                t->o->steps - t->start, elapsed, t->first_loss, t->loss, tokens_per_s(t, r), sum);
    else
        fprintf(stderr, "zinc train: gpt2, no steps to run (at step %" PRId64 "); checksum %016" PRIx64 "\n", t->start,
                sum);
    if (!isnan(r->last_val)) fprintf(stderr, "zinc train: final validation loss %.4f\n", r->last_val);
    double steps_s, engine_s;
    gpt2_times(r->m, &steps_s, &engine_s);
    if (steps_s > 0)
        fprintf(stderr,
                "zinc train: step time %.1f%% model compute, %.1f%% engine (module entries and exits, reduction, "
                "clipping, Adam, gathers, waiting for other ranks)\n",
                100 * (steps_s - engine_s) / steps_s, 100 * engine_s / steps_s);
}

int zcli_gpt2_report(zcli_train *t, json_t *j, double elapsed) {
    (void)elapsed;
    const gpt2_run *r = t->model;
    const gpt2_shape *s = &r->s;
    double steps_s, engine_s;
    gpt2_times(r->m, &steps_s, &engine_s);
    int bad = json_object_set_new(j, "compute_dtype", json_string(zinc_dtype_name(zinc_compute_dtype(t->e))));
    bad |= json_object_set_new(j, "gemm", json_string(gpt2_gemm_name(gpt2_gemm_selected())));
    bad |= json_object_set_new(j, "products", json_string(gpt2_model_bf16_products(r->m) ? "bf16" : "fp32"));
    bad |= json_object_set_new(j, "shape",
                               json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:I}", "layers", s->layers, "channels",
                                         s->channels, "heads", s->heads, "vocab", s->vocab, "padded_vocab",
                                         s->padded_vocab, "max_context", s->max_context, "context",
                                         (json_int_t)r->context));
    bad |= json_object_set(j, "val_losses", r->val_losses);
    bad |= json_object_set_new(j, "tokens_per_s", json_real(tokens_per_s(t, r)));
    bad |= json_object_set_new(j, "tokens_per_step", json_integer(zinc_train_batch_size(t->e) * r->context));
    if (!isnan(r->last_val)) bad |= json_object_set_new(j, "final_val_loss", json_real(r->last_val));
    bad |= json_object_set_new(j, "time_split",
                               json_pack("{s:f, s:f, s:f}", "train_steps_s", steps_s, "engine_s", engine_s,
                                         "model_compute_s", steps_s - engine_s));
    if (r->sample_text) bad |= json_object_set(j, "sample", r->sample_text);
    return bad ? -1 : 0;
}
