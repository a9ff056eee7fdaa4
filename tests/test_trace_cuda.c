/* The timeline on the CUDA device (base/device/device_cuda.c's cudaEvent pairs, resolved after each
 * step): the MLP on the GPU, stage 2 with overlap_comm over NCCL (run under mpirun with one (emulated) GPU
 * per rank), then with the optimizer state offloaded to the host. Rank 0 reads the file: each stream has
 * its track ("stream compute", "stream comm", "stream copy") with "gpu" spans: the modules' kernels on the
 * compute stream (args.kind forward/backward), reduce-scatters and the parameters' all-gather on the comm
 * stream with their bytes, the pinned copies of the offloaded step on the copy stream; the device spans of
 * a step lie within the host's span of that step. Built against the CUDA emulation
 * (tests/cuda_emulated.cmake); on a GPU build it needs a GPU (77 otherwise). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/device/device.h"
#include "engine_util.h"
#include "zt.h"

#define STEPS 3

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_WARN, .echo_all_ranks = 1};

static zinc_status train(const eu_run *r, const char *path) {
    char cfg[8192];
    eu_config(r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CUDA;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    o.trace_path = path;
    o.trace_first_step = 1;
    o.trace_last_step = STEPS;
    o.trace_replace = 1;
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = zinc_create(&o, &e);
    if (st != ZINC_OK) return st;
    mlp_config mc = eu_model();
    st = mlp_create(e, &mc, &m);
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) st = mlp_train_step(m, s, NULL, NULL);
    mlp_destroy(m);
    zinc_destroy(e);
    return st;
}

typedef struct seen {
    int stream_spans[3]; /* compute, comm, copy */
    int modules_fwd, modules_bwd, reduce_scatters, gathers, copies, outside_step;
} seen;

static const char *track_name(json_t *ev, json_int_t pid, json_int_t tid) {
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!strcmp(json_string_value(json_object_get(e, "ph")), "M") && n && !strcmp(n, "thread_name") &&
            json_integer_value(json_object_get(e, "pid")) == pid &&
            json_integer_value(json_object_get(e, "tid")) == tid)
            return json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    }
    return "";
}

static double num(json_t *e, const char *k) { return json_number_value(json_object_get(e, k)); }

/* Whether the step span of (pid, step) holds [ts, ts + dur] (a microsecond of slack for rounding). */
static int in_step(json_t *ev, json_int_t pid, json_int_t step, double ts, double dur) {
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!cat || strcmp(cat, "step") || json_integer_value(json_object_get(e, "pid")) != pid ||
            json_integer_value(json_object_get(json_object_get(e, "args"), "step")) != step)
            continue;
        return ts >= num(e, "ts") - 1 && ts + dur <= num(e, "ts") + num(e, "dur") + 1;
    }
    return 0;
}

static void inspect(const char *path, int world, seen *s) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    ZT_CHECK(j != NULL, "%s does not parse: %s (line %d)", path, err.text, err.line);
    if (!j) return;
    json_t *ev = json_object_get(j, "traceEvents");
    static const char *streams[3] = {"stream compute", "stream comm", "stream copy"};
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!cat || strcmp(cat, "gpu")) continue;
        json_int_t pid = json_integer_value(json_object_get(e, "pid"));
        const char *tn = track_name(ev, pid, json_integer_value(json_object_get(e, "tid")));
        int k = -1;
        for (int q = 0; q < 3; q++)
            if (!strcmp(tn, streams[q])) k = q;
        ZT_CHECK(k >= 0, "a gpu span on track \"%s\"", tn);
        ZT_CHECK(pid >= 0 && pid < world, "pid %lld", (long long)pid);
        if (k < 0 || pid < 0 || pid >= 64) continue;
        s->stream_spans[k]++;
        json_t *args = json_object_get(e, "args");
        const char *kind = json_string_value(json_object_get(args, "kind"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_int_t bytes = json_integer_value(json_object_get(args, "bytes"));
        if (k == 0 && kind && !strcmp(kind, "forward") && !strncmp(name, "fc", 2)) s->modules_fwd++;
        if (k == 0 && kind && !strcmp(kind, "backward") && !strncmp(name, "fc", 2)) s->modules_bwd++;
        if (k == 1 && !strcmp(name, "reduce_scatter") && bytes > 0) s->reduce_scatters++;
        if (k == 1 && !strcmp(name, "all_gather") && bytes > 0) s->gathers++;
        if (k == 2 && (!strcmp(name, "h2d") || !strcmp(name, "d2h")) && bytes > 0) s->copies++;
        double ts = num(e, "ts"), dur = num(e, "dur");
        if (!in_step(ev, pid, json_integer_value(json_object_get(args, "step")), ts, dur)) s->outside_step++;
        ZT_CHECK(dur >= 0, "negative duration");
    }
    json_decref(j);
}

int main(void) {
    zt_name = "trace_cuda";
    if (zdev_cuda_count() == 0) return zt_skip("no GPU (or zinc built without the CUDA backend)");
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/trace_cuda_emulated.json", zt_build_dir());
    int rank = 0, world = 1;
    const char *r_env = getenv("OMPI_COMM_WORLD_RANK"), *w_env = getenv("OMPI_COMM_WORLD_SIZE");
    if (r_env) rank = atoi(r_env);
    if (w_env) world = atoi(w_env);

    eu_run r = {.stage = 2, .dtype = ZINC_FP32, .overlap_comm = 1, .cuda = 1, .bucket = 600};
    ZT_OK(train(&r, path));
    if (rank == 0) {
        seen s = {0};
        inspect(path, world, &s);
        printf("stage 2 overlap: spans compute %d comm %d copy %d; modules %d/%d, reduce-scatters %d, "
               "all-gathers %d\n",
               s.stream_spans[0], s.stream_spans[1], s.stream_spans[2], s.modules_fwd, s.modules_bwd, s.reduce_scatters,
               s.gathers);
        ZT_CHECK(s.modules_fwd > 0 && s.modules_bwd > 0, "no module spans on the compute stream");
        if (world > 1) {
            ZT_CHECK(s.reduce_scatters > 0, "no reduce-scatters on the comm stream");
            ZT_CHECK(s.gathers >= STEPS * world,
                     "%d parameter all-gathers on the comm stream, want one per step "
                     "and rank",
                     s.gathers);
        }
        ZT_CHECK(s.outside_step == 0, "%d gpu spans outside their step's span", s.outside_step);
    }

    eu_run off = {.stage = 2,
                  .dtype = ZINC_BF16,
                  .cuda = 1,
                  .zero_extra = "\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}, "
                                "\"sub_group_size\": 2000"};
    ZT_OK(train(&off, path));
    if (rank == 0) {
        seen s = {0};
        inspect(path, world, &s);
        printf("cpu offload: spans compute %d comm %d copy %d; copies %d\n", s.stream_spans[0], s.stream_spans[1],
               s.stream_spans[2], s.copies);
        ZT_CHECK(s.copies >= 2 * STEPS * world, "%d pinned copies on the copy stream", s.copies);
        ZT_CHECK(s.outside_step == 0, "%d gpu spans outside their step's span", s.outside_step);
    }
    return zt_finish();
}
