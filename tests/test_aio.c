/* The NVMe offload IO layer and store: CRC32C, O_DIRECT alignment, partial IO completed, every injected
 * error surfacing with file/offset/length, the pipelined store staying consistent after read and write
 * failures, a corrupted file detected, buffer_count too small refused, O_DIRECT refusal (tmpfs, or
 * injected) and the buffered fallback, files and directories created private and removed.
 *
 * Files go under $ZINC_BINARY_DIR/aio_test_<pid>/. Where that file system refuses O_DIRECT only the
 * buffered-fallback checks run, then the test reports a skip (77).
 * Throughput is measured by bench/bench_nvme_store, not here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/engine/engine_internal.h"
#include "engine_util.h"
#include "offload/aio.h"
#include "base/core/crc32c.h"
#include "offload/state.h"
#include "offload/state_nvme.h"
#include "zt.h"

static char root[4096];

/* ---------------------------------------------------------------- helpers */

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};

/* An engine with NVMe offload under `dir` and the MLP built on it. `zero_more` and `extra` add JSON. */
static zinc_status make_engine(const char *dir, const char *zero_more, const char *extra, zinc_engine **e,
                               mlp_model **m) {
    char zero[2048];
    snprintf(zero, sizeof zero,
             "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"%s%s}, \"sub_group_size\": 2048", dir,
             zero_more ? ", " : "", zero_more ? zero_more : "");
    eu_run r = {.stage = 2, .dtype = ZINC_BF16, .zero_extra = zero, .extra = extra, .log = &log_cap};
    *e = NULL;
    *m = NULL;
    return eu_create(&r, e, m);
}

static void rm_tree(const char *dir) {
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* Whether `dir` accepts O_DIRECT (a probe file through the IO layer). */
/* ---------------------------------------------------------------- CRC32C */

static void test_crc(void) {
    ZT_CHECK(zcrc32c(0, "123456789", 9) == 0xE3069283u, "CRC32C(123456789) = %08x, want e3069283",
             zcrc32c(0, "123456789", 9));
    ZT_CHECK(zcrc32c_table(0, "123456789", 9) == 0xE3069283u, "table CRC32C wrong");
    uint64_t seed = zt_seed(), rs = seed;
    size_t cap = 200000;
    unsigned char *buf = malloc(cap + 8);
    for (size_t i = 0; i < cap + 8; i++) buf[i] = (unsigned char)zt_rand_u64(&rs);
    size_t lens[] = {0, 1, 7, 8, 63, 4096, 24575, 24576, 24577, 49152 + 13, 73728, 100000, 199999};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (size_t off = 0; off < 4; off++) {
            uint32_t a = zcrc32c(0, buf + off, lens[k]), b = zcrc32c_table(0, buf + off, lens[k]);
            ZT_CHECK(a == b, "CRC32C %s vs table differ at length %zu offset %zu: %08x vs %08x", zcrc32c_impl(),
                     lens[k], off, a, b);
        }
    uint32_t whole = zcrc32c(0, buf, 100000), part = zcrc32c(zcrc32c(0, buf, 30001), buf + 30001, 69999);
    ZT_CHECK(whole == part, "CRC32C does not chain: %08x vs %08x", whole, part);
    /* combined from the two parts' own CRCs (the checkpoint's whole-file CRC from its block CRCs) */
    size_t cuts[] = {0, 1, 4096, 30001, 99999, 100000};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        uint32_t c =
            zcrc32c_combine(zcrc32c(0, buf, cuts[k]), zcrc32c(0, buf + cuts[k], 100000 - cuts[k]), 100000 - cuts[k]);
        ZT_CHECK(c == whole, "zcrc32c_combine at %zu: %08x, want %08x", cuts[k], c, whole);
    }
    printf("crc32c: %s\n", zcrc32c_impl());
    free(buf);
}

/* ---------------------------------------------------------------- the IO layer */

typedef struct aio_fx {
    zaio *a;
    int f;
    char path[4200];
    uint32_t align;
    int direct;
} aio_fx;

