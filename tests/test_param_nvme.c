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
#include "offload/param_nvme.h"
#include "base/core/safe_file.h"
#include "runtime/engine/engine_internal.h"
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
    int64_t nvme_param_bytes, nvme_grad_bytes, host_grad_bytes, host_param_bytes;
    int64_t shard;       /* elements of the rank's parameter shard */
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
        r->host_param_bytes = (int64_t)rep.current[ZINC_MEMKIND_HOST][ZINC_MEM_PARAMS];
        r->shard = e->part.shard;
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
static int g_gas, g_bucket, g_hidden, g_buffer_size, g_max_in_cpu; /* max_in_cpu: elements kept in memory */

static void compare(const char *what, zinc_dtype t, const char *zero, const char *extra, const char *fp16,
                    int with_ckpt) {
    char zoff[8192], ck0[4200], ck1[4200];
    snprintf(zoff, sizeof zoff,
             "%s%s\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": %d, "
             "\"max_in_cpu\": %d}",
             zero ? zero : "", zero ? ", " : "", g_dir, g_buffer_size ? g_buffer_size : 300, g_max_in_cpu);
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
        /* max_in_cpu: that many elements in host memory (counted as parameters), only the rest in the file */
        int64_t esz = (int64_t)zinc_dtype_size(t), res = g_max_in_cpu < b.shard ? g_max_in_cpu : b.shard;
        ZT_CHECK(a.nvme_param_bytes == 0 && (b.nvme_param_bytes > 0) == (res < b.shard),
                 "NVMe parameter bytes: %lld and %lld", (long long)a.nvme_param_bytes, (long long)b.nvme_param_bytes);
        int64_t file = ((b.shard - res) * esz + 4095) / 4096 * 4096;
        ZT_CHECK(b.host_param_bytes - (a.host_param_bytes - a.shard * esz) == res * esz,
                 "%s: max_in_cpu %d: %lld parameter bytes in memory beside the %lld elements held gathered, want %lld",
                 what, g_max_in_cpu, (long long)(b.host_param_bytes - (a.host_param_bytes - a.shard * esz)),
                 (long long)(a.host_param_bytes / esz - a.shard), (long long)(res * esz));
        ZT_CHECK(b.nvme_param_bytes >= file && b.nvme_param_bytes < file + 65536,
                 "%s: max_in_cpu %d: a parameter file of %lld bytes for %lld elements on NVMe", what, g_max_in_cpu,
                 (long long)b.nvme_param_bytes, (long long)(b.shard - res));
        ZT_CHECK(a.nvme_grad_bytes == 0 && a.host_grad_bytes > 0 && b.nvme_grad_bytes > 0 && b.host_grad_bytes == 0,
                 "%s: gradient shard bytes in memory / on NVMe: %lld / %lld without offload, %lld / %lld with", what,
                 (long long)a.host_grad_bytes, (long long)a.nvme_grad_bytes, (long long)b.host_grad_bytes,
                 (long long)b.nvme_grad_bytes);
        if (b.rank == 0)
            printf("%-28s %-4s: offload_param nvme %s in memory (%zu weights, %lld + %lld file bytes on this rank, "
                   "%lld of %lld elements in memory)\n",
                   what, eu_dtype_name(t), d == na ? "==" : "!=", na, (long long)b.nvme_param_bytes,
                   (long long)b.nvme_grad_bytes, (long long)res, (long long)b.shard);
    }
    free(wa);
    free(wb);
    if (with_ckpt) {
        zfile_rmtree(ck0);
        zfile_rmtree(ck1);
    }
}

/* This rank's store file `name` (params.swp, grads.swp) under g_dir, or "". */
static void store_file(const zinc_engine *e, const char *name, char *path, size_t cap) {
    path[0] = 0;
    DIR *d = opendir(g_dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, "zinc-", 5)) { /* a store's run directory */
            char p[8192];
            snprintf(p, sizeof p, "%s/%s/rank%d/%s", g_dir, de->d_name, zinc_rank(e), name);
            if (access(p, F_OK) == 0) snprintf(path, cap, "%s", p);
        }
    if (d) closedir(d);
}

/* One injected fault: armed after step 0 (once a checkpoint is saved), it must end step 1 (the step that
 * issues or completes the faulted IO, none later: a written-behind write's error is the step's own) with
 * a message containing every `want`; then the checkpoint saved before it is loaded into a fresh engine and
 * gives bitwise the master weights it was saved with. */
