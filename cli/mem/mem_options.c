/* zinc mem's options: one table for estimate, measure and plan (mem_cli.h). */
#include <stddef.h>
#include <string.h>

#include "cli/mem/mem_cli.h"
#include "cli/common/options.h"
#include "cli/train/train_gpt2.h"

#define O(f) offsetof(mopts, f)
static const zcli_opt model_options[] =
    {{"--params", ZCLI_INT, O(params), "N", 1, (int64_t)1 << 45, NULL,
      "N parameters in modules of at most --largest-layer"},
     {"--largest-layer", ZCLI_INT, O(largest), "L", 1, (int64_t)1 << 45, NULL, "with --params: the largest module"},
     {"--gpt2", ZCLI_TEXT, O(preset), "SIZE", 0, 0, NULL, "a GPT-2 shape: small, medium, large or xl"},
     {"--layers", ZCLI_INT, O(layers), "N", 0, 100000, NULL, "a GPT-2 shape of N blocks (with --width)"},
     {"--width", ZCLI_INT, O(width), "W", 1, 1 << 20, NULL, "its channels"},
     {"--vocab", ZCLI_INT, O(vocab), "V", 1, 1 << 26, NULL, "its vocabulary"},
     {"--context", ZCLI_INT, O(context), "C", 1, 1 << 26, NULL, "its context"},
     {"--shapes", ZCLI_TEXT, O(shapes), "FILE", 0, 0, NULL,
      "one parameter per line: MODULE NAME DIM [DIM...]; modules in forward\norder (the order zinc_module_add "
      "would see them)"},
     {0}};

static const zcli_opt common_options[] =
    {{"--config", ZCLI_TEXT, O(config), "FILE", 0, 0, NULL, "the ds_config.json"},
     {"--stage", ZCLI_INT, O(stage), "S", 0, 3, NULL,
      "override zero_optimization.stage; plan without --gpu-mem: only its rows"},
     {"--offload", ZCLI_CHOICE, O(offload_i), "D", 0, 0, "none|cpu|nvme",
      "override zero_optimization.offload_optimizer.device; plan without\n--gpu-mem: only its rows"},
     {"--nodes", ZCLI_INT, O(nodes), "N", 1, 1 << 20, NULL,
      "estimate, plan without --gpu-mem: nodes; measure uses mpirun's ranks"},
     {"--gpus-per-node", ZCLI_INT, O(gpn), "M", 1, 1 << 16, NULL, "estimate, plan: ranks per node"},
     {"--device", ZCLI_CHOICE, O(device_i), "D", 0, 0, "cuda|cpu",
      "estimate: where the compute-dtype state lives; measure: the engine's\ndevice"},
     {"--plot", ZCLI_TEXT, O(plot), "FILE", 0, 0, NULL, "estimate, plan: a plot, FILE.svg or FILE.png (needs gnuplot)"},
     {"--json", ZCLI_FLAG, O(json), NULL, 0, 0, NULL, "machine-readable JSON instead of tables"},
     {"--csv", ZCLI_FLAG, O(csv), NULL, 0, 0, NULL, "CSV instead of tables"},
     {"--bytes", ZCLI_FLAG, O(exact), NULL, 0, 0, NULL, "exact byte counts in the tables instead of KiB/MiB/GiB"},
     {0}};

static const zcli_opt measure_options[] =
    {{"--steps", ZCLI_INT, O(steps), "N", 1, 1000000, NULL, "optimizer steps (the peak is reached by step 2)"},
     {"--seed", ZCLI_INT, O(seed), "S", 0, INT64_MAX, NULL, "gradient seed"},
     {"--check", ZCLI_FLAG, O(check), NULL, 0, 0, NULL,
      "exit 1 unless every row matches the estimate and each rank's real\npeak (VmHWM less the resident bytes "
      "before zinc_build) is within\n--rss-tolerance PCT of it plus --rss-slack MIB"},
     {"--rss-tolerance", ZCLI_INT, O(rss_tol_pct), "PCT", 0, 1000, NULL, "with --check (above)"},
     {"--rss-slack", ZCLI_INT, O(rss_slack_mib), "MIB", 0, 1 << 20, NULL, "with --check (above)"},
     {"--init", ZCLI_CHOICE, O(init_i), "I", 0, 0, "ranged|whole",
      "initialise with zinc_build_ranged or a whole-tensor init_fn through\nzinc_build (its fp32 scratch "
      "shows in the real peak)"},
     {"--verbose", ZCLI_FLAG, O(verbose), NULL, 0, 0, NULL, "the engine's log"},
     {0}};

static const zcli_opt plan_options[] =
    {{"--gpu-mem", ZCLI_SIZE, O(gpu_mem), "SIZE", 0, 0, NULL, "memory per GPU (the GPU plan)"},
     {"--host-mem", ZCLI_SIZE, O(host_mem), "SIZE", 0, 0, NULL,
      "host memory per node; without --gpu-mem: the host plan of a CPU machine"},
     {"--nvme", ZCLI_SIZE, O(nvme_bytes), "SIZE", 0, 0, NULL, "NVMe space per node (not given: not limited)"},
     {"--ranks", ZCLI_INT, O(ranks), "N", 1, 1 << 20, NULL, "the host plan's ranks, spread evenly over --nodes"},
     {"--activation-bytes-per-sample", ZCLI_SIZE, O(act_bytes), "SIZE", 0, 0, NULL,
      "activation memory of one sample (for the micro-batch column)"},
     {"--max-gpus", ZCLI_INT, O(max_gpus), "N", 1, 1 << 20, NULL, "the largest GPU count tried"},
     {"--paper", ZCLI_FLAG, O(paper), NULL, 0, 0, NULL,
      "the ZeRO paper's 2+2+12 bytes per parameter (Table 1), in GB (1e9)\nunless --units GiB"},
     {"--units", ZCLI_CHOICE, O(units_i), "U", 0, 0, "GB|GiB", "GB (1e9 bytes) or GiB (2^30)"},
     {0}};
