/* AVX2 + FMA + F16C bodies of the CPU kernels (8 fp32 lanes). Compiled with -mavx2 -mfma -mf16c and
 * called only when the CPU has them (kernels/adam_cpu.c dispatches). Tails shorter than a vector run the
 * scalar element code from adam_scalar.h, which performs the same operations in the same order, so
 * results do not depend on where a chunk boundary or a tail falls. No FMA is used in the Adam update
 * (see adam_scalar.h); the kernels are memory-bound, so this costs nothing measurable. */
#include <immintrin.h>

#include "kernels/adam_scalar.h"

#define ZK_AI static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- conversions, 8 lanes */
ZK_AI __m256 ld_f32x8(const void *src, zinc_dtype t, size_t i) {
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
    __m256i isnan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                       _mm256_set1_epi32(0x7f800000));
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

ZK_AI void st_f32x8(void *dst, int t, size_t i, __m256 x) {
    if (t == ZINC_FP32) _mm256_storeu_ps((float *)dst + i, x);
    else if (t == ZINC_FP16) _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), f32_to_fp16x8(x));
    else if (t == ZINC_BF16) _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), f32_to_bf16x8(x));
}

/* ---------------------------------------------------------------- Adam */
/* One 8-lane vector at element i. dec: all-ones lanes where decayed. */
ZK_AI void adam_vec(const zk_adam_consts *c, size_t i, float *p, float *m, float *v, const void *g,
                    const zinc_dtype gdt, void *po, const int pdt, __m256 dec, const int l2, const int dw,
                    const int masked) {
    __m256 pp = _mm256_loadu_ps(p + i);
    __m256 gg = _mm256_mul_ps(ld_f32x8(g, gdt, i), _mm256_set1_ps(c->gf));
    if (l2) {
        __m256 t = _mm256_add_ps(gg, _mm256_mul_ps(_mm256_set1_ps(c->wd), pp));
        gg = masked ? _mm256_blendv_ps(gg, t, dec) : t;
    }
    __m256 mm = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(c->b1), _mm256_loadu_ps(m + i)),
                              _mm256_mul_ps(_mm256_set1_ps(c->omb1), gg));
    __m256 vv = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(c->b2), _mm256_loadu_ps(v + i)),
                              _mm256_mul_ps(_mm256_set1_ps(c->omb2), _mm256_mul_ps(gg, gg)));
    __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vv), _mm256_set1_ps(c->ibc2)),
                                 _mm256_set1_ps(c->eps));
    if (dw) {
        __m256 t = _mm256_sub_ps(pp, _mm256_mul_ps(_mm256_set1_ps(c->lrwd), pp));
        pp = masked ? _mm256_blendv_ps(pp, t, dec) : t;
    }
    pp = _mm256_sub_ps(pp, _mm256_mul_ps(_mm256_set1_ps(c->step), _mm256_div_ps(mm, denom)));
    _mm256_storeu_ps(m + i, mm);
    _mm256_storeu_ps(v + i, vv);
    _mm256_storeu_ps(p + i, pp);
    st_f32x8(po, pdt, i, pp);
}

ZK_AI __m256 mask_vec(const uint8_t *mask, size_t i) {
    if (!mask) return _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    return _mm256_castsi256_ps(_mm256_set1_epi32(-(int)(mask[i / ZADAM_MASK_GROUP] != 0)));
}

/* The body, specialised by the compiler for each (gdt, pdt, l2, dw) combination. */
ZK_AI void adam_body(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
                     const zinc_dtype gdt, void *po, const int pdt, const uint8_t *mask, const int l2,
                     const int dw) {
    size_t i = 0;
    const int need_mask = (l2 || dw) && mask; /* without a mask every element is decayed: no blend */
    for (; i + 16 <= n; i += 16) { /* unrolled 2x: two independent vectors per iteration */
        __m256 d0 = need_mask ? mask_vec(mask, i) : _mm256_setzero_ps();
        __m256 d1 = need_mask ? mask_vec(mask, i + 8) : _mm256_setzero_ps();
        adam_vec(c, i, p, m, v, g, gdt, po, pdt, d0, l2, dw, need_mask);
        adam_vec(c, i + 8, p, m, v, g, gdt, po, pdt, d1, l2, dw, need_mask);
    }
    for (; i + 8 <= n; i += 8)
        adam_vec(c, i, p, m, v, g, gdt, po, pdt, need_mask ? mask_vec(mask, i) : _mm256_setzero_ps(), l2, dw,
                 need_mask);
    zk_adam_scalar_range(c, i, n, p, m, v, g, gdt, po, pdt, mask);
}

