/* Fuzz target for the ds_config loader. LLVMFuzzerTestOneInput loads the input as a ds_config and checks
 * invariants that must hold for any text: the status is OK or CONFIG with a message; an accepted config
 * satisfies the cross-key rules (batch triad, one precision, offload needs) and its resolved dump loads back
 * to the same config. Any violation aborts.
 *
 * Built with -DZINC_LIBFUZZER and clang -fsanitize=fuzzer this is a libFuzzer binary. Otherwise main() below
 * is a standalone driver (used by ctest with gcc's ASan/UBSan): it runs every seed in the corpus, then a
 * deterministic mutation loop (bit flips, byte edits, dictionary insertions, deletions, duplications,
 * splices, value swaps) plus configs generated from the schema tables, for a bounded number of iterations
 * and seconds.
 *
 *   fuzz_config [--iterations N] [--seed S] [--max-seconds T] CORPUS_DIR_OR_FILE... */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_sink.h"
#include "base/config/config.h"
#include "base/config/config_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t g_ok, g_err;

static void require(bool ok, const char *what, const char *input) {
    if (ok) return;
    fprintf(stderr, "fuzz_config: invariant broken: %s\n--- input (%zu bytes) ---\n%s\n--- last error ---\n%s\n", what,
            strlen(input), input, zinc_last_error());
    abort();
}

static bool same_fields(const zinc_config *a, const zinc_config *b, const zkey_table *t) {
    for (size_t i = 0; i < t->nkeys; i++) {
        const zkey_key *k = &t->keys[i];
        const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
        bool eq = true;
        switch (k->kind) {
        case ZKEY_OBJECT: eq = same_fields(a, b, k->sub); break;
        case ZKEY_BOOL: eq = *(const bool *)pa == *(const bool *)pb; break;
        case ZKEY_INT:
        case ZKEY_ENUM: eq = *(const int *)pa == *(const int *)pb; break;
        case ZKEY_I64:
        case ZKEY_SIZE: eq = *(const int64_t *)pa == *(const int64_t *)pb; break;
        case ZKEY_F64: eq = !memcmp(pa, pb, sizeof(double)); break;
        case ZKEY_BETAS: eq = !memcmp(pa, pb, 2 * sizeof(double)); break;
        case ZKEY_DTYPE: eq = *(const zinc_dtype *)pa == *(const zinc_dtype *)pb; break;
        case ZKEY_STR: eq = !strcmp(pa, pb); break;
        default: break;
        }
        if (!eq) {
            fprintf(stderr, "fuzz_config: %s.%s differs after the round trip\n", t->path, k->name);
            return false;
        }
    }
    return true;
}

