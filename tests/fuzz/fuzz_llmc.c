/* Fuzz target for the readers of users' llm.c files (examples/gpt2/gpt2_files.c: model checkpoints, token
 * files, plain text), for `--set PATH=VALUE` (the config loader's overrides) and for safetensors files (the
 * header check of runtime/checkpoint/safetensors.h: a Hugging Face GPT-2's --init). The first input byte picks
 * the reader; the rest is the file (written to a private temporary file and read through the same function
 * zinc train uses) or the --set string. Invariants: every refusal has a message; an accepted model has a
 * valid shape and exactly 1024 + parameters x element size bytes; an accepted token file exactly 1024 + 2 x
 * its header's count; an accepted text file one token per byte; a --set is accepted or refused as
 * ZINC_ERR_CONFIG with a message; an accepted safetensors file has every tensor inside the file after its
 * header, and each (up to 2^16 elements) reads; a safetensors index (model.safetensors.index.json, its two
 * shards fixed beside it) is accepted only when every tensor of its shards is found in the file that holds it
 * and reads, and refused with a message and nothing left open. Any violation aborts (and ASan/UBSan catch the
 * rest).
 *
 * With -DZINC_LIBFUZZER and clang -fsanitize=fuzzer this is a libFuzzer binary; otherwise main() below is a
 * standalone driver (ctest, gcc's sanitizers): seeds made here (small valid files of each kind, --set
 * strings), then a deterministic mutation loop (bit flips, interesting header values, truncation,
 * extension, byte edits) for a bounded number of iterations and seconds.
 *
 *   fuzz_llmc [--iterations N] [--seed S] [--max-seconds T] */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "examples/gpt2/gpt2_files.h"
#include "fuzz_sink.h"
#include "base/config/config.h"
#include "runtime/checkpoint/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { K_MODEL, K_TOKENS, K_TEXT, K_SET, K_ST, K_INDEX, K_N };
static size_t g_ok[K_N], g_err[K_N];
static char g_path[4096];

static void require(bool ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_llmc: invariant broken: %s (last error: %s)\n", what, zinc_last_error());
    abort();
}

static void read_file(int kind, const uint8_t *data, size_t size) {
    FILE *f = fopen(g_path, "wb");
    require(f != NULL, "cannot write the temporary file");
    if (size) require(fwrite(data, 1, size, f) == size, "short write of the temporary file");
    fclose(f);
    char err[1024] = "";
    if (kind == K_MODEL) {
        gpt2_shape s;
        float *p = NULL;
        int version = 0;
        zinc_status st = gpt2_model_read(g_path, &s, &p, &version, err, sizeof err);
        if (st == ZINC_OK) {
            char why[256];
            require(gpt2_shape_check(&s, why, sizeof why) == 0, "an accepted model has an invalid shape");
            require((version == 3 || version == 5) &&
                        (uint64_t)size == 1024 + (uint64_t)gpt2_num_params(&s) * (version == 3 ? 4u : 2u),
                    "an accepted model's size is not 1024 + parameters x element size");
            g_ok[kind]++;
        } else {
            require(err[0] != 0 && p == NULL, "a refused model has no message");
            g_err[kind]++;
        }
        free(p);
    } else {
        gpt2_tokens t = {0};
        zinc_status st = kind == K_TOKENS ? gpt2_tokens_read(g_path, &t, err, sizeof err)
                                          : gpt2_tokens_from_text(g_path, &t, err, sizeof err);
        if (st == ZINC_OK) {
            if (kind == K_TOKENS) {
                int32_t n;
                memcpy(&n, data + 8, 4);
                require(size >= 1024 && t.n == n && (uint64_t)size == 1024 + 2 * (uint64_t)t.n,
                        "an accepted token file's size disagrees with its count");
            } else {
                require(t.n == (int64_t)size, "an accepted text is not one token per byte");
                for (int64_t i = 0; i < t.n; i++) require(t.tok[i] == data[i], "a text token is not its byte");
            }
            g_ok[kind]++;
        } else {
            require(err[0] != 0 && t.tok == NULL && t.n == 0, "a refused token file has no message");
            g_err[kind]++;
        }
        gpt2_tokens_free(&t);
    }
}

