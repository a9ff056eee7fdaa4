/* The optimizer-state stores on their own: no engine, no model. A store is made from a zstate_ctx holding
 * the cpu device, a memory tracker, a log and a single-rank communicator, as the engine fills it in.
 *
 * NVMe store: random bit patterns (NaNs and infinities included) written and read back byte for byte,
 * chunk sizes rounded as documented (a last short chunk, one element, none), read-modify-write passes with
 * zstate_poll between pieces as the step calls it, short IO continued, accounting of files and swap
 * buffers returning to zero, private directories removed. Error paths with their messages: nvme_path
 * empty, under a regular file, a regular file, not writable (when not root), buffer_count below 3; a
 * swap file truncated, overwritten or removed behind the store's back; chunks out of order, a release
 * without an acquire, a pass inside a pass.
 * Memory store: host, pinned (through a discrete device) and device-resident with host-view staging.
 * Both stores with 3 tensors (Adam) and 2 (Lion): no exp_avg_sq array, file, swap-buffer part, staging or
 * count, views with v NULL; a context with another count is refused.
 * Under mpirun (offload_store_nvme_np2): the collective set-up, one run directory with a directory per
 * rank, and a rank that cannot set up failing every rank, naming it, with nothing left behind.
 *
 * Files go under $ZINC_BINARY_DIR/store_nvme_test_<pid>/. Where that file system refuses O_DIRECT the
 * store runs with allow_buffered_io (and its warning is checked). Speed: bench/bench_nvme_store. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offload/aio.h"
#include "offload/param_nvme.h"
#include "offload/state.h"
#include "offload/state_nvme.h"
#include "base/comm/comm.h"
#include "base/config/config.h"
#include "base/device/device.h"
#include "zt.h"

#define CHUNK 2048           /* sub_group_size of most stores here (a multiple of ZSTATE_CHUNK_ALIGN) */
#define N (4 * CHUNK + 1000) /* five chunks, the last one short */

static char root[1024];
static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};
/* Whether a line of the log since the last zt_logcap_clear contains `s`. */
#define logged(s) (zt_logcap_count_from(&log_cap, ZINC_LOG_DEBUG, (s)) > 0)

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

static void rm_tree(const char *dir) {
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Whether `dir` accepts O_DIRECT (a probe file through the IO layer). */
/* ---------------------------------------------------------------- the context */

typedef struct fixture {
    zmemtrack mem;
    zlog log;
    zdevice *dev;
    zcomm *comm;
    zstate_ctx ctx;
} fixture;

static int direct_ok;

/* The context the engine would fill in for offload_optimizer.device `kind` with default settings. */
static zinc_status fx_init(fixture *x, zcfg_offload_device kind, bool discrete) {
    memset(x, 0, sizeof *x);
    x->log = (zlog){.fn = zt_logcap_fn, .userdata = &log_cap, .level = ZINC_LOG_DEBUG};
    zinc_status st = discrete ? zdev_create_cpu_discrete(&x->mem, &x->dev) : zdev_create_cpu(&x->mem, &x->dev);
    if (st != ZINC_OK) return st;
    st = zcomm_create_single(&x->comm);
    if (st != ZINC_OK) return st;
    zinc_config c;
    zcfg_defaults(&c);
    x->ctx = (zstate_ctx){.dev = x->dev,
                          .mem = &x->mem,
                          .log = &x->log,
                          .comm = x->comm,
                          .offload = c.zero.offload_optimizer,
                          .aio = c.aio,
                          .sub_group_size = CHUNK,
                          .tensors = 3};
    x->ctx.offload.device = kind;
    x->ctx.aio.allow_buffered_io = !direct_ok;
    return ZINC_OK;
}

static void fx_set_path(fixture *x, const char *path) {
    size_t n = strlen(path);
    ZT_CHECK(n < sizeof x->ctx.offload.nvme_path, "nvme_path %s too long for the test", path);
    if (n >= sizeof x->ctx.offload.nvme_path) n = sizeof x->ctx.offload.nvme_path - 1;
    memcpy(x->ctx.offload.nvme_path, path, n);
    x->ctx.offload.nvme_path[n] = 0;
}

static void fx_free(fixture *x) {
    zcomm_destroy(x->comm);
    zdev_destroy(x->dev);
}

static uint64_t mem_total(const zmemtrack *m) {
    uint64_t t = 0;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) t += m->current_total[k];
    return t;
}

/* ---------------------------------------------------------------- passes */

/* The expected contents: three arrays of n floats (master, m, v), any bit pattern. */
typedef struct ref {
    int64_t n;
    float *a[3];
} ref;

static void ref_fill(ref *r, int64_t n, uint64_t *rs) {
    r->n = n;
    for (int k = 0; k < 3; k++) {
        r->a[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)zt_rand_u64(rs);
            memcpy(&r->a[k][i], &bits, sizeof bits);
        }
    }
}

static void ref_free(ref *r) {
    for (int k = 0; k < 3; k++) free(r->a[k]);
}

