/* zinc train's one driver: any model (train.h) from the options to the report. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/core/clock.h"
#include "cli/common/cli_files.h"
#include "cli/common/comms_report.h"
#include "cli/train/train.h"
#include "cli/train/train_flops.h"
#include "cli/trace/trace_summary.h"
#include "cli/train/train_guard.h"
#include "cli/train/train_memory.h"
#include "base/core/env.h"
#include "base/core/signals.h"

uint64_t zcli_checksum(const float *x, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int zcli_train_fail(const char *what) {
    fprintf(stderr, "zinc train: %s: %s\n", what, zinc_last_error());
    return -1;
}

int zcli_agree(zinc_engine *e, const char *what, const void *v, size_t n) {
    if (zinc_agree_add(e, what, v, n) == ZINC_OK) return 0;
    fprintf(stderr, "zinc train: %s\n", zinc_last_error());
    return -1;
}

/* This process's rank as the launcher set it (mpirun, srun, PMI), 0 when started alone: known even when
 * zinc_create failed before returning an engine. */
static int launcher_rank(void) {
    static const zenv_id vars[] = {ZENV_OMPI_COMM_WORLD_RANK, ZENV_PMIX_RANK, ZENV_PMI_RANK, ZENV_SLURM_PROCID};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = zenv_get(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

static int create_engine(const zcli_train_opts *o, zinc_engine **e) {
    static const zinc_device_kind devices[] = {ZINC_DEVICE_CPU, ZINC_DEVICE_CUDA, ZINC_DEVICE_AUTO};
    zinc_options zo = zinc_default_options();
    zo.config_path = o->config;
    zo.config_overrides = o->sets.v;
    zo.total_steps = o->steps; /* fills an "auto" scheduler.params.total_num_steps */
    zo.seed = (uint64_t)o->seed;
    zo.cpu_threads = (int)o->threads;
    if (o->device >= 0) zo.device = devices[o->device];
    if (o->nonfinite == 1) zo.nonfinite = ZINC_NONFINITE_SKIP;
    if (o->quiet) zo.log_level = ZINC_LOG_WARN;
    zo.preempt = 1; /* SIGTERM/SIGINT/SIGUSR1: stop at a step boundary, saved (loop) */
    zo.trace_path = o->trace;
    zo.trace_first_step = o->trace_first;
    zo.trace_last_step = o->trace_last;
    zo.trace_replace = o->force;
    zo.trace_per_rank = o->trace_per_rank;
    zinc_status st = zinc_create(&zo, e);
    if (st == ZINC_OK) return 0;
    /* A config problem is the same on every rank: said once per job, by rank 0; the other ranks exit with
     * the same status silently. Other failures can differ by rank and are printed by each. */
    if (st != ZINC_ERR_CONFIG || launcher_rank() == 0) fprintf(stderr, "zinc train: %s\n", zinc_last_error());
    return -1;
}

/* From zinc_create to a built model whose outputs can be written: the ranks agree on the run (rank 0 holds
 * the --save directory's lock), the model builds, and the --save/--report probes are honoured. */
static int setup(const zcli_train_model *m, zcli_train *t, char *save_why, char *report_why, size_t cap,
                 int *run_lock) {
    const zcli_train_opts *o = t->o;
    if (create_engine(o, &t->e)) return -1;
    zcli_run run = {.steps = o->steps,
                    .seed = o->seed,
                    .save_every = o->save_every,
                    .given = (o->save_dir ? 1 : 0) | (o->resume ? 2 : 0) | (o->report ? 4 : 0) | (o->quiet ? 8 : 0),
                    .save_dir = o->save_dir,
                    .resume = o->resume,
                    .save_why = save_why,
                    .report_why = report_why,
                    .why_cap = cap};
    if (zcli_agree(t->e, "--keep-last", &o->keep_last, sizeof o->keep_last) || zcli_agree_run(t->e, &run, run_lock) ||
        m->build(t) || zcli_outputs_refused(&run))
        return -1;
    /* The models index their samples as step x train_batch_size plus offsets within the step. */
    int64_t B = zinc_train_batch_size(t->e);
    if (o->steps > INT64_MAX / 4 / B) {
        fprintf(stderr,
                "zinc train: --steps %" PRId64 " x train_batch_size %" PRId64 " samples overflows the sample "
                "index; use fewer steps\n",
                o->steps, B);
        return -1;
    }
    if (o->resume) {
        if (zinc_load_checkpoint(t->e, o->resume) != ZINC_OK) {
            fprintf(stderr, "zinc train: resuming from %s failed: %s\n", o->resume, zinc_last_error());
            return -1;
        }
        t->start = zinc_step_count(t->e);
        /* zinc launch reads this line for the time from a failure to the resume */
        if (zinc_rank(t->e) == 0 && !o->quiet)
            fprintf(stderr, "zinc train: resumed from %s at step %" PRId64 "\n", o->resume, t->start);
        if (t->start > o->steps && zinc_rank(t->e) == 0)
            fprintf(stderr,
                    "zinc train: the checkpoint is at step %" PRId64 ", beyond --steps %" PRId64 "; nothing to train\n",
                    t->start, o->steps);
    }
    /* checkpoint.writer.decoupled: the snapshot's pages faulted in now, off the training thread, not by the
     * first save */
    if (o->save_dir && zinc_checkpoint_reserve(t->e) != ZINC_OK) {
        fprintf(stderr, "zinc train: reserving the checkpoint snapshot failed: %s\n", zinc_last_error());
        return -1;
    }
    t->info.step = t->start;
    return m->start(t);
}

static int save(zcli_train *t, int64_t step) {
    if (zinc_save_checkpoint(t->e, t->o->save_dir, NULL) == ZINC_OK) {
        /* only after the new one is published (latest names it) */
        if (t->o->keep_last > 0 && zinc_checkpoint_keep_last(t->e, t->o->save_dir, (int)t->o->keep_last) != ZINC_OK)
            return zcli_train_fail("removing checkpoints older than --keep-last failed");
        return 0;
    }
    if (step < 0) return zcli_train_fail("saving the final checkpoint failed");
    fprintf(stderr, "zinc train: saving the checkpoint of step %" PRId64 " failed: %s\n", step, zinc_last_error());
    return -1;
}

static const char *signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

/* Every rank agreed at this step that a signal reached one of them (zinc_preempt_requested): the checkpoint
 * of this step (unless --save-every just wrote it), then the exit status that says whether it was saved. */
static int preempted(zcli_train *t, int64_t step, int64_t last_saved) {
    const zcli_train_opts *o = t->o;
    int sig = zinc_preempt_requested(t->e);
    if (o->save_dir && last_saved != step && save(t, step)) return -1;
    /* checkpoint.writer.decoupled: the exit waits for the writer, and says saved only once published */
    if (o->save_dir && zinc_checkpoint_wait(t->e) != ZINC_OK) return zcli_train_fail("saving the checkpoint failed");
    if (zinc_rank(t->e) == 0) {
        double since = zsig_pending_since(), waited = since > 0 ? zclock_now_s() - since : -1;
        char took[64] = "";
        if (waited >= 0) snprintf(took, sizeof took, " (%.3f s after the signal reached rank 0)", waited);
        if (o->save_dir)
            fprintf(stderr,
                    "zinc train: %s: stopped at step %" PRId64 "; saved at step %" PRId64
                    "%s, resumable with --resume %s\n",
                    signal_name(sig), step, step, took, o->save_dir);
        else
            fprintf(stderr, "zinc train: %s: stopped at step %" PRId64 "%s; nothing saved (no --save DIR)\n",
                    signal_name(sig), step, took);
    }
    return o->save_dir ? ZCLI_EXIT_PREEMPTED : ZCLI_EXIT_STOPPED;
}

/* One optimizer step: the model's micro-steps, zinc_step, the model's loss. */
static int one_step(const zcli_train_model *m, zcli_train *t, int64_t s) {
    int64_t gas = zinc_grad_accum_steps(t->e);
    double ts = zclock_now_s();
    int bad = 0;
    for (int64_t j = 0; j < gas && !bad; j++) bad = m->micro_step(t, s, j);
    bad = bad || zinc_step(t->e, &t->info) != ZINC_OK || m->step_end(t, &t->loss);
    /* the engine's monitors (tensorboard, csv_monitor) write the loss next to the step's lr and scale */
    bad = bad || zinc_record_loss(t->e, t->loss) != ZINC_OK;
    double took = zclock_now_s() - ts;
    t->train_s += took;
    if (!bad) {
        json_array_append_new(t->step_seconds, json_real(took));
        json_array_append_new(t->losses, json_real(zcli_real(t->loss)));
        json_array_append_new(t->lrs, json_real(t->info.lr));
        json_array_append_new(t->loss_scales, json_real((double)t->info.loss_scale));
        return 0;
    }
    fprintf(stderr, "zinc train: step %" PRId64 " failed: %s\n", s + 1, zinc_last_error());
    return -1;
}

/* The steps, the --save-every checkpoints, the model's hooks, the final checkpoint. Returns 0, -1 after an
 * error, or the exit status of a run stopped by a signal (preempted). */
static int loop(const zcli_train_model *m, zcli_train *t) {
    const zcli_train_opts *o = t->o;
    int64_t last_saved = -1;
    t->t0 = zclock_now_s();
    for (int64_t s = t->start; s < o->steps; s++) {
        if (one_step(m, t, s)) return -1;
        t->taken += t->info.taken;
        if (s == t->start) t->first_loss = t->loss;
        if (m->after_step(t, s)) return -1;
        if (o->save_dir && o->save_every > 0 && (s + 1) % o->save_every == 0) {
            if (save(t, s + 1)) return -1;
            last_saved = s + 1;
        }
        if (t->info.preempt_signal) return preempted(t, s + 1, last_saved);
    }
    if (m->finish && m->finish(t)) return -1;
    if (o->save_dir && last_saved != zinc_step_count(t->e) && save(t, -1)) return -1;
    /* checkpoint.writer.decoupled: the run ends once the last save is published */
    if (o->save_dir && zinc_checkpoint_wait(t->e) != ZINC_OK) return zcli_train_fail("saving the checkpoint failed");
    return 0;
}

static int write_report(const zcli_train_model *m, zcli_train *t, double elapsed, double norm, uint64_t sum, int64_t n,
                        json_t *hwm) {
    char hex[32];
    snprintf(hex, sizeof hex, "%016" PRIx64, sum);
    const zinc_step_info *i = &t->info;
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:s, s:f, s:I}", "model",
                  m->name, "config", t->o->config, "world_size", zinc_world_size(t->e), "zero_stage",
                  zinc_zero_stage(t->e), "steps", (json_int_t)i->step, "steps_taken", (json_int_t)i->steps_taken,
                  "steps_skipped", (json_int_t)i->steps_skipped, "first_loss", zcli_real(t->first_loss), "final_loss",
                  zcli_real(t->loss), "final_loss_scale", zcli_real((double)i->loss_scale), "final_lr", i->lr,
                  "final_grad_norm", isfinite(i->grad_norm) ? i->grad_norm : -1.0, "parameters", (json_int_t)n,
                  "param_l2_norm", zcli_real(norm), "param_checksum", hex, "seconds", elapsed, "resumed_from_step",
                  (json_int_t)t->start);
    if (j) json_object_set(j, "vmhwm_bytes", hwm); /* each rank's VmHWM (/proc/self/status) */
    if (j) {                                       /* one per step of this run */
        json_object_set(j, "losses", t->losses);
        json_object_set(j, "lrs", t->lrs);
        json_object_set(j, "loss_scales", t->loss_scales);
        json_object_set(j, "step_seconds", t->step_seconds); /* the step itself: saves and evaluation apart */
    }
    if (j && (zcli_report_comms(t->e, j) || m->report(t, j, elapsed) || zcli_flops_report(t, j))) {
        fprintf(stderr, "zinc train: cannot build the report for %s\n", t->o->report);
        json_decref(j);
        return -1;
    }
    /* the safe writer: an existing file only with --force, never one of the run's inputs */
    int bad = zcli_write_json("zinc train", "--report", t->o->report, j, JSON_INDENT(2) | JSON_REAL_PRECISION(17),
                              t->o->force, t->inputs);
    json_decref(j);
    return bad ? -1 : 0;
}

