/* `zinc config check FILE [--world-size N] [--quiet]`, run as a program (ZINC_BINARY_DIR/zinc): exit 0 with
 * the resolved JSON on stdout when valid, 1 with the problems on stderr when not, 2 on usage errors. */
#include <jansson.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config/config.h"
#include "zt.h"

extern char **environ;

static char zinc_bin[4096], tmpdir[4096];
static char out_text[1 << 20], err_text[1 << 20];

static void slurp(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* Runs zinc with up to 8 arguments (NULL-terminated); returns the exit status (-1 if it did not exit). */
static int run_zinc(const char *const *args) {
    char outp[4200], errp[4200];
    snprintf(outp, sizeof outp, "%s/stdout.txt", tmpdir);
    snprintf(errp, sizeof errp, "%s/stderr.txt", tmpdir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *argv[24];
    int n = 0;
    argv[n++] = zinc_bin;
    for (int i = 0; args[i] && n < 23; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, zinc_bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "posix_spawn %s: %s\n", zinc_bin, strerror(rc));
        return -1;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1;
    slurp(outp, out_text, sizeof out_text);
    slurp(errp, err_text, sizeof err_text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define RUN(want_rc, ...)                                                                                   \
    do {                                                                                                   \
        const char *a_[] = {__VA_ARGS__, NULL};                                                            \
        int rc_ = run_zinc(a_);                                                                            \
        ZT_CHECK(rc_ == (want_rc), "zinc %s ...: exit %d, wanted %d\nstdout: %.2000s\nstderr: %.2000s", a_[0],  \
                 rc_, (want_rc), out_text, err_text);                                                      \
    } while (0)

#define HAS(buf, needle) ZT_CHECK(strstr((buf), (needle)) != NULL, "%s lacks \"%s\": %.3000s", #buf, (needle), (buf))
#define LACKS(buf, needle) ZT_CHECK(strstr((buf), (needle)) == NULL, "%s has \"%s\": %.3000s", #buf, (needle), (buf))

static void write_cfg(const char *name, const char *text, char *path, size_t n) {
    snprintf(path, n, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* The stdout of a valid check: JSON with _defaults, reloadable (minus the "_" keys) by the library. */
static json_t *check_dump(int world) {
    json_error_t je;
    json_t *root = json_loads(out_text, 0, &je);
    ZT_CHECK(root != NULL, "stdout is not JSON (%s): %.2000s", je.text, out_text);
    if (!root) return NULL;
    ZT_CHECK(json_is_array(json_object_get(root, "_defaults")), "no _defaults array");
    ZT_CHECK(json_integer_value(json_object_get(root, "_world_size")) == world, "_world_size is not %d", world);
    json_t *copy = json_deep_copy(root);
    const char *drop[] = {"_source", "_world_size", "_compute_dtype", "_defaults", "_filled"};
    for (int i = 0; i < 5; i++) json_object_del(copy, drop[i]);
    char *text = json_dumps(copy, JSON_COMPACT);
    zinc_config c;
    ZT_OK(zcfg_load_text(text, "<stdout>", world, NULL, &c));
    free(text);
    json_decref(copy);
    return root;
}

static int in_defaults(json_t *root, const char *path) {
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(root, "_defaults"), i, v) if (!strcmp(json_string_value(v), path)) return 1;
    return 0;
}

int main(void) {
    zt_name = "test_config_cli";
    snprintf(zinc_bin, sizeof zinc_bin, "%s/zinc", zt_build_dir());
    ZT_CHECK(access(zinc_bin, X_OK) == 0, "%s is not an executable (set ZINC_BINARY_DIR)", zinc_bin);
    if (zt_failed) return zt_finish();
    snprintf(tmpdir, sizeof tmpdir, "%s/test_config_cli_%d", zt_build_dir(), (int)getpid());
    mkdir(tmpdir, 0755);
    char nvme[4200], p[4200];
    snprintf(nvme, sizeof nvme, "%s/ds_configs/zero3_nvme_offload.json", zt_source_dir());

    /* valid: resolved JSON on stdout, exit 0 */
    RUN(0, "config", "check", nvme, "--world-size", "2");
    json_t *root = check_dump(2);
    if (root) {
        json_t *z = json_object_get(root, "zero_optimization");
        ZT_CHECK(json_integer_value(json_object_get(z, "stage")) == 3, "stage in dump");
        ZT_CHECK(json_integer_value(json_object_get(root, "gradient_accumulation_steps")) == 2 &&
                     json_integer_value(json_object_get(root, "train_micro_batch_size_per_gpu")) == 16,
                 "batch triad for world size 2 not resolved in the dump");
        ZT_CHECK(json_is_true(json_object_get(z, "overlap_comm")), "overlap_comm default for stage 3");
        ZT_CHECK(in_defaults(root, "gradient_clipping") && in_defaults(root, "zero_optimization.overlap_comm"),
                 "defaults not listed");
        ZT_CHECK(!in_defaults(root, "zero_optimization.stage") && !in_defaults(root, "train_batch_size"),
                 "written keys listed as defaults");
        json_decref(root);
    }
    HAS(err_text, "valid for world size 2");
    RUN(0, "config", "check", "--world-size", "4", nvme); /* options before the file */
    root = check_dump(4);
    json_decref(root);

    /* invalid for this world size: the arithmetic on stderr, nothing on stdout, exit 1 */
    RUN(1, "config", "check", nvme, "--world-size", "8");
    HAS(err_text, "train_batch_size 64 must equal");
    HAS(err_text, "world_size 8");
    ZT_CHECK(out_text[0] == 0, "stdout not empty on error: %s", out_text);

    /* several problems, each named */
    write_cfg("bad.json",
              "{\"train_batch_size\": 8, \"zero_optimisation\": {\"stage\": 2},\n \"zero_optimization\": {\"aio\": {}}, "
              "\"fp16\": {\"enabled\": \"yes\"}}",
              p, sizeof p);
    RUN(1, "config", "check", p);
    HAS(err_text, "3 problems");
    HAS(err_text, "did you mean \"zero_optimization\"?");
    HAS(err_text, "\"aio\" belongs at the top level");
    HAS(err_text, "fp16.enabled: expected true or false, got \"yes\"");
    write_cfg("broken.json", "{\"train_batch_size\": 8,\n \"fp16\": {\"enabled\": true}", p, sizeof p);
    RUN(1, "config", "check", p);
    HAS(err_text, "broken.json:2:");
    HAS(err_text, "not valid JSON");
    write_cfg("dup.json", "{\"train_batch_size\": 8, \"train_batch_size\": 8}", p, sizeof p);
    RUN(1, "config", "check", p);
    HAS(err_text, "duplicate");

    /* warnings and info go to stderr through the log sink; --quiet keeps the warnings only */
    write_cfg("old.json",
              "{\"train_micro_batch_size_per_gpu\": 2, \"bfloat16\": {\"enabled\": true}, \"zero_optimization\": "
              "{\"stage\": 2, \"cpu_offload\": true}, \"optimizer\": {\"params\": {\"lr\": \"auto\"}}}",
              p, sizeof p);
    RUN(0, "config", "check", p, "--world-size", "3");
    HAS(err_text, "[zinc WARN");
    HAS(err_text, "bfloat16 is a deprecated spelling; use \"bf16\"");
    HAS(err_text, "cpu_offload is deprecated");
    HAS(err_text, "[zinc INFO");
    HAS(err_text, "train_batch_size 6");
    HAS(err_text, "optimizer.params.lr: \"auto\"");
    root = check_dump(3);
    if (root) {
        ZT_CHECK(json_integer_value(json_object_get(root, "train_batch_size")) == 6, "derived train_batch_size");
        ZT_CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_object_get(root, "zero_optimization"),
                                                                           "offload_optimizer"),
                                                           "device")),
                         "cpu"),
                 "cpu_offload not translated in the dump");
        ZT_CHECK(!in_defaults(root, "optimizer.params.lr") &&
                     json_is_string(json_object_get(json_object_get(root, "_filled"), "optimizer.params.lr")),
                 "\"auto\" lr not listed under _filled");
        json_decref(root);
    }
    RUN(0, "config", "check", "--quiet", p, "--world-size", "3");
    HAS(err_text, "[zinc WARN");
    LACKS(err_text, "[zinc INFO");

    /* "auto" as the Hugging Face Trainer fills it, --steps and --set (issue 14) */
    write_cfg("hf.json",
              "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", "
              "\"gradient_accumulation_steps\": \"auto\", \"optimizer\": {\"type\": \"AdamW\", \"params\": "
              "{\"lr\": \"auto\"}}, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": "
              "\"auto\", \"warmup_num_steps\": \"auto\"}}}",
              p, sizeof p);
    RUN(1, "config", "check", p);
    HAS(err_text, "scheduler.params.total_num_steps (give the run length: --steps N");
    LACKS(err_text, ".c:"); /* no internal trail in a config error */
    RUN(0, "config", "check", p, "--steps", "120", "--set", "train_micro_batch_size_per_gpu=4", "--set",
        "optimizer.params.lr=2e-4", "--world-size", "2");
    HAS(err_text, "train_micro_batch_size_per_gpu = 4 (--set fills its \"auto\")");
    HAS(err_text, "gradient_accumulation_steps: \"auto\" -> 1");
    root = check_dump(2);
    if (root) {
        json_t *f = json_object_get(root, "_filled");
        ZT_CHECK(json_integer_value(json_object_get(root, "train_batch_size")) == 8, "train_batch_size 4 x 2");
        ZT_CHECK(json_is_string(json_object_get(f, "scheduler.params.total_num_steps")) &&
                     json_is_string(json_object_get(f, "gradient_accumulation_steps")),
                 "_filled lacks total_num_steps or gradient_accumulation_steps");
        ZT_CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(root, "scheduler"), "params"),
                                                    "total_num_steps")) == 120,
                 "--steps not used");
        json_decref(root);
    }
    RUN(1, "config", "check", p, "--steps", "120", "--set", "optimizer.params.lrr=1");
    HAS(err_text, "\"lrr\" is not a key");
    RUN(2, "config", "check", p, "--set");
    HAS(err_text, "--set needs PATH=VALUE");
    RUN(2, "config", "check", p, "--steps", "0");
    /* zinc train takes the same --set, and --steps fills total_num_steps */
    RUN(0, "train", "--config", p, "--steps", "3", "--set", "train_micro_batch_size_per_gpu=2", "--hidden", "8",
        "--quiet");
    HAS(err_text, "scheduler.params.total_num_steps: \"auto\" -> 3");
    RUN(1, "train", "--config", p, "--steps", "3", "--set", "zero_optimization.stage=5", "--quiet");
    HAS(err_text, "zero_optimization.stage: 5 is out of range");
    RUN(2, "train", "--config", p, "--set");
    /* memory does not depend on the schedule: zinc mem reads the same config without --steps */
    RUN(0, "mem", "estimate", "--params", "100000", "--config", p);
    HAS(err_text, "total_num_steps: \"auto\" -> 1 (a placeholder");

    /* IO problems: exit 1 */
    snprintf(p, sizeof p, "%s/missing.json", tmpdir);
    RUN(1, "config", "check", p);
    HAS(err_text, "cannot open");
    RUN(1, "config", "check", tmpdir);
    HAS(err_text, "directory");

    /* usage errors: exit 2 */
    RUN(2, "config");
    HAS(err_text, "usage: zinc config check");
    RUN(2, "config", "validate", nvme);
    RUN(2, "config", "check");
    RUN(2, "config", "check", nvme, "--world-size", "0");
    HAS(err_text, "--world-size");
    RUN(2, "config", "check", nvme, "--world-size", "two");
    RUN(2, "config", "check", nvme, "--world-size", "");
    RUN(2, "config", "check", nvme, "--world-size", "99999999999999999999");
    RUN(2, "config", "check", nvme, "--world-size");
    RUN(2, "config", "check", nvme, "--bogus");
    HAS(err_text, "--bogus");
    RUN(2, "config", "check", nvme, nvme);
    ZT_CHECK(out_text[0] == 0, "stdout not empty on a usage error");
    /* help: exit 0, on stdout */
    RUN(0, "config", "--help");
    HAS(out_text, "usage: zinc config check");
    RUN(0, "config", "check", "--help");
    HAS(out_text, "_defaults");

    const char *junk[] = {"stdout.txt", "stderr.txt", "bad.json", "broken.json", "dup.json", "old.json", "hf.json"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, junk[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return zt_finish();
}