/* A WRITE pass storing r (its first s->ctx.tensors arrays). */
static zinc_status store_write(zstate *s, const ref *r, zstate_mode extra) {
    zinc_status st = zstate_pass_begin(s, (zstate_mode)(ZSTATE_WRITE | extra));
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        float *arr[3] = {v.master, v.m, v.v};
        for (int k = 0; k < s->ctx.tensors; k++) memcpy(arr[k], r->a[k] + v.lo, (size_t)v.n * sizeof(float));
        st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

/* A READ pass comparing every byte with r; counts differing elements into *bad and the elements seen into
 * *seen (the views must tile [0, n) in order; a 2-tensor store's views have no v). */
static zinc_status store_check(zstate *s, const ref *r, zstate_mode extra, int64_t *bad, int64_t *seen) {
    *bad = *seen = 0;
    zinc_status st = zstate_pass_begin(s, (zstate_mode)(ZSTATE_READ | extra));
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        if (v.lo != *seen || (v.v != NULL) != (s->ctx.tensors > 2)) (*bad)++;
        const float *got[3] = {v.master, v.m, v.v};
        for (int k = 0; k < s->ctx.tensors; k++)
            for (int64_t i = 0; i < v.n; i++)
                if (memcmp(&got[k][i], &r->a[k][v.lo + i], sizeof(float))) (*bad)++;
        *seen += v.n;
        st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

/* A READ_WRITE pass as the optimizer step runs it: each chunk is worked on in pieces of `piece` elements
 * with zstate_poll between them. Every element becomes its bit pattern xor `mask` (in r as well). */
static zinc_status store_flip(zstate *s, ref *r, uint32_t mask, int64_t piece, int64_t *polls) {
    zinc_status st = zstate_pass_begin(s, ZSTATE_READ_WRITE);
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        float *arr[3] = {v.master, v.m, v.v};
        for (int64_t a = 0; st == ZINC_OK && a < v.n; a += piece) {
            int64_t b = a + piece < v.n ? a + piece : v.n;
            for (int k = 0; k < s->ctx.tensors; k++)
                for (int64_t i = a; i < b; i++) {
                    uint32_t bits;
                    memcpy(&bits, &arr[k][i], sizeof bits);
                    bits ^= mask;
                    memcpy(&arr[k][i], &bits, sizeof bits);
                    memcpy(&r->a[k][v.lo + i], &bits, sizeof bits);
                }
            st = zstate_poll(s);
            (*polls)++;
        }
        if (st == ZINC_OK) st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

/* ---------------------------------------------------------------- NVMe: data */

/* nt 3: master, exp_avg, exp_avg_sq (Adam); nt 2: no exp_avg_sq file, buffer or bytes at all (Lion). */
static void test_nvme_roundtrip(int nt) {
    fixture x;
    char dir[2048], run[2304], path[2560];
    snprintf(dir, sizeof dir, "%s/roundtrip%d", root, nt);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    x.ctx.tensors = nt;
    fx_set_path(&x, dir);
    zstate *s = NULL;
    uint64_t rs = zt_seed();
    ref r;
    ref_fill(&r, N, &rs);
    zt_logcap_clear(&log_cap);
    ZT_OK(zstate_create(&x.ctx, N, &s)); /* the dispatcher picks the NVMe store */
    if (!s) goto out;
    ZT_CHECK(!strcmp(s->ops->name, "nvme") && s->n == N && s->chunk == CHUNK && s->nchunks == 5 && !s->device_resident,
             "store %s: %lld elements in %lld chunks of %lld", s->ops->name, (long long)s->n, (long long)s->nchunks,
             (long long)s->chunk);
    ZT_CHECK(logged("NVMe optimizer store") && logged("5 chunks of 2048 elements"), "no set-up line in the log: %s",
             zt_logcap_last(&log_cap, ZINC_LOG_DEBUG, NULL));
    if (!direct_ok)
        ZT_CHECK(logged("refuses O_DIRECT") && logged("buffered IO"), "no buffered-IO warning: %s",
                 zt_logcap_last(&log_cap, ZINC_LOG_DEBUG, NULL));

    /* Files private, sized for the chunks, counted; swap buffers counted as staging. */
    zstate_nvme_stats ns;
    ZT_OK(zstate_nvme_stats_get(s, &ns));
    ZT_CHECK(ns.buffers == 4 && ns.direct == direct_ok && ns.align >= 512, "stats: %d buffers, direct %d, align %u",
             ns.buffers, ns.direct, ns.align);
    int64_t stride = ((int64_t)CHUNK * 4 + ns.align - 1) / ns.align * ns.align;
    int64_t last = ((int64_t)(N - 4 * CHUNK) * 4 + ns.align - 1) / ns.align * ns.align;
    ZT_CHECK(zt_find_run_dir(dir, run, sizeof run), "no single zinc-* run directory under %s", dir);
    struct stat sb;
    ZT_CHECK(stat(run, &sb) == 0 && (sb.st_mode & 0777) == 0700, "%s: mode %o, want 0700", run, sb.st_mode & 0777);
    const char *files[3] = {"master.swp", "exp_avg.swp", "exp_avg_sq.swp"};
    const zinc_mem_category cats[3] = {ZINC_MEM_MASTER, ZINC_MEM_EXP_AVG, ZINC_MEM_EXP_AVG_SQ};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/rank0/%s", run, files[k]);
        uint64_t want = k < nt ? (uint64_t)(4 * stride + last) : 0;
        if (k < nt)
            ZT_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600 && sb.st_size == 4 * stride + last,
                     "%s: mode %o size %lld, want 0600 and %lld", path, sb.st_mode & 0777, (long long)sb.st_size,
                     (long long)(4 * stride + last));
        else
            ZT_CHECK(stat(path, &sb) != 0 && errno == ENOENT, "%s exists in a %d-tensor store", path, nt);
        ZT_CHECK(x.mem.current[ZINC_MEMKIND_NVME][cats[k]] == want, "%s: %llu NVMe bytes counted, want %llu", files[k],
                 (unsigned long long)x.mem.current[ZINC_MEMKIND_NVME][cats[k]], (unsigned long long)want);
    }
    snprintf(path, sizeof path, "%s/rank0", run);
    ZT_CHECK(zt_count_entries(path) == nt, "%s: %d files, want %d", path, zt_count_entries(path), nt);
    uint64_t staging =
        x.mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] + x.mem.current[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING];
    ZT_CHECK(staging == 4ull * (uint64_t)nt * (uint64_t)stride, "staging %llu bytes, want 4 buffers x %d x %lld",
             (unsigned long long)staging, nt, (long long)stride);

    /* Write, read back byte for byte. */
    int64_t bad = 0, seen = 0, polls = 0;
    ZT_OK(store_write(s, &r, 0));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0 && seen == N, "round trip: %lld elements differ, %lld of %d seen", (long long)bad,
             (long long)seen, N);
    ZT_OK(zstate_poll(s)); /* outside a pass: nothing queued, nothing to do */

    /* The step's pattern: pieces with a poll between them, reads ahead and writes behind. */
    ZT_OK(store_flip(s, &r, 0x80000001u, 500, &polls));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0, "after a polled read-modify-write pass: %lld elements differ", (long long)bad);
    ZT_CHECK(polls == 4 * 5 + 2, "%lld polls for 5 chunks in pieces of 500", (long long)polls);

    /* Short IO everywhere: every piece continued where it stopped, the data still exact. */
    zaio_fault f = zaio_fault_none();
    f.short_io = true;
    zaio_fault_set(&f);
    ZT_OK(store_flip(s, &r, 0x00ff00ffu, CHUNK, &polls));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    int64_t hits = zaio_fault_hits();
    zaio_fault_set(NULL);
    ZT_CHECK(hits > 0 && bad == 0, "short IO: %lld injected, %lld elements differ", (long long)hits, (long long)bad);

    ZT_OK(zstate_nvme_stats_get(s, &ns));
    ZT_CHECK(ns.passes == 6 && ns.chunks_written == 15 && ns.chunks_read == 25,
             "stats: %llu passes, %llu chunks written, %llu read; want 6, 15, 25", (unsigned long long)ns.passes,
             (unsigned long long)ns.chunks_written, (unsigned long long)ns.chunks_read);
    ZT_CHECK(ns.bytes_written == 3ull * (uint64_t)nt * (uint64_t)(4 * stride + last) &&
                 ns.bytes_read == 5ull * (uint64_t)nt * (uint64_t)(4 * stride + last),
             "stats: %llu bytes written, %llu read", (unsigned long long)ns.bytes_written,
             (unsigned long long)ns.bytes_read);
    if (ns.direct)
        ZT_CHECK(ns.max_reads_ahead >= 1, "no chunk read was ever in flight ahead of the one in use (%d)",
                 ns.max_reads_ahead);
    printf("nvme store, %d tensors: align %u, %s, up to %d reads ahead and %d writes behind\n", nt, ns.align,
           ns.direct ? "O_DIRECT" : "buffered", ns.max_reads_ahead, ns.max_writes_behind);

    /* Destroy removes files and directories; every byte counted is returned. */
    zstate_destroy(s);
    s = NULL;
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: %d entries left after destroy", dir, zt_count_entries(dir));
    ZT_CHECK(mem_total(&x.mem) == 0, "%llu bytes still counted after destroy", (unsigned long long)mem_total(&x.mem));
