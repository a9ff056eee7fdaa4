/* The memory estimator (the sizing plan, summed), DeepSpeed's estimators for comparison, and the
 * pre-flight check. */
#include "runtime/mem/mem_estimate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "base/core/bytes.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/device/device.h"

bool zest_is_model_state(zinc_mem_category c) {
    return c == ZINC_MEM_PARAMS || c == ZINC_MEM_GRADS || c == ZINC_MEM_MASTER || c == ZINC_MEM_EXP_AVG ||
           c == ZINC_MEM_EXP_AVG_SQ || c == ZINC_MEM_OTHER;
}

/* ---------------------------------------------------------------- the estimate: the plan, summed */

/* The two moments' peaks (zest_estimate): the steps' buffers, and the build's while it initialises: its
 * buffers but the persistent modules' gathered copies (the gather after the initialisation allocates them),
 * with the model's declared memory (zinc_memory_get counts it from zinc_build on) and the initialisation
 * scratch in host staging. */
static void peaks(const zplan *p, zest_estimate *out) {
    uint64_t build[ZINC_MEMKIND_COUNT][ZINC_MEM_CATEGORY_COUNT] = {{0}};
    zplan_sum(p, ZPLAN_IN_STEP, out->bytes);
    zplan_sum(p, ZPLAN_AT_BUILD, build);
    const zplan_entry *persistent = &p->buf[ZPLAN_PARAMS_PERSISTENT];
    build[persistent->kind][persistent->cat] -= persistent->bytes;
    for (int i = 0; i < p->ndeclared; i++) build[p->declared[i].kind][p->declared[i].cat] += p->declared[i].bytes;
    build[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] += out->init_scratch;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        uint64_t at_build = 0;
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
            out->step_total[k] += out->bytes[k][c];
            at_build += build[k][c];
            if (build[k][c] > out->bytes[k][c]) out->bytes[k][c] = build[k][c];
        }
        out->total[k] = at_build > out->step_total[k] ? at_build : out->step_total[k];
    }
}

void zest_from_plan(const zplan *p, zest_init init, zest_estimate *out) {
    memset(out, 0, sizeof *out);
    out->stage = p->stage;
    out->world = p->world;
    out->rank = p->rank;
    out->device = p->device.compute_kind == ZINC_MEMKIND_DEVICE ? ZINC_DEVICE_CUDA : ZINC_DEVICE_CPU;
    out->offload = p->offload;
    out->compute_dtype = p->compute_dtype;
    out->grad_dtype = p->grad_dtype;
    out->comm_dtype = p->comm_dtype;
    out->numel = p->numel;
    out->flat_numel = p->part.numel;
    out->shard = p->part.shard;
    out->padded = p->part.padded;
    out->own = p->own_hi - p->own_lo;
    out->nmodules = p->nmodules;
    out->largest_module = p->largest_module;
    out->largest_module_flat = p->largest_module_flat;
    out->largest_param = p->largest_param;
    out->npersistent = p->npersistent;
    out->persistent_numel = p->persistent_numel;
    out->nbuckets = p->grads.nbuckets;
    out->bucket_cap = p->grads.bucket_cap;
    out->bytes_landing = p->grads.bytes_landing;
    out->gather_peak_numel = p->gather_peak_numel;
    out->state_chunk = p->state_chunk;
    out->state_tensors = p->state_tensors;
    out->nvme_swap_buffers = p->buf[ZPLAN_NVME_SWAP].count;
    out->nvme_swap_each = p->buf[ZPLAN_NVME_SWAP].each;
    out->offload_staging = p->buf[ZPLAN_OFFLOAD_GRAD_STAGING].bytes + p->buf[ZPLAN_OFFLOAD_PARAM_STAGING].bytes;
    out->init_scratch =
        init == ZEST_INIT_NONE
            ? 0
            : (uint64_t)(init == ZEST_INIT_RANGED ? p->init_scratch_ranged : p->init_scratch_whole) * sizeof(float);
    out->init_scratch_whole = (uint64_t)p->init_scratch_whole * sizeof(float);
    out->comm_piece = p->comm_piece;
    out->comm_pending = p->comm_pending;
    out->comm_temp = p->comm_temp;
    out->before_build = p->buf[ZPLAN_COMM_STAGING].bytes;
    out->nvme_chunk = p->nvme_chunk;
    out->param_resident_bytes = p->buf[ZPLAN_PARAMS_RESIDENT].bytes;
    out->param_resident = (int64_t)(out->param_resident_bytes / zinc_dtype_size(p->compute_dtype));
    out->nvme_buffers = p->nvme_buffers;
    out->cheaper_stage = -1;
    for (int i = 0; i < p->ndeclared; i++) out->declared[p->declared[i].kind] += p->declared[i].bytes;
    peaks(p, out);
}

