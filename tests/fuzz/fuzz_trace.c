/* Fuzz target for the trace reader (cli/trace_load.c) and what reads its result: the summary
 * (cli/trace_summary.c, printed to /dev/null) and the plot's data and script (cli/trace_plot.c, gnuplot kept
 * off PATH so only zinc's own writing runs). A trace is untrusted input (issue 42): the input is written to a
 * private temporary file and read through the same functions `zinc trace summary|plot` use. Invariants:
 * every refusal has a message; an accepted trace has every span on a track of a rank below world_size, the
 * ranks' span ranges cover the spans in order, depths within the limit; and each input is done within
 * 1 s (the standalone driver measures every one). Any violation aborts (ASan/UBSan catch the rest).
 *
 * With -DZINC_LIBFUZZER and clang -fsanitize=fuzzer this is a libFuzzer binary; otherwise main() below is a
 * standalone driver (ctest, gcc's sanitizers): seeds made here (small valid traces, one with the limits'
 * numbers, deep nesting, many tracks), then a deterministic mutation loop (bit flips, numbers replaced by
 * interesting ones, truncation, splices of event text, byte edits) for a bounded number of iterations and
 * seconds, plus large hostile files (a few MB) that must each end within 1 s.
 *
 *   fuzz_trace [--iterations N] [--seed S] [--max-seconds T] */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/trace/trace_load.h"
#include "cli/trace/trace_plot.h"
#include "cli/trace/trace_summary.h"
#include "base/core/safe_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t g_ok, g_err;
static char g_dir[4096], g_path[4200], g_out[4200];
static FILE *g_null;

static void require(bool ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_trace: invariant broken: %s\n", what);
    abort();
}

static void setup(void) {
    if (g_dir[0]) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fuzz_trace.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    mkdir(g_dir, 0700);
    snprintf(g_path, sizeof g_path, "%s/t.json", g_dir);
    snprintf(g_out, sizeof g_out, "%s/p.svg", g_dir);
    setenv("PATH", "/nonexistent-fuzz-trace", 1); /* no gnuplot: the plot stops after writing its files */
    g_null = fopen("/dev/null", "w");
    require(g_null != NULL, "cannot open /dev/null");
}

static void check_trace(const zcli_trace *t) {
    require(t->world >= 1, "an accepted trace has no ranks");
    require(t->rank_first && t->rank_first[0] == 0 && t->rank_first[t->world] == t->n, "rank ranges do not cover");
    for (int r = 0; r < t->world; r++) require(t->rank_first[r] <= t->rank_first[r + 1], "rank ranges out of order");
    for (size_t i = 0; i < t->n; i++) {
        const zcli_tspan *s = &t->spans[i];
        require(s->pid >= 0 && s->pid < t->world, "a span's rank is outside world_size");
        require(s->track >= 0 && s->track < t->ntracks && t->tracks[s->track].pid == s->pid, "a span's track");
        require(s->depth >= 0 && s->depth <= 1000, "a span nests beyond the limit");
        require(s->dur >= 0 && s->cat >= 0 && s->cat < ZCLI_TRACE_CATS, "a span's duration or phase");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    FILE *f = fopen(g_path, "wb");
    require(f != NULL, "cannot write the temporary file");
    if (size) require(fwrite(data, 1, size, f) == size, "short write of the temporary file");
    fclose(f);
    zcli_trace t;
    char why[1024] = "";
    if (zcli_trace_load(g_path, &t, why, sizeof why)) {
        require(why[0] != 0, "a refused trace has no message");
        g_err++;
    } else {
        check_trace(&t);
        json_t *s = zcli_trace_summarize(&t);
        require(s != NULL, "an accepted trace has no summary");
        zcli_trace_print(g_path, &t, s, g_null);
        json_decref(s);
        /* the plot's data and script, for every 8th accepted trace (each writes two files through the safe
         * writer, fsync included); stderr quiet: gnuplot is "not installed" on this PATH */
        if (g_ok % 8 == 0) {
            FILE *keep = stderr;
            stderr = g_null;
            zcli_trace_plot(&t, g_path, g_out, true);
            stderr = keep;
        }
        g_ok++;
    }
    zcli_trace_free(&t);
    return 0;
}

#ifndef ZINC_LIBFUZZER
static uint64_t rng;
static uint64_t next(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

#define BUF_MAX (8 << 20)
typedef struct blob {
    char *data;
    size_t len;
} blob;
static blob seeds[16];
static size_t nseeds;

/* A growing text. */
typedef struct text {
    char *s;
    size_t n, cap;
} text;
static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        require(k >= 0, "vsnprintf");
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t nc = t->cap ? 2 * t->cap : 4096;
        while (nc < t->n + (size_t)k + 1) nc *= 2;
        t->s = realloc(t->s, nc);
        require(t->s != NULL, "out of memory");
        t->cap = nc;
    }
}

