/* The pre-flight against the limits that apply to this process (issue 15): RLIMIT_AS set on the test
 * process itself (setrlimit, then zinc_build), a memory cgroup where one can be created (cgroup v2 with a
 * writable own cgroup; exit 77 with the reason otherwise), and the messages and fixes for each limit
 * (ZINC_FAKE_CGROUP_FREE, ZINC_FAKE_MEM_AVAILABLE, ZINC_MEM_HEADROOM). Runs without mpirun (one rank).
 *
 *   test_mem_limits rlimit | cgroup | advice */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zinc.h"
#include "zt.h"

static zinc_status init_range(void *u, const zinc_param_info *p, uint64_t seed, int64_t first, int64_t n, float *out) {
    (void)u, (void)p, (void)seed, (void)first;
    for (int64_t i = 0; i < n; i++) out[i] = 0.01f;
    return ZINC_OK;
}

/* Builds a one-module model of `numel` fp32 parameters at `stage`; returns zinc_build_ranged's status
 * and leaves its message in msg. */
static zinc_status try_build_zero(const char *zero, int64_t numel, int nmodules, char *msg, size_t cap) {
    char cfg[1536];
    snprintf(cfg, sizeof cfg, "{\"train_batch_size\": 1, \"zero_optimization\": {%s}}", zero);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.log_level = ZINC_LOG_ERROR;
    o.device = ZINC_DEVICE_CPU;
    zinc_engine *e = NULL;
    zinc_status st = zinc_create(&o, &e);
    if (st == ZINC_OK) {
        int64_t shape[1] = {numel / nmodules};
        for (int i = 0; i < nmodules && st == ZINC_OK; i++) {
            char name[32], w[40];
            snprintf(name, sizeof name, "layer%d", i);
            snprintf(w, sizeof w, "%s.w", name);
            int m = zinc_module_add(e, name);
            if (m < 0 || !zinc_param_add(e, m, nmodules == 1 ? "w" : w, 1, shape, ZINC_PARAM_DECAY))
                st = ZINC_ERR_INVALID_ARG;
        }
        if (st == ZINC_OK) st = zinc_build_ranged(e, init_range, NULL);
    }
    snprintf(msg, cap, "%s", st == ZINC_OK ? "" : zinc_last_error());
    zinc_destroy(e);
    return st;
}

static zinc_status try_build(int stage, int64_t numel, char *msg, size_t cap) {
    char zero[32];
    snprintf(zero, sizeof zero, "\"stage\": %d", stage);
    return try_build_zero(zero, numel, 1, msg, cap);
}

static uint64_t vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb * 1024;
}

static const int64_t BIG = 64ll << 20;  /* 64Mi parameters: about 1.3 GB at stage 0 fp32 */
static const int64_t SMALL = 1ll << 20; /* about 20 MiB */
#ifndef FREE_INFINITY
#define FREE_INFINITY "209715200" /* 200 MiB: between ZeRO-Infinity's need and this config's */
#endif

/* RLIMIT_AS a little above the current address space: the big model is refused by the pre-flight with
 * the limit named, the small one builds and is not killed. */
static int run_rlimit(void) {
    char msg[2048];
    ZT_OK(try_build(0, SMALL, msg, sizeof msg)); /* MPI and the engine's code are mapped now */
    uint64_t limit = vm_size() + (512ull << 20);
    struct rlimit rl = {limit, limit};
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < limit) rl.rlim_max = old.rlim_max;
    ZT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS, %llu): %s", (unsigned long long)limit,
             strerror(errno));
    zinc_status st = try_build(0, BIG, msg, sizeof msg);
    ZT_CHECK(st == ZINC_ERR_NOMEM, "a 64Mi-parameter build under RLIMIT_AS %llu MiB: %s (%s)",
             (unsigned long long)(limit >> 20), zinc_status_name(st), msg);
    ZT_CHECK(strstr(msg, "RLIMIT_AS") && strstr(msg, "headroom"), "the message names RLIMIT_AS: %s", msg);
    ZT_CHECK(!strstr(msg, "raise zero_optimization.stage"), "1 rank: no stage advice: %s", msg);
    printf("RLIMIT_AS %llu MiB: refused: %.400s...\n", (unsigned long long)(limit >> 20), msg);
    ZT_OK(try_build(0, SMALL, msg, sizeof msg));
    return 0;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A cgroup v2 child of this process's cgroup with memory.max 300 MiB: a forked child moves into it and
 * builds; the pre-flight must refuse the big model (naming memory.max) instead of being killed. */
