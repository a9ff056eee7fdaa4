/* zinc train --model gpt2: trains the GPT-2 example (examples/gpt2) on llm.c token files or a text file
 * (bytes as tokens), from a new model or an llm.c checkpoint (--init), with a ds_config. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "examples/gpt2/gpt2.h"
#include "cli/gpt2_cli.h"
#include "cli/train_guard.h"
#include "cli/train_memory.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zinc train --model gpt2 --config FILE (--data FILE | --text FILE) [options]\n"
            "\n"
            "Trains GPT-2 (examples/gpt2) with a DeepSpeed ds_config.json; the micro batch comes from the config,\n"
            "the sequence length from --context. Several ranks: mpirun -np N zinc train --model gpt2 ...\n"
            "\n"
            "model (a new one; with --init the checkpoint's shape, and any of these given must match it):\n"
            "  --layers L (default 4)  --width C (128)  --heads H (4)  --vocab V (256 with --text, else 50257)\n"
            "  --padded-vocab VP       rows of wte (default V rounded up to a multiple of 64)\n"
            "  --max-context N         positions in wpe (default: --context)\n"
            "  --context T             sequence length (default the checkpoint's max context, or 256)\n"
            "  --init FILE             start from an llm.c model file (version 3 fp32 or 5 bf16)\n"
            "data:\n"
            "  --data FILE             llm.c token file (uint16 tokens), read sequentially like llm.c's loader\n"
            "  --text FILE             a text file, one token per byte (vocabulary 256); its last 10%% is the\n"
            "                          validation set unless --val-data is given\n"
            "  --shuffle               visit each pass's global batches in a seeded order (--seed), not in file order\n"
            "  --val-data FILE         llm.c token file for the validation loss\n"
            "  --val-every K           validation loss every K steps and at the end (default: steps_per_print)\n"
            "  --val-batches N         global batches per validation (default 4)\n"
            "  --sample-every K        generate --sample-tokens N tokens (default 64) every K steps and at the end\n"
            "training:\n"
            "  --config FILE --steps N (default 100) --seed S (new model's initialisation and sampling)\n"
            "  --save DIR [--save-every K] --resume PATH --report FILE --quiet\n"
            "  --set PATH=VALUE        fill an \"auto\" or override a ds_config value (repeatable; see zinc train "
            "--help)\n"
            "  --on-nonfinite P        error (default) or skip: what a non-finite fp32/bf16 gradient does\n"
            "  --threads N             threads per rank for the engine's kernels and the model's compute\n"
            "                          (default: the engine's cores / ranks, the model's OMP_NUM_THREADS or all)\n"
            "  --device D              cpu | cuda | auto (default: the config's zinc.device, else auto);\n"
            "                          cuda: cuBLAS and the model's kernels on the GPU (ZINC_EXPERIMENTAL_CUDA=1;\n"
            "                          never run on a GPU yet)\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "zinc train: %s needs an integer in %lld..%lld, got \"%s\"\n", flag, (long long)lo,
                (long long)hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtod(line + 6, NULL);
    if (f) fclose(f);
    return kb / 1024.0;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Generates n tokens after `start` (temperature 1). Every rank runs the forward passes (module entries
 * are collective in stage 3); rank 0 draws each token and shares it. Prints on rank 0. */