typedef struct fault_case {
    const char *spec;    /* zaio_fault_parse's; NULL: damage a block of params.swp */
    const char *want[3]; /* substrings of the message (NULL: fewer) */
    int buffer_size;     /* 0: 300 (modules larger than every prefetch buffer: nothing is prefetched) */
    int last_write;      /* 1: ":skip=N:count=1" appended to spec, N + 1 the pieces it matches in step 1: the
                            fault hits the step's last write of that file (counted by a probe run) */
    const char *zero;    /* more zero_optimization members, or NULL */
} fault_case;

static void fault_run(const fault_case *fc) {
    char zoff[4600], ck[4200], spec[512];
    snprintf(zoff, sizeof zoff,
             "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": %d, \"max_in_cpu\": "
             "%d}%s%s",
             g_dir, fc->buffer_size ? fc->buffer_size : 300, g_max_in_cpu, fc->zero ? ", " : "",
             fc->zero ? fc->zero : "");
    snprintf(ck, sizeof ck, "%s/ckpt_fault", g_dir);
    snprintf(spec, sizeof spec, "%s", fc->spec ? fc->spec : "damaged block");
    run r = {.t = ZINC_FP32, .zero_extra = zoff, .hidden = fc->buffer_size ? 40 : 0};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    float *saved = NULL, *loaded = NULL;
    size_t n = 0;
    zinc_status st = ZINC_OK;
    if (fc->last_write) { /* the same run (deterministic) counting the matching pieces of step 1 */
        char probe[600];
        snprintf(probe, sizeof probe, "%s:skip=1000000000000", fc->spec);
        zaio_fault f;
        st = make(&r, &e, &m);
        if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL);
        ZT_OK(zaio_fault_parse(probe, &f));
        zaio_fault_set(&f);
        if (st == ZINC_OK) st = mlp_train_step(m, 1, NULL, NULL);
        int64_t seen = zaio_fault_seen();
        zaio_fault_set(NULL);
        ZT_OK(st);
        ZT_CHECK(seen > 0 && zaio_fault_hits() == 0, "%s: probe: %lld pieces", probe, (long long)seen);
        snprintf(spec, sizeof spec, "%s:skip=%lld:count=1", fc->spec, (long long)(seen - 1));
        mlp_destroy(m);
        zinc_destroy(e);
        m = NULL;
        e = NULL;
    }
    if (st == ZINC_OK) st = make(&r, &e, &m);
    ZT_OK(st);
    if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL);
    ZT_OK(st);
    if (st == ZINC_OK) { /* the checkpoint the fault must not cost */
        st = zinc_save_checkpoint(e, ck, "before");
        ZT_CHECK(st == ZINC_OK, "%s: saving the checkpoint before the fault: %s", spec, zinc_last_error());
        n = (size_t)zinc_numel_total(e);
        saved = malloc(n * sizeof *saved);
        if (st == ZINC_OK) st = zinc_gather_master(e, saved, n);
        ZT_OK(st);
    }
    if (st == ZINC_OK && !fc->spec) { /* flip a byte of this rank's parameter file behind the store's back */
        char path[8192];
        store_file(e, "params.swp", path, sizeof path);
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
        int failed_at = -1;
        for (int s = 1; s < 3 && failed_at < 0; s++)
            if (mlp_train_step(m, s, NULL, NULL) != ZINC_OK) failed_at = s;
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", zinc_last_error());
        int64_t hits = zaio_fault_hits();
        zaio_fault_set(NULL);
        ZT_CHECK(failed_at >= 0, "%s: the run went on (%lld faults injected)", spec, (long long)hits);
        ZT_CHECK(failed_at < 0 || failed_at == 1, "%s: step %d failed, not step 1 where the fault came: %s", spec,
                 failed_at, msg);
        ZT_CHECK(!fc->spec || hits > 0, "%s: no IO matched the fault", spec);
        for (int i = 0; i < 3 && fc->want[i]; i++)
            ZT_CHECK(failed_at < 0 || strstr(msg, fc->want[i]), "%s: message lacks \"%s\": %s", spec, fc->want[i], msg);
        if (failed_at >= 0 && zinc_rank(e) == 0)
            printf("%-44s: step %d ended with \"%.150s...\"\n", spec, failed_at, msg);
        /* the failed engine refuses to save (its state may be half-updated): the checkpoint before the
         * fault stays the newest */
        zinc_status sv = zinc_save_checkpoint(e, ck, "after");
        const char *why = sv == ZINC_OK ? "saved" : zinc_last_error();
        ZT_CHECK(sv == ZINC_ERR_STATE && strstr(why, "failed part-way"), "%s: the failed engine's save: status %d (%s)",
                 spec, (int)sv, why);
    }
    zaio_fault_set(NULL);
    mlp_destroy(m);
    zinc_destroy(e);
    m = NULL;
    e = NULL;
    if (saved) { /* a fresh engine loads the checkpoint saved before the fault: the same master weights */
        char p[4300];
        snprintf(p, sizeof p, "%s/before", ck);
        loaded = malloc(n * sizeof *loaded);
        st = make(&r, &e, &m);
        if (st == ZINC_OK) st = zinc_load_checkpoint(e, p);
        ZT_CHECK(st == ZINC_OK, "%s: loading the checkpoint saved before the fault: %s", spec, zinc_last_error());
        if (st == ZINC_OK) st = zinc_gather_master(e, loaded, n);
        if (st == ZINC_OK) st = mlp_train_step(m, 1, NULL, NULL); /* and it trains on */
        ZT_OK(st);
        size_t d = 0;
        while (st == ZINC_OK && d < n && !memcmp(&saved[d], &loaded[d], sizeof *saved)) d++;
        ZT_CHECK(st != ZINC_OK || d == n,
                 "%s: the checkpoint saved before the fault loads other master weights "
                 "(element %zu: %.9g, saved %.9g)",
                 spec, d, d < n ? loaded[d] : 0.0, d < n ? saved[d] : 0.0);
        mlp_destroy(m);
        zinc_destroy(e);
    }
    free(saved);
    free(loaded);
    zfile_rmtree(ck);
}

