/* The engine feeds the monitors (runtime/engine/engine_monitor.c), at 1-N ranks, through the public API:
 * the MLP trains in fp16 with tensorboard and csv_monitor on, a step's overflow injected; rank 0 alone
 * writes; the CSV rows are what DeepSpeed's engine writes: train_loss (the value given to
 * zinc_record_loss) at the samples before each step, lr (the next step's) and loss_scale (after the
 * step's update) at the samples after it, skipped steps counted. zinc_record_loss refuses calls out of
 * order; a monitor path that cannot work fails zinc_create on every rank with rank 0's message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"
#include "base/core/safe_file.h"
#include "zt.h"

#define STEPS 4
#define BATCH 24

static char dir[1024];

static void blocks(char *extra, size_t cap, const char *out, const char *job) {
    snprintf(extra, cap,
             "\"tensorboard\": {\"enabled\": true, \"output_path\": \"%s\", \"job_name\": \"%s\"}, "
             "\"csv_monitor\": {\"enabled\": true, \"output_path\": \"%s\", \"job_name\": \"%s\"}, "
             "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0, \"warmup_max_lr\": 0.003, "
             "\"warmup_num_steps\": 10, \"warmup_type\": \"linear\"}}",
             out, job, out, job);
}

/* The rows of a CSV file after its header: samples and values; returns how many. */
static int rows(const char *path, const char *header, long long *x, double *v, int max) {
    FILE *f = fopen(path, "r");
    char line[256];
    int n = 0;
    ZT_CHECK(f && fgets(line, sizeof line, f) && !strcmp(line, header), "%s: header", path);
    while (f && n < max && fgets(line, sizeof line, f)) {
        char *comma = strchr(line, ',');
        if (!comma) break;
        x[n] = atoll(line);
        v[n++] = strtod(comma + 1, NULL);
    }
    if (f) fclose(f);
    return n;
}

static void test_train(int rank, int world) {
    char extra[8192], job[64], path[1400];
    snprintf(job, sizeof job, "np%d", world); /* each rank count its own job: the tests may run side by side */
    snprintf(path, sizeof path, "%s/%s", dir, job);
    if (rank == 0) zfile_rmtree(path);
    eu_run r = {.stage = 2, .dtype = ZINC_FP16, .train_batch = BATCH, .gas = 2, .fp16_extra = "\"hysteresis\": 1"};
    blocks(extra, sizeof extra, dir, job);
    r.extra = extra;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    ZT_ERR(zinc_record_loss(e, 1.0), ZINC_ERR_STATE, "no zinc_step since the last loss");
    ZT_ERR(zinc_record_loss(NULL, 1.0), ZINC_ERR_INVALID_ARG, "NULL");
    zinc_step_info info[STEPS];
    for (int s = 0; s < STEPS; s++) {
        if (s == 1) mlp_inject_grad(m, INFINITY); /* an overflow: skipped, the scale halves */
        ZT_OK(mlp_train_step(m, s, &info[s], NULL));
        ZT_OK(zinc_record_loss(e, 1.5 + s));
        if (s == 2) ZT_ERR(zinc_record_loss(e, 9.0), ZINC_ERR_STATE, "once after each zinc_step");
    }
    ZT_CHECK(info[1].taken == 0 && info[2].taken == 1, "step 2 skipped (overflow), step 3 taken");
    mlp_destroy(m);
    zinc_destroy(e);
    if (rank != 0) return;
    long long x[16];
    double v[16];
    snprintf(path, sizeof path, "%s/%s/Train_Samples_train_loss.csv", dir, job);
    int n = rows(path, "step,train_loss\r\n", x, v, 16);
    ZT_CHECK(n == STEPS, "%d loss rows", n);
    for (int s = 0; s < n; s++)
        ZT_CHECK(x[s] == (long long)s * BATCH && v[s] == 1.5 + s, "loss row %d: %lld,%g", s, x[s], v[s]);
    snprintf(path, sizeof path, "%s/%s/Train_Samples_lr.csv", dir, job);
    n = rows(path, "step,lr\r\n", x, v, 16);
    ZT_CHECK(n == STEPS, "%d lr rows", n);
    for (int s = 0; s + 1 < n; s++) /* DeepSpeed's get_lr() after step s: what step s + 1 uses */
        ZT_CHECK(x[s] == (long long)(s + 1) * BATCH && v[s] == info[s + 1].lr, "lr row %d: %lld,%.17g vs %.17g", s,
                 x[s], v[s], info[s + 1].lr);
    ZT_CHECK(n == STEPS && fabs(v[STEPS - 1] - 0.003 * 2 / 10) < 1e-15,
             "last lr %.17g: 3 steps taken of 10, iteration 2", v[STEPS - 1]);
    snprintf(path, sizeof path, "%s/%s/Train_Samples_loss_scale.csv", dir, job);
    n = rows(path, "step,loss_scale\r\n", x, v, 16);
    ZT_CHECK(n == STEPS, "%d loss_scale rows", n);
    for (int s = 0; s < n; s++)
        ZT_CHECK(x[s] == (long long)(s + 1) * BATCH && v[s] == (double)info[s].loss_scale,
                 "scale row %d: %lld,%g vs %g", s, x[s], v[s], (double)info[s].loss_scale);
    ZT_CHECK(n == STEPS && v[1] == v[0] / 2, "the overflow halved the scale: %g -> %g", v[0], v[1]);
}

/* A monitor that cannot open fails zinc_create on every rank, with rank 0's reason. */
static void test_refused(int rank) {
    char extra[8192], file[1100];
    snprintf(file, sizeof file, "%s/not_a_dir", dir); /* the same for every rank count: never removed */
    if (rank == 0) {
        FILE *f = fopen(file, "w");
        if (f) fclose(f);
    }
    eu_run r = {.stage = 1, .dtype = ZINC_FP32};
    blocks(extra, sizeof extra, file, "job");
    r.extra = extra;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_ERR(eu_create(&r, &e, &m), ZINC_ERR_IO, "is not a directory");
    ZT_CHECK(e == NULL, "no engine");
}

/* This process's rank and the job's size as mpirun sets them (1 rank when started alone). */
static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int main(void) {
    zt_name = "test_monitor_engine";
    int rank = env_int("OMPI_COMM_WORLD_RANK", 0), world = env_int("OMPI_COMM_WORLD_SIZE", 1);
    const char *bin = getenv("ZINC_BINARY_DIR");
    snprintf(dir, sizeof dir, "%s/monitor_engine_test", bin && *bin ? bin : ".");
    if (rank == 0) mkdir(dir, 0755);
    test_train(rank, world);
    test_refused(rank);
    return zt_finish();
}
