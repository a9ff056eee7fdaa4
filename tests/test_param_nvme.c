/* Parameter offload to NVMe (zero_optimization.offload_param.device "nvme", stage 3): training with the
 * parameter shard, and the fp32 gradient shard between the reduce-scatter and the optimizer, in files under
 * nvme_path (params.swp, grads.swp; no gradient shard left in memory) gives BITWISE the same fp32 master weights as the same run with
 * the shard in memory, on this run's rank count (1 or 2 under mpirun): fp32, bf16 and fp16 with gradient
 * accumulation (2 and 4: pieces added into the gradient file), buckets smaller than a module (chunked sends),
 * with clipping (the norm streamed from the gradient file), with the optimizer state on NVMe too, with a swap buffer smaller than a
 * module (buffer_size 300: many IO batches, read-modify-write of partial blocks), with fp16 overflow skips,
 * and across a checkpoint save and resume (the files on NVMe are not the checkpoint). Then injected IO
 * faults (EIO on write, ENOSPC, a damaged block on disk; EIO and ENOSPC on the gradient file) end the run
 * with a message naming the file, and short reads (of either file) are continued without changing a bit.
 *
 * Why bitwise: the store only moves the compute-dtype bytes the in-memory shard would hold, through
 * checksummed blocks; the gather and the step see the same values. Writes under $ZINC_BINARY_DIR; skips
 * (77) where that file system refuses O_DIRECT. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"
#include "offload/aio.h"
#include "base/core/safe_file.h"
#include "zt.h"

#define STEPS 4

static char g_dir[4096];

static void quiet_log(void *u, zinc_log_level l, int rank, const char *msg) {
    (void)u;
    if ((l >= ZINC_LOG_WARN && rank == 0) || getenv("ZT_VERBOSE")) fprintf(stderr, "[zinc r%d] %s\n", rank, msg);
}

typedef struct run {
    zinc_dtype t;
    const char *zero_extra, *extra, *fp16_extra;
    const char *optimizer; /* NULL: eu_config's AdamW */
    const char *save_at;   /* non-NULL: save after STEPS/2 steps there, then resume into a fresh engine */
    int64_t nvme_param_bytes, nvme_grad_bytes, host_grad_bytes;
    int gas;             /* 0: eu_config's 2 */
    int bucket;          /* 0: eu_config's */
    int hidden;          /* 0: 96 */
    double norms[STEPS]; /* each step's gradient norm as zinc_step reports it (the step statistics) */
    int rank;
    zinc_status failed; /* the first failing call's status (ZINC_OK: none) */
    char msg[2048];
} run;

static zinc_status make(run *r, zinc_engine **e, mlp_model **m) {
    char cfg[8192];
    eu_run er = {.stage = 3,
                 .dtype = r->t,
                 .overlap_comm = 1,
                 .zero_extra = r->zero_extra,
                 .extra = r->extra,
                 .fp16_extra = r->fp16_extra,
                 .optimizer = r->optimizer,
                 .gas = r->gas,
                 .bucket = r->bucket};
    if (r->fp16_extra && !strcmp(r->fp16_extra, "overflow")) er.fp16_extra = NULL;
    eu_config(&er, cfg, sizeof cfg);
    char *sp = strstr(cfg, "\"initial_scale_power\": 8");
    if (r->fp16_extra && !strcmp(r->fp16_extra, "overflow") && sp) /* 2^20: the first steps overflow */
        memcpy(sp, "\"initial_scale_power\":20", 24);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = quiet_log;
    o.cpu_threads = 1;
    zinc_status st = zinc_create(&o, e);
    if (st != ZINC_OK) return st;
    mlp_config mc = eu_model();
    mc.hidden = r->hidden ? r->hidden : 96;
    return mlp_create(*e, &mc, m);
}