/* The parameters' norm and checksum (collective gather), the summary and the report on rank 0. */
static int conclude(const zcli_train_model *m, zcli_train *t) {
    double elapsed = zclock_now_s() - t->t0, norm = 0;
    int64_t n = m->numel(t);
    uint64_t sum = 0;
    /* streamed: no second copy of the model at the end of the run (issue 25) */
    if (zcli_param_checksum(t->e, &sum, &norm) != ZINC_OK) return zcli_train_fail("reading the parameters failed");
    json_t *hwm = zcli_vmhwm_all(t->e); /* every rank's real peak, for the report */
    if (!hwm) return zcli_train_fail("gathering the ranks' peak memory failed");
    /* A run in which every step was skipped did not train: an error, after its summary and report. */
    int all_skipped = t->o->steps > t->start && t->taken == 0, bad = 0;
    if (zinc_rank(t->e) == 0) {
        if (all_skipped)
            zcli_all_steps_skipped("zinc train", t->o->steps - t->start, t->taken,
                                   "Check the loss scale (fp16.loss_scale, initial_scale_power), the learning rate "
                                   "and the data");
        m->summary(t, elapsed, norm, sum);
        bad = t->o->report ? write_report(m, t, elapsed, norm, sum, n, hwm) : 0;
    }
    json_decref(hwm);
    return bad || all_skipped ? -1 : 0;
}