static void check_accepted(const zinc_config *c, int world, const char *text) {
    const int64_t tb = c->train_batch_size, mb = c->train_micro_batch_size_per_gpu, ga = c->gradient_accumulation_steps;
    int64_t prod;
    require(mb >= 1 && ga >= 1 && !__builtin_mul_overflow(mb * ga, (int64_t)world, &prod) && tb == prod &&
                c->world_size == world,
            "batch triad", text);
    require(c->zero.stage >= 0 && c->zero.stage <= 3, "stage range", text);
    require(!(c->fp16.enabled && c->bf16_enabled), "fp16 and bf16", text);
    require(c->compute_dtype == (c->fp16.enabled ? ZINC_FP16 : c->bf16_enabled ? ZINC_BF16 : ZINC_FP32), "compute dtype",
            text);
    require(c->zero.offload_param.device == ZOFFLOAD_NONE || c->zero.stage == 3, "offload_param needs stage 3", text);
    require(c->zero.offload_optimizer.device != ZOFFLOAD_NVME || c->zero.offload_optimizer.nvme_path[0], "nvme path",
            text);
    require(c->zero.offload_param.device != ZOFFLOAD_NVME || c->zero.offload_param.nvme_path[0], "nvme path", text);
    require(c->zero.overlap_comm == (c->zero.stage == 3) || zcfg_given(c, "zero_optimization.overlap_comm"),
            "overlap_comm default", text);
    require(c->optimizer.beta1 >= 0 && c->optimizer.beta1 < 1 && c->optimizer.beta2 >= 0 && c->optimizer.beta2 < 1,
            "betas", text);
    require(c->aio.block_size % 4096 == 0 && !c->aio.use_gds, "aio", text);
    require((int)c->scheduler.type >= 0 && c->scheduler.type <= ZSCHED_ONE_CYCLE, "scheduler type", text);

    /* the resolved dump loads back to the same config */
    char *dump = zcfg_dump_json(c);
    require(dump != NULL, "dump", text);
    json_error_t je;
    json_t *root = json_loads(dump, 0, &je);
    require(root != NULL, "dump is JSON", text);
    const char *drop[] = {"_source", "_world_size", "_compute_dtype", "_defaults", "_filled"};
    for (int i = 0; i < 5; i++) json_object_del(root, drop[i]);
    char *again = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    require(again != NULL, "re-dump", text);
    static zinc_config c2;
    zinc_status st = zcfg_load_text(again, "<dump>", world, NULL, &c2);
    if (st != ZINC_OK) fprintf(stderr, "dump:\n%s\n", dump);
    require(st == ZINC_OK, "the dump loads", text);
    require(same_fields(c, &c2, &zkey_top) && c2.compute_dtype == c->compute_dtype && c2.comm_dtype == c->comm_dtype &&
                c2.grad_accum_dtype == c->grad_accum_dtype,
            "the dump round trip", text);
    free(again);
    free(dump);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    int world = 1 + (int)(size % 8);
    static zinc_config c;
    size_t logged = 0;
    zlog log = {fuzz_sink, &logged, ZINC_LOG_DEBUG, 0};
    zinc_status st = zcfg_load_text(text, "<fuzz>", world, &log, &c);
    require(st == ZINC_OK || st == ZINC_ERR_CONFIG, "status is OK or CONFIG", text);
    if (st == ZINC_OK) {
        g_ok++;
        check_accepted(&c, world, text);
    } else {
        g_err++;
        require(zinc_last_error()[0] != 0, "an error has a message", text);
    }
    free(text);
    return 0;
}

#ifndef ZINC_LIBFUZZER
/* ------------------------------------------------------------------ standalone driver */

typedef struct {
    char *data;
    size_t len;
} blob;

static blob *seeds;
static size_t nseeds, capseeds;
static uint64_t rng;

static uint64_t next(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static void add_seed(const char *data, size_t len) {
    if (nseeds == capseeds) {
        capseeds = capseeds ? capseeds * 2 : 64;
        seeds = realloc(seeds, capseeds * sizeof *seeds);
        if (!seeds) abort();
    }
    seeds[nseeds].data = malloc(len + 1);
    if (!seeds[nseeds].data) abort();
    memcpy(seeds[nseeds].data, data, len);
    seeds[nseeds].data[len] = 0;
    seeds[nseeds].len = len;
    nseeds++;
}

static void add_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *buf = malloc(1 << 20);
    if (!buf) abort();
    size_t n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    add_seed(buf, n);
    free(buf);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void add_path(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        add_file(path);
        return;
    }
    char *names[4096];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;)
        if (e->d_name[0] != '.') {
            names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
            if (!names[n]) abort();
            sprintf(names[n], "%s/%s", path, e->d_name);
            n++;
        }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_name); /* deterministic order */
    for (size_t i = 0; i < n; i++) {
        add_file(names[i]);
        free(names[i]);
    }
}