zinc_status zest_compute(const zplan_model *m, const zinc_config *cfg, int world, int rank, zinc_device_kind device,
                         zest_estimate *out) {
    zinc_status st = ZINC_OK;
    zplan plan;
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "memory estimate: out is NULL");
    zplan_device dev = zplan_device_for(device);
    TRY(zplan_make(m, cfg, world, rank, &dev, &plan));
    zest_from_plan(&plan, ZEST_INIT_RANGED, out);
    zplan_free(&plan);
fail:
    return st;
}

/* The host-RAM bytes of the steps (all) and of the build (before the scratch), both less what zinc_create
 * allocated. */
static void rss_parts(const zest_estimate *est, bool device_in_host, uint64_t *all, uint64_t *build) {
    uint64_t a = 0, gather = 0, declared = 0;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        if (k == ZINC_MEMKIND_NVME || (k == ZINC_MEMKIND_DEVICE && !device_in_host)) continue;
        a += est->step_total[k];
        gather += est->bytes[k][ZINC_MEM_GATHER];
        declared += est->declared[k];
    }
    a -= a > est->before_build ? est->before_build : a;
    *all = a;
    *build = a - gather - declared;
}

uint64_t zest_rss_build(const zest_estimate *est, bool device_in_host) {
    uint64_t all, build;
    rss_parts(est, device_in_host, &all, &build);
    return build + est->init_scratch;
}

int64_t zest_resident_fit(double floor, double esz, int64_t resident, double room) {
    if (!(esz > 0) || room < floor) return -1;
    int64_t keep = (int64_t)((room - floor) / esz);
    return keep >= resident ? resident - 1 : keep;
}

uint64_t zest_rss(const zest_estimate *est, bool device_in_host) {
    uint64_t all, build;
    rss_parts(est, device_in_host, &all, &build);
    build += est->init_scratch;
    uint64_t steps = all + est->comm_temp;
    return build > steps ? build : steps;
}

/* The process at start, measured on the CPU build with the CUDA backend (2-core EPYC, bench/RESULTS.md):
 * `zinc train --model gpt2`'s VmHWM less the estimate's other rows, about 13 MiB at one rank and 22 MiB per
 * rank under mpirun (Open MPI's shared-memory segments and components); the CUDA libraries are mapped but
 * not resident until a GPU is used (VmSize, not VmRSS), so they add nothing here. The test
 * mem_whole_matrix keeps these within its 5%. The address space a compute thread reserves beyond its
 * resident bytes: glibc's malloc arena (64 MiB reserved), its stack (8 MiB) and OpenBLAS's buffer
 * reservation; VmPeak less VmSize at zinc_build per thread, rounded up. */
#define ZEST_BASELINE_ONE ((uint64_t)13 << 20)
#define ZEST_BASELINE_MPI ((uint64_t)22 << 20)
#define ZEST_BASELINE_CUDA ((uint64_t)0)
#define ZEST_THREAD_AS ((uint64_t)200 << 20)

uint64_t zest_as_extra(int threads) { return (uint64_t)(threads > 0 ? threads : 1) * ZEST_THREAD_AS; }

uint64_t zest_baseline_bytes(int world, bool cuda_build) {
    uint64_t b = world > 1 ? ZEST_BASELINE_MPI : ZEST_BASELINE_ONE;
    return b + (cuda_build ? ZEST_BASELINE_CUDA : 0);
}

uint64_t zest_whole_process(const zest_estimate *est, bool device_in_host, bool cuda_build) {
    return zest_baseline_bytes(est->world, cuda_build) + zest_rss(est, device_in_host);
}

/* ---------------------------------------------------------------- DeepSpeed's estimators */

static uint64_t floor_u64(double x) { return x <= 0 ? 0 : (uint64_t)x; }