static int fx_open(aio_fx *x, const char *name, zaio_params p, int allow_buffered) {
    memset(x, 0, sizeof *x);
    snprintf(x->path, sizeof x->path, "%s/%s", root, name);
    zinc_status st = zaio_create(&p, &x->a);
    ZT_OK(st);
    if (st != ZINC_OK) return 0;
    st = zaio_open(x->a, x->path, allow_buffered, &x->f);
    ZT_OK(st);
    if (st != ZINC_OK) return 0;
    const zaio_file *fi = zaio_file_info(x->a, x->f);
    x->align = fi->align;
    x->direct = fi->direct;
    return 1;
}

static void fx_close(aio_fx *x) {
    zaio_destroy(x->a);
    unlink(x->path);
}

static zinc_status fx_io(aio_fx *x, zaio_op op, void *buf, int64_t off, int64_t len) {
    zaio_req r;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.file = x->f;
    r.buf = buf;
    r.buf_index = -1;
    r.off = off;
    r.len = len;
    snprintf(r.what, sizeof r.what, "test data");
    zinc_status st = zaio_submit(x->a, &r);
    if (st != ZINC_OK) return st;
    return zaio_wait(x->a, &r);
}

static void *abuf(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0) return NULL;
    return p;
}

static void fill_pattern(uint32_t *p, size_t words, uint32_t salt) {
    for (size_t i = 0; i < words; i++) p[i] = (uint32_t)(i * 2654435761u) ^ salt;
}

/* Round trip with `fault` active for both directions; checks the data and that the fault fired. */
static void roundtrip(const char *label, zaio_params p, const zaio_fault *fault, int want_short) {
    aio_fx x;
    zaio_fault_set(fault); /* before the context: a no_uring fault acts at creation */
    if (!fx_open(&x, "roundtrip.bin", p, 1)) {
        zaio_fault_set(NULL);
        return;
    }
    const size_t len = 320 * 1024; /* several pieces at a 64 KiB block size */
    uint32_t *w = abuf(len), *r = abuf(len);
    fill_pattern(w, len / 4, 0x1234);
    memset(r, 0, len);
    ZT_OK(zaio_preallocate(x.a, x.f, (int64_t)len + 8192));
    ZT_OK(fx_io(&x, ZAIO_WRITE, w, 8192, (int64_t)len));
    ZT_OK(fx_io(&x, ZAIO_READ, r, 8192, (int64_t)len));
    int64_t hits = zaio_fault_hits();
    zaio_fault_set(NULL);
    ZT_CHECK(memcmp(w, r, len) == 0, "%s: data read back differs from data written", label);
    zaio_stats s;
    zaio_stats_get(x.a, &s);
    ZT_CHECK(s.bytes_written == len && s.bytes_read == len, "%s: %llu written, %llu read, want %zu each", label,
             (unsigned long long)s.bytes_written, (unsigned long long)s.bytes_read, len);
    if (fault) ZT_CHECK(hits > 0, "%s: the fault never fired", label);
    if (want_short)
        ZT_CHECK(s.short_resubmits > 0, "%s: no short transfer was continued (%llu)", label,
                 (unsigned long long)s.short_resubmits);
    printf("%-34s ok: %llu pieces, %llu short continuations, %llu EAGAIN retries (%s)\n", label,
           (unsigned long long)s.pieces, (unsigned long long)s.short_resubmits, (unsigned long long)s.again_retries,
           zaio_backend(x.a));
    free(w);
    free(r);
    fx_close(&x);
}

static const zaio_params base_params = {.block_size = 65536,
                                        .queue_depth = 4,
                                        .intra_op_parallelism = 2,
                                        .overlap_events = true};

