/* AVX-512 (F, BW, VL, DQ) + F16C bodies of the CPU kernels (16 fp32 lanes). Compiled with the AVX-512
 * flags and called only when the CPU has avx512f (kernels/adam_cpu.c dispatches). Tails shorter than a
 * vector run the scalar element code from adam_scalar.h (same operations, same order). The decay mask is
 * applied per 8 lanes: one mask byte per ZADAM_MASK_GROUP elements gives 8 bits of a __mmask16. */
#include <immintrin.h>

#include "kernels/adam_scalar.h"

#define ZK_AI static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- conversions, 16 lanes */
ZK_AI __m512 ld_f32x16(const void *src, zinc_dtype t, size_t i) {
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
    __mmask16 isnan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                              _mm512_set1_epi32(0x7f800000));
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    r = _mm512_mask_or_epi32(r, isnan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* NaNs are first made sign|0x7fc00000 so that they convert to sign|0x7e00 as the scalar code does. */
ZK_AI __m256i f32_to_fp16x16(__m512 x) {
    __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512i u = _mm512_castps_si512(x);
    __m512i q = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u)),
                                _mm512_set1_epi32(0x7fc00000));
    x = _mm512_castsi512_ps(_mm512_mask_mov_epi32(u, isnan, q));
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

ZK_AI void st_f32x16(void *dst, int t, size_t i, __m512 x) {
    if (t == ZINC_FP32) _mm512_storeu_ps((float *)dst + i, x);
    else if (t == ZINC_FP16) _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), f32_to_fp16x16(x));
    else if (t == ZINC_BF16) _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), f32_to_bf16x16(x));
}

/* ---------------------------------------------------------------- Adam */
ZK_AI void adam_vec(const zk_adam_consts *c, size_t i, float *p, float *m, float *v, const void *g,
                    const zinc_dtype gdt, void *po, const int pdt, __mmask16 dec, const int l2, const int dw) {
    __m512 pp = _mm512_loadu_ps(p + i);
    __m512 gg = _mm512_mul_ps(ld_f32x16(g, gdt, i), _mm512_set1_ps(c->gf));
    if (l2) gg = _mm512_mask_add_ps(gg, dec, gg, _mm512_mul_ps(_mm512_set1_ps(c->wd), pp));
    __m512 mm = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(c->b1), _mm512_loadu_ps(m + i)),
                              _mm512_mul_ps(_mm512_set1_ps(c->omb1), gg));
    __m512 vv = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(c->b2), _mm512_loadu_ps(v + i)),
                              _mm512_mul_ps(_mm512_set1_ps(c->omb2), _mm512_mul_ps(gg, gg)));
    __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vv), _mm512_set1_ps(c->ibc2)),
                                 _mm512_set1_ps(c->eps));
    if (dw) pp = _mm512_mask_sub_ps(pp, dec, pp, _mm512_mul_ps(_mm512_set1_ps(c->lrwd), pp));
    pp = _mm512_sub_ps(pp, _mm512_mul_ps(_mm512_set1_ps(c->step), _mm512_div_ps(mm, denom)));
    _mm512_storeu_ps(m + i, mm);
    _mm512_storeu_ps(v + i, vv);
    _mm512_storeu_ps(p + i, pp);
    st_f32x16(po, pdt, i, pp);
}

/* i is a multiple of 16, so lanes 0-7 use mask byte i/8 and lanes 8-15 the next one. */
ZK_AI __mmask16 mask_bits(const uint8_t *mask, size_t i) {
    if (!mask) return (__mmask16)0xffff;
    const uint8_t *b = mask + i / ZADAM_MASK_GROUP;
    return (__mmask16)((b[0] ? 0x00ffu : 0u) | (b[1] ? 0xff00u : 0u));
}

ZK_AI void adam_body(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                     const zinc_dtype gdt, void *po, const int pdt, const uint8_t *mask, const int l2,
                     const int dw) {
    size_t i = 0;
    const int need_mask = l2 || dw;
    for (; i + 32 <= n; i += 32) { /* unrolled 2x */
        __mmask16 d0 = need_mask ? mask_bits(mask, i) : 0;
        __mmask16 d1 = need_mask ? mask_bits(mask, i + 16) : 0;
        adam_vec(c, i, p, m, v, g, gdt, po, pdt, d0, l2, dw);
        adam_vec(c, i + 16, p, m, v, g, gdt, po, pdt, d1, l2, dw);
    }
    for (; i + 16 <= n; i += 16)
        adam_vec(c, i, p, m, v, g, gdt, po, pdt, need_mask ? mask_bits(mask, i) : 0, l2, dw);
    zk_adam_scalar_range(c, i, n, p, m, v, g, gdt, po, pdt, mask);
}