void zest_deepspeed(int stage, zcfg_offload_device offload_optimizer, bool offload_param, int64_t P, int64_t L,
                    int nodes, int gpus_per_node, double abf, zest_ds_estimate *out) {
    memset(out, 0, sizeof *out);
    double p = (double)P, l = (double)L, gpn = (double)gpus_per_node;
    double G = (double)nodes * gpn;
    if (stage == 0 || offload_optimizer == ZOFFLOAD_NVME) return;
    bool off = offload_optimizer == ZOFFLOAD_CPU;
    out->available = true;
    if (stage <= 2) {
        out->function = "estimate_zero2_model_states_mem_needs";
        if (off) {
            out->gpu_bytes = (uint64_t)(2 * P);
            double f = 4 * G > 16 ? 4 * G : 16;
            out->cpu_bytes = floor_u64(p * f * abf);
        } else {
            out->gpu_bytes = (uint64_t)(2 * P) + floor_u64(18.0 * p / G);
            out->cpu_bytes = floor_u64(p * 4 * gpn * abf);
        }
        out->cpu_bytes_no_zero_init = out->cpu_bytes;
        return;
    }
    out->function = "estimate_zero3_model_states_mem_needs";
    double gf = 1.0 / (double)nodes;
    uint64_t llm = (uint64_t)(4 * L);
    if (off && offload_param) {
        out->gpu_bytes = llm;
        out->cpu_bytes = floor_u64(p * 18 * gf * abf);
        double f = 4 * gpn > 18 * gf ? 4 * gpn : 18 * gf;
        out->cpu_bytes_no_zero_init = floor_u64(p * f * abf);
    } else if (off) {
        out->gpu_bytes = llm + floor_u64(2.0 * p / G);
        out->cpu_bytes = floor_u64(p * 16 * gf * abf);
        double f = 4 * gpn > 16 * gf ? 4 * gpn : 16 * gf;
        out->cpu_bytes_no_zero_init = floor_u64(p * f * abf);
    } else {
        out->gpu_bytes = llm + floor_u64(18.0 * p / G);
        out->cpu_bytes = floor_u64(l * 4 * gpn * abf);
        out->cpu_bytes_no_zero_init = floor_u64(p * 4 * gpn * abf);
    }
}

/* ---------------------------------------------------------------- pre-flight */

static bool env_bytes(zenv_id id, uint64_t *out) {
    const char *v = zenv_get(id);
    if (!v || !*v) return false;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) return false;
    *out = (uint64_t)x;
    return true;
}

/* A number from a cgroup file; false for "max" (no limit) or an unreadable file. */
static bool read_u64_file(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long v;
    bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok) *out = (uint64_t)v;
    return ok;
}

/* The tightest memory-cgroup limit over this process's cgroup and its ancestors, v2 or v1. */
static void read_cgroup(zest_available *out) {
    if (env_bytes(ZENV_FAKE_CGROUP_FREE, &out->cgroup_free)) {
        out->have_cgroup = true;
        out->cgroup_limit = out->cgroup_free;
        snprintf(out->cgroup_file, sizeof out->cgroup_file, "ZINC_FAKE_CGROUP_FREE");
        return;
    }
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return;
    char line[1024], rel[768] = "";
    const char *root = NULL, *limit_name = NULL, *usage_name = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1;
        if (!strcmp(line, "0") && !*ctrl && !root) { /* v2 unified */
            root = "/sys/fs/cgroup", limit_name = "memory.max", usage_name = "memory.current";
            snprintf(rel, sizeof rel, "%s", c2 + 1);
        } else if (strstr(ctrl, "memory")) { /* v1 memory controller, in a list like "memory" or "cpu,memory" */
            root = "/sys/fs/cgroup/memory", limit_name = "memory.limit_in_bytes", usage_name = "memory.usage_in_bytes";
            snprintf(rel, sizeof rel, "%s", c2 + 1);
            break;
        }
    }
    fclose(f);
    if (!root) return;
    /* From the process's cgroup up to the root; inside a container the path may not exist (its own
     * cgroup is mounted at the root), so missing levels are skipped. */
    for (;;) {
        char lim_path[1100], use_path[1100];
        snprintf(lim_path, sizeof lim_path, "%s%s/%s", root, rel, limit_name);
        snprintf(use_path, sizeof use_path, "%s%s/%s", root, rel, usage_name);
        uint64_t lim = 0, use = 0;
        /* v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages) */
        if (read_u64_file(lim_path, &lim) && lim < ((uint64_t)1 << 60) && read_u64_file(use_path, &use)) {
            uint64_t fr = lim > use ? lim - use : 0;
            if (!out->have_cgroup || fr < out->cgroup_free) {
                out->have_cgroup = true;
                out->cgroup_free = fr;
                out->cgroup_limit = lim;
                size_t n = strlen(lim_path);
                if (n >= sizeof out->cgroup_file) n = sizeof out->cgroup_file - 1;
                memcpy(out->cgroup_file, lim_path, n);
                out->cgroup_file[n] = 0;
            }
        }
        char *slash = strrchr(rel, '/');
        if (!slash || !rel[0]) break;
        if (slash == rel && !rel[1]) break; /* "/" done */
        if (slash == rel)
            rel[1] = 0;
        else
            *slash = 0;
        if (!strcmp(rel, "/")) rel[0] = 0; /* the root level: root + "" */
    }
}