static const char *const CATS[] = {"forward", "backward", "comm", "wait", "optimizer", "data",
                                   "engine",  "pool",     "nvme", "copy", "gpu",       "odd"};

/* A trace of `world` ranks, `tracks` tracks each, `steps` steps of nested spans (depth `depth`). */
static void trace_text(text *t, int world, int tracks, int steps, int depth, const char *numbers) {
    put(t, "{\"traceEvents\":[\n");
    bool first = true;
    for (int r = 0; r < world; r++) {
        put(t, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\"}}",
            first ? "" : ",\n", r, r);
        first = false;
        for (int k = 0; k < tracks; k++)
            put(t,
                ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"t%d`x`\\\"\"}}",
                r, k, k);
        for (int s = 0; s < steps; s++) {
            double ts = 1000.0 * s;
            put(t,
                ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%g,\"dur\":900,\"name\":\"step\",\"cat\":\"step\","
                "\"args\":{\"step\":%d,\"samples\":4}}",
                r, ts, s + 1);
            for (int d = 1; d <= depth; d++)
                put(t,
                    ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%g,\"dur\":%g,\"name\":\"m%d\",\"cat\":\"%s\","
                    "\"args\":{\"step\":%d,\"module\":\"m%d\",\"bytes\":%d}}",
                    r, d % tracks, ts + d, 900.0 - 2 * d, d, CATS[d % 12], s + 1, d, 64 * d);
        }
    }
    put(t,
        "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"zinc-trace 1\",\"world_size\":%d,"
        "\"trace_steps\":[1,%d],\"flops_per_sample\":1000,\"module_flops\":{\"m1\":[10,20],\"m2\":[1e3,2e3]}%s}}\n",
        world, steps > 0 ? steps : 1, numbers);
}

static void add_seed(int world, int tracks, int steps, int depth, const char *numbers) {
    text t = {0};
    trace_text(&t, world, tracks, steps, depth, numbers);
    seeds[nseeds++] = (blob){t.s, t.n};
}

static void make_seeds(void) {
    add_seed(1, 2, 3, 3, "");
    add_seed(2, 3, 2, 5, ",\"zinc_version\":\"0.1.0\"");
    add_seed(4, 1, 1, 2, "");
    add_seed(1, 1, 2, 12, ""); /* deeper than the plot draws */
    add_seed(3, 8, 1, 8, ",\"dropped_events\":0");
}

static const char *const interesting[] = {"0",
                                          "-1",
                                          "1e15",
                                          "1.0000001e15",
                                          "-1e15",
                                          "9223372036854775807",
                                          "-9223372036854775808",
                                          "9223372036854775806",
                                          "2147483647",
                                          "2147483648",
                                          "1048576",
                                          "1048575",
                                          "4294967296",
                                          "1e308",
                                          "-0",
                                          "0.5",
                                          "1e-300",
                                          "9007199254740993",
                                          "\"x\"",
                                          "null",
                                          "[]",
                                          "{}",
                                          "true"};

/* Replaces a number (a run of digits, '-', '.', 'e') at a random place by an interesting value. */
static size_t set_number(char *buf, size_t len) {
    size_t at = below(len);
    while (at < len && !(buf[at] >= '0' && buf[at] <= '9')) at++;
    if (at >= len) return len;
    size_t b = at;
    while (b > 0 && (buf[b - 1] == '-' || buf[b - 1] == '.' || (buf[b - 1] >= '0' && buf[b - 1] <= '9'))) b--;
    size_t e = at;
    while (e < len && (buf[e] == '-' || buf[e] == '.' || buf[e] == 'e' || (buf[e] >= '0' && buf[e] <= '9'))) e++;
    const char *v = interesting[below(sizeof interesting / sizeof *interesting)];
    size_t vl = strlen(v);
    if (len - (e - b) + vl >= BUF_MAX) return len;
    memmove(buf + b + vl, buf + e, len - e);
    memcpy(buf + b, v, vl);
    return len - (e - b) + vl;
}