static void read_safetensors(const uint8_t *data, size_t size) {
    FILE *f = fopen(g_path, "wb");
    require(f != NULL, "cannot write the temporary file");
    if (size) require(fwrite(data, 1, size, f) == size, "short write of the temporary file");
    fclose(f);
    zckpt_st_file st;
    if (zckpt_st_open(&st, "fuzz", g_path) != ZINC_OK) {
        require(zinc_last_error()[0] != 0 && st.fd < 0 && st.t == NULL, "a refused safetensors file has no message");
        g_err[K_ST]++;
        return;
    }
    static float out[1 << 16];
    for (int i = 0; i < st.ntensors; i++) {
        const zckpt_st_tensor *t = &st.t[i];
        int64_t bytes = t->numel * (int64_t)zinc_dtype_size(t->dtype);
        require(t->offset >= 8 && t->offset + bytes <= (int64_t)size, "an accepted tensor lies outside the file");
        require(zckpt_st_find(&st, t->name) != NULL, "an accepted tensor is not found by its name");
        if (t->numel <= (int64_t)(sizeof out / sizeof *out))
            require(zckpt_st_read_f32(&st, t, 0, t->numel, out) == ZINC_OK, "an accepted tensor does not read");
    }
    zckpt_st_close(&st);
    g_ok[K_ST]++;
}

/* The index's two shards: "a" (F32 [2, 3]) in s1, "b" (BF16 [4]) in s2. */
static const char *const shard_hdr[2] = {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
                                         "{\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}"};
static char g_dir[4200];

static void write_shards(void) {
    require(mkdir(g_dir, 0700) == 0, "cannot make the index's directory");
    for (int i = 0; i < 2; i++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/s%d.safetensors", g_dir, i + 1);
        FILE *f = fopen(path, "wb");
        require(f != NULL, "cannot write a shard");
        uint64_t hl = strlen(shard_hdr[i]);
        uint8_t data[24] = {0};
        require(fwrite(&hl, 8, 1, f) == 1 && fwrite(shard_hdr[i], 1, hl, f) == hl &&
                    fwrite(data, 1, i ? 8 : 24, f) == (i ? 8u : 24u),
                "short write of a shard");
        fclose(f);
    }
}

static void read_index(const uint8_t *data, size_t size) {
    char path[4300];
    if (!g_dir[0]) snprintf(g_dir, sizeof g_dir, "%s.d", g_path), write_shards();
    snprintf(path, sizeof path, "%s/m.safetensors.index.json", g_dir);
    FILE *f = fopen(path, "wb");
    require(f != NULL, "cannot write the index");
    if (size) require(fwrite(data, 1, size, f) == size, "short write of the index");
    fclose(f);
    zckpt_st_set set;
    if (zckpt_st_set_open(&set, "fuzz", path) != ZINC_OK) {
        require(zinc_last_error()[0] != 0 && set.nfiles == 0 && set.files == NULL, "a refused index has no message");
        g_err[K_INDEX]++;
        return;
    }
    static float out[8];
    for (int i = 0; i < set.nfiles; i++)
        for (int j = 0; j < set.files[i].ntensors; j++) {
            const zckpt_st_file *in = NULL;
            const zckpt_st_tensor *t = zckpt_st_set_find(&set, set.files[i].t[j].name, &in);
            require(t == &set.files[i].t[j] && in == &set.files[i], "an accepted index finds a tensor elsewhere");
            require(zckpt_st_read_f32(in, t, 0, t->numel, out) == ZINC_OK,
                    "a tensor of an accepted index does not read");
        }
    zckpt_st_set_close(&set);
    g_ok[K_INDEX]++;
}