/* Tokens that matter to the loader: every schema key name (quoted), values at the edges of the types. */
static const char *values[] = {
    "\"auto\"", "null", "true", "false", "0", "1", "-1", "2", "3", "4", "8", "16", "1.5", "0.5", "0.999", "1e-8", "5e8",
    "15099494.4", "1e19", "1e999", "-1e999", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "9223372036854775807.0", "4611686018427387904", "3074457345618258602", "1e308", "-0.0", "2.5", "{}", "[]",
    "[0.9, 0.999]", "[1, 2, 3]", "\"\"", "\"cpu\"", "\"nvme\"", "\"none\"", "\"/tmp/zinc\"", "\"fp16\"", "\"bf16\"",
    "\"fp32\"", "\"torch.float16\"", "\"Adam\"", "\"AdamW\"", "\"WarmupLR\"", "\"WarmupDecayLR\"",
    "\"WarmupCosineLR\"", "\"OneCycle\"", "\"linear\"", "\"Fail\"", "{\"enabled\": true}", "{\"enabled\": false}",
    "\"\\ud800\"", "\"\\u0000\"", "\"\\u00e9\"", "\"\xc3\xa9\"", "\"\xff\"", "\"\xc0\xaf\"", "{\"stage\": 3}"};
static const char *syntax[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "//", "/*", "*/", "#", "\n", " ", "e",
                               "-", ".", "0", "\xff", "\x80", "\xc3", "\t", "\"\":", ",,"};

static const char *random_key(void) {
    const zkey_table *all[64];
    size_t nt = zkey_all_tables(all, 64);
    const zkey_table *t = all[below(nt < 64 ? nt : 64)];
    return t->nkeys ? t->keys[below(t->nkeys)].name : "stage";
}

/* A config generated from the schema: random keys at their own nesting, values from the pool. */
static size_t generate(char *out, size_t cap, const zkey_table *t, int depth) {
    size_t n = 0;
    n += (size_t)snprintf(out + n, cap - n, "{");
    size_t keys = below(t->nkeys < 6 ? t->nkeys + 1 : 7);
    if (depth == 0 && below(4)) /* a batch size most of the time, so configs get past the triad */
        n += (size_t)snprintf(out + n, cap - n, "\"train_batch_size\": %d%s", (int)(1 + below(4)) * 8, keys ? ", " : "");
    for (size_t i = 0; i < keys && n + 512 < cap; i++) {
        const zkey_key *k = &t->keys[below(t->nkeys)];
        n += (size_t)snprintf(out + n, cap - n, "%s\"%s\": ", i ? ", " : "", k->name);
        if (k->kind == ZKEY_OBJECT && depth < 4 && below(8)) n += generate(out + n, cap - n, k->sub, depth + 1);
        else if (k->kind == ZKEY_ENUM && below(2)) n += (size_t)snprintf(out + n, cap - n, "\"%s\"", k->names[below(3)]);
        else n += (size_t)snprintf(out + n, cap - n, "%s", values[below(sizeof values / sizeof values[0])]);
    }
    n += (size_t)snprintf(out + n, cap - n, "}");
    return n;
}

#define BUF_MAX (1u << 16)