static void test_aio_roundtrips(void) {
    zaio_params p = base_params;
    roundtrip("plain", p, NULL, 0);
    zaio_fault f = zaio_fault_none();
    f.short_io = true; /* every piece comes back with half its bytes, then the rest */
    roundtrip("short reads and writes", p, &f, 1);
    f = zaio_fault_none();
    f.err = EAGAIN;
    f.count = 5;
    roundtrip("EAGAIN x5 retried", p, &f, 0);
    f = zaio_fault_none();
    f.err = EINTR;
    f.count = 3;
    roundtrip("EINTR x3 retried", p, &f, 0);
    zaio_params q = p;
    q.single_submit = true;
    q.overlap_events = false;
    q.intra_op_parallelism = 4;
    roundtrip("single_submit, no overlap_events", q, NULL, 0);
    q = p;
    q.queue_depth = 1;
    q.intra_op_parallelism = 1;
    q.block_size = 4096;
    roundtrip("queue depth 1, 4 KiB blocks", q, NULL, 0);
    f = zaio_fault_none();
    f.no_uring = true;
    zaio_fault_set(&f);
    zaio *a = NULL;
    ZT_OK(zaio_create(&p, &a));
    ZT_CHECK(a && contains(zaio_backend(a), "pread"), "no_uring fault: backend %s", a ? zaio_backend(a) : "?");
    zaio_destroy(a);
    zaio_fault_set(NULL);
    /* The synchronous fallback with short IO: set no_uring and short together. */
    f = zaio_fault_none();
    f.no_uring = true;
    f.short_io = true;
    roundtrip("pread/pwrite fallback, short IO", p, &f, 1);
    f = zaio_fault_none();
    f.no_uring = true;
    f.err = EAGAIN;
    f.count = 4;
    roundtrip("pread/pwrite fallback, EAGAIN x4", p, &f, 0);
}

static void test_alignment(void) {
    aio_fx x;
    if (!fx_open(&x, "align.bin", base_params, 0)) return;
    const zaio_file *fi = zaio_file_info(x.a, x.f);
    ZT_CHECK(x.direct, "%s: not opened with O_DIRECT", x.path);
    ZT_CHECK(x.align >= 512 && (x.align & (x.align - 1)) == 0, "alignment %u is not a power of two >= 512", x.align);
    printf("O_DIRECT alignment under %s: %u bytes (%s)\n", root, x.align, fi->align_source);
    void *b = abuf(8192);
    ZT_ERR(fx_io(&x, ZAIO_WRITE, b, 1, 4096), ZINC_ERR_INTERNAL, "alignment");
    ZT_ERR(fx_io(&x, ZAIO_WRITE, (char *)b + 8, 4096, 4096), ZINC_ERR_INTERNAL, "alignment");
    ZT_OK(fx_io(&x, ZAIO_WRITE, b, x.align, x.align));
    free(b);
    fx_close(&x);
}

/* Every injected errno surfaces from a read and a write as ZINC_ERR_IO naming the file, the failing
 * piece's offset and length, and the errno. */