static size_t mutate(char *buf, size_t len) {
    int rounds = 1 + (int)below(4);
    for (int r = 0; r < rounds; r++) {
        switch (below(6)) {
        case 0:
            if (len) buf[below(len)] ^= (char)(1u << below(8));
            break;
        case 1:
        case 2: len = set_number(buf, len); break;
        case 3: /* truncation */
            if (len > 1) len = below(len);
            break;
        case 4: /* a piece of the file repeated (more events, deeper nesting, duplicated keys) */
        {
            if (!len) break;
            size_t a = below(len), n = 1 + below(len - a < 512 ? len - a : 512);
            if (len + n < BUF_MAX) {
                size_t at = below(len);
                memmove(buf + at + n, buf + at, len - at);
                memmove(buf + at, buf + (a >= at ? a + n : a), n);
                len += n;
            }
            break;
        }
        default:
            if (len) buf[below(len)] = "{}[],:\"0123456789-e.XMphtsdurpidn"[below(33)];
            break;
        }
    }
    return len;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double g_slowest;
static void timed(const char *data, size_t len, const char *what) {
    double t0 = now_s();
    LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    double dt = now_s() - t0;
    if (dt > g_slowest) g_slowest = dt;
    if (getenv("FUZZ_TRACE_VERBOSE")) printf("fuzz_trace: %s (%zu bytes): %.3f s\n", what, len, dt);
    if (dt > 1.0) {
        fprintf(stderr, "fuzz_trace: %s (%zu bytes) took %.2f s (limit 1 s)\n", what, len, dt);
        abort();
    }
}

/* Large hostile files: many tracks, deep nesting on one track, many ranks claimed, one huge event list. */
static void hostile(void) {
    text t = {0};
    trace_text(&t, 1, 20000, 1, 0, ""); /* 20,000 tracks on one rank */
    timed(t.s, t.n, "20,000 tracks");
    t.n = 0;
    trace_text(&t, 16, 2, 100, 6, ""); /* 16 ranks x 100 steps x 7 spans: about 1.3 MB */
    timed(t.s, t.n, "16 ranks, 11,200 spans");
    t.n = 0;
    put(&t, "{\"traceEvents\":[\n");
    for (int d = 0; d < 20000; d++) /* 20,000 spans each inside the last */
        put(&t, "%s{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":%d,\"dur\":%d,\"name\":\"n\",\"cat\":\"forward\"}",
            d ? ",\n" : "", d, 1000000 - 2 * d);
    put(&t, "],\"otherData\":{\"format\":\"zinc-trace 1\",\"world_size\":1}}");
    timed(t.s, t.n, "20,000 nested spans");
    t.n = 0;
    put(&t, "{\"traceEvents\":[],\"otherData\":{\"format\":\"zinc-trace 1\",\"world_size\":1048576}}");
    timed(t.s, t.n, "world_size 2^20 in a small file");
    t.n = 0;
    put(&t, "{\"traceEvents\":[\n");
    for (int k = 0; k < 25000; k++) /* a thread per event, each on its own tid */
        put(&t, "%s{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"dur\":1,\"name\":\"n\",\"cat\":\"comm\"}",
            k ? ",\n" : "", k % 4, k);
    put(&t, "],\"otherData\":{\"format\":\"zinc-trace 1\",\"world_size\":4}}");
    timed(t.s, t.n, "25,000 tracks of one span");
    free(t.s);
    printf("fuzz_trace: 5 hostile files of up to 1.7 MB, each within 1 s\n");
}

int main(int argc, char **argv) {
    long iterations = 20000, max_seconds = 45;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc)
            max_seconds = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: fuzz_trace [--iterations N] [--seed S] [--max-seconds T]\n");
            return 2;
        }
    }
    rng = seed;
    make_seeds();
    for (size_t i = 0; i < nseeds; i++) {
        size_t before = g_ok;
        timed(seeds[i].data, seeds[i].len, "a seed");
        if (g_ok == before) {
            fprintf(stderr, "fuzz_trace: seed %zu was refused:\n%.600s\n", i, seeds[i].data);
            return 1;
        }
    }
    hostile();
    double t0 = now_s();
    char *buf = malloc(BUF_MAX);
    require(buf != NULL, "out of memory");
    long done = 0;
    for (; done < iterations; done++) {
        const blob *b = &seeds[below(nseeds)];
        memcpy(buf, b->data, b->len);
        size_t len = mutate(buf, b->len);
        timed(buf, len, "a mutated trace");
        if (done % 64 == 0 && now_s() - t0 >= (double)max_seconds) {
            printf("fuzz_trace: time limit of %ld s reached\n", max_seconds);
            break;
        }
    }
    printf("fuzz_trace: %ld mutated traces in %.1f s (seed %llu): %zu accepted, %zu refused; slowest input %.3f s; "
           "0 invariant failures\n",
           done, now_s() - t0, (unsigned long long)seed, g_ok, g_err, g_slowest);
    if (zfile_rmtree(g_dir) != ZINC_OK) fprintf(stderr, "fuzz_trace: could not remove %s\n", g_dir);
    free(buf);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    return 0;
}
#endif