static float *train(run *r, size_t *n) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    float *w = NULL;
    zinc_status st = make(r, &e, &m);
    for (int s = 0; s < STEPS && st == ZINC_OK; s++) {
        zinc_step_info info;
        memset(&info, 0, sizeof info);
        st = mlp_train_step(m, s, &info, NULL);
        r->norms[s] = info.grad_norm;
        if (st == ZINC_OK && r->save_at && s == STEPS / 2 - 1) {
            st = zinc_save_checkpoint(e, r->save_at, "mid");
            mlp_destroy(m);
            zinc_destroy(e);
            m = NULL;
            e = NULL;
            char p[4200];
            snprintf(p, sizeof p, "%s/mid", r->save_at);
            if (st == ZINC_OK) st = make(r, &e, &m);
            if (st == ZINC_OK) st = zinc_load_checkpoint(e, p);
        }
    }
    if (st == ZINC_OK) {
        zinc_memory_report rep;
        zinc_memory_get(e, &rep);
        r->nvme_param_bytes = (int64_t)rep.current[ZINC_MEMKIND_NVME][ZINC_MEM_PARAMS];
        r->nvme_grad_bytes = (int64_t)rep.current[ZINC_MEMKIND_NVME][ZINC_MEM_GRADS];
        r->host_grad_bytes = (int64_t)rep.current[ZINC_MEMKIND_HOST][ZINC_MEM_GRADS];
        r->rank = zinc_rank(e);
        *n = (size_t)zinc_numel_total(e);
        w = malloc(*n * sizeof *w);
        st = zinc_gather_master(e, w, *n);
        if (st != ZINC_OK) {
            free(w);
            w = NULL;
        }
    }
    r->failed = st;
    if (st != ZINC_OK) snprintf(r->msg, sizeof r->msg, "%s", zinc_last_error());
    mlp_destroy(m);
    zinc_destroy(e);
    return w;
}

static const char *g_optimizer;
static int g_gas, g_bucket, g_hidden, g_buffer_size;

static void compare(const char *what, zinc_dtype t, const char *zero, const char *extra, const char *fp16,
                    int with_ckpt) {
    char zoff[8192], ck0[4200], ck1[4200];
    snprintf(zoff, sizeof zoff,
             "%s%s\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": %d, "
             "\"max_in_cpu\": 0}",
             zero ? zero : "", zero ? ", " : "", g_dir, g_buffer_size ? g_buffer_size : 300);
    snprintf(ck0, sizeof ck0, "%s/ckpt_mem", g_dir);
    snprintf(ck1, sizeof ck1, "%s/ckpt_nvme", g_dir);
    run a = {.t = t,
             .zero_extra = zero,
             .extra = extra,
             .fp16_extra = fp16,
             .optimizer = g_optimizer,
             .gas = g_gas,
             .bucket = g_bucket,
             .hidden = g_hidden,
             .save_at = with_ckpt ? ck0 : NULL};
    run b = {.t = t,
             .zero_extra = zoff,
             .extra = extra,
             .fp16_extra = fp16,
             .optimizer = g_optimizer,
             .gas = g_gas,
             .bucket = g_bucket,
             .hidden = g_hidden,
             .save_at = with_ckpt ? ck1 : NULL};
    size_t na = 0, nb = 0;
    float *wa = train(&a, &na), *wb = train(&b, &nb);
    ZT_CHECK(a.failed == ZINC_OK, "%s %s without offload: %s", what, eu_dtype_name(t), a.msg);
    ZT_CHECK(b.failed == ZINC_OK, "%s %s with offload_param nvme: %s", what, eu_dtype_name(t), b.msg);
    if (wa && wb) {
        size_t d = 0;
        while (d < na && !memcmp(&wa[d], &wb[d], sizeof *wa)) d++;
        ZT_CHECK(na == nb && d == na, "%s %s: parameter NVMe offload differs at element %zu (%.9g vs %.9g)", what,
                 eu_dtype_name(t), d, d < na ? wb[d] : 0.0, d < na ? wa[d] : 0.0);
        for (int s = 0; s < STEPS; s++) /* bitwise, NaN (a skipped step) included */
            ZT_CHECK(!memcmp(&a.norms[s], &b.norms[s], sizeof a.norms[s]),
                     "%s %s: step %d's gradient norm %.17g with NVMe offload, %.17g in memory", what, eu_dtype_name(t),
                     s, b.norms[s], a.norms[s]);
        ZT_CHECK(a.nvme_param_bytes == 0 && b.nvme_param_bytes > 0, "NVMe parameter bytes: %lld and %lld",
                 (long long)a.nvme_param_bytes, (long long)b.nvme_param_bytes);
        ZT_CHECK(a.nvme_grad_bytes == 0 && a.host_grad_bytes > 0 && b.nvme_grad_bytes > 0 && b.host_grad_bytes == 0,
                 "%s: gradient shard bytes in memory / on NVMe: %lld / %lld without offload, %lld / %lld with", what,
                 (long long)a.host_grad_bytes, (long long)a.nvme_grad_bytes, (long long)b.host_grad_bytes,
                 (long long)b.nvme_grad_bytes);
        if (b.rank == 0)
            printf("%-28s %-4s: offload_param nvme %s in memory (%zu weights, %lld + %lld file bytes on this rank)\n",
                   what, eu_dtype_name(t), d == na ? "==" : "!=", na, (long long)b.nvme_param_bytes,
                   (long long)b.nvme_grad_bytes);
    }
    free(wa);
    free(wb);
    if (with_ckpt) {
        zfile_rmtree(ck0);
        zfile_rmtree(ck1);
    }
}

