/* Fuzz target for the checkpoint manifest reader (issue 18). LLVMFuzzerTestOneInput reads the input twice:
 *   1. as it is: the text of a manifest.json, which must be refused unless its seal (the CRC-32C on the
 *      first line) matches, and never crash;
 *   2. resealed: when the input parses as a JSON object, its checksum is recomputed (as an editing tool
 *      would) so every mutation reaches the field validation.
 * The status is OK, CORRUPT or UNSUPPORTED (NOMEM tolerated); an accepted manifest satisfies the invariants
 * every reader relies on: parameters inside the flat buffer in order, files covering it exactly, every
 * section inside its file, block counts matching sizes, step counters and the loss scaler in range. Any
 * violation aborts.
 *
 * Built with -DZINC_LIBFUZZER and clang -fsanitize=fuzzer this is a libFuzzer binary. Otherwise main() below
 * is a standalone driver (ctest, under ASan/UBSan when available): every seed, then a deterministic
 * mutation loop (bit flips, byte edits, digit edits, deletions, duplications, splices with other seeds)
 * for a bounded number of iterations and seconds.
 *
 *   fuzz_manifest [--iterations N] [--seed S] [--max-seconds T] CORPUS_DIR_OR_FILE... */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/checkpoint/checkpoint_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t g_ok, g_refused;

static void require(bool ok, const char *what, const char *input, size_t n) {
    if (ok) return;
    fprintf(stderr, "fuzz_manifest: invariant broken: %s\n--- input (%zu bytes) ---\n%.*s\n--- last error ---\n%s\n",
            what, n, (int)(n > 4000 ? 4000 : n), input, zinc_last_error());
    abort();
}

static void check_accepted(const zckpt_manifest *m, const char *text, size_t n) {
    require(m->nparams >= 1 && m->nfiles >= 1 && m->world_size >= 1 && m->stage >= 0 && m->stage <= 3, "counts",
            text, n);
    int64_t end = 0;
    for (int i = 0; i < m->nparams; i++) {
        const zckpt_param *p = &m->params[i];
        require(p->numel >= 1 && p->flat_offset >= end && p->flat_offset + p->numel <= m->flat_numel,
                "parameter inside the flat buffer, in order", text, n);
        end = p->flat_offset + p->numel;
    }
    int64_t at = 0;
    for (int i = 0; i < m->nfiles; i++) {
        const zckpt_file *f = &m->files[i];
        require(f->flat_lo == at && f->flat_hi >= f->flat_lo && f->flat_hi <= m->flat_numel, "files tile the buffer",
                text, n);
        at = f->flat_hi;
        require(f->block_bytes > 0 && f->nblocks == (f->bytes + f->block_bytes - 1) / f->block_bytes,
                "block count", text, n);
        for (int s = 0; s < ZCKPT_NSEC; s++) {
            if (f->sec_offset[s] < 0) {
                require(s == ZCKPT_SEC_PARAMS, "master and Adam sections present", text, n);
                continue;
            }
            int64_t len = (f->flat_hi - f->flat_lo) * (int64_t)zinc_dtype_size(f->sec_dtype[s]);
            require(f->sec_offset[s] >= ZCKPT_HEADER_BYTES && f->sec_offset[s] + len <= f->bytes,
                    "section inside its file", text, n);
        }
        require(strchr(f->name, '/') == NULL && f->name[0] != '.', "file name stays in the directory", text, n);
    }
    require(at == m->flat_numel, "files cover the buffer", text, n);
    require(m->steps_taken + m->steps_skipped <= m->steps && m->steps <= ZCKPT_MAX_STEPS, "step counters", text, n);
    require(m->scaler.scale_window >= 1 && isfinite(m->scaler.cur_scale) && m->scaler.cur_scale > 0 &&
                m->scaler.cur_hysteresis >= 1,
            "loss scaler", text, n);
}

static void one(const char *text, size_t n) {
    zckpt_manifest m;
    zinc_status st = zckpt_manifest_parse("fuzz/manifest.json", text, n, &m);
    require(st == ZINC_OK || st == ZINC_ERR_CORRUPT || st == ZINC_ERR_UNSUPPORTED || st == ZINC_ERR_NOMEM,
            "status", text, n);
    require(st == ZINC_OK || zinc_last_error()[0] != 0, "a refusal has a message", text, n);
    if (st == ZINC_OK) {
        g_ok++;
        check_accepted(&m, text, n);
        zckpt_manifest_free(&m);
    } else {
        g_refused++;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    one(text, size);
    json_t *root = json_loadb(text, size, 0, NULL);
    if (json_is_object(root)) {
        json_object_del(root, "manifest_crc32c");
        char *sealed = zckpt_manifest_seal(root);
        if (sealed) one(sealed, strlen(sealed));
        free(sealed);
    }
    json_decref(root);
    free(text);
    return 0;
}

#ifndef ZINC_LIBFUZZER
typedef struct seed {
    char *data;
    size_t len;
} seed;

static seed *g_seeds;
static size_t g_nseeds, g_cap;

static void add_seed(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    if (len < 0 || len > (1 << 20)) {
        fclose(f);
        return;
    }
    char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) == (size_t)len) {
        b[len] = 0;
        if (g_nseeds == g_cap) {
            g_cap = g_cap ? 2 * g_cap : 16;
            g_seeds = realloc(g_seeds, g_cap * sizeof *g_seeds);
        }
        g_seeds[g_nseeds++] = (seed){b, (size_t)len};
    } else {
        free(b);
    }
    fclose(f);
}