/* --trace: outside the checkpoint directories, not one of the inputs nor the --report file (both are written
 * at the end: the one would replace the other). 1 after saying why (rank 0), else 0. */
static int trace_refused(const zcli_train_opts *o, const char *const *inputs) {
    char why[8800];
    zcli_check_outside_run_dirs("--trace", o->trace, o->save_dir, o->resume, why, sizeof why);
    if (!why[0]) zcli_check_target("--trace", o->trace, o->force, inputs, why, sizeof why);
    if (!why[0] && o->report && zcli_same_file(o->trace, o->report))
        snprintf(why, sizeof why, "--trace %s and --report %s name the same file: give each its own path", o->trace,
                 o->report);
    if (why[0] && launcher_rank() == 0) fprintf(stderr, "zinc train: %s\n", why);
    return why[0] != 0;
}

int zcli_train_run(const zcli_train_model *m, zcli_train_opts *o, void *model_opts) {
    /* From here on a SIGTERM/SIGINT/SIGUSR1 is only recorded (zinc_options.preempt, set in create_engine,
     * agrees on it at the first step): one arriving while the ranks start (MPI, the model's files) stops the
     * run at its first step boundary instead of killing it before there is anything to save. */
    zsig_install();
    zsig_defer(true);
    /* Output paths are checked before any training is spent on them (every rank checks its own view of
     * the file system; the result is one of the items the ranks agree on). */
    char save_why[8800] = "", report_why[8800] = "";
    if (o->save_dir) zcli_check_out_path("--save", o->save_dir, 1, save_why, sizeof save_why);
    if (o->report) zcli_check_out_path("--report", o->report, 0, report_why, sizeof report_why);
    zcli_train t = {.o = o,
                    .model_opts = model_opts,
                    .first_loss = NAN,
                    .inputs = {o->config},
                    .losses = json_array(),
                    .lrs = json_array(),
                    .loss_scales = json_array(),
                    .step_seconds = json_array()};
    int run_lock = -1, rc = m->prepare(&t);
    /* --report is checked against the inputs the model's prepare named (an existing file needs --force) */
    if (rc == 0 && o->report && !report_why[0])
        zcli_check_target("--report", o->report, o->force, t.inputs, report_why, sizeof report_why);
    /* neither the report nor the trace among the checkpoint's files (the --save probe made its directory) */
    if (rc == 0 && o->report && !report_why[0])
        zcli_check_outside_run_dirs("--report", o->report, o->save_dir, o->resume, report_why, sizeof report_why);
    /* --trace against the model's inputs too (zinc_create checks the path, the config and --force again) */
    if (rc == 0 && o->trace && trace_refused(o, t.inputs)) rc = 1;
    if (rc == 0 && (setup(m, &t, save_why, report_why, sizeof save_why, &run_lock) || zcli_flops_start(&t))) rc = 1;
    int stopped = rc == 0 ? loop(m, &t) : 0;
    if (rc == 0) rc = stopped > 0 ? stopped : stopped < 0 || conclude(m, &t) ? 1 : 0;
    if (run_lock >= 0) close(run_lock);
    m->destroy(&t);
    int rank = t.e ? zinc_rank(t.e) : -1;
    zinc_destroy(t.e); /* a run shorter than --trace-steps writes its trace here */
    /* the end-of-run table per module, from the timeline (as DeepSpeed's flops profiler prints one) */
    if (rc == 0 && o->trace && rank == 0 && !o->quiet && access(o->trace, F_OK) == 0)
        zcli_trace_module_table("zinc train", o->trace, stderr);
    json_decref(t.losses);
    json_decref(t.lrs);
    json_decref(t.loss_scales);
    json_decref(t.step_seconds);
    /* a signal recorded before there was an engine to stop at a step (zsig_defer from main on): the run
     * ended before its first step, as a signalled run without a checkpoint ends */
    if (rc == 1 && rank < 0 && zsig_pending()) {
        if (launcher_rank() == 0)
            fprintf(stderr, "zinc train: %s: stopped before the first step; nothing trained or saved\n",
                    signal_name(zsig_pending()));
        rc = ZCLI_EXIT_STOPPED;
    }
    return rc;
}
