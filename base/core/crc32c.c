/* CRC32C: slicing-by-8 tables built once, and an SSE4.2 path (crc32 instruction, three independent
 * streams over each 24 KiB block combined with a shift table) chosen at run time on x86-64. */
#include "base/core/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define ZCRC_X86 1
#endif

#define POLY 0x82F63B78u

static uint32_t tab[8][256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++) tab[s][i] = (tab[s - 1][i] >> 8) ^ tab[0][tab[s - 1][i] & 0xff];
}

static uint32_t table_raw(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^ tab[4][(w >> 24) & 0xff] ^
            tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^ tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
    return c;
}

uint32_t zcrc32c_table(uint32_t crc, const void *buf, size_t n) {
    pthread_once(&tab_once, build_tables);
    return ~table_raw(~crc, buf, n);
}

/* GF(2) matrix helpers (zlib's crc32_combine method) to build the shift-by-len tables. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1) sum ^= mat[i];
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) sq[n] = gf2_times(mat, mat[n]);
}

/* The operator that appends `len` zero bytes to a (raw, not inverted) CRC register. */
static void zeros_op(uint32_t *op, size_t len) {
    uint32_t odd[32], even[32], row = 1;
    odd[0] = POLY;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_square(even, odd); /* 2 zero bits */
    gf2_square(odd, even); /* 4 zero bits */
    /* op = identity */
    row = 1;
    for (int n = 0; n < 32; n++, row <<= 1) op[n] = row;
    int which = 0; /* apply squared operators for each set bit of len (in bytes = 8 bits) */
    do {
        gf2_square(which ? odd : even, which ? even : odd);
        const uint32_t *m = which ? odd : even;
        if (len & 1) {
            uint32_t tmp[32];
            for (int n = 0; n < 32; n++) tmp[n] = gf2_times(m, op[n]);
            memcpy(op, tmp, sizeof tmp);
        }
        len >>= 1;
        which ^= 1;
    } while (len);
}

#ifdef ZCRC_X86
/* Three interleaved streams hide the instruction's 3-cycle latency. Each stream covers LANE bytes; the
 * first two are shifted over the rest with "multiply by x^(8*k)" tables for k = LANE*2 and LANE. */
#define LANE 8192

static uint32_t shift_lane1[4][256], shift_lane2[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void build_shift(uint32_t t[4][256], size_t len) {
    uint32_t op[32];
    zeros_op(op, len);
    for (int b = 0; b < 4; b++)
        for (uint32_t i = 0; i < 256; i++) t[b][i] = gf2_times(op, i << (8 * b));
}

static void build_shifts(void) {
    build_shift(shift_lane1, LANE);
    build_shift(shift_lane2, 2 * LANE);
}

static inline uint32_t shift(uint32_t t[4][256], uint32_t c) {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t sse_raw(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    uint64_t c0 = c;
    while (n >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *p1 = p + LANE, *p2 = p + 2 * LANE;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p1 + i, 8);
            memcpy(&w2, p2 + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        /* crc(A B C) = shift(crc(A), |B|+|C|) ^ shift(crc(B), |C|) ^ crc(C) for raw registers where B and C
         * were started from 0. */
        c0 = shift(shift_lane2, (uint32_t)c0) ^ shift(shift_lane1, (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * LANE;
        n -= 3 * LANE;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c0;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}

static int have_sse42(void) {
    static int v = -1;
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    return v;
}
#endif

uint32_t zcrc32c(uint32_t crc, const void *buf, size_t n) {
#ifdef ZCRC_X86
    if (have_sse42()) {
        pthread_once(&shift_once, build_shifts);
        return ~sse_raw(~crc, buf, n);
    }
#endif
    return zcrc32c_table(crc, buf, n);
}

const char *zcrc32c_impl(void) {
#ifdef ZCRC_X86
    if (have_sse42()) return "sse4.2";
#endif
    return "table";
}

uint32_t zcrc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2) {
    /* a checkpoint combines ~1400 blocks of the same 1 MiB a save: that length's operator made once per
     * thread (about 30 us each time otherwise) */
    static _Thread_local uint32_t op[32];
    static _Thread_local size_t op_len;
    if (len2 == 0) return crc1;
    if (op_len != len2) {
        zeros_op(op, len2); /* the pre- and post-inversion cancel: the operator applies to the final values */
        op_len = len2;
    }
    return gf2_times(op, crc1) ^ crc2;
}
