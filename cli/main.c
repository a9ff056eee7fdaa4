/* The zinc program: dispatches to its subcommands. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common/commands.h"
#include "cli/common/options.h"
#include "cli/train/train.h"
#include "base/core/env.h"
#include "base/core/signals.h"
#include "zinc.h"

static void usage(FILE *f) {
    fprintf(f,
            "zinc %s: ZeRO-sharded training runtime in C (reads DeepSpeed ds_config.json files)\n"
            "\n"
            "usage: zinc <command> [options]\n"
            "\n"
            "commands:\n"
            "  train       train GPT-2 (--model gpt2) or the example MLP with a ds_config (zinc train --help)\n"
            "  config      check a ds_config and print it fully resolved (zinc config check FILE)\n"
            "  mem         per-rank memory: zinc mem estimate (predict) | zinc mem measure (run and compare)\n"
            "  checkpoint  inspect a checkpoint or export it to safetensors (zinc checkpoint --help)\n"
            "  launch      run zinc train under mpirun, restarting from its checkpoints (zinc launch --help)\n"
            "  trace       read a zinc train --trace timeline: zinc trace summary|plot FILE (zinc trace --help)\n"
            "\n"
            "  zinc --version | zinc --help\n"
            "Several ranks: mpirun -np N zinc train --config FILE (or srun).\n",
            ZINC_VERSION_STRING);
}

/* The words after "zinc", in the order of `commands` below; then help and the version. */
static const char command_words[] = "train|config|mem|checkpoint|launch|trace|help|--version|-V";
enum { CMD_TRAIN, CMD_HELP = 6, CMD_VERSION };

static int run(int argc, char **argv) {
    static int (*const commands[])(int, char **) = {zcli_cmd_train,      zcli_cmd_config, zcli_cmd_mem,
                                                    zcli_cmd_checkpoint, zcli_cmd_launch, zcli_cmd_trace};
    static const zcli_subs subs = {"zinc", command_words, "command", false, usage};
    int rc, k = zcli_subcommand(&subs, argc, argv, &rc);
    if (k < 0) return rc;
    if (k == CMD_HELP) return usage(stdout), 0;
    if (k >= CMD_VERSION) {
        printf("zinc %s\n", ZINC_VERSION_STRING);
        return 0;
    }
    /* The library ends a rank stuck in a collective only when asked (base/comm/watchdog.h); the zinc program
     * asks, so a job whose ranks disagree or lost a rank ends instead of holding its nodes forever. */
    setenv("ZINC_COLLECTIVE_TIMEOUT_S", ZCLI_COLLECTIVE_TIMEOUT_S, 0);
    return commands[k](argc - 1, argv + 1);
}

/* glibc's mmap threshold held at 1 MiB (unless the user sets it: MALLOC_MMAP_THRESHOLD_ or GLIBC_TUNABLES).
 * Left sliding, it rises to the size of the first large block freed (oneDNN's 705 KiB sgemm pack buffer,
 * allocated and freed in most calls), later large blocks then come from the heap, and how much of the freed
 * heap stays resident depends on the address layout: a run's peak RSS drew 89 or 92 MiB at random (ASLR)
 * against an 87 MiB estimate. Held, blocks of 1 MiB and more are mapped and returned when freed, and smaller
 * ones (oneDNN's buffer) are reused from the heap; held at 256 KiB instead, each sgemm call faults its
 * buffer in anew (3% of the README job's tokens/s). docs/mem.md, "Freed pages kept by malloc". */
static void hold_mmap_threshold(void) {
#ifdef M_MMAP_THRESHOLD
    const char *tunables = zenv_get(ZENV_GLIBC_TUNABLES);
    if (zenv_get(ZENV_MALLOC_MMAP_THRESHOLD) || (tunables && strstr(tunables, "mmap_threshold"))) return;
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

/* Ends without the libraries' exit handlers: OpenBLAS's joins its server threads, and under a tight
 * RLIMIT_AS a server thread that cannot map its buffer retries forever, so a run that failed (or was refused
 * by the pre-flight) would never end (issue 25). MPI is finalised and the streams flushed first. */
int main(int argc, char **argv) {
    hold_mmap_threshold();
    /* zinc train first of all: SIGTERM/SIGINT/SIGUSR1 recorded from here on (the driver stops at the first
     * step boundary, exit 114/115), where the default action would kill a job a scheduler only warned. A
     * parent that blocks them across exec covers the instants before main too: they wait, blocked, until
     * here, and are recorded once unblocked. */
    if (argc > 1 && zcli_choice(command_words, argv[1]) == CMD_TRAIN) {
        zsig_install();
        zsig_defer(true);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTERM);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGUSR1);
        pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    }
    int rc = run(argc, argv);
    zinc_finalize();
    fflush(NULL);
    _exit(rc);
}