static int run_cgroup(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024], rel[1024] = "";
    int v2 = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3)) memmove(rel, line + 3, strlen(line + 3) + 1), v2 = 1;
    }
    if (f) fclose(f);
    char dir[1100], path[1200];
    rel[sizeof rel - 80] = 0; /* room for the prefix */
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", rel);
    snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
    if (!v2 || access(path, R_OK) != 0) {
        printf("SKIP: no cgroup v2 hierarchy for this process (%s): the test creates v2 cgroups only; zinc "
               "reads v1 limits too, and the refusal message is checked with ZINC_FAKE_CGROUP_FREE (advice)\n",
               v2 ? path : "/proc/self/cgroup has no 0:: line");
        return 77;
    }
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/zinc_test_%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        printf("SKIP: cannot create a cgroup (%s: %s)\n", dir, strerror(errno));
        return 77;
    }
    snprintf(path, sizeof path, "%s/memory.max", dir);
    if (write_file(path, "314572800") != 0) {
        printf("SKIP: cannot set %s (%s): the memory controller is not delegated here\n", path, strerror(errno));
        rmdir(dir);
        return 77;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char procs[1200], msg[2048], me[32];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        snprintf(me, sizeof me, "%d", (int)getpid());
        if (write_file(procs, me) != 0) _exit(77);
        zinc_status st = try_build(0, BIG, msg, sizeof msg);
        int ok = st == ZINC_ERR_NOMEM && strstr(msg, "memory.max") != NULL;
        printf("in a 300 MiB cgroup: %s: %.300s\n", zinc_status_name(st), msg);
        ok = ok && try_build(0, SMALL, msg, sizeof msg) == ZINC_OK;
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    rmdir(dir);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        printf("SKIP: cannot move a process into %s\n", dir);
        return 77;
    }
    ZT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child in the cgroup: status 0x%x (killed: %d)", status,
             WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 0;
}

