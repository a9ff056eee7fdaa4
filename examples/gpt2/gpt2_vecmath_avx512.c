/* AVX-512F instance of gpt2_vecmath_simd.inc: 16 lanes, SLEEF's avx512f exp (tanh from it). Compiled with
 * -mavx512f -mfma (CMake) and chosen only on a CPU that has them (gpt2_vecmath.c). */
#include <immintrin.h>
#include <sleef.h>

#include "gpt2_vecmath.h"

#define ZK_AI static inline __attribute__((always_inline))
#define ZW 16
#define VM_NAME "avx512-sleef"
#define VM_INSTANCE vm_avx512
typedef __m512 zv;
typedef __m512d zvd;

ZK_AI zv v_loadu(const float *p) { return _mm512_loadu_ps(p); }
ZK_AI void v_storeu(float *p, zv x) { _mm512_storeu_ps(p, x); }
ZK_AI zv v_set1(float x) { return _mm512_set1_ps(x); }
ZK_AI zv v_add(zv a, zv b) { return _mm512_add_ps(a, b); }
ZK_AI zv v_sub(zv a, zv b) { return _mm512_sub_ps(a, b); }
ZK_AI zv v_mul(zv a, zv b) { return _mm512_mul_ps(a, b); }
ZK_AI zv v_max(zv a, zv b) { return _mm512_max_ps(a, b); }
ZK_AI zv v_fmadd(zv a, zv b, zv c) { return _mm512_fmadd_ps(a, b, c); }
ZK_AI zv v_div(zv a, zv b) { return _mm512_div_ps(a, b); }
ZK_AI zv v_exp(zv a) { return Sleef_expf16_u10avx512f(a); }
ZK_AI zvd vd_zero(void) { return _mm512_setzero_pd(); }
ZK_AI zvd vd_add(zvd a, zvd b) { return _mm512_add_pd(a, b); }
ZK_AI zvd vd_lo(zv a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
ZK_AI zvd vd_hi(zv a) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))); }
ZK_AI zvd vd_exp(zvd a) { return Sleef_expd8_u10avx512f(a); }
ZK_AI zvd vd_loadu(const double *p) { return _mm512_loadu_pd(p); }
ZK_AI void vd_storeu(double *p, zvd a) { _mm512_storeu_pd(p, a); }
ZK_AI zv v_from_d(zvd lo, zvd hi) {
    __m512d l = _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))); /* AVX-512F only: no insertf32x8 */
    return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
}
ZK_AI double vd_sum(zvd a) {
    double b[8], s = 0;
    _mm512_storeu_pd(b, a);
    for (int i = 0; i < 8; i++) s += b[i];
    return s;
}

#include "gpt2_vecmath_simd.inc"

const gpt2_vecmath *const gpt2_vecmath_avx512_ptr = &vm_avx512;
