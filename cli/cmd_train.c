/* zinc train: trains the example MLP (examples/mlp) through the engine with a ds_config. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/core/env.h"
#include "cli/commands.h"
#include "cli/gpt2_cli.h"
#include "cli/train_guard.h"
#include "cli/train_memory.h"
#include "examples/mlp/mlp.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f, "usage: zinc train [--model mlp] --config FILE [options]   (GPT-2: zinc train --model gpt2 --help)\n"
               "\n"
               "Trains the example MLP (examples/mlp) on its synthetic classification task with a DeepSpeed\n"
               "ds_config.json. Run under mpirun/srun for several ranks: mpirun -np 4 zinc train ...\n"
               "\n"
               "options:\n"
               "  --config FILE     the ds_config.json (required)\n"
               "  --steps N         the optimizer step count to reach (default 100); a run resumed at step K\n"
               "                    trains N - K more\n"
               "  --seed S          parameter initialisation seed (default 1234)\n"
               "  --data-seed S     the synthetic task's seed (default 42)\n"
               "  --hidden N        hidden width (default 128); --depth N hidden layers (default 2)\n"
               "  --in-dim N        input features (default 32); --classes N (default 8)\n"
               "  --device D        cpu | cuda | auto (default: the config's zinc.device, else auto)\n"
               "  --threads N       CPU kernel threads per rank (default: cores / ranks on the node)\n"
               "  --report FILE     write a JSON summary (loss, steps, loss scale, parameter norm and checksum)\n"
               "  --save DIR        save checkpoints to DIR (tags step<N>, DIR/latest names the newest): at the end,\n"
               "                    and every K steps with --save-every K\n"
               "  --resume PATH     continue from a checkpoint: DIR (its latest) or DIR/TAG; any rank count and\n"
               "                    ZeRO stage can resume any checkpoint of the same model\n"
               "  --set PATH=VALUE  fill an \"auto\" or override a ds_config value: a dotted key path and a JSON\n"
               "                    value (--set train_micro_batch_size_per_gpu=4 --set optimizer.params.lr=3e-4);\n"
               "                    repeatable. An \"auto\" not set is filled as the Hugging Face Trainer fills it\n"
               "                    with its default arguments (a warning names each); total_num_steps from --steps\n"
               "  --on-nonfinite P  error (default): a non-finite gradient in fp32/bf16, or parameters made\n"
               "                    non-finite by a step, stop the run naming the step and tensor; skip: such\n"
               "                    steps are skipped with a warning (fp16 always skips and lowers its loss scale)\n"
               "  --quiet           only warnings, errors and the summary\n"
               "\n"
               "ZINC_COLLECTIVE_TIMEOUT_S (default for this program 1800, 0 = off): a rank that waits longer in a "
               "collective (another\n"
               "rank died or stopped) ends with exit status 113 and a message, so the launcher ends the job.\n");
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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "zinc train: %s needs an integer in %lld..%lld, got \"%s\"\n", flag, (long long)lo,
                (long long)hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static void progress(int64_t done, int64_t total, double loss, double rate) {
    int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %" PRId64 "/%" PRId64 " loss %.4f %.0f samples/s ", bar, done, total, loss, rate);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* Whether a path can be written, tried before any training is spent on it: --save DIR is created (as the
 * save would) and a probe file made and removed in it; --report FILE is opened for writing (created and
 * removed when it does not exist yet; an existing one must be a regular file and is left as it is). ""
 * when it can, else why not. */