/* Each limit's message and the fixes offered. */
static int run_advice(void) {
    char msg[2048];
    setenv("ZINC_FAKE_CGROUP_FREE", "104857600", 1); /* 100 MiB */
    ZT_ERR(try_build(0, SMALL * 8, msg, sizeof msg), ZINC_ERR_NOMEM, "memory cgroup");
    ZT_CHECK(!strstr(msg, "raise zero_optimization.stage"), "1 rank: a higher stage saves nothing: %s", msg);
    ZT_CHECK(strstr(msg, "with zero_optimization.stage 1 or more"), "stage 0: offload named with stage >= 1: %s", msg);
    ZT_CHECK(strstr(msg, "sub_group_size"), "NVMe advice names a sub_group_size that saves memory: %s", msg);
    ZT_OK(try_build(0, SMALL, msg, sizeof msg)); /* ~20 MiB + 10% fits in 100 MiB */
    /* The headroom: 90% of the limit kept free refuses what fits without it. */
    setenv("ZINC_MEM_HEADROOM", "90", 1);
    setenv("ZINC_FAKE_CGROUP_FREE", "41943040", 1); /* 40 MiB: 1Mi fp32 params need ~20 MiB, x1.9 > 40 */
    ZT_ERR(try_build(0, SMALL, msg, sizeof msg), ZINC_ERR_NOMEM, "90% headroom");
    setenv("ZINC_MEM_HEADROOM", "0", 1);
    ZT_OK(try_build(0, SMALL, msg, sizeof msg));
    setenv("ZINC_MEM_HEADROOM", "95", 1);
    ZT_ERR(try_build(0, SMALL, msg, sizeof msg), ZINC_ERR_INVALID_ARG, "ZINC_MEM_HEADROOM=\"95\"");
    unsetenv("ZINC_MEM_HEADROOM");
    unsetenv("ZINC_FAKE_CGROUP_FREE");
    /* The optimizer state already on NVMe: what still fits is ZeRO-Infinity, the parameters and their
     * gradients in files too, named with its disk traffic; a limit below even that names no cheapest change. */
    char zero[512], dir[256];
    snprintf(dir, sizeof dir, "%s/nvme_advice", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    mkdir(dir, 0755);
    snprintf(zero, sizeof zero,
             "\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}, "
             "\"sub_group_size\": 1048576, \"reduce_bucket_size\": 1048576, \"stage3_prefetch_bucket_size\": "
             "1048576, \"stage3_max_live_parameters\": 1048576, \"stage3_max_reuse_distance\": 0",
             dir);
    setenv("ZINC_FAKE_CGROUP_FREE", FREE_INFINITY, 1);
    ZT_ERR(try_build_zero(zero, BIG, 64, msg, sizeof msg), ZINC_ERR_NOMEM, "memory cgroup");
    ZT_CHECK(strstr(msg, "the cheapest change that fits by the estimate: ZeRO-Infinity") &&
                 strstr(msg, "of disk traffic per optimizer step"),
             "optimizer state on NVMe: ZeRO-Infinity named first: %s", msg);
    printf("optimizer state on NVMe, 200 MiB free: %s\n", msg);
    /* The parameters on NVMe too, with DeepSpeed's default max_in_cpu (1e9: the whole 64Mi-element shard
     * kept in memory, 256 MiB): the cheapest change is the largest max_in_cpu that fits; a build with it
     * passes the pre-flight, one with 4Mi elements more does not. */
    char zp[1200], zk[1300];
    snprintf(zp, sizeof zp,
             "%s, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": 1048576", zero,
             dir);
    snprintf(zk, sizeof zk, "%s}", zp);
    ZT_ERR(try_build_zero(zk, BIG, 64, msg, sizeof msg), ZINC_ERR_NOMEM, "memory cgroup");
    const char *at =
        strstr(msg, "the cheapest change that fits by the estimate: zero_optimization.offload_param.max_in_cpu ");
    long long keep = -1, was = -1;
    if (at) sscanf(strstr(at, "max_in_cpu ") + 11, "%lld instead of %lld", &keep, &was);
    ZT_CHECK(keep > 0 && keep < BIG && was == BIG,
             "max_in_cpu 1e9 over a 64Mi shard: named max_in_cpu %lld of %lld: %s", keep, was, msg);
    printf("parameters on NVMe with max_in_cpu 1e9, 200 MiB free: %.400s\n", at ? at : msg);
    snprintf(zk, sizeof zk, "%s, \"max_in_cpu\": %lld}", zp, keep);
    ZT_OK(try_build_zero(zk, BIG, 64, msg, sizeof msg));
    snprintf(zk, sizeof zk, "%s, \"max_in_cpu\": %lld}", zp, keep + (4ll << 20));
    ZT_ERR(try_build_zero(zk, BIG, 64, msg, sizeof msg), ZINC_ERR_NOMEM, "memory cgroup");
    setenv("ZINC_FAKE_CGROUP_FREE", "1048576", 1);
    ZT_ERR(try_build_zero(zero, BIG, 64, msg, sizeof msg), ZINC_ERR_NOMEM, "memory cgroup");
    ZT_CHECK(!strstr(msg, "the cheapest change"), "1 MiB: no change fits, none is named: %s", msg);
    unsetenv("ZINC_FAKE_CGROUP_FREE");
    setenv("ZINC_FAKE_MEM_AVAILABLE", "10485760", 1);
    ZT_ERR(try_build(0, SMALL, msg, sizeof msg), ZINC_ERR_NOMEM, "MemAvailable");
    unsetenv("ZINC_FAKE_MEM_AVAILABLE");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "advice";
    zt_name = mode;
    int rc = !strcmp(mode, "rlimit") ? run_rlimit() : !strcmp(mode, "cgroup") ? run_cgroup() : run_advice();
    if (rc == 77) return 77;
    printf("%s: %d passed, %d failed\n", mode, zt_passed, zt_failed);
    return zt_failed ? 1 : rc;
}