out:
    zstate_destroy(s);
    ref_free(&r);
    fx_free(&x);
}

/* Chunk sizes: sub_group_size rounded up to 1024 elements, at most n; a one-element store, an empty one. */
static void test_nvme_sizes(void) {
    ZT_CHECK(zstate_chunk_elems(1, 1 << 20) == ZSTATE_CHUNK_ALIGN, "sub_group_size 1: %lld",
             (long long)zstate_chunk_elems(1, 1 << 20));
    ZT_CHECK(zstate_chunk_elems(1500, 1 << 20) == 2048, "sub_group_size 1500: %lld",
             (long long)zstate_chunk_elems(1500, 1 << 20));
    ZT_CHECK(zstate_chunk_elems(1000000000, 5000) == 5000, "n 5000: %lld",
             (long long)zstate_chunk_elems(1000000000, 5000));
    ZT_CHECK(zstate_chunk_elems(4096, 0) == 1, "n 0: %lld", (long long)zstate_chunk_elems(4096, 0));

    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/sizes", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    uint64_t rs = zt_seed() ^ 7;
    const int64_t ns[] = {1, 1023, 3000, 0};
    const int64_t sgs[] = {CHUNK, 1, 1024, CHUNK};
    for (int t = 0; t < 4; t++) {
        zstate *s = NULL;
        ref r;
        ref_fill(&r, ns[t], &rs);
        x.ctx.sub_group_size = sgs[t];
        ZT_OK(zstate_create_nvme(&x.ctx, ns[t], &s));
        if (s) {
            int64_t want_chunks = ns[t] == 0 ? 0 : (ns[t] + s->chunk - 1) / s->chunk;
            ZT_CHECK(s->nchunks == want_chunks && s->chunk == zstate_chunk_elems(sgs[t], ns[t]),
                     "n %lld, sub_group_size %lld: %lld chunks of %lld", (long long)ns[t], (long long)sgs[t],
                     (long long)s->nchunks, (long long)s->chunk);
            int64_t bad = 0, seen = 0;
            ZT_OK(store_write(s, &r, 0));
            ZT_OK(store_check(s, &r, 0, &bad, &seen));
            ZT_CHECK(bad == 0 && seen == ns[t], "n %lld: %lld differ, %lld seen", (long long)ns[t], (long long)bad,
                     (long long)seen);
        }
        zstate_destroy(s);
        ref_free(&r);
    }
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: entries left", dir);
    ZT_CHECK(mem_total(&x.mem) == 0, "%llu bytes still counted", (unsigned long long)mem_total(&x.mem));
    fx_free(&x);
}

/* ---------------------------------------------------------------- NVMe: errors */

static void test_nvme_config_errors(void) {
    fixture x;
    char dir[2048], file[2304], sub[2560];
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    zstate *s = NULL;

    fx_set_path(&x, "");
    ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_CONFIG, "nvme_path is empty");
    ZT_CHECK(s == NULL, "a store came back from a failed create");

    snprintf(dir, sizeof dir, "%s/errors", root);
    fx_set_path(&x, dir);
    x.ctx.offload.buffer_count = 2;
    ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_CONFIG, "buffer_count is 2");
    ZT_CHECK(contains(zinc_last_error(), "at least 3") && contains(zinc_last_error(), "24576 bytes"),
             "buffer_count message does not give the need and the buffer size: %s", zinc_last_error());
    x.ctx.offload.buffer_count = 4;

    /* A regular file where a directory is wanted, as nvme_path and as its parent. */
    ZT_CHECK(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    snprintf(file, sizeof file, "%s/afile", dir);
    FILE *fp = fopen(file, "w");
    ZT_CHECK(fp != NULL, "cannot create %s", file);
    if (fp) fclose(fp);
    fx_set_path(&x, file);
    ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_CONFIG, "is not a directory");
    ZT_CHECK(contains(zinc_last_error(), file), "message does not name %s: %s", file, zinc_last_error());
    snprintf(sub, sizeof sub, "%s/sub", file);
    fx_set_path(&x, sub);
    ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_IO, "cannot create the directory");
    ZT_CHECK(contains(zinc_last_error(), sub) && contains(zinc_last_error(), "Not a directory") &&
                 contains(zinc_last_error(), "nvme_path"),
             "message does not name the path, the cause and the key: %s", zinc_last_error());

    /* A name longer than the file system allows. */
    char longp[2560];
    int k = snprintf(longp, sizeof longp, "%s/", dir);
    memset(longp + k, 'a', 300);
    longp[k + 300] = 0;
    fx_set_path(&x, longp);
    ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_IO, "File name too long");
    ZT_CHECK(contains(zinc_last_error(), "choose an nvme_path"), "no way out in: %s", zinc_last_error());

    /* A directory this user cannot write (root writes anywhere: checked only as another user). */
    char ro[2304];
    snprintf(ro, sizeof ro, "%s/readonly", dir);
    ZT_CHECK(mkdir(ro, 0500) == 0, "mkdir %s: %s", ro, strerror(errno));
    fx_set_path(&x, ro);
    if (geteuid() != 0) {
        ZT_ERR(zstate_create_nvme(&x.ctx, N, &s), ZINC_ERR_IO, "is not writable by this user");
        ZT_CHECK(contains(zinc_last_error(), ro), "message does not name %s: %s", ro, zinc_last_error());
    } else {
        printf("running as root: the unwritable-directory check is skipped (root writes anywhere)\n");
    }
    ZT_CHECK(zt_count_entries(ro) == 0, "%s: a failed create left files", ro);
    ZT_CHECK(mem_total(&x.mem) == 0, "%llu bytes counted after failed creates", (unsigned long long)mem_total(&x.mem));
    chmod(ro, 0700);
    fx_free(&x);
}

