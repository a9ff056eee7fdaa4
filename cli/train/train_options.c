/* zinc train: the options every model takes, and picking the model (train.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"

#include "cli/common/commands.h"
#include "cli/train/train.h"
#include "cli/train/train_flops.h"

/* The steps --trace records without --trace-steps. */
#define TRACE_FIRST 1
#define TRACE_LAST 5

#define O(f) offsetof(zcli_train_opts, f)
static const zcli_opt train_opts[] =
    {{"--model", ZCLI_CHOICE, O(model), "M", 0, 0, "mlp|gpt2",
      "the model: mlp or gpt2 (zinc train --model gpt2 --help)"},
     {"--config", ZCLI_TEXT, O(config), "FILE", 0, 0, NULL, "the ds_config.json (required)"},
     {"--steps", ZCLI_INT, O(steps), "N", 0, (int64_t)1 << 53, NULL,
      "the optimizer step count to reach; a run resumed at step K trains\nN - K more"},
     {"--seed", ZCLI_INT, O(seed), "S", 0, INT64_MAX, NULL, "parameter initialisation seed"},
     {"--device", ZCLI_CHOICE, O(device), "D", 0, 0, "cpu|cuda|auto", "cpu | cuda | auto"},
     {"--threads", ZCLI_INT, O(threads), "N", 1, 1024, NULL, "CPU kernel threads per rank"},
     {"--report", ZCLI_TEXT, O(report), "FILE", 0, 0, NULL,
      "write a JSON summary (losses, steps, loss scale, parameter norm and\nchecksum)"},
     {"--save", ZCLI_TEXT, O(save_dir), "DIR", 0, 0, NULL,
      "save checkpoints to DIR (tags step<N>, DIR/latest names the newest):\nat the end, and every K steps with "
      "--save-every K"},
     {"--save-every", ZCLI_INT, O(save_every), "K", 1, (int64_t)1 << 53, NULL,
      "a checkpoint every K steps (needs --save)"},
     {"--keep-last", ZCLI_INT, O(keep_last), "K", 1, 1 << 30, NULL,
      "keep the newest K step<N> checkpoints in --save DIR: older ones are\nremoved after each save has published "
      "its own, never the one\nDIR/latest names (needs --save)"},
     {"--resume", ZCLI_TEXT, O(resume), "PATH", 0, 0, NULL,
      "continue from a checkpoint: DIR (its latest) or DIR/TAG; any rank\ncount and ZeRO stage can resume any "
      "checkpoint of the same model"},
     {"--set", ZCLI_LIST, O(sets), "PATH=VALUE", 0, 0, NULL,
      "fill an \"auto\" or override a ds_config value: a dotted key path and a\nJSON value (--set "
      "train_micro_batch_size_per_gpu=4 --set\noptimizer.params.lr=3e-4); repeatable. An \"auto\" not set is "
      "filled as\nthe Hugging Face Trainer fills it with its default arguments (a\nwarning names each); "
      "total_num_steps from --steps"},
     {"--on-nonfinite", ZCLI_CHOICE, O(nonfinite), "P", 0, 0, "error|skip",
      "error: a non-finite gradient in fp32/bf16, or parameters made\nnon-finite by a step, stop the run "
      "naming the step and tensor;\nskip: such steps are skipped with a warning (fp16 always skips and\nlowers its "
      "loss scale)"},
     {"--peak-flops", ZCLI_TEXT, O(peak_flops), "X", 0, 0, NULL,
      "the peak FLOP/s of one rank (9.9e14), or sgemm to measure it (the\nmodel's own products, oneDNN or OpenBLAS, "
      "per CPU second, best 25 ms\nwindow of 0.4 s on every rank): progress lines and the report then\nshow MFU "
      "beside the achieved FLOP/s (docs/profiling.md)"},
     {"--quiet", ZCLI_FLAG, O(quiet), NULL, 0, 0, NULL, "only warnings, errors and the summary"},
     {"--force", ZCLI_FLAG, O(force), NULL, 0, 0, NULL,
      "replace an existing --report or --trace file (never an input, a link\nor a special file)"},
     {"--trace", ZCLI_TEXT, O(trace), "FILE", 0, 0, NULL,
      "write a timeline of the run (Chrome Trace Event JSON, one process per\nrank; Perfetto, chrome://tracing, "
      "zinc trace summary): modules, collectives,\nwaits, optimizer chunks, NVMe, checkpoints, data"},
     {"--trace-steps", ZCLI_TEXT, O(trace_steps), "A:B", 0, 0, NULL,
      "the steps --trace records, A to B counted from 1"},
     {"--trace-per-rank", ZCLI_FLAG, O(trace_per_rank), NULL, 0, 0, NULL,
      "also write each rank's spans to FILE.rank<R>.json with PyTorch's\ndistributedInfo and ProfilerStep markers "
      "(HolisticTraceAnalysis\nreads one file per rank)"},
     {0}};
#undef O

/* The defaults settled after parsing (train_driver.c, the engine's zpool_default_threads). */
static const zcli_later train_later[] = {{"--device", "the config's zinc.device, else auto"},
                                         {"--threads", "cores / ranks on the node"},
                                         {"--trace-steps", ZCLI_STR(TRACE_FIRST) ":" ZCLI_STR(TRACE_LAST)},
                                         {0}};

const zcli_table zcli_train_table = {"training (every model):", train_opts, train_later};