static void test_aio_errors(void) {
    static const struct {
        int err;
        const char *name;
    } errs[] = {{EIO, "EIO"},     {ENOSPC, "ENOSPC"}, {EINVAL, "EINVAL"}, {EBADF, "EBADF"},
                {EROFS, "EROFS"}, {EFBIG, "EFBIG"},   {EDQUOT, "EDQUOT"}, {ENXIO, "ENXIO"}};
    aio_fx x;
    zaio_params p = base_params; /* 256 KiB request: 4 pieces of 64 KiB */
    if (!fx_open(&x, "errors.bin", p, 1)) return;
    const int64_t base = 1 << 20, len = 256 * 1024;
    void *b = abuf((size_t)len);
    memset(b, 7, (size_t)len);
    ZT_OK(zaio_preallocate(x.a, x.f, base + len));
    ZT_OK(fx_io(&x, ZAIO_WRITE, b, base, len));
    for (size_t k = 0; k < sizeof errs / sizeof *errs; k++)
        for (int op = ZAIO_READ; op <= ZAIO_WRITE; op++) {
            zaio_fault f = zaio_fault_none();
            f.op = op;
            f.err = errs[k].err;
            f.skip = 2; /* the third piece fails */
            f.count = 1;
            zaio_fault_set(&f);
            zinc_status st = fx_io(&x, (zaio_op)op, b, base, len);
            zaio_fault_set(NULL);
            const char *msg = zinc_last_error();
            char want_off[64], want_len[64];
            snprintf(want_off, sizeof want_off, "offset %lld", (long long)(base + 2 * 65536));
            snprintf(want_len, sizeof want_len, "length %d", 65536);
            ZT_CHECK(st == ZINC_ERR_IO, "%s %s: status %s", op == ZAIO_READ ? "read" : "write", errs[k].name,
                     zinc_status_name(st));
            ZT_CHECK(contains(msg, x.path) && contains(msg, want_off) && contains(msg, want_len) &&
                         contains(msg, errs[k].name) && contains(msg, op == ZAIO_READ ? "reading" : "writing"),
                     "%s %s: message lacks file/offset/length/errno: %s", op == ZAIO_READ ? "read" : "write",
                     errs[k].name, msg);
            if (k == 0 && op == ZAIO_WRITE) printf("injected error message: %s\n", msg);
        }
    /* EAGAIN that never clears gives up after the retry limit. */
    zaio_fault f = zaio_fault_none();
    f.err = EAGAIN;
    zaio_fault_set(&f);
    ZT_ERR(fx_io(&x, ZAIO_READ, b, base, len), ZINC_ERR_IO, "EAGAIN");
    zaio_fault_set(NULL);
    /* A read past the end of the file: an unexpected end of file, not a hang or silent zeros. */
    ZT_ERR(fx_io(&x, ZAIO_READ, b, base + len, len), ZINC_ERR_IO, "end of file");
    /* The context is still usable after all that. */
    ZT_OK(fx_io(&x, ZAIO_READ, b, base, len));
    /* ZINC_AIO_FAULT syntax. */
    ZT_OK(zaio_fault_parse("write:ENOSPC:skip=3:count=1:path=exp_avg", &f));
    ZT_CHECK(f.op == ZAIO_WRITE && f.err == ENOSPC && f.skip == 3 && f.count == 1 && !strcmp(f.path, "exp_avg"),
             "ZINC_AIO_FAULT parse");
    ZT_ERR(zaio_fault_parse("write:EWHAT", &f), ZINC_ERR_INVALID_ARG, "EWHAT");
    free(b);
    fx_close(&x);
}

/* ---------------------------------------------------------------- the store */

#define SN (5 * 2048 + 320) /* 6 chunks of 2048, the last 320 elements (1280 bytes: padded on disk) */

static float val(int t, int64_t i, int gen) { return (float)(t * 1000000 + i) * 0.5f + (float)gen; }

