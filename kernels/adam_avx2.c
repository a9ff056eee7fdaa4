/* AVX2 + FMA + F16C instance of the SIMD kernel bodies (kernels/adam_simd.inc): 8 fp32 lanes. Compiled with
 * -mavx2 -mfma -mf16c and called only when the CPU has them (kernels/adam_cpu.c dispatches). This file
 * holds only what differs by width: the vector operations, the dtype conversions and the decay mask. */
#include <immintrin.h>

#include "kernels/adam_scalar.h"

#define ZK_AI static inline __attribute__((always_inline))
#define ZW 8
#define ZK_SIMD_OPS zk_ops_avx2
#define ZK_SIMD_NAME "avx2"
typedef __m256 zv;
typedef __m256 zvmask; /* all-ones lanes where decayed, for blendv */

ZK_AI zv v_loadu(const float *p) { return _mm256_loadu_ps(p); }
ZK_AI void v_storeu(float *p, zv x) { _mm256_storeu_ps(p, x); }
ZK_AI void v_stream(float *p, zv x) { _mm256_stream_ps(p, x); } /* p: ZW * 4 bytes aligned */
ZK_AI zv v_set1(float x) { return _mm256_set1_ps(x); }
ZK_AI zv v_add(zv a, zv b) { return _mm256_add_ps(a, b); }
ZK_AI zv v_sub(zv a, zv b) { return _mm256_sub_ps(a, b); }
ZK_AI zv v_mul(zv a, zv b) { return _mm256_mul_ps(a, b); }
ZK_AI zv v_div(zv a, zv b) { return _mm256_div_ps(a, b); }
ZK_AI zv v_sqrt(zv a) { return _mm256_sqrt_ps(a); }
ZK_AI zv v_select(zvmask dec, zv a, zv b) { return _mm256_blendv_ps(a, b, dec); }

/* One mask byte covers the vector's 8 lanes. */
ZK_AI zvmask v_decay(const uint8_t *mask, size_t i) {
    if (!mask) return _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    return _mm256_castsi256_ps(_mm256_set1_epi32(-(int)(mask[i / ZADAM_MASK_GROUP] != 0)));
}

ZK_AI zv v_ld(const void *src, zinc_dtype t, size_t i) {
    if (t == ZINC_FP16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
    if (t == ZINC_BF16) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    return _mm256_loadu_ps((const float *)src + i);
}

/* Round to nearest even; NaN stays NaN as (bits >> 16) | 0x40, exactly as zinc_f32_to_bf16. */
ZK_AI __m128i f32_to_bf16x8(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i isnan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, q, isnan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* F16C rounds to nearest even like zinc_f32_to_fp16; NaNs are first made sign|0x7fc00000 so that they
 * convert to sign|0x7e00 as the scalar code does (F16C would keep payload bits). */
ZK_AI __m128i f32_to_fp16x8(__m256 x) {
    __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 q = _mm256_or_ps(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u))),
                            _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    x = _mm256_blendv_ps(x, q, isnan);
    return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

ZK_AI void v_st(void *dst, int t, size_t i, zv x) {
    if (t == ZINC_FP32)
        _mm256_storeu_ps((float *)dst + i, x);
    else if (t == ZINC_FP16)
        _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), f32_to_fp16x8(x));
    else if (t == ZINC_BF16)
        _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), f32_to_bf16x8(x));
}

/* LAMB's norms: the 8 lanes as two 4-lane double accumulators. */
typedef __m256d zvd;
ZK_AI zvd v_dzero(void) { return _mm256_setzero_pd(); }
ZK_AI void v_sq_acc(zvd acc[2], zv x) {
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    acc[0] = _mm256_add_pd(acc[0], _mm256_mul_pd(lo, lo));
    acc[1] = _mm256_add_pd(acc[1], _mm256_mul_pd(hi, hi));
}
ZK_AI double v_dsum(const zvd acc[2]) {
    double t[8], s = 0;
    _mm256_storeu_pd(t, acc[0]);
    _mm256_storeu_pd(t + 4, acc[1]);
    for (int k = 0; k < 8; k++) s += t[k];
    return s;
}

#include "kernels/adam_simd.inc"