static size_t mutate(char *buf, size_t len) {
    int rounds = 1 + (int)below(4);
    for (int r = 0; r < rounds; r++) {
        size_t pos = below(len + 1);
        const char *tok = NULL;
        switch (below(9)) {
        case 0: /* flip a bit */
            if (len) buf[below(len)] ^= (char)(1u << below(8));
            break;
        case 1: /* overwrite a byte */
            if (len) buf[below(len)] = (char)(below(4) ? syntax[below(sizeof syntax / sizeof syntax[0])][0] : (int)below(256));
            break;
        case 2: tok = values[below(sizeof values / sizeof values[0])]; break;
        case 3: tok = syntax[below(sizeof syntax / sizeof syntax[0])]; break;
        case 4: { /* a quoted schema key */
            static char q[128];
            snprintf(q, sizeof q, "\"%s\": ", random_key());
            tok = q;
            break;
        }
        case 5: { /* delete a range */
            size_t del = below(len - (pos < len ? pos : len) + 1);
            if (del > 64) del = below(64);
            memmove(buf + pos, buf + pos + del, len - pos - del);
            len -= del;
            break;
        }
        case 6: { /* duplicate a range */
            if (!len) break;
            size_t from = below(len), cnt = below(len - from + 1);
            if (cnt > 256) cnt = 256;
            if (len + cnt >= BUF_MAX) break;
            char tmp[256];
            memcpy(tmp, buf + from, cnt);
            memmove(buf + pos + cnt, buf + pos, len - pos);
            memcpy(buf + pos, tmp, cnt);
            len += cnt;
            break;
        }
        case 7: { /* splice: our prefix, another seed's suffix */
            const blob *o = &seeds[below(nseeds)];
            size_t from = below(o->len + 1);
            size_t take = o->len - from;
            if (pos + take >= BUF_MAX) take = BUF_MAX - 1 - pos;
            memcpy(buf + pos, o->data + from, take);
            len = pos + take;
            break;
        }
        default: { /* replace the value after a ':' */
            size_t start = below(len);
            char *colon = len ? memchr(buf + start, ':', len - start) : NULL;
            if (!colon) break;
            size_t at = (size_t)(colon - buf) + 1, end = at;
            while (end < len && buf[end] != ',' && buf[end] != '}' && buf[end] != ']') end++;
            const char *v = values[below(sizeof values / sizeof values[0])];
            size_t vl = strlen(v);
            if (len - (end - at) + vl >= BUF_MAX) break;
            memmove(buf + at + vl, buf + end, len - end);
            memcpy(buf + at, v, vl);
            len = len - (end - at) + vl;
            break;
        }
        }
        if (tok) {
            size_t tl = strlen(tok);
            if (len + tl < BUF_MAX) {
                memmove(buf + pos + tl, buf + pos, len - pos);
                memcpy(buf + pos, tok, tl);
                len += tl;
            }
        }
    }
    return len;
}

int main(int argc, char **argv) {
    long iterations = 20000, max_seconds = 50;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) max_seconds = atol(argv[++i]);
        else add_path(argv[i]);
    }
    if (!nseeds) {
        fprintf(stderr, "usage: fuzz_config [--iterations N] [--seed S] [--max-seconds T] CORPUS_DIR_OR_FILE...\n"
                        "(no seed files found)\n");
        return 2;
    }
    rng = seed;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < nseeds; i++) LLVMFuzzerTestOneInput((const uint8_t *)seeds[i].data, seeds[i].len);
    size_t seeds_ok = g_ok;
    printf("fuzz_config: %zu seeds, %zu accepted\n", nseeds, seeds_ok);
    char *buf = malloc(BUF_MAX);
    if (!buf) abort();
    long done = 0;
    for (; done < iterations; done++) {
        size_t len;
        if (done % 5 == 4) {
            len = generate(buf, BUF_MAX, &zkey_top, 0);
            if (below(2)) len = mutate(buf, len);
        } else {
            const blob *b = &seeds[below(nseeds)];
            len = b->len < BUF_MAX ? b->len : BUF_MAX - 1;
            memcpy(buf, b->data, len);
            len = mutate(buf, len);
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        if (done % 256 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= max_seconds) {
                printf("fuzz_config: time limit of %ld s reached\n", max_seconds);
                break;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    double secs = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
    printf("fuzz_config: %ld mutated/generated inputs in %.1f s (seed %llu): %zu accepted, %zu refused\n", done, secs,
           (unsigned long long)seed, g_ok - seeds_ok, g_err);
    free(buf);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    free(seeds);
    /* a fuzzer that never gets a config accepted tests only the parser's error paths */
    if (seeds_ok == 0 || g_ok - seeds_ok < (size_t)(done / 100)) {
        fprintf(stderr, "fuzz_config: too few accepted inputs (%zu of %ld); the corpus or mutator is broken\n",
                g_ok - seeds_ok, done);
        return 1;
    }
    return 0;
}
#endif