static zinc_status store_write(zstate *s, int gen) {
    zinc_status st = zstate_pass_begin(s, ZSTATE_WRITE);
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        for (int64_t i = 0; i < v.n; i++) {
            v.master[i] = val(0, v.lo + i, gen);
            v.m[i] = val(1, v.lo + i, gen);
            v.v[i] = val(2, v.lo + i, gen);
        }
        st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

/* READ_WRITE pass adding 1 to everything. */
static zinc_status store_add(zstate *s) {
    zinc_status st = zstate_pass_begin(s, ZSTATE_READ_WRITE);
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        for (int64_t i = 0; i < v.n; i++) {
            v.master[i] += 1;
            v.m[i] += 1;
            v.v[i] += 1;
        }
        st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

/* READ pass: gen_of[c] gives each chunk's expected generation (-1: skip the check). Returns the status
 * and counts mismatching elements into *bad. */
static zinc_status store_check(zstate *s, const int *gen_of, int64_t *bad) {
    *bad = 0;
    zinc_status st = zstate_pass_begin(s, ZSTATE_READ);
    for (int64_t c = 0; st == ZINC_OK && c < s->nchunks; c++) {
        zstate_view v;
        st = zstate_acquire(s, c, &v);
        if (st != ZINC_OK) break;
        for (int64_t i = 0; gen_of[c] >= 0 && i < v.n; i++)
            if (v.master[i] != val(0, v.lo + i, gen_of[c]) || v.m[i] != val(1, v.lo + i, gen_of[c]) ||
                v.v[i] != val(2, v.lo + i, gen_of[c]))
                (*bad)++;
        st = zstate_release(s, c);
    }
    if (st == ZINC_OK) return zstate_pass_end(s);
    zstate_pass_abort(s);
    return st;
}

static void test_store(void) {
    char dir[4200], engine_dir[4200], run[4400], path[4600];
    snprintf(engine_dir, sizeof engine_dir, "%s/engine", root);
    snprintf(dir, sizeof dir, "%s/store", root);
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    zstate *s = NULL;
    ZT_OK(
        make_engine(engine_dir, "\"buffer_count\": 3", "\"aio\": {\"block_size\": 4096, \"queue_depth\": 4}", &e, &m));
    if (!e) return;
    /* A second store of SN elements under its own directory, with the engine's settings. */
    zstate_ctx ctx = e->state_ctx;
    if (snprintf(ctx.offload.nvme_path, sizeof ctx.offload.nvme_path, "%s", dir) >= (int)sizeof ctx.offload.nvme_path)
        goto out;
    zinc_memory_report before, after;
    zinc_memory_get(e, &before);
    ZT_OK(zstate_create_nvme(&ctx, SN, &s));
    if (!s) goto out;
    ZT_CHECK(s->nchunks == 6 && s->chunk == 2048, "store: %lld chunks of %lld", (long long)s->nchunks,
             (long long)s->chunk);
    const int64_t stride = 2048 * 4;

    /* Privacy and accounting. */
    ZT_CHECK(zt_find_run_dir(dir, run, sizeof run), "no single zinc-* run directory under %s", dir);
    struct stat sb;
    ZT_CHECK(stat(run, &sb) == 0 && (sb.st_mode & 0777) == 0700, "%s: mode %o, want 0700", run, sb.st_mode & 0777);
    snprintf(path, sizeof path, "%s/rank0", run);
    ZT_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0700, "%s: mode %o, want 0700", path, sb.st_mode & 0777);
    snprintf(path, sizeof path, "%s/rank0/master.swp", run);
    ZT_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "%s: mode %o, want 0600", path, sb.st_mode & 0777);
    ZT_CHECK(sb.st_size >= (off_t)SN * 4 && sb.st_size < (off_t)SN * 4 + 4096, "%s: size %lld for %d elements", path,
             (long long)sb.st_size, SN);
    zinc_memory_get(e, &after);
    uint64_t nv =
        after.current[ZINC_MEMKIND_NVME][ZINC_MEM_MASTER] - before.current[ZINC_MEMKIND_NVME][ZINC_MEM_MASTER];
    ZT_CHECK(nv == (uint64_t)sb.st_size, "NVMe master bytes counted %llu, file %lld", (unsigned long long)nv,
             (long long)sb.st_size);
    uint64_t staging =
        after.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] + after.current[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING] -
        before.current[ZINC_MEMKIND_HOST][ZINC_MEM_STAGING] - before.current[ZINC_MEMKIND_PINNED][ZINC_MEM_STAGING];
    ZT_CHECK(staging == 3ull * 3 * (uint64_t)stride, "staging bytes %llu, want 3 buffers x 3 x %lld",
             (unsigned long long)staging, (long long)stride);

    int gens[6] = {0, 0, 0, 0, 0, 0};
    int64_t bad = 0;
    ZT_OK(store_write(s, 0));
    ZT_OK(store_check(s, gens, &bad));
    ZT_CHECK(bad == 0, "store round trip: %lld elements differ", (long long)bad);

    /* Short IO everywhere: still exact. */
    zaio_fault f = zaio_fault_none();
    f.short_io = true;
    zaio_fault_set(&f);
    ZT_OK(store_add(s));
    zaio_fault_set(NULL);
    zstate_nvme_stats ns;
    ZT_OK(zstate_nvme_stats_get(s, &ns));
    ZT_CHECK(ns.max_reads_ahead >= 1, "the pipeline never had a read ahead in flight (%d)", ns.max_reads_ahead);
    ZT_CHECK(ns.buffers == 3 && ns.direct == 1, "stats: %d buffers, direct %d", ns.buffers, ns.direct);
    printf("store pipeline: up to %d chunk reads ahead and %d chunk writes behind while a chunk was in use\n",
           ns.max_reads_ahead, ns.max_writes_behind);
    for (int c = 0; c < 6; c++) gens[c] = 1;
    ZT_OK(store_check(s, gens, &bad));
    ZT_CHECK(bad == 0, "after a pass with short IO: %lld elements differ", (long long)bad);

    /* A read failure at chunk 3 (exp_avg): the pass fails at chunk 3 naming file, offset and length; chunks
     * 0-2 are updated and stored, 3-5 untouched. */
    f = zaio_fault_none();
    f.op = ZAIO_READ;
    f.err = EIO;
    f.offset = 3 * stride;
    snprintf(f.path, sizeof f.path, "exp_avg.swp");
    zaio_fault_set(&f);
    zinc_status st = store_add(s);
    zaio_fault_set(NULL);
    char want[128];
    snprintf(want, sizeof want, "offset %lld", (long long)(3 * stride));
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "exp_avg.swp") && contains(zinc_last_error(), want) &&
                 contains(zinc_last_error(), "length") && contains(zinc_last_error(), "chunk 3"),
             "read fault: %s: %s", zinc_status_name(st), zinc_last_error());
    gens[0] = gens[1] = gens[2] = 2;
    ZT_OK(store_check(s, gens, &bad));
    ZT_CHECK(bad == 0, "after a failed read at chunk 3: %lld elements are neither old nor new", (long long)bad);

    /* A write failure of chunk 1 (ENOSPC): the pass fails, chunk 1 is marked lost (reading it is an error,
     * not silent garbage), the others are consistent; a WRITE pass repairs everything. */
    f = zaio_fault_none();
    f.op = ZAIO_WRITE;
    f.err = ENOSPC;
    f.offset = 1 * stride;
    snprintf(f.path, sizeof f.path, "master.swp");
    zaio_fault_set(&f);
    st = store_add(s);
    zaio_fault_set(NULL);
    snprintf(want, sizeof want, "offset %lld", (long long)(1 * stride));
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "master.swp") && contains(zinc_last_error(), want) &&
                 contains(zinc_last_error(), "ENOSPC") && contains(zinc_last_error(), "writing"),
             "write fault: %s: %s", zinc_status_name(st), zinc_last_error());
    int lost[6] = {-1, -1, -1, -1, -1, -1};
    st = store_check(s, lost, &bad);
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "chunk 1") && contains(zinc_last_error(), "lost"),
             "reading the chunk whose write failed: %s: %s", zinc_status_name(st), zinc_last_error());
    ZT_OK(store_write(s, 5));
    for (int c = 0; c < 6; c++) gens[c] = 5;
    ZT_OK(store_check(s, gens, &bad));
    ZT_CHECK(bad == 0, "after repairing with a WRITE pass: %lld elements differ", (long long)bad);

    /* Corruption behind zinc's back: one byte of exp_avg_sq chunk 2 flipped on disk. */
    snprintf(path, sizeof path, "%s/rank0/exp_avg_sq.swp", run);
    int fd = open(path, O_RDWR);
    ZT_CHECK(fd >= 0, "cannot open %s: %s", path, strerror(errno));
    if (fd >= 0) {
        unsigned char byte = 0;
        off_t at = 2 * stride + 100;
        ZT_CHECK(pread(fd, &byte, 1, at) == 1, "pread");
        byte ^= 0x10;
        ZT_CHECK(pwrite(fd, &byte, 1, at) == 1, "pwrite");
        fsync(fd);
        st = store_check(s, gens, &bad);
        snprintf(want, sizeof want, "offset %lld", (long long)(2 * stride));
        ZT_CHECK(st == ZINC_ERR_CORRUPT && contains(zinc_last_error(), "exp_avg_sq.swp") &&
                     contains(zinc_last_error(), "chunk 2") && contains(zinc_last_error(), want),
                 "corrupted file: %s: %s", zinc_status_name(st), zinc_last_error());
        printf("corruption message: %s\n", zinc_last_error());
        byte ^= 0x10;
        ZT_CHECK(pwrite(fd, &byte, 1, at) == 1, "pwrite");
        close(fd);
        ZT_OK(store_check(s, gens, &bad));
    }

    /* Destroy removes the files and directories, and the accounting returns. */
    zstate_destroy(s);
    s = NULL;
    ZT_CHECK(zt_count_entries(dir) == 0, "%s not empty after destroy (%d entries)", dir, zt_count_entries(dir));
    zinc_memory_get(e, &after);
    ZT_CHECK(after.current_total[ZINC_MEMKIND_NVME] == before.current_total[ZINC_MEMKIND_NVME],
             "NVMe bytes after destroy %llu, before %llu", (unsigned long long)after.current_total[ZINC_MEMKIND_NVME],
             (unsigned long long)before.current_total[ZINC_MEMKIND_NVME]);