/* Pass discipline: chunks in order, a release only after an acquire, no pass inside a pass. */
static void test_nvme_order_errors(void) {
    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/order", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    zstate *s = NULL;
    uint64_t rs = zt_seed() ^ 11;
    ref r;
    ref_fill(&r, N, &rs);
    ZT_OK(zstate_create_nvme(&x.ctx, N, &s));
    if (!s) goto out;
    ZT_OK(store_write(s, &r, 0));
    zstate_view v;
    ZT_ERR(zstate_acquire(s, 0, &v), ZINC_ERR_INTERNAL, "acquired out of order"); /* outside a pass */
    ZT_OK(zstate_pass_begin(s, ZSTATE_READ));
    ZT_ERR(zstate_pass_begin(s, ZSTATE_READ), ZINC_ERR_INTERNAL, "a pass began inside another pass");
    ZT_ERR(zstate_acquire(s, 1, &v), ZINC_ERR_INTERNAL, "chunk 1 acquired out of order (expected 0 of 5)");
    ZT_ERR(zstate_release(s, 0), ZINC_ERR_INTERNAL, "released but not acquired");
    ZT_OK(zstate_acquire(s, 0, &v));
    ZT_CHECK(v.lo == 0 && v.n == CHUNK && !memcmp(v.m, r.a[1], CHUNK * sizeof(float)), "chunk 0: lo %lld n %lld",
             (long long)v.lo, (long long)v.n);
    ZT_OK(zstate_release(s, 0));
    ZT_ERR(zstate_acquire(s, 0, &v), ZINC_ERR_INTERNAL, "expected 1 of 5");
    ZT_ERR(zstate_acquire(s, 7, &v), ZINC_ERR_INTERNAL, "out of order");
    zstate_pass_abort(s);
    zstate_pass_abort(s); /* outside a pass: nothing */
    ZT_ERR(zstate_nvme_stats_get(NULL, NULL), ZINC_ERR_INVALID_ARG, "not an NVMe optimizer-state store");
    int64_t bad = 0, seen = 0;
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0 && seen == N, "after refused calls and an aborted pass: %lld differ", (long long)bad);
out:
    zstate_destroy(s);
    ref_free(&r);
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: entries left", dir);
    fx_free(&x);
}

/* The swap files changed behind the store's back. */
static void test_nvme_files_behind_back(void) {
    fixture x;
    char dir[2048], run[2304], path[2560];
    snprintf(dir, sizeof dir, "%s/behind", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    zstate *s = NULL;
    uint64_t rs = zt_seed() ^ 13;
    ref r;
    ref_fill(&r, N, &rs);
    int64_t bad = 0, seen = 0, polls = 0;
    ZT_OK(zstate_create_nvme(&x.ctx, N, &s));
    if (!s) goto out;
    ZT_OK(store_write(s, &r, 0));
    ZT_CHECK(zt_find_run_dir(dir, run, sizeof run), "no single run directory under %s", dir);
    zstate_nvme_stats ns;
    ZT_OK(zstate_nvme_stats_get(s, &ns));
    int64_t stride = ((int64_t)CHUNK * 4 + ns.align - 1) / ns.align * ns.align;
    char want[128];

    /* Truncated to two chunks: reading chunk 2 hits the end of the file; the pass fails there, naming the
     * file, the chunk and the offset; chunks 0-1 were read intact. */
    snprintf(path, sizeof path, "%s/rank0/exp_avg.swp", run);
    ZT_CHECK(truncate(path, 2 * stride) == 0, "truncate %s: %s", path, strerror(errno));
    zinc_status st = store_check(s, &r, 0, &bad, &seen);
    snprintf(want, sizeof want, "offset %lld", (long long)(2 * stride));
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "exp_avg.swp") &&
                 contains(zinc_last_error(), "chunk 2 of 5") && contains(zinc_last_error(), want) &&
                 contains(zinc_last_error(), "unexpected end of file"),
             "truncated file: %s: %s", zinc_status_name(st), zinc_last_error());
    ZT_CHECK(bad == 0 && seen == 2 * CHUNK, "before the truncation point: %lld differ, %lld seen", (long long)bad,
             (long long)seen);
    printf("truncated file: %s\n", zinc_last_error());
    /* A WRITE pass stores every chunk again (the file grows back). */
    ZT_OK(store_write(s, &r, 0));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0 && seen == N, "after rewriting a truncated file: %lld differ", (long long)bad);

    /* Overwritten: chunk 3 of master zeroed on disk. The checksum catches it (never silent garbage). */
    snprintf(path, sizeof path, "%s/rank0/master.swp", run);
    int fd = open(path, O_WRONLY);
    ZT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    if (fd >= 0) {
        char zeros[256] = {0};
        ZT_CHECK(pwrite(fd, zeros, sizeof zeros, 3 * stride + 64) == (ssize_t)sizeof zeros, "pwrite");
        fsync(fd);
        close(fd);
        st = store_check(s, &r, 0, &bad, &seen);
        snprintf(want, sizeof want, "offset %lld", (long long)(3 * stride));
        ZT_CHECK(st == ZINC_ERR_CORRUPT && contains(zinc_last_error(), "master.swp") &&
                     contains(zinc_last_error(), "chunk 3 of 5") && contains(zinc_last_error(), want) &&
                     contains(zinc_last_error(), "checksum mismatch"),
                 "overwritten file: %s: %s", zinc_status_name(st), zinc_last_error());
        ZT_OK(store_write(s, &r, 0));
    }

    /* Removed: the store keeps its open files, so the state is not lost while it lives; destroy then
     * removes what is left without an error. */
    snprintf(path, sizeof path, "%s/rank0/exp_avg_sq.swp", run);
    ZT_CHECK(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));
    ZT_OK(store_flip(s, &r, 0x40000000u, CHUNK, &polls));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0 && seen == N, "with a removed file: %lld differ", (long long)bad);
    zstate_destroy(s);
    s = NULL;
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: %d entries left after destroy", dir, zt_count_entries(dir));
    ZT_CHECK(mem_total(&x.mem) == 0, "%llu bytes still counted", (unsigned long long)mem_total(&x.mem));
out:
    zstate_destroy(s);
    ref_free(&r);
    fx_free(&x);
}

/* Write errors: the chunk whose write failed is lost (an error to read, naming it) until a WRITE pass. */
static void test_nvme_write_error(void) {
    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/wfail", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    zstate *s = NULL;
    uint64_t rs = zt_seed() ^ 17;
    ref r;
    ref_fill(&r, N, &rs);
    int64_t bad = 0, seen = 0, polls = 0;
    ZT_OK(zstate_create_nvme(&x.ctx, N, &s));
    if (!s) goto out;
    ZT_OK(store_write(s, &r, 0));
    zstate_nvme_stats ns;
    ZT_OK(zstate_nvme_stats_get(s, &ns));
    int64_t stride = ((int64_t)CHUNK * 4 + ns.align - 1) / ns.align * ns.align;
    zaio_fault f = zaio_fault_none();
    f.op = ZAIO_WRITE;
    f.err = EIO;
    f.offset = 4 * stride;
    snprintf(f.path, sizeof f.path, "exp_avg_sq.swp");
    zaio_fault_set(&f);
    ref flipped = r;
    for (int k = 0; k < 3; k++) {
        flipped.a[k] = malloc(N * sizeof(float));
        memcpy(flipped.a[k], r.a[k], N * sizeof(float));
    }
    zinc_status st = store_flip(s, &flipped, 1u, 700, &polls);
    zaio_fault_set(NULL);
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "writing chunk 4 of 5") &&
                 contains(zinc_last_error(), "exp_avg_sq.swp") && contains(zinc_last_error(), "EIO"),
             "write fault: %s: %s", zinc_status_name(st), zinc_last_error());
    st = store_check(s, &flipped, 0, &bad, &seen);
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "chunk 4 of 5") && contains(zinc_last_error(), "lost") &&
                 contains(zinc_last_error(), "checkpoint"),
             "reading the lost chunk: %s: %s", zinc_status_name(st), zinc_last_error());
    ZT_CHECK(bad == 0 && seen == 4 * CHUNK, "chunks 0-3 after the failed write: %lld differ, %lld seen", (long long)bad,
             (long long)seen);
    ZT_OK(store_write(s, &r, 0));
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0 && seen == N, "after the repairing WRITE pass: %lld differ", (long long)bad);
    ref_free(&flipped);