void zcli_train_defaults(zcli_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = 100;
    o->seed = 1234;
    o->device = -1;
    o->trace_first = TRACE_FIRST;
    o->trace_last = TRACE_LAST;
}

int zcli_trace_steps(const char *text, int64_t *first, int64_t *last) {
    long long a, b;
    int used = 0;
    if (sscanf(text, "%lld:%lld%n", &a, &b, &used) != 2 || text[used] || a < 1 || b < a) return -1;
    *first = a;
    *last = b;
    return 0;
}

int zcli_train_read(int first, int argc, char **argv, zcli_train_opts *o) {
    zcli_train_defaults(o);
    zcli_cmd c = {.name = "zinc train", .tables = {&zcli_train_table}, .dst = {o}, .keep_unknown = true};
    return zcli_parse(&c, first, argc, argv) ? 2 : 0;
}

/* In the order of --model's choices. */
static const zcli_train_model *const models[] = {&zcli_model_mlp, &zcli_model_gpt2};

const zcli_train_model *zcli_train_model_named(int first, int argc, char **argv) {
    const char *name = zcli_peek(first, argc, argv, "--model");
    return name && !strcmp(name, "gpt2") ? models[1] : models[0];
}

/* torchrun (RANK, WORLD_SIZE, LOCAL_RANK set, no MPI/PMI/srun rank): zinc's ranks meet through MPI, so these
 * processes would each train alone on the whole job. Refused with the command to use, said by rank 0. Returns
 * 2 when refused. */
static int refuse_torchrun(int argc, char **argv) {
    const char *ws = zenv_get(ZENV_TORCH_WORLD_SIZE), *rank = zenv_get(ZENV_TORCH_RANK);
    if (!ws || atoi(ws) <= 1) return 0;
    static const zenv_id mpi[] = {ZENV_OMPI_COMM_WORLD_RANK, ZENV_PMIX_RANK, ZENV_PMI_RANK, ZENV_SLURM_PROCID};
    for (size_t i = 0; i < sizeof mpi / sizeof *mpi; i++)
        if (zenv_get(mpi[i]) && *zenv_get(mpi[i])) return 0;
    if (rank && atoi(rank) != 0) return 2;
    const char *local = zenv_get(ZENV_TORCH_LOCAL_RANK);
    fprintf(stderr,
            "zinc train: started by torchrun or another torch.distributed launcher (RANK=%s, WORLD_SIZE=%s, "
            "LOCAL_RANK=%s) without MPI: zinc's ranks meet through MPI, so these %d processes would each train "
            "alone. Launch the job with mpirun (or srun) instead:\n  mpirun -np %d",
            rank ? rank : "unset", ws, local ? local : "unset", atoi(ws), atoi(ws));
    for (int i = 0; i < argc; i++) fprintf(stderr, " %s", i == 0 ? "zinc train" : argv[i]);
    fprintf(stderr,
            "\n(or zinc launch -n %d -- zinc train ... --save DIR, which also restarts it from its "
            "checkpoints)\n",
            atoi(ws));
    return 2;
}

int zcli_cmd_train(int argc, char **argv) {
    const zcli_train_model *m = zcli_train_model_named(1, argc, argv);
    zcli_train_opts o;
    zcli_train_defaults(&o);
    _Alignas(max_align_t) char model_opts[512];
    if (m->opts_size > sizeof model_opts) return 1;
    m->defaults(model_opts);
    zcli_cmd c = {.name = "zinc train",
                  .usage = m->usage,
                  .about = m->about,
                  .footer = "ZINC_COLLECTIVE_TIMEOUT_S (" ZCLI_COLLECTIVE_TIMEOUT_S
                            " in this program unless set, 0 = off): a rank that waits "
                            "longer in a\ncollective (another rank died or stopped) ends with exit status 113 and "
                            "a message,\nso the launcher ends the job.",
                  .tables = {m->options, &zcli_train_table},
                  .dst = {model_opts, &o}};
    int pr = zcli_parse(&c, 1, argc, argv);
    if (pr) return pr == 1 ? 0 : 2;
    if (models[o.model] != m) return zcli_usage_error(&c, "--model is given twice, with different models");
    if (o.save_every && !o.save_dir) return zcli_usage_error(&c, "--save-every needs --save DIR");
    if (o.keep_last && !o.save_dir) return zcli_usage_error(&c, "--keep-last needs --save DIR");
    char why[256];
    double peak;
    int measure;
    if (o.peak_flops && zcli_peak_parse(o.peak_flops, &peak, &measure, why, sizeof why))
        return zcli_usage_error(&c, "%s", why);
    if (o.trace_steps && !o.trace) return zcli_usage_error(&c, "--trace-steps needs --trace FILE");
    if (o.trace_per_rank && !o.trace) return zcli_usage_error(&c, "--trace-per-rank needs --trace FILE");
    if (o.trace_steps && zcli_trace_steps(o.trace_steps, &o.trace_first, &o.trace_last))
        return zcli_usage_error(&c,
                                "--trace-steps %s: want A:B, the first and last step to trace, 1 <= A <= B "
                                "(for example 2:6)",
                                o.trace_steps);
    if (!o.config) {
        zcli_usage_error(&c, "--config FILE is required (for example ds_configs/zero2_fp16.json)");
        fprintf(stderr, "%s\n", m->usage);
        return 2;
    }
    if (refuse_torchrun(argc, argv)) return 2;
    return zcli_train_run(m, &o, model_opts);
}