int zinc_cmd_train(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--model")) {
            if (!strcmp(argv[i + 1], "gpt2")) return zinc_cmd_train_gpt2(argc, argv);
            if (strcmp(argv[i + 1], "mlp")) {
                fprintf(stderr, "zinc train: --model must be mlp or gpt2, got \"%s\"\n", argv[i + 1]);
                return 2;
            }
        }
    const char *config = NULL, *report = NULL, *save_dir = NULL, *resume = NULL;
    int64_t steps = 100, seed = 1234, data_seed = 42, threads = 0, save_every = 0;
    zinc_mlp_config mc = zinc_mlp_default_config();
    zinc_options o = zinc_default_options();
    int quiet = 0, nsets = 0, run_lock = -1;
    const char *sets[ZINC_MAX_SETS + 1] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        /* Every option but these takes a value, and a value is never the next option: `--resume` alone or
         * `--save --quiet` is an error, not a run from scratch or a directory named --quiet. */
        if (strcmp(a, "--help") && strcmp(a, "-h") && strcmp(a, "--quiet") && a[0] == '-' &&
            (!v || (v[0] == '-' && v[1] == '-'))) {
            fprintf(stderr, "zinc train: %s needs a value%s%s%s (see zinc train --help)\n", a,
                    v ? ", got the option \"" : "", v ? v : "", v ? "\"" : "");
            return 2;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--config"))
            config = v, i++;
        else if (!strcmp(a, "--report"))
            report = v, i++;
        else if (!strcmp(a, "--save"))
            save_dir = v, i++;
        else if (!strcmp(a, "--resume"))
            resume = v, i++;
        else if (!strcmp(a, "--set")) {
            if (!v || nsets == ZINC_MAX_SETS) {
                fprintf(stderr,
                        "zinc train: --set needs PATH=VALUE, for example --set train_micro_batch_size_per_gpu=4 "
                        "(at most %d of them)\n",
                        ZINC_MAX_SETS);
                return 2;
            }
            sets[nsets++] = v;
            i++;
        } else if (!strcmp(a, "--save-every")) {
            if (parse_i64(a, v, 1, (int64_t)1 << 53, &save_every)) return 2;
            i++;
        } else if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (!strcmp(a, "--model"))
            i++; /* mlp: checked above */
        else if (!strcmp(a, "--steps")) {
            if (parse_i64(a, v, 0, (int64_t)1 << 53, &steps)) return 2;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (parse_i64(a, v, 0, INT64_MAX, &seed)) return 2;
            i++;
        } else if (!strcmp(a, "--data-seed")) {
            if (parse_i64(a, v, 0, INT64_MAX, &data_seed)) return 2;
            i++;
        } else if (!strcmp(a, "--threads")) {
            if (parse_i64(a, v, 1, 1024, &threads)) return 2;
            i++;
        } else if (!strcmp(a, "--hidden") || !strcmp(a, "--depth") || !strcmp(a, "--in-dim") ||
                   !strcmp(a, "--classes")) {
            if (parse_i64(a, v, !strcmp(a, "--depth") ? 0 : (!strcmp(a, "--classes") ? 2 : 1),
                          !strcmp(a, "--in-dim") ? 512 : 65536, &x))
                return 2;
            if (!strcmp(a, "--hidden"))
                mc.hidden = (int)x;
            else if (!strcmp(a, "--depth"))
                mc.depth = (int)x;
            else if (!strcmp(a, "--in-dim"))
                mc.in_dim = (int)x;
            else
                mc.classes = (int)x;
            i++;
        } else if (!strcmp(a, "--on-nonfinite")) {
            if (!strcmp(v, "error"))
                o.nonfinite = ZINC_NONFINITE_DEFAULT;
            else if (!strcmp(v, "skip"))
                o.nonfinite = ZINC_NONFINITE_SKIP;
            else {
                fprintf(stderr, "zinc train: --on-nonfinite must be error or skip, got \"%s\"\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--device")) {
            if (zcli_device_arg(v, &o.device)) return 2;
            i++;
        } else {
            fprintf(stderr, "zinc train: unknown option \"%s\" (see zinc train --help)\n", a);
            return 2;
        }
    }
    if ((save_dir && !*save_dir) || (resume && !*resume) || (!save_dir && save_every)) {
        fprintf(stderr, "zinc train: --save and --resume need a path; --save-every needs --save DIR\n");
        return 2;
    }
    if (!config) {
        fprintf(stderr, "zinc train: --config FILE is required (for example ds_configs/zero2_fp16.json)\n");
        usage(stderr);
        return 2;
    }
    /* Output paths are checked before any training is spent on them (every rank checks its own view of
     * the file system; the result is one of the items the ranks agree on). */
    char save_why[8800] = "", report_why[8800] = "";
    if (save_dir) zcli_check_out_path("--save", save_dir, 1, save_why, sizeof save_why);
    if (report) zcli_check_out_path("--report", report, 0, report_why, sizeof report_why);
    o.config_path = config;
    o.config_overrides = sets;
    o.total_steps = steps; /* fills an "auto" scheduler.params.total_num_steps */
    o.seed = (uint64_t)seed;
    o.cpu_threads = (int)threads;
    if (quiet) o.log_level = ZINC_LOG_WARN;
    mc.data_seed = (uint64_t)data_seed;

    zinc_engine *e = NULL;
    zinc_mlp *m = NULL;
    json_t *hwm = NULL;
    int rc = 1;
    zinc_status cst = zinc_create(&o, &e);
    if (cst != ZINC_OK) {
        /* A config problem is the same on every rank: said once per job, by rank 0; the other ranks exit with
         * the same status silently. Other failures can differ by rank and are printed by each. */
        if (cst != ZINC_ERR_CONFIG || launcher_rank() == 0) fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        return 1;
    }
    /* What every rank must have been given alike; zinc_build (in zinc_mlp_create) compares them. */
    zcli_run run = {.steps = steps,
                    .seed = seed,
                    .save_every = save_every,
                    .given = (save_dir ? 1 : 0) | (resume ? 2 : 0) | (report ? 4 : 0) | (quiet ? 8 : 0),
                    .save_dir = save_dir,
                    .resume = resume,
                    .save_why = save_why,
                    .report_why = report_why,
                    .why_cap = sizeof save_why};
    if (zcli_agree_run(e, &run, &run_lock)) goto done;
    if (zinc_agree_add(e, "--data-seed", &data_seed, sizeof data_seed) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        goto done;
    }
    if (zinc_mlp_create(e, &mc, &m) != ZINC_OK) {
        fprintf(stderr, "zinc train: building the model failed: %s\n", zinc_last_error());
        goto done;
    }
    if (zcli_outputs_refused(&run)) goto done;
    if (steps > INT64_MAX / 4 / zinc_train_batch_size(e)) {
        fprintf(stderr,
                "zinc train: --steps %" PRId64 " x train_batch_size %" PRId64 " samples overflows the sample "
                "index; use fewer steps\n",
                steps, (int64_t)zinc_train_batch_size(e));
        goto done;
    }
    int64_t start = 0, last_saved = -1;
    if (resume) {
        if (zinc_load_checkpoint(e, resume) != ZINC_OK) {
            fprintf(stderr, "zinc train: resuming from %s failed: %s\n", resume, zinc_last_error());
            goto done;
        }
        start = zinc_step_count(e);
        if (start > steps && zinc_rank(e) == 0)
            fprintf(stderr,
                    "zinc train: the checkpoint is at step %" PRId64 ", beyond --steps %" PRId64 "; nothing to train\n",
                    start, steps);
    }
    int rank0 = zinc_rank(e) == 0;
    int64_t every = zinc_steps_per_print(e);
    int bar = rank0 && !quiet && isatty(2) && every == 0;
    zinc_step_info info = {.step = start};
    zinc_mlp_metrics met = {0}, first = {0};
    double t0 = now_s(), t_last = t0;
    int64_t last_step = start;
    for (int64_t s = start; s < steps; s++) {
        if (zinc_mlp_train_step(m, s, &info, &met) != ZINC_OK) {
            fprintf(stderr, "zinc train: step %" PRId64 " failed: %s\n", s + 1, zinc_last_error());
            goto done;
        }
        if (s == start) first = met;
        double t = now_s();
        if (every > 0 && ((s + 1) % every == 0 || s + 1 == steps)) {
            double rate = (double)((s + 1 - last_step) * zinc_train_batch_size(e)) / (t - t_last);
            zinc_log(e, ZINC_LOG_INFO,
                     "step %6" PRId64 " | loss %.4f | acc %.3f | lr %.3e | loss scale %g | skipped %" PRId64
                     " | grad norm %.4f | %.0f samples/s",
                     s + 1, met.loss, met.accuracy, info.lr, (double)info.loss_scale, info.steps_skipped,
                     info.grad_norm, rate);
            t_last = t;
            last_step = s + 1;
        }
        if (bar) progress(s + 1, steps, met.loss, (double)((s + 1 - start) * zinc_train_batch_size(e)) / (t - t0));
        if (save_dir && save_every > 0 && (s + 1) % save_every == 0) {
            if (zinc_save_checkpoint(e, save_dir, NULL) != ZINC_OK) {
                fprintf(stderr, "zinc train: saving the checkpoint of step %" PRId64 " failed: %s\n", s + 1,
                        zinc_last_error());
                goto done;
            }
            last_saved = s + 1;
        }
    }
    if (save_dir && last_saved != zinc_step_count(e)) {
        if (zinc_save_checkpoint(e, save_dir, NULL) != ZINC_OK) {
            fprintf(stderr, "zinc train: saving the final checkpoint failed: %s\n", zinc_last_error());
            goto done;
        }
    }
    double elapsed = now_s() - t0;

    int64_t n = zinc_numel_total(e);
    double norm = 0;
    uint64_t sum = 0;
    if (zcli_param_checksum(e, &sum, &norm) != ZINC_OK || !(hwm = zcli_vmhwm_all(e))) {
        fprintf(stderr, "zinc train: reading the parameters back failed: %s\n", zinc_last_error());
        goto done;
    }
    if (rank0) {
        fprintf(stderr,
                "zinc train: %" PRId64 " steps (%" PRId64 " taken, %" PRId64 " skipped) in %.2f s, %.0f samples/s; "
                "loss %.4f -> %.4f, accuracy %.3f -> %.3f; loss scale %g; parameter norm %.6f, checksum %016" PRIx64
                "\n",
                info.step, info.steps_taken, info.steps_skipped, elapsed,
                elapsed > 0 ? (double)((steps - start) * zinc_train_batch_size(e)) / elapsed : 0.0, first.loss,
                met.loss, first.accuracy, met.accuracy, (double)info.loss_scale, norm, sum);
        if (report) {
            char hex[32];
            snprintf(hex, sizeof hex, "%016" PRIx64, sum);
            json_t *j =
                json_pack("{s:s, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:s, s:f, s:I}",
                          "config", config, "world_size", zinc_world_size(e), "zero_stage", zinc_zero_stage(e), "steps",
                          (json_int_t)info.step, "steps_taken", (json_int_t)info.steps_taken, "steps_skipped",
                          (json_int_t)info.steps_skipped, "first_loss", first.loss, "final_loss", met.loss,
                          "final_accuracy", met.accuracy, "final_loss_scale", (double)info.loss_scale, "final_lr",
                          info.lr, "final_grad_norm", isfinite(info.grad_norm) ? info.grad_norm : -1.0, "parameters",
                          (json_int_t)n, "param_l2_norm", norm, "param_checksum", hex, "seconds", elapsed,
                          "resumed_from_step", (json_int_t)start);
            if (j) json_object_set(j, "vmhwm_bytes", hwm);
            if (!j || json_dump_file(j, report, JSON_INDENT(2)) != 0) {
                fprintf(stderr, "zinc train: cannot write the report to %s\n", report);
                json_decref(j);
                goto done;
            }
            json_decref(j);
        }
    }
    rc = 0;
done:
    if (run_lock >= 0) close(run_lock);
    json_decref(hwm);
    zinc_mlp_destroy(m);
    zinc_destroy(e);
    return rc;
}
