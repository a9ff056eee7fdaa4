/* llm.c's files as examples/gpt2 reads and writes them: model checkpoints (versions 3 and 5) and token
 * files written and read back bitwise, the header bytes at their documented places, damaged files
 * (truncated, wrong magic, wrong version, bad shape) and tokens out of the vocabulary refused with a
 * message naming the file, the field and the expected value; the sequential loader's windows. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpt2_files.h"
#include "base/core/safe_file.h"
#include "zt.h"

static char dir[512];
static char err[1024];

static const char *path(const char *name) {
    static char p[4][700];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

static void write_raw(const char *p, const void *data, size_t n) {
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}
static size_t read_raw(const char *p, void **data) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n);
    if (fread(*data, 1, n, f) != n) n = 0;
    fclose(f);
    return n;
}

#define EXPECT_ERR(call, needle1, needle2)                                                                 \
    do {                                                                                                   \
        err[0] = 0;                                                                                        \
        zinc_status st_ = (call);                                                                          \
        ZT_CHECK(st_ != ZINC_OK && strstr(err, needle1) && strstr(err, needle2),                           \
                 "%s: expected an error with \"%s\" and \"%s\", got %s: %s", #call, needle1, needle2,         \
                 zinc_status_name(st_), err);                                                              \
    } while (0)

static void test_model(void) {
    gpt2_shape s = {12, 50, 3, 2, 16, 64};
    int64_t n = gpt2_num_params(&s);
    /* the count llm.c's layout gives: wte, wpe, 12 per-layer tensors, lnf */
    int64_t C = 16, L = 3;
    ZT_CHECK(n == 64 * C + 12 * C + L * (12 * C * C + 13 * C) + 2 * C, "parameter count %lld", (long long)n);
    ZT_CHECK(gpt2_llmc_offset(&s, GPT2_QKVW, 1) == 64 * C + 12 * C + 2 * L * C + 3 * C * C, "qkvw[1] offset");
    uint64_t rng = zt_seed();
    float *p = malloc((size_t)n * 4), *q = NULL;
    for (int64_t i = 0; i < n; i++) p[i] = (float)zt_rand_normal(&rng);
    gpt2_shape r;
    int version = 0;
    /* version 3: bitwise */
    ZT_OK(gpt2_model_write(path("m3.bin"), &s, p, 3, ZFILE_REPLACE, NULL, err, sizeof err));
    void *raw;
    size_t len = read_raw(path("m3.bin"), &raw);
    int32_t *h = raw;
    ZT_CHECK(len == 1024 + (size_t)n * 4 && h[0] == 20240326 && h[1] == 3 && h[2] == 12 && h[3] == 50 && h[4] == 3 &&
                 h[5] == 2 && h[6] == 16 && h[7] == 64 && !memcmp((char *)raw + 1024, p, (size_t)n * 4),
             "version 3 file layout");
    ZT_OK(gpt2_model_read(path("m3.bin"), &r, &q, &version, err, sizeof err));
    ZT_CHECK(q && version == 3 && !memcmp(&r, &s, sizeof s) && !memcmp(p, q, (size_t)n * 4), "version 3 round trip");
    free(q);
    /* version 5: bf16; values already bf16 come back bitwise, others rounded to nearest even */
    for (int64_t i = 0; i < n; i++) p[i] = zinc_bf16_to_f32(zinc_f32_to_bf16(p[i]));
    ZT_OK(gpt2_model_write(path("m5.bin"), &s, p, 5, ZFILE_REPLACE, NULL, err, sizeof err));
    ZT_OK(gpt2_model_read(path("m5.bin"), &r, &q, &version, err, sizeof err));
    ZT_CHECK(q && version == 5 && !memcmp(p, q, (size_t)n * 4), "version 5 round trip");
    free(q);
    q = NULL;

    /* damaged files */
    write_raw(path("short.bin"), raw, 1000);
    EXPECT_ERR(gpt2_model_read(path("short.bin"), &r, &q, NULL, err, sizeof err), "short.bin", "header needs 1024");
    write_raw(path("trunc.bin"), raw, len - 4);
    EXPECT_ERR(gpt2_model_read(path("trunc.bin"), &r, &q, NULL, err, sizeof err), "trunc.bin", "expected");
    h[0] = 20240520;
    write_raw(path("magic.bin"), raw, len);
    EXPECT_ERR(gpt2_model_read(path("magic.bin"), &r, &q, NULL, err, sizeof err), "header[0] (magic)", "20240326");
    h[0] = 20240326, h[1] = 4;
    write_raw(path("version.bin"), raw, len);
    EXPECT_ERR(gpt2_model_read(path("version.bin"), &r, &q, NULL, err, sizeof err), "header[1] (version)",
               "expected 3");
    h[1] = 3, h[5] = 5; /* heads must divide channels */
    write_raw(path("heads.bin"), raw, len);
    EXPECT_ERR(gpt2_model_read(path("heads.bin"), &r, &q, NULL, err, sizeof err), "heads.bin", "heads = 5");
    h[5] = 2, h[7] = 40; /* padded vocabulary below the vocabulary */
    write_raw(path("pad.bin"), raw, len);
    EXPECT_ERR(gpt2_model_read(path("pad.bin"), &r, &q, NULL, err, sizeof err), "pad.bin", "padded vocabulary = 40");
    EXPECT_ERR(gpt2_model_read(path("missing.bin"), &r, &q, NULL, err, sizeof err), "missing.bin", "cannot open");
    ZT_CHECK(q == NULL, "no parameters returned on errors");
    free(raw);
    free(p);
}