out:
    zstate_destroy(s);
    mlp_destroy(m);
    zinc_destroy(e);
    ZT_CHECK(zt_count_entries(engine_dir) == 0, "%s not empty after zinc_destroy", engine_dir);
}

/* Engine-level: an IO error in a step fails zinc_step cleanly, buffer_count too small is refused. */
static void test_engine_faults(void) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/eng2", root);
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_ERR(make_engine(dir, "\"buffer_count\": 2", NULL, &e, &m), ZINC_ERR_CONFIG, "buffer_count");
    ZT_CHECK(contains(zinc_last_error(), "at least 3"), "buffer_count message does not name the need: %s",
             zinc_last_error());
    printf("buffer_count message: %s\n", zinc_last_error());
    ZT_CHECK(zt_count_entries(dir) <= 0, "%s: files left after a refused build", dir);

    ZT_OK(make_engine(dir, NULL, NULL, &e, &m));
    if (!e) return;
    ZT_OK(mlp_train_step(m, 0, NULL, NULL));
    char ckpt[4300];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", root);
    ZT_OK(zinc_save_checkpoint(e, ckpt, NULL));
    size_t n = (size_t)zinc_numel_total(e);
    float *before = malloc(n * sizeof *before), *w = malloc(n * sizeof *w);
    ZT_OK(zinc_gather_master(e, before, n));
    zaio_fault f = zaio_fault_none();
    f.op = ZAIO_READ;
    f.err = EIO;
    f.skip = 4;
    f.count = 1;
    zaio_fault_set(&f);
    zinc_status st = mlp_train_step(m, 1, NULL, NULL);
    zaio_fault_set(NULL);
    ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "EIO") && contains(zinc_last_error(), ".swp"),
             "step with a read error: %s: %s", zinc_status_name(st), zinc_last_error());
    /* Chunks before the failing one were updated and those after were not, so the engine refuses to
     * train or save on that state, naming the failure, until a checkpoint loads. */
    ZT_ERR(mlp_train_step(m, 2, NULL, NULL), ZINC_ERR_STATE, "failed part-way");
    ZT_CHECK(contains(zinc_last_error(), "EIO") && contains(zinc_last_error(), "checkpoint"),
             "refusal after a failed step does not name the failure and the way out: %s", zinc_last_error());
    ZT_ERR(zinc_save_checkpoint(e, ckpt, "bad"), ZINC_ERR_STATE, "failed part-way");
    ZT_OK(zinc_load_checkpoint(e, ckpt));
    ZT_OK(zinc_gather_master(e, w, n));
    ZT_CHECK(memcmp(w, before, n * sizeof *w) == 0, "the reloaded state differs from the saved one");
    ZT_OK(mlp_train_step(m, 1, NULL, NULL)); /* the failed step, again, now cleanly */
    ZT_OK(zinc_gather_master(e, w, n));
    int finite = 1;
    for (size_t i = 0; i < n; i++)
        if (!(w[i] == w[i])) finite = 0;
    ZT_CHECK(finite, "master weights not finite after recovering from a failed step");
    free(w);
    free(before);
    mlp_destroy(m);
    zinc_destroy(e);
    ZT_CHECK(zt_count_entries(dir) == 0, "%s not empty after zinc_destroy", dir);
}

