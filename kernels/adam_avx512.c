/* AVX-512 (F, BW, VL, DQ) + F16C instance of the SIMD kernel bodies (kernels/adam_simd.inc): 16 fp32
 * lanes. Compiled with the AVX-512 flags and called only when the CPU has them (kernels/adam_cpu.c
 * dispatches). This file holds only what differs by width: the vector operations, the dtype conversions
 * and the decay mask (per 8 lanes: one mask byte per ZADAM_MASK_GROUP elements gives 8 bits of a
 * __mmask16). */
#include <immintrin.h>

#include "kernels/adam_scalar.h"

#define ZK_AI static inline __attribute__((always_inline))
#define ZW 16
#define ZK_SIMD_OPS zk_ops_avx512
#define ZK_SIMD_NAME "avx512"
typedef __m512 zv;
typedef __mmask16 zvmask;

ZK_AI zv v_loadu(const float *p) { return _mm512_loadu_ps(p); }
ZK_AI void v_storeu(float *p, zv x) { _mm512_storeu_ps(p, x); }
ZK_AI void v_stream(float *p, zv x) { _mm512_stream_ps(p, x); } /* p: ZW * 4 bytes aligned */
ZK_AI zv v_set1(float x) { return _mm512_set1_ps(x); }
ZK_AI zv v_add(zv a, zv b) { return _mm512_add_ps(a, b); }
ZK_AI zv v_sub(zv a, zv b) { return _mm512_sub_ps(a, b); }
ZK_AI zv v_mul(zv a, zv b) { return _mm512_mul_ps(a, b); }
ZK_AI zv v_div(zv a, zv b) { return _mm512_div_ps(a, b); }
ZK_AI zv v_sqrt(zv a) { return _mm512_sqrt_ps(a); }
ZK_AI zv v_select(zvmask dec, zv a, zv b) { return _mm512_mask_blend_ps(dec, a, b); }

/* i is a multiple of 16, so lanes 0-7 use mask byte i/8 and lanes 8-15 the next one. */
ZK_AI zvmask v_decay(const uint8_t *mask, size_t i) {
    if (!mask) return (__mmask16)0xffff;
    const uint8_t *b = mask + i / ZADAM_MASK_GROUP;
    return (__mmask16)((b[0] ? 0x00ffu : 0u) | (b[1] ? 0xff00u : 0u));
}

ZK_AI zv v_ld(const void *src, zinc_dtype t, size_t i) {
    if (t == ZINC_FP16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
    if (t == ZINC_BF16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    return _mm512_loadu_ps((const float *)src + i);
}

/* Round to nearest even; NaN stays NaN as (bits >> 16) | 0x40, exactly as zinc_f32_to_bf16. */
ZK_AI __m256i f32_to_bf16x16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __mmask16 isnan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    r = _mm512_mask_or_epi32(r, isnan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* NaNs are first made sign|0x7fc00000 so that they convert to sign|0x7e00 as the scalar code does. */
ZK_AI __m256i f32_to_fp16x16(__m512 x) {
    __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512i u = _mm512_castps_si512(x);
    __m512i q =
        _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u)), _mm512_set1_epi32(0x7fc00000));
    x = _mm512_castsi512_ps(_mm512_mask_mov_epi32(u, isnan, q));
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

ZK_AI void v_st(void *dst, int t, size_t i, zv x) {
    if (t == ZINC_FP32)
        _mm512_storeu_ps((float *)dst + i, x);
    else if (t == ZINC_FP16)
        _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), f32_to_fp16x16(x));
    else if (t == ZINC_BF16)
        _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), f32_to_bf16x16(x));
}

/* LAMB's norms: the 16 lanes as two 8-lane double accumulators. */
typedef __m512d zvd;
ZK_AI zvd v_dzero(void) { return _mm512_setzero_pd(); }
ZK_AI void v_sq_acc(zvd acc[2], zv x) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    acc[0] = _mm512_add_pd(acc[0], _mm512_mul_pd(lo, lo));
    acc[1] = _mm512_add_pd(acc[1], _mm512_mul_pd(hi, hi));
}
ZK_AI double v_dsum(const zvd acc[2]) {
    double t[16], s = 0;
    _mm512_storeu_pd(t, acc[0]);
    _mm512_storeu_pd(t + 8, acc[1]);
    for (int k = 0; k < 16; k++) s += t[k];
    return s;
}

#include "kernels/adam_simd.inc"