static void cleanup_index(void) {
    const char *names[3] = {"s1.safetensors", "s2.safetensors", "m.safetensors.index.json"};
    char path[4300];
    if (!g_dir[0]) return;
    for (int i = 0; i < 3; i++) snprintf(path, sizeof path, "%s/%s", g_dir, names[i]), unlink(path);
    rmdir(g_dir);
}

static void set_override(const uint8_t *data, size_t size) {
    char set[1024];
    size_t n = size < sizeof set - 1 ? size : sizeof set - 1;
    memcpy(set, data, n);
    set[n] = 0;
    const char *sets[2] = {set, NULL};
    zcfg_load_opts lo = {.sets = sets, .run_steps = 100};
    zlog log = {.fn = fuzz_sink, .level = ZINC_LOG_DEBUG};
    zinc_config cfg;
    zinc_status st = zcfg_load_text_ex("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\", \"params\": "
                                       "{\"lr\": \"auto\"}}, \"fp16\": {\"enabled\": \"auto\"}}",
                                       "fuzz", 1, &lo, &log, &cfg);
    require(st == ZINC_OK || (st == ZINC_ERR_CONFIG && zinc_last_error()[0]), "a refused --set has no message");
    if (st == ZINC_OK)
        g_ok[K_SET]++;
    else
        g_err[K_SET]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_path, sizeof g_path, "%s/fuzz_llmc.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    }
    if (size < 1) return 0;
    int kind = data[0] % K_N;
    if (kind == K_SET)
        set_override(data + 1, size - 1);
    else if (kind == K_ST)
        read_safetensors(data + 1, size - 1);
    else if (kind == K_INDEX)
        read_index(data + 1, size - 1);
    else
        read_file(kind, data + 1, size - 1);
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

#define BUF_MAX (1 << 20)
typedef struct blob {
    uint8_t *data;
    size_t len;
} blob;
static blob seeds[16];
static size_t nseeds;

static void add_seed(int kind, const void *body, size_t len) {
    uint8_t *d = malloc(len + 1);
    if (!d) abort();
    d[0] = (uint8_t)kind;
    memcpy(d + 1, body, len);
    seeds[nseeds++] = (blob){d, len + 1};
}

static void make_seeds(void) {
    /* a model of every small shape kind: version 3 and 5 */
    gpt2_shape s = {8, 20, 1, 2, 8, 32};
    for (int v = 3; v <= 5; v += 2) {
        size_t n = (size_t)gpt2_num_params(&s), esz = v == 3 ? 4 : 2, len = 1024 + n * esz;
        uint8_t *m = calloc(1, len);
        int32_t h[8] = {GPT2_MODEL_MAGIC, v, s.max_context, s.vocab, s.layers, s.heads, s.channels, s.padded_vocab};
        memcpy(m, h, sizeof h);
        for (size_t i = 1024; i < len; i++) m[i] = (uint8_t)(i * 31);
        add_seed(K_MODEL, m, len);
        free(m);
    }
    for (int32_t count = 0; count <= 300; count += 300) {
        size_t len = 1024 + 2 * (size_t)count;
        uint8_t *t = calloc(1, len);
        int32_t h[3] = {GPT2_TOKENS_MAGIC, 1, count};
        memcpy(t, h, sizeof h);
        for (size_t i = 1024; i < len; i++) t[i] = (uint8_t)i;
        add_seed(K_TOKENS, t, len);
        free(t);
    }
    const char *text = "The quick brown fox\njumps over the lazy dog.\n\x01\xff";
    add_seed(K_TEXT, text, strlen(text));
    const char *sets[] = {"optimizer.params.lr=3e-4",           "fp16.enabled=true",
                          "zero_optimization.stage=3",          "train_micro_batch_size_per_gpu=2",
                          "scheduler={\"type\": \"WarmupLR\"}", "gradient_clipping=1.0"};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) add_seed(K_SET, sets[i], strlen(sets[i]));
    /* a safetensors file: an F32 matrix and a BF16 vector after an 8-byte header length */
    static const char hdr[] = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                              "\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":"
                              "[24,32]}}";
    uint8_t stf[8 + sizeof hdr + 32];
    uint64_t hl = sizeof hdr - 1;
    memcpy(stf, &hl, 8);
    memcpy(stf + 8, hdr, hl);
    for (size_t i = 0; i < 32; i++) stf[8 + hl + i] = (uint8_t)(i * 37);
    add_seed(K_ST, stf, 8 + hl + 32);
    const char *index = "{\"metadata\": {\"total_size\": 32}, \"weight_map\": {\"a\": \"s1.safetensors\", \"b\": "
                        "\"s2.safetensors\"}}";
    add_seed(K_INDEX, index, strlen(index));
}