out:
    zstate_destroy(s);
    ref_free(&r);
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: entries left", dir);
    fx_free(&x);
}

/* ---------------------------------------------------------------- the memory store */

/* nt 3 (Adam) and 2 (Lion: exp_avg_sq neither allocated nor staged). */
static void test_memory(int nt) {
    uint64_t rs = zt_seed() ^ 19;
    ref r;
    ref_fill(&r, N, &rs);
    int64_t bad = 0, seen = 0, polls = 0;
    struct {
        zcfg_offload_device kind;
        bool discrete, pin;
        const char *what;
        zinc_mem_kind mem_kind;
        int64_t chunk;
        bool resident;
    } cases[] = {
        {ZOFFLOAD_CPU, false, false, "offload cpu", ZINC_MEMKIND_HOST, CHUNK, false},
        {ZOFFLOAD_CPU, false, true, "offload cpu, pin_memory on a cpu run", ZINC_MEMKIND_HOST, CHUNK, false},
        {ZOFFLOAD_CPU, true, true, "offload cpu, pin_memory, discrete device", ZINC_MEMKIND_PINNED, CHUNK, false},
        {ZOFFLOAD_NONE, false, false, "no offload, cpu", ZINC_MEMKIND_HOST, N, false},
        {ZOFFLOAD_NONE, true, false, "no offload, discrete device", ZINC_MEMKIND_DEVICE, N, true},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        fixture x;
        zstate *s = NULL;
        ZT_OK(fx_init(&x, cases[t].kind, cases[t].discrete));
        x.ctx.offload.pin_memory = cases[t].pin;
        x.ctx.tensors = nt;
        zt_logcap_clear(&log_cap);
        uint64_t base = mem_total(&x.mem); /* the discrete device counts a fixed staging area of its own */
        ZT_OK(zstate_create(&x.ctx, N, &s));
        if (!s) {
            fx_free(&x);
            continue;
        }
        zinc_mem_kind mk = cases[t].mem_kind;
        ZT_CHECK(!strcmp(s->ops->name, "memory") && s->chunk == cases[t].chunk &&
                     s->device_resident == cases[t].resident,
                 "%s: store %s, chunk %lld, device_resident %d", cases[t].what, s->ops->name, (long long)s->chunk,
                 s->device_resident);
        ZT_CHECK(x.mem.current[mk][ZINC_MEM_MASTER] == N * 4 && x.mem.current[mk][ZINC_MEM_EXP_AVG] == N * 4 &&
                     x.mem.current[mk][ZINC_MEM_EXP_AVG_SQ] == (nt > 2 ? N * 4 : 0),
                 "%s, %d tensors: master %llu, exp_avg_sq %llu bytes counted under kind %d", cases[t].what, nt,
                 (unsigned long long)x.mem.current[mk][ZINC_MEM_MASTER],
                 (unsigned long long)x.mem.current[mk][ZINC_MEM_EXP_AVG_SQ], (int)mk);
        ZT_CHECK(mem_total(&x.mem) - base == (uint64_t)nt * N * 4, "%s, %d tensors: %llu bytes counted, want %d x %d",
                 cases[t].what, nt, (unsigned long long)(mem_total(&x.mem) - base), nt, N * 4);
        /* pin_memory is DeepSpeed 0.19.8's default, so a CPU run (which makes no device copies) says nothing */
        ZT_CHECK(!logged("pin_memory"), "%s: a pin_memory note on every offloaded run: %s", cases[t].what,
                 zt_logcap_last(&log_cap, ZINC_LOG_DEBUG, NULL));
        ZT_ERR(zstate_nvme_stats_get(s, &(zstate_nvme_stats){0}), ZINC_ERR_INVALID_ARG, "not an NVMe");
        /* Host views: the arrays themselves, or staged through host memory for a device-resident store. */
        uint64_t staged0 = x.mem.peak_total[ZINC_MEMKIND_HOST] + x.mem.peak_total[ZINC_MEMKIND_PINNED];
        ZT_OK(store_write(s, &r, ZSTATE_HOST_VIEW));
        ZT_OK(store_check(s, &r, ZSTATE_HOST_VIEW, &bad, &seen));
        ZT_CHECK(bad == 0 && seen == N, "%s, %d tensors: round trip: %lld differ", cases[t].what, nt, (long long)bad);
        uint64_t staged = x.mem.peak_total[ZINC_MEMKIND_HOST] + x.mem.peak_total[ZINC_MEMKIND_PINNED] - staged0;
        if (s->device_resident) /* one chunk (all N here) of each array staged through host memory */
            ZT_CHECK(staged == (uint64_t)nt * N * 4, "%s, %d tensors: host-view staging peaked %llu bytes higher",
                     cases[t].what, nt, (unsigned long long)staged);
        if (s->device_resident) {
            /* Device views go to the device operations: zero exp_avg there, see it through a host view. */
            ZT_OK(zstate_pass_begin(s, ZSTATE_READ_WRITE));
            for (int64_t c = 0; c < s->nchunks; c++) {
                zstate_view v;
                ZT_OK(zstate_acquire(s, c, &v));
                ZT_OK(x.dev->ops->memset0(x.dev, v.m, (size_t)v.n * sizeof(float)));
                ZT_OK(zstate_release(s, c));
            }
            ZT_OK(zstate_pass_end(s));
            memset(r.a[1], 0, N * sizeof(float));
        } else {
            ZT_OK(store_flip(s, &r, 0x12345678u, 3000, &polls));
        }
        ZT_OK(store_check(s, &r, ZSTATE_HOST_VIEW, &bad, &seen));
        ZT_CHECK(bad == 0, "%s: after a read-modify-write pass: %lld differ", cases[t].what, (long long)bad);
        zstate_destroy(s);
        ZT_CHECK(mem_total(&x.mem) == base, "%s: %llu bytes counted after destroy, %llu before create", cases[t].what,
                 (unsigned long long)mem_total(&x.mem), (unsigned long long)base);
        fx_free(&x);
    }
    ref_free(&r);
}

/* A context without a valid tensor count (filled in by hand, forgetting it) is refused by both stores. */
static void test_tensors_error(void) {
    fixture x;
    zstate *s = NULL;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/tensors", root);
    for (int t = 0; t < 2; t++) {
        ZT_OK(fx_init(&x, t ? ZOFFLOAD_NVME : ZOFFLOAD_CPU, false));
        fx_set_path(&x, dir);
        x.ctx.tensors = t ? 4 : 0;
        ZT_ERR(zstate_create(&x.ctx, N, &s), ZINC_ERR_INTERNAL, "fill zstate_ctx.tensors");
        ZT_CHECK(s == NULL && mem_total(&x.mem) == 0, "a refused store left %llu bytes counted",
                 (unsigned long long)mem_total(&x.mem));
        fx_free(&x);
    }
    ZT_CHECK(zt_count_entries(dir) <= 0, "%s: a refused NVMe store left files", dir);
}