#define ZK_DECAY_CASES(GDT, PDT)                                                                           \
    do {                                                                                                   \
        if (c->l2 && mask) adam_body(c, n, p, m, v, g, GDT, po, PDT, mask, 1, 0);                          \
        else if (c->l2) adam_body(c, n, p, m, v, g, GDT, po, PDT, NULL, 1, 0);                             \
        else if (c->dw && mask) adam_body(c, n, p, m, v, g, GDT, po, PDT, mask, 0, 1);                     \
        else if (c->dw) adam_body(c, n, p, m, v, g, GDT, po, PDT, NULL, 0, 1);                             \
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

static void adam_avx2(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g,
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
    __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    if (acc) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_mul_ps(s, ld_f32x8(src, t, i))));
        for (; i < n; i++) dst[i] = dst[i] + scale * zk_load(src, t, i);
    } else {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(s, ld_f32x8(src, t, i)));
        for (; i < n; i++) dst[i] = scale * zk_load(src, t, i);
    }
}
static void axpy_avx2(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int acc) {
    if (t == ZINC_FP16) axpy_body(dst, src, ZINC_FP16, scale, n, acc);
    else if (t == ZINC_BF16) axpy_body(dst, src, ZINC_BF16, scale, n, acc);
    else axpy_body(dst, src, ZINC_FP32, scale, n, acc);
}

ZK_AI void cast_from_body(void *dst, const int t, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        st_f32x8(dst, t, i, _mm256_loadu_ps(src + i));
        st_f32x8(dst, t, i + 8, _mm256_loadu_ps(src + i + 8));
    }
    for (; i + 8 <= n; i += 8) st_f32x8(dst, t, i, _mm256_loadu_ps(src + i));
    for (; i < n; i++) zk_store(dst, t, i, src[i]);
}
static void cast_from_avx2(void *dst, zinc_dtype t, const float *src, size_t n) {
    if (t == ZINC_FP16) cast_from_body(dst, ZINC_FP16, src, n);
    else if (t == ZINC_BF16) cast_from_body(dst, ZINC_BF16, src, n);
    else memmove(dst, src, n * sizeof(float));
}

ZK_AI void cast_to_body(float *dst, const zinc_dtype t, const void *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(dst + i, ld_f32x8(src, t, i));
        _mm256_storeu_ps(dst + i + 8, ld_f32x8(src, t, i + 8));
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ld_f32x8(src, t, i));
    for (; i < n; i++) dst[i] = zk_load(src, t, i);
}
static void cast_to_avx2(float *dst, const void *src, zinc_dtype t, size_t n) {
    if (t == ZINC_FP16) cast_to_body(dst, ZINC_FP16, src, n);
    else if (t == ZINC_BF16) cast_to_body(dst, ZINC_BF16, src, n);
    else memmove(dst, src, n * sizeof(float));
}

ZK_AI void scale_body(void *x, const zinc_dtype t, float scale, size_t n) {
    __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) st_f32x8(x, t, i, _mm256_mul_ps(ld_f32x8(x, t, i), s));
    for (; i < n; i++) zk_store(x, t, i, zk_load(x, t, i) * scale);
}
static void scale_avx2(void *x, zinc_dtype t, float scale, size_t n) {
    if (t == ZINC_FP16) scale_body(x, ZINC_FP16, scale, n);
    else if (t == ZINC_BF16) scale_body(x, ZINC_BF16, scale, n);
    else scale_body(x, ZINC_FP32, scale, n);
}

const zk_ops zk_ops_avx2 = {"avx2", adam_avx2, axpy_avx2, cast_from_avx2, cast_to_avx2, scale_avx2};