/* The first step has no module trace for the stage-3 prefetch to follow: the swap-ins are guessed ahead
 * in registration order (forward) and its reverse (backward), so some reads of step 0 are prefetched. */
static void first_step_prefetch(void) {
    char zoff[4600];
    snprintf(zoff, sizeof zoff,
             "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": 2048, \"max_in_cpu\": "
             "0}, "
             "\"sub_group_size\": 1024",
             g_dir);
    run r = {.t = ZINC_FP32, .zero_extra = zoff, .hidden = 40, .gas = 1}; /* one micro-step: no trace in it */
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = make(&r, &e, &m);
    ZT_OK(st);
    zaio_fault f; /* counts the prefetched reads (none is faulted) */
    ZT_OK(zaio_fault_parse("read:EIO:path=params.swp:what=(prefetch):skip=1000000000000", &f));
    zaio_fault_set(&f);
    if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL);
    int64_t seen = zaio_fault_seen();
    zaio_fault_set(NULL);
    ZT_OK(st);
    ZT_CHECK(seen > 0, "the first step (no trace yet) prefetched no parameter read");
    if (zinc_rank(e) == 0) printf("first step: %lld prefetched parameter read pieces\n", (long long)seen);
    mlp_destroy(m);
    zinc_destroy(e);
}

/* The step's statistics (the norm for clipping) come from the block sums kept as the gradient landed: with
 * modules of many statistics blocks (hidden 1024: 1Mi-element weights), buckets that land them in large
 * pieces and one micro-step, a step reads the gradient file about once (the optimizer pass; the statistics
 * only the blocks at module edges), not twice. The bits against the in-memory run are compare()'s (its
 * small buckets land pieces below a block: every block read back, the fallback). */