static const int32_t interesting[] = {0,         1,         -1,       2,       3,     5,       255,
                                      256,       1024,      65535,    65536,   65537, 1 << 20, (1 << 20) + 1,
                                      INT32_MAX, INT32_MIN, 20240326, 20240520};

static size_t mutate(uint8_t *buf, size_t len) {
    int rounds = 1 + (int)below(4);
    for (int r = 0; r < rounds; r++) {
        switch (below(6)) {
        case 0: /* a bit of the payload (not the kind byte) */
            if (len > 1) buf[1 + below(len - 1)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* a header field set to an interesting value */
            if (len >= 1 + 32) {
                int32_t v = interesting[below(sizeof interesting / sizeof *interesting)];
                memcpy(buf + 1 + 4 * below(8), &v, 4);
            }
            break;
        case 2: /* truncation */
            if (len > 1) len = 1 + below(len - 1);
            break;
        case 3: /* extension */
        {
            size_t add = 1 + below(64);
            if (len + add < BUF_MAX) {
                for (size_t i = 0; i < add; i++) buf[len + i] = (uint8_t)next();
                len += add;
            }
            break;
        }
        case 4: /* a byte anywhere */
            if (len > 1) buf[1 + below(len - 1)] = (uint8_t)next();
            break;
        default: /* a --set string: a character inserted */
            if (buf[0] % K_N == K_SET && len + 1 < BUF_MAX && len > 1) {
                size_t at = 1 + below(len - 1);
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = "=.{}[]\"0123456789e-+ntfau"[below(25)];
                len++;
            }
            break;
        }
    }
    return len;
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
            fprintf(stderr, "usage: fuzz_llmc [--iterations N] [--seed S] [--max-seconds T]\n");
            return 2;
        }
    }
    rng = seed;
    make_seeds();
    for (size_t i = 0; i < nseeds; i++) LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].len);
    for (int k = 0; k < K_N; k++)
        if (!g_ok[k]) {
            fprintf(stderr, "fuzz_llmc: a seed of kind %d was refused: %s\n", k, zinc_last_error());
            return 1;
        }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint8_t *buf = malloc(BUF_MAX);
    if (!buf) abort();
    long done = 0;
    for (; done < iterations; done++) {
        const blob *b = &seeds[below(nseeds)];
        memcpy(buf, b->data, b->len);
        size_t len = mutate(buf, b->len);
        LLVMFuzzerTestOneInput(buf, len);
        if (done % 256 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= max_seconds) {
                printf("fuzz_llmc: time limit of %ld s reached\n", max_seconds);
                break;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    double secs = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
    printf("fuzz_llmc: %ld mutated inputs in %.1f s (seed %llu): model %zu accepted %zu refused, tokens %zu/%zu, "
           "text %zu/%zu, --set %zu/%zu, safetensors %zu/%zu, index %zu/%zu; 0 invariant failures\n",
           done, secs, (unsigned long long)seed, g_ok[K_MODEL], g_err[K_MODEL], g_ok[K_TOKENS], g_err[K_TOKENS],
           g_ok[K_TEXT], g_err[K_TEXT], g_ok[K_SET], g_err[K_SET], g_ok[K_ST], g_err[K_ST], g_ok[K_INDEX],
           g_err[K_INDEX]);
    unlink(g_path);
    cleanup_index();
    free(buf);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    return 0;
}
#endif