static void test_tokens(void) {
    int64_t n = 1000;
    uint16_t *t = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) t[i] = (uint16_t)(i * 7919 % 50257);
    ZT_OK(gpt2_tokens_write(path("t.bin"), t, n, ZFILE_REPLACE, err, sizeof err));
    void *raw;
    size_t len = read_raw(path("t.bin"), &raw);
    int32_t *h = raw;
    ZT_CHECK(len == 1024 + 2000 && h[0] == 20240520 && h[1] == 1 && h[2] == 1000 &&
                 !memcmp((char *)raw + 1024, t, 2000),
             "token file layout");
    gpt2_tokens r = {0};
    ZT_OK(gpt2_tokens_read(path("t.bin"), &r, err, sizeof err));
    ZT_CHECK(r.n == n && !memcmp(r.tok, t, 2000), "token round trip");
    ZT_OK(gpt2_tokens_check(&r, 50257, "t.bin", err, sizeof err));
    EXPECT_ERR(gpt2_tokens_check(&r, 50000, "t.bin", err, sizeof err), "t.bin", "vocabulary is 50000");
    gpt2_tokens_free(&r);

    write_raw(path("tshort.bin"), raw, len - 2);
    EXPECT_ERR(gpt2_tokens_read(path("tshort.bin"), &r, err, sizeof err), "header[2] (token count) is 1000",
               "should have 3024 bytes");
    h[0] = 20240326;
    write_raw(path("tmagic.bin"), raw, len);
    EXPECT_ERR(gpt2_tokens_read(path("tmagic.bin"), &r, err, sizeof err), "tmagic.bin", "expected 20240520");
    h[0] = 20240520, h[1] = 2;
    write_raw(path("tversion.bin"), raw, len);
    EXPECT_ERR(gpt2_tokens_read(path("tversion.bin"), &r, err, sizeof err), "header[1] (version) is 2", "expected 1");
    ZT_CHECK(r.tok == NULL && r.n == 0, "nothing returned on errors");
    free(raw);

    /* text: bytes are tokens */
    const char *txt = "GPT-2 \xc3\xa9\n";
    write_raw(path("x.txt"), txt, strlen(txt));
    ZT_OK(gpt2_tokens_from_text(path("x.txt"), &r, err, sizeof err));
    int same = r.n == (int64_t)strlen(txt);
    for (int64_t i = 0; same && i < r.n; i++) same = r.tok[i] == (unsigned char)txt[i];
    ZT_CHECK(same, "text bytes as tokens");
    gpt2_tokens_free(&r);

    /* the loader: batches of global*T+1 tokens at multiples of global*T, wrapping before one that would
     * not fit (llm.c's DataLoader with B*processes = global) */
    gpt2_tokens d = {t, 100};
    int T = 4;
    int64_t global = 6; /* 24 tokens per batch: (100-1)/24 = 4 batches per pass */
    ZT_CHECK(gpt2_batches_per_pass(&d, T, global) == 4, "batches per pass %lld",
             (long long)gpt2_batches_per_pass(&d, T, global));
    uint16_t w[5];
    int ok = 1;
    for (int64_t k = 0; k < 60; k++) {
        gpt2_window(&d, T, global, k, w);
        int64_t batch = (k / global) % 4, pos = batch * global * T + (k % global) * T;
        ok &= !memcmp(w, t + pos, 5 * 2) && pos + 5 <= 100;
    }
    ZT_CHECK(ok, "sequential windows");
    /* --shuffle: each pass visits every batch once, in an order that changes with the pass and the seed */
    int64_t nb = 4;
    int perm_ok = 1, differs = 0;
    for (int64_t pass = 0; pass < 3; pass++) {
        int seen[4] = {0};
        for (int64_t i = 0; i < nb; i++) {
            int64_t k = (pass * nb + i) * global;
            gpt2_window_shuffled(&d, T, global, k, 99, w);
            int64_t pos = -1;
            for (int64_t bb = 0; bb < nb; bb++)
                if (!memcmp(w, t + bb * global * T, 5 * 2)) pos = bb;
            if (pos < 0 || seen[pos]++) perm_ok = 0;
            differs |= pos != i;
            gpt2_window_shuffled(&d, T, global, k + 3, 99, w); /* windows inside a batch keep their order */
            perm_ok &= pos >= 0 && !memcmp(w, t + pos * global * T + 3 * T, 5 * 2);
        }
    }
    ZT_CHECK(perm_ok, "shuffled passes are permutations of the batches");
    ZT_CHECK(differs, "shuffling changes the order");
    gpt2_tokens tiny = {t, 24};
    ZT_CHECK(gpt2_batches_per_pass(&tiny, T, global) == 0, "a file of global*T tokens holds no batch (needs +1)");
    free(t);
}

int main(void) {
    zt_name = "gpt2_files";
    snprintf(dir, sizeof dir, "%s/gpt2_files_test", zt_build_dir());
    mkdir(dir, 0755);
    test_model();
    test_tokens();
    return zt_finish();
}