zinc_status zest_headroom_read(unsigned *pct) {
    const char *v = zenv_get(ZENV_MEM_HEADROOM);
    *pct = ZEST_HEADROOM_DEFAULT;
    if (!v || !*v) return ZINC_OK;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end == '%') end++;
    if (*end || x < 0 || x > 90)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "ZINC_MEM_HEADROOM=\"%s\": expected a percentage from 0 to 90 (default %d): the share of "
                    "each memory limit the pre-flight keeps free",
                    v, ZEST_HEADROOM_DEFAULT);
    *pct = (unsigned)x;
    return ZINC_OK;
}

void zest_available_read(const char *nvme_path, zest_available *out) {
    memset(out, 0, sizeof *out);
    if (env_bytes(ZENV_FAKE_MEM_AVAILABLE, &out->mem_available)) {
        out->have_mem = true;
    } else {
        FILE *f = fopen("/proc/meminfo", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                out->mem_available = (uint64_t)kb * 1024;
                out->have_mem = true;
                break;
            }
        }
        if (f) fclose(f);
    }
    if (env_bytes(ZENV_FAKE_MEMLOCK, &out->memlock)) {
        out->have_memlock = true;
    } else {
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            out->memlock = (uint64_t)rl.rlim_cur;
            out->have_memlock = true;
        }
    }
    read_cgroup(out);
    if (env_bytes(ZENV_FAKE_AS_FREE, &out->as_free)) {
        out->have_as = true;
    } else {
        struct rlimit rl;
        uint64_t rss = 0, hwm = 0, vsize = 0;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            FILE *f = fopen("/proc/self/status", "r");
            char line[256];
            unsigned long long kb;
            while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "VmSize: %llu kB", &kb) == 1) vsize = (uint64_t)kb * 1024;
            if (f) fclose(f);
            (void)rss, (void)hwm;
            out->as_limit = (uint64_t)rl.rlim_cur;
            out->as_free = out->as_limit > vsize ? out->as_limit - vsize : 0;
            out->have_as = true;
        }
    }
    out->headroom_pct = ZEST_HEADROOM_DEFAULT;
    if (env_bytes(ZENV_FAKE_NVME_FREE, &out->nvme_free)) {
        out->have_nvme = true;
    } else if (nvme_path && *nvme_path) {
        struct statvfs sv;
        if (statvfs(nvme_path, &sv) == 0) {
            out->nvme_free = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
            out->have_nvme = true;
        }
    }
}

/* "params 1.2 GiB, grads ..." for the non-zero categories of the given kinds. */
static void breakdown(const zest_estimate *est, const zinc_mem_kind *kinds, int nk, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
        uint64_t v = 0;
        for (int k = 0; k < nk; k++) v += est->bytes[kinds[k]][c];
        if (!v || len + 64 >= cap) continue;
        char s[32];
        zbytes_format(s, sizeof s, v);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s %s", len ? ", " : "",
                                zinc_mem_category_name((zinc_mem_category)c), s);
    }
}