#define ZK_DECAY_CASES(GDT, PDT)                                                                           \
    do {                                                                                                   \
        if (c->l2) adam_body(c, n, p, m, v, g, GDT, po, PDT, mask, 1, 0);                                  \
        else if (c->dw) adam_body(c, n, p, m, v, g, GDT, po, PDT, mask, 0, 1);                             \
        else adam_body(c, n, p, m, v, g, GDT, po, PDT, mask, 0, 0);                                        \
    } while (0)
#define ZK_PDT_CASES(GDT)                                                                                  \
    do {                                                                                                   \
        switch (pdt) {                                                                                     \
        case ZINC_FP32: ZK_DECAY_CASES(GDT, ZINC_FP32); break;                                             \
        case ZINC_FP16: ZK_DECAY_CASES(GDT, ZINC_FP16); break;                                             \
        case ZINC_BF16: ZK_DECAY_CASES(GDT, ZINC_BF16); break;                                             \
        default: ZK_DECAY_CASES(GDT, ZK_NO_OUT); break;                                                    \
        }                                                                                                  \
    } while (0)

static void adam_avx512(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                        zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    if (!po) pdt = ZK_NO_OUT;
    switch (gdt) {
    case ZINC_FP16: ZK_PDT_CASES(ZINC_FP16); break;
    case ZINC_BF16: ZK_PDT_CASES(ZINC_BF16); break;
    default: ZK_PDT_CASES(ZINC_FP32); break;
    }
}

/* ---------------------------------------------------------------- casts, axpy, scale */
ZK_AI void axpy_body(float *dst, const void *src, const zinc_dtype t, float scale, size_t n, int acc) {
    __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;
    if (acc) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(dst + i), _mm512_mul_ps(s, ld_f32x16(src, t, i))));
        for (; i < n; i++) dst[i] = dst[i] + scale * zk_load(src, t, i);
    } else {
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(s, ld_f32x16(src, t, i)));
        for (; i < n; i++) dst[i] = scale * zk_load(src, t, i);
    }
}
static void axpy_avx512(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int acc) {
    if (t == ZINC_FP16) axpy_body(dst, src, ZINC_FP16, scale, n, acc);
    else if (t == ZINC_BF16) axpy_body(dst, src, ZINC_BF16, scale, n, acc);
    else axpy_body(dst, src, ZINC_FP32, scale, n, acc);
}

ZK_AI void cast_from_body(void *dst, const int t, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        st_f32x16(dst, t, i, _mm512_loadu_ps(src + i));
        st_f32x16(dst, t, i + 16, _mm512_loadu_ps(src + i + 16));
    }
    for (; i + 16 <= n; i += 16) st_f32x16(dst, t, i, _mm512_loadu_ps(src + i));
    for (; i < n; i++) zk_store(dst, t, i, src[i]);
}
static void cast_from_avx512(void *dst, zinc_dtype t, const float *src, size_t n) {
    if (t == ZINC_FP16) cast_from_body(dst, ZINC_FP16, src, n);
    else if (t == ZINC_BF16) cast_from_body(dst, ZINC_BF16, src, n);
    else memmove(dst, src, n * sizeof(float));
}

ZK_AI void cast_to_body(float *dst, const zinc_dtype t, const void *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(dst + i, ld_f32x16(src, t, i));
        _mm512_storeu_ps(dst + i + 16, ld_f32x16(src, t, i + 16));
    }
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, ld_f32x16(src, t, i));
    for (; i < n; i++) dst[i] = zk_load(src, t, i);
}
static void cast_to_avx512(float *dst, const void *src, zinc_dtype t, size_t n) {
    if (t == ZINC_FP16) cast_to_body(dst, ZINC_FP16, src, n);
    else if (t == ZINC_BF16) cast_to_body(dst, ZINC_BF16, src, n);
    else memmove(dst, src, n * sizeof(float));
}

ZK_AI void scale_body(void *x, const zinc_dtype t, float scale, size_t n) {
    __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) st_f32x16(x, t, i, _mm512_mul_ps(ld_f32x16(x, t, i), s));
    for (; i < n; i++) zk_store(x, t, i, zk_load(x, t, i) * scale);
}
static void scale_avx512(void *x, zinc_dtype t, float scale, size_t n) {
    if (t == ZINC_FP16) scale_body(x, ZINC_FP16, scale, n);
    else if (t == ZINC_BF16) scale_body(x, ZINC_BF16, scale, n);
    else scale_body(x, ZINC_FP32, scale, n);
}

const zk_ops zk_ops_avx512 = {"avx512", adam_avx512, axpy_avx512, cast_from_avx512, cast_to_avx512,
                              scale_avx512};
