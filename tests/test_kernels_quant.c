/* ZeRO++ block quantization (kernels/quant_cpu.c, the formulas in kernels/cpu_kernels.h):
 * - DeepSpeed's Symmetric math on hand-worked values: scale 2^bits / (2 max), rint half to even (2.5 -> 2,
 *   3.5 -> 4), the block maximum clamped to 2^(bits-1) - 1, an all-zero block (scale 1, q 0), the stored
 *   scale 1 / s;
 * - the error per element against float64, in every block: at most (max / 2^bits)(1 + 2^-12) below the top of
 *   the range and (max / 2^(bits-1))(1 + 2^-12) at it, plus the rounding of the result to a 16-bit
 *   dtype (2^-8 |y| for bf16, 2^-11 |y| + 2^-25 for fp16); and that the bound is met tightly (the largest
 *   error seen is above half of it: the test would see a wrong scale);
 * - zk_quant_sym / zk_dequant_sym (every SIMD path this CPU has, 1 and 3 threads, sizes that cross the
 *   threads' runs, blocks of 1, 7, 64, 2048 and 12000 elements, the last block short) bitwise equal to the
 *   references, for fp32, bf16 and fp16 and for 8 and 4 bits. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_kernels.h"
#include "zt.h"

static uint64_t rng;
static const char *const paths[] = {"scalar", "avx2", "avx512"};
static const zinc_dtype dts[] = {ZINC_FP32, ZINC_BF16, ZINC_FP16};

static void store(void *buf, zinc_dtype t, size_t i, float x) {
    if (t == ZINC_FP32) ((float *)buf)[i] = x;
    else if (t == ZINC_FP16) ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x);
    else ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x);
}

static double load(const void *buf, zinc_dtype t, size_t i) {
    if (t == ZINC_FP32) return ((const float *)buf)[i];
    if (t == ZINC_FP16) return zinc_fp16_to_f32(((const uint16_t *)buf)[i]);
    return zinc_bf16_to_f32(((const uint16_t *)buf)[i]);
}

static void test_hand_values(void) {
    /* max 1: s = 256 / 2 = 128 */
    const float x[] = {1.0f, -0.5f, 0.25f, 2.5f / 128, 3.5f / 128, -2.5f / 128, 0.0039f, -1.0f};
    const int8_t want[] = {127, -64, 32, 2, 4, -2, 0, -128};
    int8_t q[8];
    float sc[2];
    zk_quant_sym_ref(x, ZINC_FP32, 8, 8, 8, q, sc);
    for (int i = 0; i < 8; i++) ZT_CHECK(q[i] == want[i], "x %g: q %d, want %d", x[i], q[i], want[i]);
    ZT_CHECK(sc[0] == 1.0f / 128, "scale %g, want 1/128", sc[0]);
    float y[8];
    zk_dequant_sym_ref(q, sc, 8, 8, y, ZINC_FP32);
    ZT_CHECK(y[0] == 127.0f / 128 && y[1] == -0.5f && y[7] == -1.0f, "dequantized %g %g %g", y[0], y[1], y[7]);
    /* 4 bits: s = 16 / 2 = 8; q in [-8, 7] */
    const float x4[] = {1.0f, -1.0f, 0.5f, 0.3125f, 0.1875f, 0.0f};
    const int8_t want4[] = {7, -8, 4, 2, 2, 0}; /* 2.5 -> 2, 1.5 -> 2 */
    zk_quant_sym_ref(x4, ZINC_FP32, 6, 6, 4, q, sc);
    for (int i = 0; i < 6; i++) ZT_CHECK(q[i] == want4[i], "4-bit x %g: q %d, want %d", x4[i], q[i], want4[i]);
    ZT_CHECK(sc[0] == 0.125f, "4-bit scale %g", sc[0]);
    /* two blocks, the second all zero: scale 1, q 0 */
    const float z[] = {0.5f, -0.25f, 0.0f, -0.0f};
    zk_quant_sym_ref(z, ZINC_FP32, 4, 2, 8, q, sc);
    ZT_CHECK(sc[0] == 0.5f / 128 && sc[1] == 1.0f && q[2] == 0 && q[3] == 0, "zero block: scales %g %g q %d %d",
             sc[0], sc[1], q[2], q[3]);
}

/* Fills n values in blocks of very different magnitudes, some blocks all zero, some with ties. */
static void fill(void *x, zinc_dtype t, size_t n, size_t block) {
    for (size_t b = 0; b < n; b += block) {
        double mag = ldexp(1.0, (int)(zt_rand_u64(&rng) % 24) - 16);
        int kind = (int)(zt_rand_u64(&rng) % 8);
        for (size_t i = b; i < n && i < b + block; i++) {
            double v = kind == 0 ? 0.0 : zt_rand_normal(&rng) * mag;
            if (kind == 1) v = mag * ((double)(int64_t)(zt_rand_u64(&rng) % 255) - 127 + 0.5) / 128; /* ties */
            store(x, t, i, (float)v);
        }
    }
}