/* A fault during the run ends it with a message containing `want`. */
static void fault_run(const char *spec, const char *want, int damage) {
    char zoff[4600];
    snprintf(zoff, sizeof zoff,
             "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": 300}", g_dir);
    run r = {.t = ZINC_FP32, .zero_extra = zoff};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = make(&r, &e, &m);
    ZT_OK(st);
    if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL);
    ZT_OK(st);
    if (damage && st == ZINC_OK) { /* flip a byte of this rank's parameter file behind the store's back */
        char path[8192];
        path[0] = 0;
        DIR *d = opendir(g_dir);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (!strncmp(de->d_name, "zinc-", 5)) { /* the parameter store's run directory (not the gradients') */
                char p[8192];
                snprintf(p, sizeof p, "%s/%s/rank%d/params.swp", g_dir, de->d_name, zinc_rank(e));
                if (access(p, F_OK) == 0) snprintf(path, sizeof path, "%s", p);
            }
        if (d) closedir(d);
        int fd = open(path, O_RDWR);
        ZT_CHECK(fd >= 0, "open %s", path);
        unsigned char c = 0;
        if (fd >= 0 && pread(fd, &c, 1, 100) == 1) {
            c ^= 0x5a;
            ZT_CHECK(pwrite(fd, &c, 1, 100) == 1, "damage %s", path);
        }
        if (fd >= 0) close(fd);
    } else if (st == ZINC_OK) {
        zaio_fault f;
        ZT_OK(zaio_fault_parse(spec, &f));
        zaio_fault_set(&f);
    }
    if (st == ZINC_OK) {
        for (int s = 1; s < 3 && st == ZINC_OK; s++) st = mlp_train_step(m, s, NULL, NULL);
        const char *msg = zinc_last_error();
        ZT_CHECK(st != ZINC_OK, "%s: the run went on", damage ? "damaged block" : spec);
        ZT_CHECK(st == ZINC_OK || strstr(msg, want), "%s: message lacks \"%s\": %s", damage ? "damage" : spec, want,
                 msg);
        if (st != ZINC_OK && zinc_rank(e) == 0)
            printf("%-28s: ended with \"%.120s...\"\n", damage ? "damaged block" : spec, msg);
    }
    zaio_fault_set(NULL);
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "offload_param_nvme";
    snprintf(g_dir, sizeof g_dir, "%s/offload_param_nvme", zt_build_dir());
    mkdir(g_dir, 0700);
    if (!zt_direct_io_supported(g_dir)) {
        rmdir(g_dir);
        return zt_skip("the build directory's file system refuses O_DIRECT: parameter NVMe offload not checked here");
    }
    static const zinc_dtype dtypes[3] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};
    for (int d = 0; d < 3; d++) compare("gas 2", dtypes[d], "\"sub_group_size\": 1024", NULL, NULL, 0);
    g_gas = 4; /* every gradient piece after the first micro-step read back from the file and added into */
    compare("gas 4", ZINC_FP32, "\"sub_group_size\": 1024", "\"gradient_clipping\": 0.05", NULL, 0);
    g_bucket = 700; /* buckets smaller than modules: the landing buffer's chunked sends */
    compare("gas 4, small buckets", ZINC_BF16, NULL, NULL, NULL, 0);
    g_gas = g_bucket = 0;
    /* the norm streamed from the gradient file in pieces of several statistics blocks (8192 elements of a
     * shard of about 70K / ranks): a piece's sum added as one would round differently from the in-memory
     * block-by-block sum, and clipping makes the norm reach the weights */
    g_hidden = 256;
    g_buffer_size = 8192;
    compare("clipping, long norm pieces", ZINC_FP32, "\"sub_group_size\": 16384", "\"gradient_clipping\": 0.05", NULL,
            0);
    g_hidden = g_buffer_size = 0;
    compare("clipping 0.05", ZINC_BF16, "\"sub_group_size\": 2048", "\"gradient_clipping\": 0.05", NULL, 0);
    char zo[4600];
    snprintf(zo, sizeof zo, "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", g_dir);
    compare("optimizer state on nvme", ZINC_FP32, zo, NULL, NULL, 0);
    compare("fp16 overflow skips", ZINC_FP16, NULL, NULL, "overflow", 0);
    compare("checkpoint save/resume", ZINC_BF16, "\"sub_group_size\": 1024", NULL, NULL, 1);
    /* LAMB: per-tensor pieces of each scratch-sized piece of a chunk, the sums pass and the update */
    g_optimizer = "{\"type\": \"Lamb\", \"params\": {\"lr\": 0.003}}";
    compare("lamb", ZINC_BF16, NULL, NULL, NULL, 0);
    g_optimizer = NULL;
    {
        zaio_fault f;
        ZT_OK(zaio_fault_parse("read:short:path=params.swp", &f));
        zaio_fault_set(&f);
        compare("short reads", ZINC_FP32, NULL, NULL, NULL, 0);
        zaio_fault_set(NULL);
        ZT_OK(zaio_fault_parse("read:short:path=grads.swp", &f));
        zaio_fault_set(&f);
        compare("short gradient reads", ZINC_FP32, NULL, "\"gradient_clipping\": 0.05", NULL, 0);
        zaio_fault_set(NULL);
    }
    { /* the pre-flight counts the parameter file against the free space under offload_param.nvme_path */
        char zoff[4600];
        snprintf(zoff, sizeof zoff, "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", g_dir);
        run r = {.t = ZINC_FP32, .zero_extra = zoff};
        zinc_engine *e = NULL;
        mlp_model *m = NULL;
        setenv("ZINC_FAKE_NVME_FREE", "4096", 1);
        zinc_status st = make(&r, &e, &m);
        unsetenv("ZINC_FAKE_NVME_FREE");
        const char *msg = zinc_last_error();
        ZT_CHECK(st == ZINC_ERR_NOMEM && strstr(msg, "free space under nvme_path") && strstr(msg, g_dir),
                 "pre-flight with 4 KiB free: status %d: %s", (int)st, msg);
        mlp_destroy(m);
        zinc_destroy(e);
    }
    fault_run("write:EIO:path=params.swp", "params.swp", 0);
    fault_run("write:ENOSPC:path=params.swp", "params.swp", 0);
    fault_run("read:EIO:path=params.swp", "params.swp", 0);
    fault_run(NULL, "checksum", 1);
    /* the gradient file: a failed write while a piece lands in backward (kept, agreed at the step), a
     * failed read (the pieces' read-modify-writes, the statistics, the update) */
    fault_run("write:EIO:path=grads.swp", "grads.swp", 0);
    fault_run("write:ENOSPC:path=grads.swp", "grads.swp", 0);
    fault_run("read:EIO:path=grads.swp", "grads.swp", 0);
    rmdir(g_dir);
    return zt_finish();
}
