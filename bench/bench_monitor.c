/* What the monitors cost a training step on rank 0: the three scalars of an fp16 step (train_loss, lr,
 * loss_scale) to both TensorBoard and CSV, each a record encoded and written with one write(). Prints the
 * time per step and the bytes per step, then the fsync at the end.
 *
 *   bench_monitor [DIR] [STEPS]     (default: $TMPDIR or /tmp, 200000 steps) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/core/clock.h"
#include "base/core/safe_file.h"
#include "runtime/monitor/monitor.h"

int main(int argc, char **argv) {
    const char *tmp = getenv("TMPDIR");
    char root[1024];
    snprintf(root, sizeof root, "%s/zinc_bench_monitor_XXXXXX", argc > 1 ? argv[1] : tmp && *tmp ? tmp : "/tmp");
    long steps = argc > 2 ? atol(argv[2]) : 200000;
    if (!mkdtemp(root) || steps <= 0) return fprintf(stderr, "usage: bench_monitor [DIR] [STEPS]\n"), 2;
    zcfg_monitor m = {.enabled = true};
    snprintf(m.output_path, sizeof m.output_path, "%s", root);
    snprintf(m.job_name, sizeof m.job_name, "job");
    const char *tags[] = {"Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/loss_scale", NULL};
    zlog log = zlog_default();
    zmon *mon = NULL;
    if (zmon_open(&m, &m, tags, &log, &mon) != ZINC_OK) return fprintf(stderr, "%s\n", zinc_last_error()), 1;
    double t0 = zclock_now_s();
    for (long s = 0; s < steps; s++) {
        zmon_scalar(mon, tags[0], 2.3 / (1.0 + 1e-4 * (double)s), s * 64);
        zmon_scalar(mon, tags[1], 3e-4 * (double)(s % 1000) / 1000.0, (s + 1) * 64);
        zmon_scalar(mon, tags[2], 65536.0, (s + 1) * 64);
    }
    double t1 = zclock_now_s();
    zmon_close(mon);
    double t2 = zclock_now_s();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s/job", root);
    long long bytes = 0;
    struct stat sb;
    char path[1400];
    const char *files[] = {"Train_Samples_train_loss.csv", "Train_Samples_lr.csv", "Train_Samples_loss_scale.csv"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", cmd, files[i]);
        if (stat(path, &sb) == 0) bytes += sb.st_size;
    }
    printf("monitors: %ld steps, 3 scalars each to tensorboard and csv_monitor: %.2f us/step, "
           "csv %.1f bytes/step; close (fsync) %.1f ms\n",
           steps, 1e6 * (t1 - t0) / (double)steps, (double)bytes / (double)steps, 1e3 * (t2 - t1));
    zfile_rmtree(root);
    return 0;
}