/* The float64 check of one quantize/dequantize round trip; returns the largest error / bound seen. */
static double check_error(const void *x, zinc_dtype t, size_t n, size_t block, int bits, const void *y) {
    const double slack = ldexp(1.0, -12); /* the float roundings of s, x*s, 1/s and q*scale */
    double worst = 0;
    for (size_t b = 0; b < n; b += block) {
        size_t e = n - b < block ? n : b + block;
        double m = 0;
        for (size_t i = b; i < e; i++) m = fmax(m, fabs(load(x, t, i)));
        double s = m == 0 ? 1 : ldexp(1.0, bits) / (2 * m);
        for (size_t i = b; i < e; i++) {
            double xi = load(x, t, i), yi = load(y, t, i);
            bool top = fabs(xi) * s >= ldexp(1.0, bits - 1) - 0.5 - 1e-3;
            double bound = (top ? ldexp(m, 1 - bits) : ldexp(m, -bits)) * (1 + slack);
            double round = t == ZINC_BF16 ? ldexp(fabs(yi), -8) : t == ZINC_FP16 ? ldexp(fabs(yi), -11) + ldexp(1, -25) : 0;
            double err = fabs(yi - xi);
            if (err > bound + round) {
                ZT_CHECK(0, "%s %d bits, block %zu, element %zu: |%.9g - %.9g| = %.3g above %.3g (max %.9g)",
                         zinc_dtype_name(t), bits, block, i, yi, xi, err, bound + round, m);
                return worst;
            }
            if (bound > 0 && !top) worst = fmax(worst, err / (bound + round));
        }
    }
    zt_passed++;
    return worst;
}

static void test_error_bound(void) {
    const size_t n = 50000;
    const size_t blocks[] = {7, 64, 2048, 12000};
    for (int d = 0; d < 3; d++)
        for (int bits = 4; bits <= 8; bits += 4)
            for (int k = 0; k < 4; k++) {
                zinc_dtype t = dts[d];
                size_t sz = zinc_dtype_size(t), nb = (n + blocks[k] - 1) / blocks[k];
                void *x = malloc(n * sz), *y = malloc(n * sz);
                int8_t *q = malloc(n);
                float *sc = malloc(nb * sizeof *sc);
                fill(x, t, n, blocks[k]);
                zk_quant_sym_ref(x, t, n, blocks[k], bits, q, sc);
                zk_dequant_sym_ref(q, sc, n, blocks[k], y, t);
                double worst = check_error(x, t, n, blocks[k], bits, y);
                /* the bound is tight: rounding to the nearest step errs by up to half a step somewhere */
                ZT_CHECK(blocks[k] < 64 || worst > 0.5, "%s %d bits block %zu: largest error only %.3g of the bound",
                         zinc_dtype_name(t), bits, blocks[k], worst);
                free(x), free(y), free(q), free(sc);
            }
}

static void test_fast_equals_ref(void) {
    const size_t sizes[] = {1, 13, 4096, 65536 * 3 + 517};
    const size_t blocks[] = {1, 7, 64, 2048, 12000};
    const int threads[] = {1, 3};
    for (int p = 0; p < 3; p++) {
        if (zkernels_set_simd(paths[p]) != 0) continue;
        for (int th = 0; th < 2; th++) {
            zkernels_set_threads(threads[th]);
            for (int d = 0; d < 3; d++)
                for (int bits = 4; bits <= 8; bits += 4)
                    for (int si = 0; si < 4; si++)
                        for (int bi = 0; bi < 5; bi++) {
                            size_t n = sizes[si], blk = blocks[bi];
                            if (blk == 1 && n > 5000) continue;
                            zinc_dtype t = dts[d];
                            size_t sz = zinc_dtype_size(t), nb = (n + blk - 1) / blk;
                            void *x = malloc(n * sz), *y0 = malloc(n * sz), *y1 = malloc(n * sz);
                            int8_t *q0 = malloc(n), *q1 = malloc(n);
                            float *s0 = malloc(nb * 4), *s1 = malloc(nb * 4);
                            fill(x, t, n, blk);
                            zk_quant_sym_ref(x, t, n, blk, bits, q0, s0);
                            zk_quant_sym(x, t, n, blk, bits, q1, s1);
                            zk_dequant_sym_ref(q0, s0, n, blk, y0, t);
                            zk_dequant_sym(q0, s0, n, blk, y1, t);
                            ZT_CHECK(!memcmp(q0, q1, n) && !memcmp(s0, s1, nb * 4) && !memcmp(y0, y1, n * sz),
                                     "%s, %d threads, %s %d bits, n %zu, block %zu: fast differs from the reference "
                                     "(q %d scales %d y %d)",
                                     paths[p], threads[th], zinc_dtype_name(t), bits, n, blk, !!memcmp(q0, q1, n),
                                     !!memcmp(s0, s1, nb * 4), !!memcmp(y0, y1, n * sz));
                            free(x), free(y0), free(y1), free(q0), free(q1), free(s0), free(s1);
                        }
        }
    }
    zkernels_set_simd(NULL);
    zkernels_set_threads(0);
}

int main(void) {
    rng = zt_seed();
    test_hand_values();
    test_error_bound();
    test_fast_equals_ref();
    return zt_finish();
}