/* ---------------------------------------------------------------- several ranks (under mpirun) */

/* Set-up is collective: every rank gets its own directory under one run directory, and a rank that cannot
 * set up makes every rank fail, naming it, with nothing left behind. */
static void test_nvme_ranks(zcomm *world) {
    fixture x;
    int rank = world->rank;
    char dir[2048], run[2304], bad[2304];
    snprintf(dir, sizeof dir, "%s/ranks", root);
    snprintf(bad, sizeof bad, "%s/afile", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    zcomm_destroy(x.comm);
    x.comm = NULL;
    x.ctx.comm = world;
    zstate *s = NULL;
    uint64_t rs = zt_seed() ^ (uint64_t)(rank + 1) * 0x9e3779b97f4a7c15ull;
    int64_t n = N + 1000 * rank; /* own ranges need not be equal */
    ref r;
    ref_fill(&r, n, &rs);
    if (rank == 0) {
        FILE *fp = fopen(bad, "w");
        ZT_CHECK(fp != NULL, "cannot create %s", bad);
        if (fp) fclose(fp);
    }
    ZT_OK(zcomm_barrier(world));

    fx_set_path(&x, dir);
    ZT_OK(zstate_create_nvme(&x.ctx, n, &s));
    if (s) {
        int64_t bad_elems = 0, seen = 0;
        ZT_OK(store_write(s, &r, 0));
        ZT_OK(store_check(s, &r, 0, &bad_elems, &seen));
        ZT_CHECK(bad_elems == 0 && seen == n, "rank %d: %lld differ, %lld of %lld seen", rank, (long long)bad_elems,
                 (long long)seen, (long long)n);
        ZT_OK(zcomm_barrier(world));
        if (rank == 0) {
            ZT_CHECK(zt_find_run_dir(dir, run, sizeof run), "no single run directory under %s", dir);
            ZT_CHECK(zt_count_entries(run) == world->size, "%s: %d rank directories for %d ranks", run,
                     zt_count_entries(run), world->size);
        }
        ZT_OK(zcomm_barrier(world));
    }
    zstate_destroy(s);
    s = NULL;
    ZT_OK(zcomm_barrier(world));
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: %d entries left after every rank destroyed its store", dir,
             zt_count_entries(dir));
    ZT_OK(zcomm_barrier(world)); /* every rank has looked before the next create makes a run directory */

    /* The last rank cannot set up (its nvme_path is a regular file): every rank fails. */
    int last = world->size - 1;
    fx_set_path(&x, rank == last ? bad : dir);
    zinc_status st = zstate_create_nvme(&x.ctx, n, &s);
    char want[64];
    snprintf(want, sizeof want, "rank %d could not set up", last);
    if (rank == last)
        ZT_CHECK(st == ZINC_ERR_CONFIG && contains(zinc_last_error(), "is not a directory"),
                 "rank %d with a bad nvme_path: %s: %s", rank, zinc_status_name(st), zinc_last_error());
    else
        ZT_CHECK(st == ZINC_ERR_CONFIG && contains(zinc_last_error(), want), "rank %d while rank %d fails: %s: %s",
                 rank, last, zinc_status_name(st), zinc_last_error());
    ZT_CHECK(s == NULL, "rank %d: a store came back from a failed create", rank);
    /* Rank 0 cannot make the run directory: every rank fails with its reason. */
    fx_set_path(&x, rank == 0 ? bad : dir);
    st = zstate_create_nvme(&x.ctx, n, &s);
    if (rank != 0)
        ZT_CHECK(st == ZINC_ERR_CONFIG && contains(zinc_last_error(), "rank 0 could not set up nvme_path") &&
                     contains(zinc_last_error(), "is not a directory"),
                 "rank %d while rank 0 fails: %s: %s", rank, zinc_status_name(st), zinc_last_error());
    else
        ZT_CHECK(st == ZINC_ERR_CONFIG, "rank 0 with a bad nvme_path: %s", zinc_status_name(st));
    zstate_destroy(s);
    ZT_OK(zcomm_barrier(world));
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: %d entries left after failed creates", dir, zt_count_entries(dir));
    ZT_CHECK(mem_total(&x.mem) == 0, "rank %d: %llu bytes still counted", rank, (unsigned long long)mem_total(&x.mem));
    ref_free(&r);
    zdev_destroy(x.dev);
}

/* ---------------------------------------------------------------- the parameter store's prefetch */

/* offload/param_nvme.c: a prefetched read returns what a plain read does (pieces over several swap
 * buffers, unaligned ranges), a write over a prefetched range drops the prefetch (no stale data), a read
 * of never-written blocks reads no bytes, too few free buffers issue nothing, a failed prefetched read is
 * an IO error at its use, and the write-behind's data is what a later read sees. */
static void test_param_prefetch(void) {
    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/param_prefetch", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    x.ctx.offload.buffer_size = 3000; /* 12000 bytes: 3 blocks of 4096 per swap buffer */
    x.ctx.offload.buffer_count = 3;
    enum { PN = 20000 };
    float *v = malloc(PN * sizeof *v), *got = malloc(PN * sizeof *got);
    ZT_CHECK(v && got, "out of memory");
    zstate_param *p = NULL;
    ZT_OK(zstate_param_create(&x.ctx, PN, ZINC_FP32, 1024, 0, &p));
    if (!p || !v || !got) goto done;
    zstate_param_stats st0, st1;
    /* never written: zeros and no IO, prefetched or not */
    ZT_OK(zstate_param_prefetch(p, 10, 5000));
    ZT_OK(zstate_param_read(p, 10, 5000, got));
    zstate_param_stats_get(p, &st0);
    ZT_CHECK(st0.bytes_read == 0 && got[0] == 0 && got[4999] == 0, "unwritten: %llu bytes read",
             (unsigned long long)st0.bytes_read);
    for (int i = 0; i < PN; i++) v[i] = 0.5f * (float)i + 1;
    for (int a = 0; a < PN; a += 1000) ZT_OK(zstate_param_write(p, a, 1000, v + a)); /* unaligned pieces */
    ZT_OK(zstate_param_flush(p));
    /* 5000 elements from 1234: blocks 1..6, two swap buffers */
    ZT_CHECK(zstate_param_can_prefetch(p, 1234, 5000), "a free prefetch is refused");
    ZT_OK(zstate_param_prefetch(p, 1234, 5000));
    ZT_CHECK(!zstate_param_can_prefetch(p, 7000, 5000), "two buffers granted with one free");
    ZT_OK(zstate_param_prefetch(p, 7000, 5000)); /* issues nothing */
    zstate_param_stats_get(p, &st0);
    ZT_OK(zstate_param_read(p, 1234, 5000, got));
    zstate_param_stats_get(p, &st1);
    ZT_CHECK(!memcmp(got, v + 1234, 5000 * sizeof *got), "a prefetched read differs");
    ZT_CHECK(st1.prefetched == st0.prefetched + 1 && st1.bytes_read == st0.bytes_read + 6 * 4096,
             "prefetched %llu -> %llu, %llu bytes", (unsigned long long)st0.prefetched,
             (unsigned long long)st1.prefetched, (unsigned long long)(st1.bytes_read - st0.bytes_read));
    ZT_OK(zstate_param_read(p, 7000, 5000, got));
    ZT_CHECK(!memcmp(got, v + 7000, 5000 * sizeof *got), "a plain read differs");
    /* a write inside a prefetched range: the read sees the new values */
    ZT_OK(zstate_param_prefetch(p, 100, 2000));
    for (int i = 500; i < 600; i++) v[i] = -7.0f * (float)i;
    ZT_OK(zstate_param_write(p, 500, 100, v + 500));
    zstate_param_stats_get(p, &st0);
    ZT_OK(zstate_param_read(p, 100, 2000, got));
    zstate_param_stats_get(p, &st1);
    ZT_CHECK(!memcmp(got, v + 100, 2000 * sizeof *got), "a read after a write returned the prefetched (stale) data");
    ZT_CHECK(st1.prefetched == st0.prefetched, "a stale prefetch was used");
    ZT_CHECK(zstate_param_can_prefetch(p, 0, 3000 * 3 - 1024), "buffers left busy after the dropped prefetch");
    /* a failed prefetched read is an IO error at its use, naming the file */
    zaio_fault f = zaio_fault_none();
    ZT_OK(zaio_fault_parse("read:EIO:path=params.swp", &f));
    zaio_fault_set(&f);
    ZT_OK(zstate_param_prefetch(p, 3000, 4000));
    ZT_ERR(zstate_param_read(p, 3000, 4000, got), ZINC_ERR_IO, "params.swp");
    zaio_fault_set(NULL);
    ZT_OK(zstate_param_read(p, 3000, 4000, got));
    ZT_CHECK(!memcmp(got, v + 3000, 4000 * sizeof *got), "the read after a failed prefetch differs");
    ZT_CHECK(zstate_param_can_prefetch(p, 0, 3000 * 3 - 1024), "buffers left busy after a failed prefetch");
done:
    zstate_param_destroy(p);
    free(v);
    free(got);
    fx_free(&x);
}