static void grad_reads_per_step(void) {
    char zoff[4600];
    snprintf(zoff, sizeof zoff,
             "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_size\": 8192, \"max_in_cpu\": "
             "0}, "
             "\"sub_group_size\": 16384",
             g_dir);
    run r = {.t = ZINC_FP32,
             .zero_extra = zoff,
             .extra = "\"gradient_clipping\": 0.05",
             .hidden = 1024,
             .gas = 1,
             .bucket = 2000000};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zinc_status st = make(&r, &e, &m);
    ZT_OK(st);
    zstate_param_stats s0 = {0}, s1 = {0};
    if (st == ZINC_OK) st = mlp_train_step(m, 0, NULL, NULL);
    if (st == ZINC_OK) zstate_param_stats_get(e->gstore, &s0);
    if (st == ZINC_OK) st = mlp_train_step(m, 1, NULL, NULL);
    if (st == ZINC_OK) zstate_param_stats_get(e->gstore, &s1);
    ZT_OK(st);
    if (st == ZINC_OK) {
        double shard = (double)e->part.shard * 4, per_step = (double)(s1.bytes_read - s0.bytes_read);
        ZT_CHECK(per_step >= shard && per_step < 1.25 * shard,
                 "gradient bytes read in a step: %.0f, %.2fx the shard's %.0f (want once, plus module edges)", per_step,
                 per_step / shard, shard);
        if (zinc_rank(e) == 0)
            printf("gradient file read per step: %.2fx the shard (%.0f of %.0f bytes)\n", per_step / shard, per_step,
                   shard);
    }
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "offload_param_nvme";
    /* one directory per rank count: the 1- and 2-rank tests run at once under ctest -j, and the damaged-block
     * case corrupts a params.swp it finds there (another run's would fail that run) */
    const char *np = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    snprintf(g_dir, sizeof g_dir, "%s/offload_param_nvme_np%s", zt_build_dir(), np ? np : "1");
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
    /* large buckets land 1Mi-element weights in whole-block pieces: the norm from the block sums kept at
     * landing (one micro-step and two, added into), and with fp16 overflow (non-finite sums: read back) */
    g_hidden = 1024;
    g_bucket = 2000000;
    g_buffer_size = 8192;
    g_gas = 1;
    compare("norm from landed block sums", ZINC_FP32, "\"sub_group_size\": 16384", "\"gradient_clipping\": 0.05", NULL,
            0);
    g_gas = 2;
    compare("landed block sums, gas 2", ZINC_BF16, "\"sub_group_size\": 16384", "\"gradient_clipping\": 0.05", NULL, 0);
    compare("landed block sums, overflow", ZINC_FP16, "\"sub_group_size\": 16384", NULL, "overflow", 0);
    g_hidden = g_bucket = g_buffer_size = g_gas = 0;
    compare("clipping 0.05", ZINC_BF16, "\"sub_group_size\": 2048", "\"gradient_clipping\": 0.05", NULL, 0);
    char zo[4600];
    snprintf(zo, sizeof zo, "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", g_dir);
    compare("optimizer state on nvme", ZINC_FP32, zo, NULL, NULL, 0);
    compare("fp16 overflow skips", ZINC_FP16, NULL, NULL, "overflow", 0);
    compare("checkpoint save/resume", ZINC_BF16, "\"sub_group_size\": 1024", NULL, NULL, 1);
    /* offload_param.max_in_cpu: the shard's first elements kept in memory, the rest swapped. 3001 of a shard
     * of about 11.4K / 5.7K elements: modules straddle the boundary (a read, prefetch and write split there,
     * a block-unaligned start of the file part); then all of it (DeepSpeed's default 1e9 here: no file
     * traffic for parameters at all) */
    g_max_in_cpu = 3001;
    compare("max_in_cpu 3001", ZINC_BF16, "\"sub_group_size\": 1024", "\"gradient_clipping\": 0.05", NULL, 0);
    compare("max_in_cpu 3001, checkpoint", ZINC_FP32, "\"sub_group_size\": 1024", NULL, NULL, 1);
    g_hidden = 40;
    g_buffer_size = 2048; /* modules prefetched (hidden 40: a shard of about 4.6K / 2.3K): prefetches split */
    g_max_in_cpu = 1001;
    compare("max_in_cpu 1001, prefetched", ZINC_FP32, "\"sub_group_size\": 1024", NULL, NULL, 0);
    g_hidden = g_buffer_size = 0;
    g_max_in_cpu = 1000000000;
    compare("max_in_cpu 1e9 (all)", ZINC_FP16, NULL, NULL, "overflow", 0);
    g_max_in_cpu = 0;
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
        /* short reads of the prefetched reads only (waited for at use, continued there), of either file */
        g_hidden = 40;
        g_buffer_size = 2048;
        static const char *const shorts[2] = {"read:short:path=params.swp:what=(prefetch)",
                                              "read:short:path=grads.swp:what=(prefetch)"};
        for (int i = 0; i < 2; i++) {
            ZT_OK(zaio_fault_parse(shorts[i], &f));
            zaio_fault_set(&f);
            compare(i ? "short prefetched grad reads" : "short prefetched reads", ZINC_FP32, "\"sub_group_size\": 1024",
                    "\"gradient_clipping\": 0.05", NULL, 0);
            int64_t hits = zaio_fault_hits();
            zaio_fault_set(NULL);
            ZT_CHECK(hits > 0, "%s: no prefetched read was issued", shorts[i]);
            printf("%s: %lld pieces came back short\n", shorts[i], (long long)hits);
        }
        g_hidden = g_buffer_size = 0;
    }
    { /* the pre-flight counts the parameter file against the free space under offload_param.nvme_path */
        char zoff[4600];
        snprintf(zoff, sizeof zoff,
                 "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"max_in_cpu\": 0}", g_dir);
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
    /* buffer_size 300: nothing prefetched, every IO issued and waited for by the call that needs it (the
     * written-behind writes completed by the store's next call) */
    static const fault_case plain[] = {
        {"write:EIO:path=params.swp", {"params.swp", "EIO", "(written behind)"}, 0, 0, NULL},
        {"write:ENOSPC:path=params.swp", {"params.swp", "ENOSPC"}, 0, 0, NULL},
        {"read:EIO:path=params.swp", {"params.swp", "EIO"}, 0, 0, NULL},
        {NULL, {"params.swp", "checksum"}, 0, 0, NULL},
        /* the gradient file: a failed write while a piece lands in backward (kept, agreed at the step), a
         * failed read (the pieces' read-modify-writes, the statistics, the update) */
        {"write:EIO:path=grads.swp", {"grads.swp", "EIO", "(written behind)"}, 0, 0, NULL},
        {"write:ENOSPC:path=grads.swp", {"grads.swp", "ENOSPC"}, 0, 0, NULL},
        {"read:EIO:path=grads.swp", {"grads.swp", "EIO"}, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) fault_run(&plain[i]);
    /* the asynchronous paths (hidden 40: every module within stage3_prefetch_bucket_size; buffer_size 2048:
     * each module fits the free prefetch buffers, so the stage-3 prefetch issues its reads ahead, and the
     * optimizer pass writes the 3-block shard in two pieces, blocks 0..1 and 2..2):
     * a fault that matches only the prefetched reads (waited for at the module's use), and writes that
     * complete after the call that issued them: the pass's first chunk (offset 0: completed by the next
     * chunk's write) and its last (completed by the flush after the pass); the gradient file's first write
     * of the step (completed by the next piece's landing) and its last */
    static const char *const sg = "\"sub_group_size\": 1024";
    static const fault_case async[] = {
        {"read:EIO:path=params.swp:what=(prefetch)", {"params.swp", "(prefetch)", "EIO"}, 2048, 0, sg},
        {"read:EIO:path=grads.swp:what=(prefetch)", {"grads.swp", "(prefetch)", "EIO"}, 2048, 0, sg},
        {"write:EIO:path=params.swp:count=1:offset=0", {"params.swp", "(written behind)", "EIO"}, 2048, 0, sg},
        {"write:ENOSPC:path=params.swp", {"params.swp", "(written behind)", "ENOSPC"}, 2048, 1, sg},
        /* the backward's last landing piece: completed by the statistics pass's first call */
        {"write:EIO:path=grads.swp", {"grads.swp", "(written behind)", "EIO"}, 2048, 1, sg},
        {"write:ENOSPC:path=grads.swp:count=1", {"grads.swp", "(written behind)", "ENOSPC"}, 2048, 0, sg},
    };
    for (size_t i = 0; i < sizeof async / sizeof *async; i++) fault_run(&async[i]);
    /* with part of the shard in memory the file part still fails loudly: its reads, writes and blocks */
    g_max_in_cpu = 3001;
    fault_run(&plain[2]);
    fault_run(&plain[3]);
    g_max_in_cpu = 1001; /* hidden 40's smaller shard */
    fault_run(&async[0]);
    g_max_in_cpu = 0;
    { /* the optimizer state on NVMe too: its pass's first reads are issued ahead (at step 1's first module,
       * zstate_pass_prestart) and the first of them fails; the pass that takes them over fails the step */
        static char zs[4700];
        snprintf(zs, sizeof zs,
                 "\"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}",
                 g_dir);
        const fault_case st_read = {"read:EIO:path=exp_avg.swp:count=1",
                                    {"exp_avg.swp", "EIO", "chunk 0"},
                                    2048,
                                    0,
                                    zs};
        const fault_case st_write = {"write:ENOSPC:path=master.swp:count=1", {"master.swp", "ENOSPC"}, 2048, 0, zs};
        fault_run(&st_read);
        fault_run(&st_write);
    }
    first_step_prefetch();
    grad_reads_per_step();
    rmdir(g_dir);
    return zt_finish();
}