/* What would shrink the footprint in memory kind k (host or device), biggest first where it matters. */
static void fit_advice(const zest_estimate *est, zinc_mem_kind k, char *buf, size_t cap) {
    size_t len = 0;
    const uint64_t *h = est->bytes[k];
    uint64_t state = h[ZINC_MEM_MASTER] + h[ZINC_MEM_EXP_AVG] + h[ZINC_MEM_EXP_AVG_SQ];
    char s[32];
#define ADVICE(...)                                                                                                    \
    do {                                                                                                               \
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__);                                     \
    } while (0)
    /* A higher stage only where it costs less at this rank count (the pre-flight computes it; an estimate
     * without that check offers one only with ranks to shard across). */
    if (est->stage < 3 && est->world > 1 && est->cheaper_stage > est->stage) {
        zbytes_format(s, sizeof s, est->cheaper_bytes);
        ADVICE("; raise zero_optimization.stage to %d (now %d): %s per rank at this rank count (stage 1 shards the "
               "optimizer state across ranks, 2 also the gradients, 3 also the parameters)",
               est->cheaper_stage, est->stage, s);
    }
    /* Offload needs stage 1 or more (the config refuses stage 0 with offload). NVMe offload only saves
     * host memory when its swap buffers (buffer_count x 3 chunks of sub_group_size) are smaller than the
     * state: name a sub_group_size that leaves a quarter of it. */
    const char *need_stage = est->stage == 0 ? " with zero_optimization.stage 1 or more" : "";
    int64_t sg = est->own / 4 / (est->nvme_buffers > 0 ? est->nvme_buffers : 1);
    sg = sg < 1 ? 1 : sg;
    bool nvme_saves = (int64_t)est->nvme_buffers * est->nvme_chunk < est->own;
    char sgtext[160] = "";
    if (!nvme_saves)
        snprintf(sgtext, sizeof sgtext,
                 " and zero_optimization.sub_group_size %" PRId64 " (now %" PRId64
                 ": its swap buffers would hold the whole state)",
                 sg, est->nvme_chunk);
    if (state && k == ZINC_MEMKIND_DEVICE) {
        zbytes_format(s, sizeof s, state);
        ADVICE("; zero_optimization.offload_optimizer.device \"cpu\" (or \"nvme\")%s moves the optimizer state (%s) "
               "off the GPU",
               need_stage, s);
    } else if (state && est->offload != ZOFFLOAD_NVME) {
        zbytes_format(s, sizeof s, state);
        ADVICE("; zero_optimization.offload_optimizer.device \"nvme\"%s%s moves the optimizer state (%s) to files",
               need_stage, sgtext, s);
    } else if (est->offload == ZOFFLOAD_NVME && h[ZINC_MEM_STAGING] && est->nvme_buffers > 1 && sg < est->nvme_chunk) {
        zbytes_format(s, sizeof s, h[ZINC_MEM_STAGING]);
        ADVICE("; a smaller zero_optimization.sub_group_size (%" PRId64 ", now %" PRId64
               ") shrinks the NVMe swap buffers (%s)",
               sg, est->nvme_chunk, s);
    } else if (est->offload == ZOFFLOAD_NVME && h[ZINC_MEM_STAGING] && sg < est->nvme_chunk) {
        zbytes_format(s, sizeof s, h[ZINC_MEM_STAGING]);
        ADVICE("; zero_optimization.sub_group_size %" PRId64 " (now %" PRId64 ") shrinks the NVMe swap buffers (%s)",
               sg, est->nvme_chunk, s);
    }
    if (h[ZINC_MEM_BUCKETS] > state / 4 && h[ZINC_MEM_BUCKETS]) {
        zbytes_format(s, sizeof s, h[ZINC_MEM_BUCKETS]);
        ADVICE("; a smaller zero_optimization.reduce_bucket_size shrinks the buckets (%s, %d x %" PRId64 " elements)",
               s, est->nbuckets, est->bucket_cap);
    }
    if (h[ZINC_MEM_GATHER]) {
        zbytes_format(s, sizeof s, h[ZINC_MEM_GATHER]);
        ADVICE("; smaller stage3_max_reuse_distance / stage3_max_live_parameters / stage3_prefetch_bucket_size "
               "shrink the gathered parameters (%s)",
               s);
    }
    if (h[ZINC_MEM_ACTIVATIONS]) {
        char s2[32];
        zbytes_format(s, sizeof s, h[ZINC_MEM_ACTIVATIONS]);
        zbytes_format(s2, sizeof s2, h[ZINC_MEM_SCRATCH]);
        ADVICE("; the model's activations (%s) and scratch (%s) grow with train_micro_batch_size_per_gpu: halve it "
               "(and double gradient_accumulation_steps to keep train_batch_size), or turn on activation "
               "checkpointing (\"activation_checkpointing\": {} in the config, where the model supports it; "
               "zinc train --model gpt2 does), which keeps one input per block",
               s, s2);
    }
    if (est->stage > 0 || k == ZINC_MEMKIND_DEVICE)
        ADVICE(k == ZINC_MEMKIND_DEVICE ? "; more GPUs (one rank each) divide the sharded states further"
                                        : "; more ranks (nodes) divide the sharded states further");
