/* The decoupled writer's checksums taken as it copies (runtime/checkpoint/checkpoint_segs.c) against the pass
 * over the whole image that they replace: for shard files of several blocks, with and without the params
 * section (bf16), a section with no source (Lion's exp_avg_sq: zeros), pieces that do not divide a block,
 * the pieces copied in a random order, some by the "guard" (copied without a checksum, as the training
 * thread does), every block's CRC32C and the file's equal zcrc32c over the image, and the image equals the
 * bytes copied; without segments (an image made on the training thread) the same checksum. A non-finite
 * element is reported by the copy of its piece. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/crc32c.h"
#include "kernels/cpu_kernels.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "zt.h"

typedef struct shape {
    const char *name;
    int64_t nelem, piece;
    bool params, lion;
} shape;

static void one(const shape *sh, uint64_t *rng) {
    zckpt_file f;
    zckpt_layout(&f, 0, 1000, 1000 + sh->nelem, sh->params, ZINC_BF16);
    int nsec = sh->params ? 4 : 3;
    bool have[4] = {true, true, !sh->lion, true};
    size_t esz[4] = {4, 4, 4, 2};
    uint8_t *src[4] = {0}, *image = calloc((size_t)f.bytes, 1), *want = calloc((size_t)f.bytes, 1);
    for (int s = 0; s < nsec; s++) {
        src[s] = malloc((size_t)sh->nelem * esz[s]);
        for (int64_t i = 0; i < sh->nelem * (int64_t)esz[s]; i++) src[s][i] = (uint8_t)zt_rand_u64(rng);
        if (s < ZCKPT_SEC_PARAMS) /* finite floats: the copies check them */
            for (int64_t i = 0; i < sh->nelem; i++) ((float *)src[s])[i] = (float)zt_rand_normal(rng);
        if (have[s]) memcpy(want + f.sec_offset[s], src[s], (size_t)sh->nelem * esz[s]);
    }
    zckpt_header_encode(&f, "0123456789abcdef", want);
    memcpy(image, want, ZCKPT_HEADER_BYTES);
    zckpt_segs g;
    ZT_OK(zckpt_segs_build(&g, &f, nsec, have, sh->nelem, sh->piece, esz));
    int64_t np = (sh->nelem + sh->piece - 1) / sh->piece, *order = malloc((size_t)np * sizeof *order);
    for (int64_t p = 0; p < np; p++) order[p] = p;
    for (int64_t p = np - 1; p > 0; p--) { /* a random order, as writer and guard interleave */
        int64_t q = (int64_t)(zt_rand_u64(rng) % (uint64_t)(p + 1)), t = order[p];
        order[p] = order[q];
        order[q] = t;
    }
    int bad = 0;
    for (int64_t i = 0; i < np; i++) {
        int64_t p = order[i], a = p * sh->piece, n = sh->nelem - a < sh->piece ? sh->nelem - a : sh->piece;
        bool guard = i % 3 == 1;
        for (int s = 0; s < nsec; s++) {
            if (!have[s]) continue;
            int64_t off = f.sec_offset[s] + a * (int64_t)esz[s], bytes = n * (int64_t)esz[s];
            const uint8_t *from = src[s] + a * (int64_t)esz[s];
            if (guard)
                memcpy(image + off, from, (size_t)bytes);
            else
                bad |= zckpt_segs_copy(&g, p, s, image, from, off, bytes, s < ZCKPT_SEC_PARAMS);
        }
    }
    ZT_CHECK(!bad, "%s: finite pieces reported non-finite", sh->name);
    ZT_CHECK(!memcmp(image, want, (size_t)f.bytes), "%s: the image differs from the bytes copied", sh->name);
    f.block_crc = calloc((size_t)f.nblocks, sizeof *f.block_crc);
    zckpt_segs_finish(&g, image, &f);
    int wrong = 0;
    for (int64_t b = 0; b < f.nblocks; b++) {
        int64_t off = b * f.block_bytes, len = f.bytes - off < f.block_bytes ? f.bytes - off : f.block_bytes;
        wrong += f.block_crc[b] != zcrc32c(0, want + off, (size_t)len);
    }
    ZT_CHECK(!wrong, "%s: %d of %lld block checksums differ from the pass over the image", sh->name, wrong,
             (long long)f.nblocks);
    ZT_CHECK(f.crc == zcrc32c(0, want, (size_t)f.bytes), "%s: the file's checksum %08x, the image's %08x", sh->name,
             f.crc, zcrc32c(0, want, (size_t)f.bytes));
    zckpt_segs none = {0}; /* an image made on the training thread: every block read from it */
    uint32_t seg_crc = f.crc;
    zckpt_segs_finish(&none, image, &f);
    ZT_CHECK(f.crc == seg_crc, "%s: without segments the file's checksum is %08x, with them %08x", sh->name, f.crc,
             seg_crc);
    printf("%s: %lld bytes, %lld blocks, %lld segments, %lld pieces: checksums equal the image's\n", sh->name,
           (long long)f.bytes, (long long)f.nblocks, (long long)g.n, (long long)np);

    /* A NaN in the master section of the last piece: its copy says so. */
    int64_t last = np - 1, a = last * sh->piece;
    ((float *)src[0])[sh->nelem - 1] = NAN;
    int nan = zckpt_segs_copy(&g, last, 0, image, src[0] + a * 4, f.sec_offset[0] + a * 4, (sh->nelem - a) * 4, 1);
    ZT_CHECK(nan, "%s: a NaN copied without being reported", sh->name);
    zckpt_segs_free(&g);
    free(order);
    free(f.block_crc);
    for (int s = 0; s < 4; s++) free(src[s]);
    free(image);
    free(want);
}

int main(void) {
    uint64_t seed = zt_seed(), rng = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    const shape shapes[] = {
        {"3 sections, pieces of 64 Ki elements", 700000, 65536, false, false},
        {"stage 3 (bf16 params), pieces of 300001 elements", 1234567, 300001, true, false},
        {"Lion (no exp_avg_sq), one piece", 400000, 1 << 22, false, true},
        {"stage 3 Lion, pieces of 1024", 300000, 1024, true, true},
        {"a file inside one block", 5000, 1024, true, false},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) one(&shapes[i], &rng);
    return zt_finish();
}