static void add_path(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        add_seed(path);
        return;
    }
    struct dirent *de;
    char p[4096];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        add_seed(p);
    }
    closedir(d);
}

static uint64_t g_rng;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* One mutation of buf (len bytes, capacity cap) in place; returns the new length. */
static size_t mutate(char *buf, size_t len, size_t cap) {
    size_t pos = len ? (size_t)(rnd() % len) : 0;
    switch (rnd() % 8) {
    case 0: /* a bit flip */
        if (len) buf[pos] = (char)(buf[pos] ^ (1 << (rnd() % 8)));
        break;
    case 1: /* a random byte */
        if (len) buf[pos] = (char)rnd();
        break;
    case 2: { /* a digit changed (numbers are where the meaning is) */
        for (size_t k = 0; k < len; k++) {
            size_t q = (pos + k) % len;
            if (buf[q] >= '0' && buf[q] <= '9') {
                buf[q] = (char)('0' + rnd() % 10);
                break;
            }
        }
        break;
    }
    case 3: { /* a number made huge or negative */
        const char *rep[] = {"-1", "0", "9223372036854775807", "-9223372036854775808", "4294967297", "1e308",
                             "4611686018427387904", "65536"};
        const char *r = rep[rnd() % 8];
        size_t rl = strlen(r);
        for (size_t k = 0; k < len; k++) {
            size_t q = (pos + k) % len;
            if (buf[q] >= '0' && buf[q] <= '9') {
                size_t e = q;
                while (e < len && ((buf[e] >= '0' && buf[e] <= '9') || buf[e] == '.' || buf[e] == 'e')) e++;
                if (len - (e - q) + rl >= cap) break;
                memmove(buf + q + rl, buf + e, len - e);
                memcpy(buf + q, r, rl);
                len = len - (e - q) + rl;
                break;
            }
        }
        break;
    }
    case 4: { /* a deletion */
        size_t n = len ? 1 + rnd() % (len - pos < 64 ? len - pos : 64) : 0;
        memmove(buf + pos, buf + pos + n, len - pos - n);
        len -= n;
        break;
    }
    case 5: { /* a duplication */
        size_t n = len ? 1 + rnd() % (len - pos < 64 ? len - pos : 64) : 0;
        if (len + n >= cap) break;
        memmove(buf + pos + n, buf + pos, len - pos);
        len += n;
        break;
    }
    case 6: { /* a splice from another seed */
        const seed *s = &g_seeds[rnd() % g_nseeds];
        if (!s->len) break;
        size_t from = (size_t)(rnd() % s->len), n = 1 + rnd() % 128;
        if (from + n > s->len) n = s->len - from;
        if (pos + n >= cap) break;
        memcpy(buf + pos, s->data + from, n);
        if (pos + n > len) len = pos + n;
        break;
    }
    default: { /* a key renamed: one letter changed inside quotes */
        for (size_t k = 0; k < len; k++) {
            size_t q = (pos + k) % len;
            if (buf[q] >= 'a' && buf[q] <= 'z') {
                buf[q] = (char)('a' + rnd() % 26);
                break;
            }
        }
        break;
    }
    }
    return len;
}

int main(int argc, char **argv) {
    long iterations = 20000, max_seconds = 60;
    uint64_t seedv = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seedv = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) max_seconds = strtol(argv[++i], NULL, 10);
        else add_path(argv[i]);
    }
    if (!g_nseeds) {
        fprintf(stderr, "fuzz_manifest: no seeds (give a corpus directory)\n");
        return 2;
    }
    g_rng = seedv * 0x9e3779b97f4a7c15ull | 1;
    for (size_t i = 0; i < g_nseeds; i++) LLVMFuzzerTestOneInput((const uint8_t *)g_seeds[i].data, g_seeds[i].len);
    size_t seeds_ok = g_ok;
    time_t t0 = time(NULL);
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    long it = 0;
    for (; it < iterations && time(NULL) - t0 < max_seconds; it++) {
        const seed *s = &g_seeds[rnd() % g_nseeds];
        if (s->len >= cap) continue;
        memcpy(buf, s->data, s->len);
        size_t len = s->len;
        int nmut = 1 + (int)(rnd() % 4);
        for (int k = 0; k < nmut; k++) len = mutate(buf, len, cap);
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    }
    free(buf);
    printf("fuzz_manifest: %zu seeds (%zu accepted), %ld mutated inputs, %zu executions (each input as it is and "
           "resealed): %zu accepted, %zu refused, 0 crashes\n",
           g_nseeds, seeds_ok, it, g_ok + g_refused, g_ok, g_refused);
    return 0;
}
#endif