#undef ADVICE
    if (buf[0] == ';') memmove(buf, buf + 2, strlen(buf + 2) + 1); /* drop the leading "; " */
}

uint64_t zest_disk_io(const zest_estimate *e, int64_t gas) {
    uint64_t par = e->bytes[ZINC_MEMKIND_NVME][ZINC_MEM_PARAMS] + e->bytes[ZINC_MEMKIND_NVME][ZINC_MEM_GRADS],
             rest = e->total[ZINC_MEMKIND_NVME] - par;
    return 2 * rest + (uint64_t)(2 * (gas > 0 ? gas : 1) + 1) * par;
}

/* The first of the changes that needs no more ranks and fits the limit by the estimate, in order of the
 * disk traffic they add (zest_disk_io, the rule `zinc mem plan` names its cheapest choice by), the least
 * disruptive first among those adding none: a micro batch half as large (the model's declared memory taken
 * to scale with it), the cheaper higher stage the pre-flight found, the optimizer state in NVMe files, then
 * ZeRO-Infinity (stage 3, the parameters and the optimizer state on NVMe). Put in front of the advice. */
static void cheapest_fit(const zest_estimate *est, uint64_t need, uint64_t hr, uint64_t mult, uint64_t free_bytes,
                         uint64_t extra, char *advice, size_t cap) {
    const uint64_t *h = est->bytes[ZINC_MEMKIND_HOST];
    uint64_t model = h[ZINC_MEM_ACTIVATIONS] + h[ZINC_MEM_SCRATCH];
    uint64_t state = h[ZINC_MEM_MASTER] + h[ZINC_MEM_EXP_AVG] + h[ZINC_MEM_EXP_AVG_SQ];
    char io[32], inf[480], res[300];
    zbytes_format(io, sizeof io, est->infinity_io);
    snprintf(inf, sizeof inf,
             "ZeRO-Infinity: zero_optimization.stage 3 with offload_optimizer and offload_param {\"device\": "
             "\"nvme\", \"nvme_path\": a directory on a fast local disk}, offload_param.buffer_size %" PRId64
             ", offload_param.max_in_cpu 0 and sub_group_size %" PRId64 " (about %s of disk traffic per optimizer "
             "step; `zinc mem plan --host-mem SIZE` compares every choice)",
             est->infinity_buffer_size, est->infinity_sub_group_size, io);
    /* The parameters already on NVMe with part of the shard kept in memory: the largest max_in_cpu that
     * fits (zest_resident_fit) in the bytes the limit leaves (want(b) = b (1 + hr/100) mult + extra). */
    uint64_t esz = est->param_resident ? est->param_resident_bytes / (uint64_t)est->param_resident : 0;
    uint64_t floor = est->resident_floor_bytes;
    int64_t keep = -1;
    if (esz && floor && free_bytes > extra) {
        uint64_t room = (uint64_t)((double)(free_bytes - extra) / (double)mult / (1.0 + (double)hr / 100.0));
        keep = zest_resident_fit((double)floor, (double)esz, est->param_resident, (double)room);
        for (int t = 0; t < 4 && keep >= 0; t++) { /* the integer headroom rounds: settle it */
            uint64_t b = floor + (uint64_t)keep * esz, want = (b + b / 100 * hr) * mult + extra;
            if (want <= free_bytes) break;
            keep -= (int64_t)((want - free_bytes + esz - 1) / esz) + 1;
        }
        if (keep < 0) keep = -1;
    }
    snprintf(res, sizeof res,
             "zero_optimization.offload_param.max_in_cpu %" PRId64 " instead of %" PRId64
             " (parameter elements per rank kept in memory; the others are swapped through nvme_path at every use)",
             keep, est->param_resident);
    struct {
        bool ok;
        uint64_t bytes;
        const char *what;
    } alt[5] = {
        {model > 0, need - model / 2, "train_micro_batch_size_per_gpu halved (gradient_accumulation_steps doubled)"},
        {est->cheaper_stage > est->stage, est->cheaper_bytes, "the higher ZeRO stage below"},
        {keep >= 0, floor + (uint64_t)(keep > 0 ? keep : 0) * esz, res},
        {state > 0 && est->stage > 0 && est->offload != ZOFFLOAD_NVME, need - state, "NVMe offload as below"},
        {est->infinity_fits_more, est->infinity_bytes, inf},
    };
    for (int i = 0; i < 5; i++) {
        uint64_t want = (alt[i].bytes + alt[i].bytes / 100 * hr) * mult + extra;
        if (!alt[i].ok || want > free_bytes) continue;
        char s[32], *rest = strdup(advice);
        if (!rest) return;
        zbytes_format(s, sizeof s, alt[i].bytes);
        snprintf(advice, cap, "the cheapest change that fits by the estimate: %s, about %s per rank; also %s",
                 alt[i].what, s, rest);
        free(rest);
        return;
    }
}