/* The parameter store's resident part (offload_param.max_in_cpu): the first `resident` elements in host
 * memory (counted as parameters), only the rest in the file. Ranges inside it, across its end and past it
 * read back what was written; a prefetch across the boundary reads the file part only; a range wholly
 * inside needs no prefetch (granted, "in flight", no IO); forget zeroes both parts; a fault on the file
 * still fails a read that crosses the boundary. */
static void test_param_resident(void) {
    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/param_resident", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    x.ctx.offload.buffer_size = 3000;
    x.ctx.offload.buffer_count = 3;
    enum { PN = 20000, RES = 5001 };
    float *v = malloc(PN * sizeof *v), *got = malloc(PN * sizeof *got);
    zstate_param *p = NULL;
    ZT_OK(zstate_param_create(&x.ctx, PN, ZINC_FP32, 1024, RES, &p));
    if (!p || !v || !got) goto done;
    ZT_CHECK(x.mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_PARAMS] == RES * 4 &&
                 x.mem.current[ZINC_MEMKIND_NVME][ZINC_MEM_PARAMS] == (PN - RES) * 4 / 4096 * 4096 + 4096,
             "counted %llu host and %llu NVMe parameter bytes",
             (unsigned long long)x.mem.current[ZINC_MEMKIND_HOST][ZINC_MEM_PARAMS],
             (unsigned long long)x.mem.current[ZINC_MEMKIND_NVME][ZINC_MEM_PARAMS]);
    for (int i = 0; i < PN; i++) v[i] = 0.25f * (float)i - 3;
    for (int a = 0; a < PN; a += 999) ZT_OK(zstate_param_write(p, a, a + 999 < PN ? 999 : PN - a, v + a));
    ZT_OK(zstate_param_flush(p));
    static const int ranges[][2] = {{0, PN}, {10, 100}, {4000, 2000}, {RES - 1, 2}, {RES, 7}, {15000, 5000}};
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
        int lo = ranges[i][0], n = ranges[i][1];
        memset(got, 0, (size_t)n * sizeof *got);
        ZT_OK(zstate_param_read(p, lo, n, got));
        ZT_CHECK(!memcmp(got, v + lo, (size_t)n * sizeof *got), "read [%d, %d) differs", lo, lo + n);
    }
    zstate_param_stats st0, st1;
    /* wholly resident: no prefetch needed, none issued */
    ZT_CHECK(zstate_param_can_prefetch(p, 100, 4000) && zstate_param_prefetching(p, 100, 4000),
             "a resident range is not granted as prefetched");
    zstate_param_stats_get(p, &st0);
    ZT_OK(zstate_param_prefetch(p, 100, 4000));
    ZT_OK(zstate_param_read(p, 100, 4000, got));
    zstate_param_stats_get(p, &st1);
    ZT_CHECK(st1.bytes_read == st0.bytes_read && st1.reads == st0.reads, "a resident range read %llu file bytes",
             (unsigned long long)(st1.bytes_read - st0.bytes_read));
    ZT_CHECK(!memcmp(got, v + 100, 4000 * sizeof *got), "resident read differs");
    /* across the boundary: the prefetch reads [RES, 7000) of the shard, file elements [0, 1999): 2 blocks */
    ZT_CHECK(!zstate_param_prefetching(p, 4000, 3000), "a prefetch reported before it was issued");
    ZT_OK(zstate_param_prefetch(p, 4000, 3000));
    ZT_CHECK(zstate_param_prefetching(p, 4000, 3000), "the boundary prefetch is not held");
    zstate_param_stats_get(p, &st0);
    ZT_OK(zstate_param_read(p, 4000, 3000, got));
    zstate_param_stats_get(p, &st1);
    ZT_CHECK(!memcmp(got, v + 4000, 3000 * sizeof *got), "a prefetched read across the boundary differs");
    ZT_CHECK(st1.prefetched == st0.prefetched + 1 && st1.bytes_read == st0.bytes_read + 2 * 4096,
             "boundary prefetch: %llu served, %llu bytes", (unsigned long long)(st1.prefetched - st0.prefetched),
             (unsigned long long)(st1.bytes_read - st0.bytes_read));
    /* a failed file read fails the read that crosses the boundary */
    zaio_fault f = zaio_fault_none();
    ZT_OK(zaio_fault_parse("read:EIO:path=params.swp", &f));
    zaio_fault_set(&f);
    ZT_ERR(zstate_param_read(p, 4000, 3000, got), ZINC_ERR_IO, "params.swp");
    zaio_fault_set(NULL);
    /* forget: both parts read as zeros */
    zstate_param_forget(p);
    ZT_OK(zstate_param_read(p, 0, PN, got));
    int nz = 0;
    for (int i = 0; i < PN; i++) nz += got[i] != 0;
    ZT_CHECK(nz == 0, "%d elements nonzero after forget", nz);
    ZT_ERR(zstate_param_read(p, PN - 5, 10, got), ZINC_ERR_INTERNAL, "outside the shard");
