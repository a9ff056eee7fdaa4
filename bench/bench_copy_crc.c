/* The decoupled checkpoint writer's CPU work per save (issue 38): the snapshot's copy of the state into the
 * image, and the checksums of the image. Two ways over the same bytes:
 *   two passes: zk_copy_stream over the whole buffer (streaming stores), then zcrc32c over the copy (read back
 *               from memory: the streaming stores left nothing in the caches);
 *   one pass:   chunk by chunk, zcrc32c over the source chunk, then zk_copy_stream of the same chunk (its source
 *               still in the cache): the image is never read back.
 * Both give the same checksum (checked). Prints seconds and GiB/s per way, the median of --reps, interleaved.
 *
 *   bench_copy_crc [--mib N (1424)] [--reps K (5)] [--chunk KIB (96)] */
#include <stdint.h>

#include "base/core/crc32c.h"
#include "bench/bench_util.h"
#include "kernels/cpu_kernels.h"

static uint32_t two_passes(uint8_t *dst, const uint8_t *src, size_t n) {
    zk_copy_stream(dst, src, n, 1);
    return zcrc32c(0, dst, n);
}

static uint32_t one_pass(uint8_t *dst, const uint8_t *src, size_t n, size_t chunk) {
    uint32_t crc = 0;
    for (size_t off = 0; off < n; off += chunk) {
        size_t len = n - off < chunk ? n - off : chunk;
        crc = zcrc32c(crc, src + off, len);
        zk_copy_stream(dst + off, src + off, len, 1);
    }
    return crc;
}

int main(int argc, char **argv) {
    size_t mib = 1424, chunk = 96 << 10;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            chunk = (size_t)atol(argv[++i]) << 10;
        else {
            fprintf(stderr, "usage: bench_copy_crc [--mib N] [--reps K] [--chunk KIB]\n");
            return 2;
        }
    }
    if (mib == 0 || reps < 1 || reps > 100 || chunk < 4096 || chunk % 64) {
        fprintf(stderr, "bench_copy_crc: want --mib > 0, --reps 1..100, --chunk >= 4 KiB\n");
        return 2;
    }
    size_t n = mib << 20;
    uint8_t *src = bench_alloc("bench_copy_crc", n), *dst = bench_alloc("bench_copy_crc", n);
    float *f = (float *)src;
    uint32_t x = 12345;
    for (size_t i = 0; i < n / sizeof(float); i++) {
        x = x * 1664525u + 1013904223u;
        f[i] = (float)(x >> 8) * 1e-7f - 0.8f;
    }
    double t2[100], t1[100];
    uint32_t c2 = 0, c1 = 0;
    for (int r = 0; r < reps; r++) {
        double a = bench_now_s();
        c2 = two_passes(dst, src, n);
        double b = bench_now_s();
        c1 = one_pass(dst, src, n, chunk);
        double c = bench_now_s();
        t2[r] = b - a;
        t1[r] = c - b;
    }
    if (c1 != c2) {
        fprintf(stderr, "bench_copy_crc: the two ways disagree (crc %08x vs %08x)\n", c1, c2);
        return 1;
    }
    qsort(t2, (size_t)reps, sizeof(double), bench_cmp_double);
    qsort(t1, (size_t)reps, sizeof(double), bench_cmp_double);
    double gib = (double)n / (1 << 30);
    printf("bench_copy_crc: %zu MiB, %d reps (median), chunk %zu KiB, crc %08x\n", mib, reps, chunk >> 10, c1);
    printf("  two passes (copy, then checksum the copy): %.3f s  %.2f GiB/s\n", t2[reps / 2], gib / t2[reps / 2]);
    printf("  one pass (checksum each chunk, then copy): %.3f s  %.2f GiB/s  (%.2fx)\n", t1[reps / 2],
           gib / t1[reps / 2], t2[reps / 2] / t1[reps / 2]);
    free(src);
    free(dst);
    return 0;
}