zinc_status zest_preflight_check(const zest_estimate *est, int local_ranks, const zest_available *a,
                                 const char *nvme_path) {
    char need[32], have[32], node[32], parts[512], advice[1024];
    uint64_t L = local_ranks > 0 ? (uint64_t)local_ranks : 1;
    /* The device's own scratch is allocated when the engine is created: already out of device_free. */
    uint64_t dev = est->total[ZINC_MEMKIND_DEVICE];
    if (est->device == ZINC_DEVICE_CUDA) dev -= dev < zdev_cuda_fixed_bytes() ? dev : zdev_cuda_fixed_bytes();
    uint64_t R = a->ranks_per_device > 0 ? (uint64_t)a->ranks_per_device : 1;
    if (a->have_device && dev * R > a->device_free) {
        static const zinc_mem_kind dk[] = {ZINC_MEMKIND_DEVICE};
        zbytes_format(need, sizeof need, dev);
        zbytes_format(node, sizeof node, dev * R);
        zbytes_format(have, sizeof have, a->device_free);
        breakdown(est, dk, 1, parts, sizeof parts);
        fit_advice(est, ZINC_MEMKIND_DEVICE, advice, sizeof advice);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough GPU memory. Each rank needs %s of GPU memory (%" PRIu64
                    " bytes: %s); %" PRIu64 " rank%s on this GPU need%s %s (%" PRIu64
                    " bytes), but the GPU has %s (%" PRIu64 " bytes) free. To fit: %s. (ZeRO stage %d, %d rank%s; "
                    "`zinc mem estimate --device cuda` shows the breakdown; ZINC_PREFLIGHT=0 skips this check)",
                    need, dev, parts, R, R == 1 ? "" : "s", R == 1 ? "s" : "", node, dev * R, have, a->device_free,
                    advice, est->stage, est->world, est->world == 1 ? "" : "s");
    }
    /* Host memory: the process's predicted growth (the rows plus the build's scratch or MPI's
     * temporaries) with the headroom, against every limit that applies: MemAvailable and the memory
     * cgroup for all ranks of this node (mpirun starts them in its own cgroup), RLIMIT_AS per process. */
    uint64_t host = zest_rss(est, false);
    uint64_t hr = a->headroom_pct <= 90 ? a->headroom_pct : 90;
    uint64_t host_hr = host + host / 100 * hr;
    struct {
        bool have;
        uint64_t free, mult;
        char what[512];
    } lim[3] = {{a->have_mem, a->mem_available, L, "MemAvailable (/proc/meminfo)"},
                {a->have_cgroup, a->cgroup_free, L, ""},
                {a->have_as, a->as_free, 1, ""}};
    char cl[32], al[32];
    zbytes_format(cl, sizeof cl, a->cgroup_limit);
    zbytes_format(al, sizeof al, a->as_limit);
    snprintf(lim[1].what, sizeof lim[1].what, "what the memory cgroup leaves free (%s of limit %s, less usage)",
             a->cgroup_file, cl);
    snprintf(lim[2].what, sizeof lim[2].what, "the address space RLIMIT_AS (%s) leaves this process", al);
    for (int i = 0; i < 3; i++) {
        /* the address space also holds what the threads reserve beyond their resident bytes */
        uint64_t want = host_hr * lim[i].mult + (i == 2 ? est->as_extra : 0);
        if (!lim[i].have || want <= lim[i].free) continue;
        static const zinc_mem_kind hk[] = {ZINC_MEMKIND_HOST, ZINC_MEMKIND_PINNED};
        char extra[160] = "";
        zbytes_format(need, sizeof need, host);
        zbytes_format(node, sizeof node, want);
        zbytes_format(have, sizeof have, lim[i].free);
        breakdown(est, hk, 2, parts, sizeof parts);
        fit_advice(est, ZINC_MEMKIND_HOST, advice, sizeof advice);
        cheapest_fit(est, host, hr, lim[i].mult, lim[i].free, i == 2 ? est->as_extra : 0, advice, sizeof advice);
        if (est->init_scratch || est->comm_temp) {
            char s1[32], s2[32];
            zbytes_format(s1, sizeof s1, est->init_scratch);
            zbytes_format(s2, sizeof s2, est->comm_temp);
            snprintf(extra, sizeof extra, ", init scratch %s at build, MPI temporaries %s", s1, s2);
        }
        if (i == 2 && est->as_extra) {
            char s3[32];
            size_t l = strlen(extra);
            zbytes_format(s3, sizeof s3, est->as_extra);
            snprintf(extra + l, sizeof extra - l, "; and %s of address space the threads reserve", s3);
        }
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough host memory. Each rank needs %s of host memory at its peak (%" PRIu64
                    " bytes: %s%s); with %" PRIu64 "%% headroom (ZINC_MEM_HEADROOM) %" PRIu64
                    " process%s need%s %s (%" PRIu64 " bytes), but %s is %s (%" PRIu64
                    " bytes). To fit: %s. (ZeRO stage %d, %d rank%s; `zinc mem estimate` shows the breakdown; "
                    "ZINC_PREFLIGHT=0 skips this check)",
                    need, host, parts, extra, hr, lim[i].mult, lim[i].mult == 1 ? "" : "es",
                    lim[i].mult == 1 ? "s" : "", node, want, lim[i].what, have, lim[i].free, advice, est->stage,
                    est->world, est->world == 1 ? "" : "s");
    }
    /* The NVMe store's swap buffers fall back to ordinary host memory when they cannot be pinned. */
    uint64_t pinned = est->total[ZINC_MEMKIND_PINNED] - est->bytes[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING];
    if (pinned && a->have_memlock && pinned > a->memlock) {
        static const zinc_mem_kind pk[] = {ZINC_MEMKIND_PINNED};
        zbytes_format(need, sizeof need, pinned);
        zbytes_format(have, sizeof have, a->memlock);
        breakdown(est, pk, 1, parts, sizeof parts);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: each rank needs %s (%" PRIu64 " bytes) of pinned host memory (%s), but the "
                    "pinned-memory limit RLIMIT_MEMLOCK is %s (%" PRIu64
                    " bytes). Raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf or the "
                    "container's --ulimit memlock=-1), or set zero_optimization.offload_optimizer.pin_memory "
                    "false (ZINC_PREFLIGHT=0 skips this check)",
                    need, pinned, parts, have, a->memlock);
    }
    uint64_t nvme = est->total[ZINC_MEMKIND_NVME];
    if (nvme && a->have_nvme && nvme * L > a->nvme_free) {
        static const zinc_mem_kind nk[] = {ZINC_MEMKIND_NVME};
        zbytes_format(need, sizeof need, nvme);
        zbytes_format(node, sizeof node, nvme * L);
        zbytes_format(have, sizeof have, a->nvme_free);
        breakdown(est, nk, 1, parts, sizeof parts);
        return ZERR(ZINC_ERR_NOMEM,
                    "pre-flight: not enough free space under nvme_path \"%s\": each rank writes %s (%" PRIu64
                    " bytes: %s); %" PRIu64 " rank%s on this node write%s %s (%" PRIu64 " bytes), but %s (%" PRIu64
                    " bytes) are free. Free space there, point "
                    "zero_optimization.offload_optimizer.nvme_path (or offload_param.nvme_path) at a bigger file "
                    "system, use more nodes, or "
                    "offload to \"cpu\" (ZINC_PREFLIGHT=0 skips this check)",
                    nvme_path ? nvme_path : "", need, nvme, parts, L, L == 1 ? "" : "s", L == 1 ? "s" : "", node,
                    nvme * L, have, a->nvme_free);
    }
    return ZINC_OK;
}

void zest_available_device(zest_available *a, uint64_t used, uint64_t total, int ranks_per_device) {
    a->device_free = total > used ? total - used : 0;
    a->have_device = env_bytes(ZENV_FAKE_DEVICE_FREE, &a->device_free) || total > 0;
    a->ranks_per_device = ranks_per_device > 0 ? ranks_per_device : 1;
}