done:
    zstate_param_destroy(p);
    ZT_CHECK(mem_total(&x.mem) == 0, "%llu bytes still counted", (unsigned long long)mem_total(&x.mem));
    free(v);
    free(got);
    fx_free(&x);
}

/* zstate_pass_prestart: the next pass's first reads issued outside any pass (the engine does it after each
 * step and keeps them moving from module boundaries); the next reading pass takes them over and sees the
 * same bytes, a writing pass drops them, a failed prestarted read fails the pass that takes it over at the
 * chunk's acquire (as its own read would), and destroy with reads in flight returns everything. */
static void test_nvme_prestart(void) {
    fixture x;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/prestart", root);
    ZT_OK(fx_init(&x, ZOFFLOAD_NVME, false));
    fx_set_path(&x, dir);
    zstate *s = NULL;
    uint64_t rs = zt_seed();
    ref r;
    ref_fill(&r, N, &rs);
    ZT_OK(zstate_create(&x.ctx, N, &s));
    if (!s) goto out;
    int64_t bad = 0, seen = 0, polls = 0;
    zaio_fault f;
    /* counts the read pieces issued (skip: none is faulted) */
    ZT_OK(zaio_fault_parse("read:EIO:skip=1000000000", &f));
    zaio_fault_set(&f);
    ZT_OK(zstate_pass_prestart(s)); /* nothing written yet: nothing to read */
    ZT_CHECK(zaio_fault_seen() == 0, "prestart of a store never written: %lld read pieces",
             (long long)zaio_fault_seen());
    ZT_OK(store_write(s, &r, 0)); /* drops that (empty) prestart */
    ZT_CHECK(!s->prestarted, "a writing pass left the prestart in place");
    zaio_fault_set(&f);
    ZT_OK(zstate_pass_prestart(s));
    int64_t issued = zaio_fault_seen();
    ZT_CHECK(s->prestarted && issued > 0, "prestart: %d, %lld read pieces issued", s->prestarted, (long long)issued);
    ZT_OK(zstate_pass_prestart(s)); /* already prestarted: nothing more (a poll would move the rest along) */
    ZT_CHECK(zaio_fault_seen() == issued, "a second prestart issued %lld more pieces",
             (long long)(zaio_fault_seen() - issued));
    ZT_OK(zstate_poll(s));
    /* the optimizer's pattern takes the reads over: the same bytes as without */
    ZT_OK(store_flip(s, &r, 0x80000001u, 500, &polls));
    ZT_CHECK(!s->prestarted, "the pass did not take the prestart over");
    zaio_fault_set(&f); /* counts afresh */
    ZT_OK(zstate_pass_prestart(s));
    ZT_OK(store_check(s, &r, 0, &bad, &seen)); /* a READ pass takes them over too, reading nothing twice */
    ZT_CHECK(zaio_fault_seen() == 3 * s->nchunks, "a prestart and a pass read %lld pieces, want %lld",
             (long long)zaio_fault_seen(), (long long)(3 * s->nchunks));
    zaio_fault_set(NULL);
    ZT_CHECK(bad == 0 && seen == N, "after prestarted passes: %lld elements differ, %lld seen", (long long)bad,
             (long long)seen);
    ZT_OK(zstate_pass_prestart(s));
    ZT_OK(store_write(s, &r, 0)); /* a WRITE pass drops them */
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0, "after a prestart dropped by a write pass: %lld elements differ", (long long)bad);
    /* a prestarted read that fails: the pass fails at that chunk with the IO error, the store is intact */
    ZT_OK(zaio_fault_parse("read:EIO:count=1", &f));
    zaio_fault_set(&f);
    ZT_OK(zstate_pass_prestart(s));
    zaio_fault_set(NULL);
    zinc_status st = store_check(s, &r, 0, &bad, &seen);
    ZT_CHECK(st == ZINC_ERR_IO && strstr(zinc_last_error(), "EIO") && strstr(zinc_last_error(), "chunk 0"),
             "a failed prestarted read: status %d: %s", (int)st, zinc_last_error());
    ZT_OK(store_check(s, &r, 0, &bad, &seen));
    ZT_CHECK(bad == 0, "after a failed prestarted read: %lld elements differ", (long long)bad);
    /* inside a pass it is a no-op */
    ZT_OK(zstate_pass_begin(s, ZSTATE_READ));
    ZT_OK(zstate_pass_prestart(s));
    ZT_CHECK(!s->prestarted, "prestarted inside a pass");
    zstate_pass_abort(s);
    ZT_OK(zstate_pass_prestart(s)); /* destroyed with its reads in flight */
    zstate_destroy(s);
    s = NULL;
    ZT_CHECK(zt_count_entries(dir) == 0 && mem_total(&x.mem) == 0, "after destroy: %d entries, %llu bytes counted",
             zt_count_entries(dir), (unsigned long long)mem_total(&x.mem));
    printf("nvme store prestart: %lld read pieces issued ahead of the pass\n", (long long)issued);
out:
    zaio_fault_set(NULL);
    zstate_destroy(s);
    ref_free(&r);
    fx_free(&x);
}

int main(void) {
    zt_name = "store_nvme";
    zlog wlog = {.fn = zt_logcap_fn, .userdata = &log_cap, .level = ZINC_LOG_WARN};
    zcomm *world = NULL;
    if (zcomm_create(&wlog, &world) != ZINC_OK) {
        fprintf(stderr, "cannot create the communicator: %s\n", zinc_last_error());
        return 1;
    }
    /* Under mpirun every rank uses rank 0's directory. */
    long id = (long)getpid();
    if (zcomm_bcast(world, &id, sizeof id, 0) != ZINC_OK) return 1;
    snprintf(root, sizeof root, "%s/store_nvme_test_%ld", zt_build_dir(), id);
    if (world->rank == 0) {
        rm_tree(root);
        direct_ok = -1;
        if (mkdir(root, 0700) != 0)
            fprintf(stderr, "cannot create %s: %s\n", root, strerror(errno));
        else
            direct_ok = zt_direct_io_supported(root);
    }
    if (zcomm_bcast(world, &direct_ok, sizeof direct_ok, 0) != ZINC_OK || direct_ok < 0) return 1;
    if (world->size > 1) {
        test_nvme_ranks(world);
        zcomm_barrier(world);
        if (world->rank == 0) rm_tree(root);
        zcomm_destroy(world);
        return zt_finish();
    }
    if (!direct_ok) printf("%s refuses O_DIRECT: the stores run with zinc.allow_buffered_io\n", root);
    test_nvme_roundtrip(3);
    test_nvme_roundtrip(2);
    test_nvme_sizes();
    test_nvme_config_errors();
    test_nvme_order_errors();
    test_nvme_files_behind_back();
    test_nvme_write_error();
    test_memory(3);
    test_memory(2);
    test_tensors_error();
    test_param_prefetch();
    test_param_resident();
    test_nvme_prestart();
    rm_tree(root);
    zcomm_destroy(world);
    return zt_finish();
}