static int sample(zinc_engine *e, zinc_gpt2 *m, int n, uint16_t start, uint64_t *rng, json_t **text_out) {
    int T = zinc_gpt2_context(m), V = zinc_gpt2_shape(m)->vocab, len = 1;
    uint16_t *toks = malloc((size_t)(n + 1) * sizeof *toks);
    float *logits = malloc((size_t)V * sizeof *logits);
    char *text = malloc((size_t)n * 12 + 16);
    size_t tl = 0;
    int rc = -1;
    if (!toks || !logits || !text) goto done;
    toks[0] = start;
    for (int i = 0; i < n; i++) {
        int ctx = len < T ? len : T;
        if (zinc_gpt2_next_logits(m, toks + len - ctx, ctx, logits) != ZINC_OK) {
            fprintf(stderr, "zinc train: sampling failed: %s\n", zinc_last_error());
            goto done;
        }
        double pick = 0;
        if (zinc_rank(e) == 0) {
            float mx = logits[0];
            for (int k = 1; k < V; k++) mx = logits[k] > mx ? logits[k] : mx;
            double sum = 0;
            for (int k = 0; k < V; k++) sum += exp((double)(logits[k] - mx));
            double u = (double)(rng_next(rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
            int k = 0;
            for (; k < V - 1; k++) {
                acc += exp((double)(logits[k] - mx));
                if (acc > u) break;
            }
            pick = k;
        }
        if (zinc_allreduce_sum(e, &pick, 1) != ZINC_OK) goto done;
        toks[len++] = (uint16_t)pick;
        unsigned t = (unsigned)pick;
        if (V <= 256) {
            if (t == '\n' || t == '\t' || (t >= 32 && t < 127))
                text[tl++] = (char)t;
            else
                tl += (size_t)sprintf(text + tl, "\\x%02x", t);
        } else {
            tl += (size_t)sprintf(text + tl, "%s%u", i ? " " : "", t);
        }
    }
    text[tl] = 0;
    if (zinc_rank(e) == 0) {
        fprintf(stderr, "---- sample (%d tokens) ----\n%s\n----------------------------\n", n, text);
        if (text_out) {
            json_decref(*text_out);
            *text_out = json_string(text);
        }
    }
    rc = 0;
done:
    free(toks);
    free(logits);
    free(text);
    return rc;
}

/* A flag that must agree with the checkpoint given by --init: -1 when not given. */
static int check_flag(const char *init, const char *flag, int64_t given, int have, int field) {
    if (given < 0 || given == have) return 0;
    fprintf(stderr, "zinc train: %s %lld does not match %s: its header[%d] (%s) is %d; drop the flag or give %d\n",
            flag, (long long)given, init, field, flag + 2, have, have);
    return -1;
}

int zinc_cmd_train_gpt2(int argc, char **argv) {
    const char *config = NULL, *report = NULL, *save_dir = NULL, *resume = NULL, *init = NULL, *data_path = NULL,
               *text_path = NULL, *val_path = NULL;
    int64_t steps = 100, seed = 1234, threads = 0, save_every = 0, val_every = 0, val_batches = 4, sample_every = 0,
            sample_tokens = 64;
    int64_t layers = -1, width = -1, heads = -1, vocab = -1, padded = -1, max_context = -1, context = -1;
    zinc_options o = zinc_default_options();
    int quiet = 0, shuffle = 0, nsets = 0, run_lock = -1;
    const char *sets[ZINC_MAX_SETS + 1] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = zcli_value(argc, argv, i);
        struct {
            const char *name;
            int64_t *dst, lo, hi;
        } ints[] = {{"--steps", &steps, 0, INT64_MAX / 2},
                    {"--seed", &seed, 0, INT64_MAX},
                    {"--threads", &threads, 1, 1024},
                    {"--save-every", &save_every, 1, INT64_MAX / 2},
                    {"--val-every", &val_every, 1, INT64_MAX / 2},
                    {"--val-batches", &val_batches, 1, 1 << 20},
                    {"--sample-every", &sample_every, 1, INT64_MAX / 2},
                    {"--sample-tokens", &sample_tokens, 1, 1 << 16},
                    {"--layers", &layers, 1, 1024},
                    {"--width", &width, 1, 65536},
                    {"--heads", &heads, 1, 65536},
                    {"--vocab", &vocab, 1, 65536},
                    {"--padded-vocab", &padded, 1, 1 << 20},
                    {"--max-context", &max_context, 1, 1 << 20},
                    {"--context", &context, 1, 1 << 20}};
        int matched = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
            if (!strcmp(a, ints[k].name)) {
                if (parse_i64(a, v, ints[k].lo, ints[k].hi, ints[k].dst)) return 2;
                i++;
                matched = 1;
            }
        if (matched) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        const char **strs[] = {&config, &report, &save_dir, &resume, &init, &data_path, &text_path, &val_path};
        const char *snames[] = {"--config", "--report", "--save", "--resume",
                                "--init",   "--data",   "--text", "--val-data"};
        for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
            if (!strcmp(a, snames[k])) {
                if (!v || !*v) {
                    fprintf(stderr, "zinc train: %s needs a path\n", a);
                    return 2;
                }
                *strs[k] = v, i++, matched = 1;
            }
        if (matched) continue;
        if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (!strcmp(a, "--shuffle"))
            shuffle = 1;
        else if (!strcmp(a, "--set")) {
            if (!v || nsets == ZINC_MAX_SETS) {
                fprintf(stderr, "zinc train: --set needs PATH=VALUE (at most %d of them)\n", ZINC_MAX_SETS);
                return 2;
            }
            sets[nsets++] = v, i++;
        } else if (!strcmp(a, "--on-nonfinite")) {
            if (!v || (strcmp(v, "error") && strcmp(v, "skip"))) {
                fprintf(stderr, "zinc train: --on-nonfinite must be error or skip, got \"%s\"\n", v ? v : "");
                return 2;
            }
            o.nonfinite = !strcmp(v, "skip") ? ZINC_NONFINITE_SKIP : ZINC_NONFINITE_DEFAULT, i++;
        } else if (!strcmp(a, "--model") && v && !strcmp(v, "gpt2"))
            i++;
        else if (!strcmp(a, "--device")) {
            if (zcli_device_arg(v, &o.device)) return 2;
            i++;
        } else {
            fprintf(stderr, "zinc train --model gpt2: unknown option \"%s\" (see zinc train --model gpt2 --help)\n", a);
            return 2;
        }
    }
    if (!config || (!data_path == !text_path)) {
        fprintf(stderr, "zinc train --model gpt2: --config FILE and one of --data FILE (llm.c tokens) or --text FILE "
                        "are required\n");
        return 2;
    }
    if (!save_dir && save_every) {
        fprintf(stderr, "zinc train: --save-every needs --save DIR\n");
        return 2;
    }
    /* Output paths are checked before any training is spent on them (each rank its own view; the ranks
     * agree on the result at the build). */
    char save_why[8800] = "", report_why[8800] = "";
    if (save_dir) zcli_check_out_path("--save", save_dir, 1, save_why, sizeof save_why);
    if (report) zcli_check_out_path("--report", report, 0, report_why, sizeof report_why);

    char err[1024];
    zinc_gpt2_config mc = {0};
    gpt2_model_file init_file = {0};
    gpt2_tokens train = {0}, val = {0};
    zinc_engine *e = NULL;
    zinc_gpt2 *m = NULL;
    json_t *losses = json_array(), *vlosses = json_array(), *sample_text = NULL, *hwm = NULL;
    int rc = 1;

    /* the shape: the checkpoint's (flags must agree), a resumed run's, or the flags' */
    gpt2_shape s = {0};
    if (init) {
        /* read piece by piece while the engine builds: no copy of the model in memory */
        if (gpt2_model_open(init, &init_file, err, sizeof err) != ZINC_OK) {
            fprintf(stderr, "zinc train: --init: %s\n", err);
            goto done;
        }
        s = init_file.shape;
        if (check_flag(init, "--max-context", max_context, s.max_context, 2) ||
            check_flag(init, "--vocab", vocab, s.vocab, 3) || check_flag(init, "--layers", layers, s.layers, 4) ||
            check_flag(init, "--heads", heads, s.heads, 5) || check_flag(init, "--width", width, s.channels, 6) ||
            check_flag(init, "--padded-vocab", padded, s.padded_vocab, 7))
            goto done;
        if (context > s.max_context) {
            fprintf(stderr,
                    "zinc train: --context %lld is longer than %s allows: its header[2] (max context) is %d; "
                    "give --context 1..%d\n",
                    (long long)context, init, s.max_context, s.max_context);
            goto done;
        }
        if (context < 0) context = s.max_context;
    } else {
        int r = resume && layers < 0 && width < 0 ? gpt2_shape_load(resume, &s, err, sizeof err) : 1;
        if (r < 0) {
            fprintf(stderr, "zinc train: --resume: %s\n", err);
            goto done;
        }
        if (r == 1) {
            s.layers = (int)(layers > 0 ? layers : 4);
            s.channels = (int)(width > 0 ? width : 128);
            s.heads = (int)(heads > 0 ? heads : 4);
            s.vocab = (int)(vocab > 0 ? vocab : text_path ? 256 : 50257);
            s.padded_vocab = (int)(padded > 0 ? padded : (s.vocab + 63) / 64 * 64);
            if (context < 0) context = max_context > 0 ? max_context : 256;
            s.max_context = (int)(max_context > 0 ? max_context : context);
        } else if (context < 0) {
            context = s.max_context;
        }
        if (gpt2_shape_check(&s, err, sizeof err)) {
            fprintf(stderr, "zinc train: the model's %s\n", err);
            goto done;
        }
        if (context > s.max_context) {
            fprintf(stderr, "zinc train: --context %lld is longer than --max-context %d\n", (long long)context,
                    s.max_context);
            goto done;
        }
    }
    mc.shape = s;
    mc.context = (int)context;
    mc.init_file = init ? &init_file : NULL;

    /* the data */
    if (text_path) {
        gpt2_tokens all = {0};
        if (gpt2_tokens_from_text(text_path, &all, err, sizeof err) != ZINC_OK) {
            fprintf(stderr, "zinc train: --text: %s\n", err);
            goto done;
        }
        int64_t ntrain = val_path ? all.n : all.n - all.n / 10;
        train = all;
        if (!val_path && all.n - ntrain > 0) {
            val.n = all.n - ntrain;
            val.tok = malloc((size_t)val.n * sizeof *val.tok);
            if (val.tok) memcpy(val.tok, all.tok + ntrain, (size_t)val.n * sizeof *val.tok);
            train.n = ntrain;
        }
    } else if (gpt2_tokens_read(data_path, &train, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc train: --data: %s\n", err);
        goto done;
    }
    if (val_path && gpt2_tokens_read(val_path, &val, err, sizeof err) != ZINC_OK) {
        fprintf(stderr, "zinc train: --val-data: %s\n", err);
        goto done;
    }
    if (gpt2_tokens_check(&train, s.vocab, text_path ? text_path : data_path, err, sizeof err) != ZINC_OK ||
        (val.n && gpt2_tokens_check(&val, s.vocab, val_path ? val_path : text_path, err, sizeof err) != ZINC_OK)) {
        fprintf(stderr, "zinc train: %s\n", err);
        goto done;
    }

    o.config_path = config;
    o.config_overrides = sets;
    o.total_steps = steps; /* fills an "auto" scheduler.params.total_num_steps */
    o.seed = (uint64_t)seed;
    o.cpu_threads = (int)threads;
    if (quiet) o.log_level = ZINC_LOG_WARN;
    if (zinc_create(&o, &e) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        goto done;
    }
    /* what every rank must have been given alike; zinc_build (in zinc_gpt2_create) compares them */
    zcli_run run = {.steps = steps,
                    .seed = seed,
                    .save_every = save_every,
                    .given =
                        (save_dir ? 1 : 0) | (resume ? 2 : 0) | (report ? 4 : 0) | (init ? 8 : 0) | (shuffle ? 16 : 0),
                    .save_dir = save_dir,
                    .resume = resume,
                    .save_why = save_why,
                    .report_why = report_why,
                    .why_cap = sizeof save_why};
    int64_t shape[7] = {s.layers, s.channels, s.heads, s.vocab, s.padded_vocab, s.max_context, context};
    if (zcli_agree_run(e, &run, &run_lock)) goto done;
    if (zinc_agree_add(e, "--val-every", &val_every, sizeof val_every) != ZINC_OK ||
        zinc_agree_add(e, "the model shape and --context", shape, sizeof shape) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        goto done;
    }
    if (zinc_gpt2_create(e, &mc, &m) != ZINC_OK) {
        fprintf(stderr, "zinc train: building the model failed: %s\n", zinc_last_error());
        goto done;
    }
    if (zcli_outputs_refused(&run)) goto done;
    gpt2_model_close(&init_file);
    if (shuffle) zinc_gpt2_shuffle(m, (uint64_t)seed);
    int64_t start = 0, last_saved = -1, B = zinc_train_batch_size(e);
    if (gpt2_batches_per_pass(&train, (int)context, B) < 1) {
        fprintf(stderr,
                "zinc train: %s has %lld tokens, fewer than one global batch needs (train_batch_size %lld x "
                "context %lld + 1)\n",
                text_path ? text_path : data_path, (long long)train.n, (long long)B, (long long)context);
        goto done;
    }
    if (val.n && gpt2_batches_per_pass(&val, (int)context, B) < 1) {
        fprintf(stderr,
                "zinc train: the validation data (%s) has %lld tokens, fewer than one global batch needs "
                "(%lld x %lld + 1); validation is off\n",
                val_path ? val_path : text_path, (long long)val.n, (long long)B, (long long)context);
        gpt2_tokens_free(&val);
    }
    if (resume) {
        if (zinc_load_checkpoint(e, resume) != ZINC_OK) {
            fprintf(stderr, "zinc train: resuming from %s failed: %s\n", resume, zinc_last_error());
            goto done;
        }
        start = zinc_step_count(e);
    }
    int rank0 = zinc_rank(e) == 0, W = zinc_world_size(e);
    if (rank0 && save_dir && gpt2_shape_save(save_dir, &s, err, sizeof err) != 0) {
        fprintf(stderr, "zinc train: %s\n", err);
        goto done;
    }
    int64_t every = zinc_steps_per_print(e);
    if (every <= 0) every = steps - start > 20 ? (steps - start) / 20 : 1;
    if (!val_every) val_every = every;
    uint64_t rng = (uint64_t)seed ^ 0x5eed5eedull;
    uint16_t prompt = text_path ? '\n' : (uint16_t)(s.vocab > 50256 ? 50256 : 0);
    if (rank0)
        zinc_log(e, ZINC_LOG_INFO,
                 "gpt2: %d layers, %d channels, %d heads, vocabulary %d (padded %d), context %lld, %lld parameters; "
                 "%lld training tokens, %lld validation tokens; %lld tokens per step",
                 s.layers, s.channels, s.heads, s.vocab, s.padded_vocab, (long long)context,
                 (long long)gpt2_num_params(&s), (long long)train.n, (long long)val.n, (long long)(B * context));
    zinc_step_info info = {.step = start};
    double t0 = now_s(), t_last = t0, loss = 0, first_loss = NAN, last_val = NAN, train_time = 0;
    int64_t last_step = start;
    for (int64_t st = start; st < steps; st++) {
        double ts = now_s();
        if (zinc_gpt2_train_step(m, &train, st, &info, &loss) != ZINC_OK) {
            fprintf(stderr, "zinc train: step %" PRId64 " failed: %s\n", st + 1, zinc_last_error());
            goto done;
        }
        train_time += now_s() - ts;
        if (st == start) first_loss = loss;
        json_array_append_new(losses, json_real(loss));
        double t = now_s();
        if ((st + 1) % every == 0 || st + 1 == steps) {
            double *rss = calloc((size_t)W, sizeof *rss);
            if (!rss) goto done;
            rss[zinc_rank(e)] = rss_mib();
            if (zinc_allreduce_sum(e, rss, W) != ZINC_OK) {
                free(rss);
                goto done;
            }
            double mx = 0;
            for (int r = 0; r < W; r++) mx = rss[r] > mx ? rss[r] : mx;
            free(rss);
            double dt = t - t_last, tps = (double)((st + 1 - last_step) * B * context) / dt;
            double ms = 1e3 * dt / (double)(st + 1 - last_step), eta = (double)(steps - st - 1) * ms / 1e3;
            char etas[48] = "";
            if (eta >= 60) snprintf(etas, sizeof etas, " | ETA %dm%02ds", (int)(eta / 60), (int)eta % 60);
            if (rank0)
                fprintf(stderr,
                        "step %6" PRId64 "/%" PRId64 " | loss %.4f | lr %.3e | %.0f tokens/s | %.1f ms/step | "
                        "loss scale %g | grad norm %.3f | rss max %.0f MiB/rank%s\n",
                        st + 1, steps, loss, info.lr, tps, ms, (double)info.loss_scale, info.grad_norm, mx, etas);
            t_last = now_s();
            last_step = st + 1;
        }
        if (val.n && ((st + 1) % val_every == 0 || st + 1 == steps)) {
            if (zinc_gpt2_val_loss(m, &val, val_batches, &last_val) != ZINC_OK) {
                fprintf(stderr, "zinc train: validation failed: %s\n", zinc_last_error());
                goto done;
            }
            if (rank0) fprintf(stderr, "step %6" PRId64 " | val loss %.4f\n", st + 1, last_val);
            json_array_append_new(vlosses, json_pack("{s:I, s:f}", "step", (json_int_t)(st + 1), "loss", last_val));
            t_last = now_s();
        }
        if ((sample_every && (st + 1) % sample_every == 0) || (sample_every && st + 1 == steps)) {
            if (sample(e, m, (int)sample_tokens, prompt, &rng, &sample_text)) goto done;
            t_last = now_s();
        }
        if (save_dir && save_every > 0 && (st + 1) % save_every == 0) {
            if (zinc_save_checkpoint(e, save_dir, NULL) != ZINC_OK) {
                fprintf(stderr, "zinc train: saving step %" PRId64 " failed: %s\n", st + 1, zinc_last_error());
                goto done;
            }
            last_saved = st + 1;
        }
    }
    if (!sample_every && report && sample(e, m, (int)sample_tokens, prompt, &rng, &sample_text)) goto done;
    if (save_dir && last_saved != zinc_step_count(e) && zinc_save_checkpoint(e, save_dir, NULL) != ZINC_OK) {
        fprintf(stderr, "zinc train: saving the final checkpoint failed: %s\n", zinc_last_error());
        goto done;
    }
    double elapsed = now_s() - t0;
    int64_t n = gpt2_num_params(&s);
    uint64_t sum = 0;
    if (zcli_param_checksum(e, &sum, NULL) != ZINC_OK || !(hwm = zcli_vmhwm_all(e))) {
        fprintf(stderr, "zinc train: reading the parameters back failed: %s\n", zinc_last_error());
        goto done;
    }
    double tps = train_time > 0 ? (double)((steps - start) * B * context) / train_time : 0;
    if (rank0) {
        if (steps > start)
            fprintf(stderr,
                    "zinc train: gpt2, %" PRId64 " steps in %.1f s; loss %.4f -> %.4f; %.0f tokens/s (training steps "
                    "only); checksum %016" PRIx64 "\n",
                    steps - start, elapsed, first_loss, loss, tps, sum);
        else
            fprintf(stderr, "zinc train: gpt2, no steps to run (at step %" PRId64 "); checksum %016" PRIx64 "\n", start,
                    sum);
        if (!isnan(last_val)) fprintf(stderr, "zinc train: final validation loss %.4f\n", last_val);
        double steps_s, engine_s;
        zinc_gpt2_times(m, &steps_s, &engine_s);
        if (steps_s > 0)
            fprintf(stderr,
                    "zinc train: step time %.1f%% model compute, %.1f%% engine (module entries and exits, "
                    "reduction, clipping, Adam, gathers, waiting for other ranks)\n",
                    100 * (steps_s - engine_s) / steps_s, 100 * engine_s / steps_s);
        if (report) {
            char hex[32];
            snprintf(hex, sizeof hex, "%016" PRIx64, sum);
            json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:I}, s:I, s:I, s:I, "
                                  "s:o, s:o, s:f, s:f, "
                                  "s:f, s:f, s:s, s:I, s:I}",
                                  "model", "gpt2", "config", config, "world_size", W, "zero_stage", zinc_zero_stage(e),
                                  "compute_dtype", zinc_dtype_name(zinc_compute_dtype(e)), "shape", "layers", s.layers,
                                  "channels", s.channels, "heads", s.heads, "vocab", s.vocab, "padded_vocab",
                                  s.padded_vocab, "max_context", s.max_context, "context", (json_int_t)context,
                                  "parameters", (json_int_t)n, "steps", (json_int_t)info.step, "steps_skipped",
                                  (json_int_t)info.steps_skipped, "losses", json_incref(losses), "val_losses",
                                  json_incref(vlosses), "first_loss", isnan(first_loss) ? 0.0 : first_loss,
                                  "final_loss", loss, "tokens_per_s", tps, "seconds", elapsed, "param_checksum", hex,
                                  "resumed_from_step", (json_int_t)start, "tokens_per_step", (json_int_t)(B * context));
            if (j && !isnan(last_val)) json_object_set_new(j, "final_val_loss", json_real(last_val));
            if (j)
                json_object_set_new(j, "time_split",
                                    json_pack("{s:f, s:f, s:f}", "train_steps_s", steps_s, "engine_s", engine_s,
                                              "model_compute_s", steps_s - engine_s));
            if (j && sample_text) json_object_set(j, "sample", sample_text);
            if (j) json_object_set(j, "vmhwm_bytes", hwm);
            if (!j || json_dump_file(j, report, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) {
                fprintf(stderr, "zinc train: cannot write the report to %s\n", report);
                json_decref(j);
                goto done;
            }
            json_decref(j);
        }
    }
    rc = 0;
done:
    json_decref(hwm);
    json_decref(losses);
    json_decref(vlosses);
    json_decref(sample_text);
    gpt2_model_close(&init_file);
    gpt2_tokens_free(&train);
    gpt2_tokens_free(&val);
    zinc_gpt2_destroy(m);
    zinc_destroy(e);
    if (run_lock >= 0) close(run_lock);
    return rc;
}