#undef O

/* The defaults settled after parsing (mc_build_model, the config, the engine) or that differ by subcommand. */
static const zcli_later model_later[] = {{"--largest-layer", "N/" ZCLI_STR(MC_PARAMS_MODULES)},
                                         {"--vocab", ZCLI_STR(ZCLI_GPT2_VOCAB)},
                                         {"--context", ZCLI_STR(ZCLI_GPT2_MAX_CONTEXT)},
                                         {0}},
                        common_later[] = {{"--config", "DeepSpeed's defaults, stage 0, fp32"},
                                          {"--gpus-per-node", ZCLI_STR(MC_GPN) "; plan: " ZCLI_STR(MC_PLAN_GPN)},
                                          {"--device", "cuda; measure: cuda when usable, else cpu"},
                                          {0}},
                        plan_later[] = {{"--ranks", "1"}, {0}};
static const zcli_table model_table = {"MODEL, one of:", model_options, model_later},
                        common_table = {"options:", common_options, common_later},
                        measure_table = {"measure:", measure_options, NULL},
                        plan_table = {"plan:", plan_options, plan_later};

static const char mem_usage[] = "usage: zinc mem estimate MODEL [options]\n"
                                "       [mpirun -np N] zinc mem measure MODEL [options]\n"
                                "       zinc mem plan MODEL --gpu-mem SIZE [options]\n"
                                "       zinc mem plan MODEL --host-mem SIZE [--nvme SIZE] [--ranks N] [options]";
static const char mem_about[] =
    "estimate: the bytes one rank needs, by category (parameters, gradients, fp32 master, Adam m and v,\n"
    "  reduce buckets, stage-3 gather/prefetch buffers, staging, other) and memory kind (GPU, host,\n"
    "  pinned host, NVMe), for a model, a ds_config and nodes x GPUs per node; then every stage and\n"
    "  offload choice, each beside what DeepSpeed's own estimators say.\n"
    "measure: runs real steps of a synthetic model with those shapes through the engine on the CPU\n"
    "  (random gradients), on as many ranks as mpirun starts, and prints the peak bytes the engine\n"
    "  counted next to the estimate, with the difference per row.\n"
    "plan: for each stage and offload, the fewest GPUs (and nodes) holding one rank's estimate with\n"
    "  ZINC_MEM_HEADROOM % (" ZCLI_STR(
        ZEST_HEADROOM_DEFAULT) " unless set) kept free, and the largest micro-batch beside it.\n"
                               "plan without --gpu-mem (a CPU machine): for each stage x offload_optimizer x "
                               "offload_param (stage 3),\n"
                               "  the host memory (pinned included) and NVMe bytes per node, whether they fit "
                               "--host-mem (with the\n"
                               "  headroom) and --nvme, and the cheapest that fits: the least data moved to and from "
                               "NVMe per step,\n"
                               "  then the least host memory; when none fits, how much the closest misses and how many "
                               "nodes would do.";
static const char mem_footer[] =
    "Batch sizes do not change these bytes: zinc mem runs the config with a micro-batch of 1.\n"
    "zinc mem estimate --model gpt2|mlp [zinc train's model flags] --config FILE [--ranks N] [--json]: the whole\n"
    "training process per rank, batch from the config (zinc mem estimate --model gpt2 --help).";

static zcli_cmd mem_cmd(const char *name, mopts *o) {
    return (zcli_cmd){.name = name,
                      .usage = mem_usage,
                      .about = mem_about,
                      .footer = mem_footer,
                      .tables = {&model_table, &common_table, &measure_table, &plan_table},
                      .dst = {o, o, o, o}};
}

void mc_defaults(mopts *o, int sub) {
    *o = (mopts){.measure = sub == 1,
                 .layers = -1, /* not given (0 is refused later, as "no model") */
                 .nodes = 1,
                 .gpn = sub == 2 ? MC_PLAN_GPN : MC_GPN,
                 .device = ZINC_DEVICE_CUDA,
                 .stage = -1,
                 .steps = 3,
                 .seed = 1,
                 .rss_tol_pct = 5,
                 .rss_slack_mib = 4,
                 .plan = sub == 2,
                 .max_gpus = 1024,
                 .offload_i = -1,
                 .device_i = -1,
                 .units_i = -1,
                 .init_i = 0};
}

void mc_usage(FILE *f) {
    mopts o;
    mc_defaults(&o, 0);
    zcli_cmd c = mem_cmd("zinc mem", &o);
    zcli_help(&c, f);
}

int mc_parse_args(int argc, char **argv, mopts *o, int *status) {
    static const char *offloads[] = {"none", "cpu", "nvme"};
    static const zinc_device_kind devices[] = {ZINC_DEVICE_CUDA, ZINC_DEVICE_CPU};
    zcli_cmd c = mem_cmd("zinc mem", o);
    int pr = zcli_parse(&c, 2, argc, argv);
    if (pr) return *status = pr == 1 ? 0 : 2, 1;
    if (o->offload_i >= 0) o->offload = offloads[o->offload_i];
    if ((o->device_set = o->device_i >= 0)) o->device = devices[o->device_i];
    o->units_set = o->units_i >= 0;
    o->units_gb = o->units_set ? o->units_i == 0 : o->paper; /* the paper counts in 1e9 bytes */
    o->init_whole = o->init_i == 1;
    if (o->json && o->csv) return *status = zcli_usage_error(&c, "give --json or --csv, not both"), 1;
    return 0;
}