/* O_DIRECT refusal: tmpfs where the kernel refuses it, and always through the injected refusal; with
 * zinc.allow_buffered_io the store works and warns. */
static void test_refusal(void) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    char dir[4200];
    struct stat sb;
    if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0) {
        snprintf(dir, sizeof dir, "/dev/shm/zinc_aio_test_%ld", (long)getpid());
        zinc_status st = make_engine(dir, NULL, NULL, &e, &m);
        if (st == ZINC_OK) {
            printf("tmpfs (/dev/shm) accepts O_DIRECT on this kernel (Linux >= 6.6): the refusal is checked by "
                   "injection only\n");
            mlp_destroy(m);
            zinc_destroy(e);
        } else {
            ZT_CHECK(st == ZINC_ERR_IO && contains(zinc_last_error(), "refuses O_DIRECT") &&
                         contains(zinc_last_error(), dir) && contains(zinc_last_error(), "allow_buffered_io"),
                     "tmpfs refusal: %s: %s", zinc_status_name(st), zinc_last_error());
            printf("tmpfs refusal message: %s\n", zinc_last_error());
        }
        rm_tree(dir);
    }
    snprintf(dir, sizeof dir, "%s/refuse", root);
    zaio_fault f = zaio_fault_none();
    f.refuse_direct = true;
    zaio_fault_set(&f);
    ZT_ERR(make_engine(dir, NULL, NULL, &e, &m), ZINC_ERR_IO, "refuses O_DIRECT");
    ZT_CHECK(contains(zinc_last_error(), dir) && contains(zinc_last_error(), "allow_buffered_io"),
             "refusal message lacks the path or the fix: %s", zinc_last_error());
    ZT_CHECK(zt_count_entries(dir) == 0, "%s: files left after a refused build", dir);
    zt_logcap_clear(&log_cap);
    ZT_OK(make_engine(dir, NULL, "\"zinc\": {\"allow_buffered_io\": true}", &e, &m));
    zaio_fault_set(NULL);
    ZT_CHECK(zt_logcap_count_from(&log_cap, ZINC_LOG_WARN, "buffered IO") &&
                 zt_logcap_count_from(&log_cap, ZINC_LOG_WARN, "O_DIRECT"),
             "no buffered-IO warning: %s", zt_logcap_last(&log_cap, ZINC_LOG_WARN, NULL));
    if (e) {
        for (int s = 0; s < 3; s++) ZT_OK(mlp_train_step(m, s, NULL, NULL));
        mlp_destroy(m);
        zinc_destroy(e);
    }
}

int main(void) {
    zt_name = "aio";
    snprintf(root, sizeof root, "%s/aio_test_%ld", zt_build_dir(), (long)getpid());
    rm_tree(root);
    if (mkdir(root, 0700) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", root, strerror(errno));
        return 1;
    }
    test_crc();
    int direct = zt_direct_io_supported(root);
    if (!direct) {
        /* Only the buffered fallback can be checked here. */
        test_refusal();
        rm_tree(root);
        if (zt_failed) return zt_finish();
        return zt_skip("the build directory's file system refuses O_DIRECT: NVMe offload IO checks skipped");
    }
    test_alignment();
    test_aio_roundtrips();
    test_aio_errors();
    test_store();
    test_engine_faults();
    test_refusal();
    rm_tree(root);
    return zt_finish();
}
