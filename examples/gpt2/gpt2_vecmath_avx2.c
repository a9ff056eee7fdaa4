/* AVX2 + FMA instance of gpt2_vecmath_simd.inc: 8 lanes, SLEEF's avx2 exp (tanh from it). Compiled with
 * -mavx2 -mfma (CMake) and chosen only on a CPU that has them and no AVX-512F (gpt2_vecmath.c). */
#include <immintrin.h>
#include <sleef.h>

#include "gpt2_vecmath.h"

#define ZK_AI static inline __attribute__((always_inline))
#define ZW 8
#define VM_NAME "avx2-sleef"
#define VM_INSTANCE vm_avx2
typedef __m256 zv;
typedef __m256d zvd;

ZK_AI zv v_loadu(const float *p) { return _mm256_loadu_ps(p); }
ZK_AI void v_storeu(float *p, zv x) { _mm256_storeu_ps(p, x); }
ZK_AI zv v_set1(float x) { return _mm256_set1_ps(x); }
ZK_AI zv v_add(zv a, zv b) { return _mm256_add_ps(a, b); }
ZK_AI zv v_sub(zv a, zv b) { return _mm256_sub_ps(a, b); }
ZK_AI zv v_mul(zv a, zv b) { return _mm256_mul_ps(a, b); }
ZK_AI zv v_max(zv a, zv b) { return _mm256_max_ps(a, b); }
ZK_AI zv v_fmadd(zv a, zv b, zv c) { return _mm256_fmadd_ps(a, b, c); }
ZK_AI zv v_div(zv a, zv b) { return _mm256_div_ps(a, b); }
ZK_AI zv v_exp(zv a) { return Sleef_expf8_u10avx2(a); }
ZK_AI zvd vd_zero(void) { return _mm256_setzero_pd(); }
ZK_AI zvd vd_add(zvd a, zvd b) { return _mm256_add_pd(a, b); }
ZK_AI zvd vd_lo(zv a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); }
ZK_AI zvd vd_hi(zv a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); }
ZK_AI zvd vd_exp(zvd a) { return Sleef_expd4_u10avx2(a); }
ZK_AI zvd vd_loadu(const double *p) { return _mm256_loadu_pd(p); }
ZK_AI void vd_storeu(double *p, zvd a) { _mm256_storeu_pd(p, a); }
ZK_AI zv v_from_d(zvd lo, zvd hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}
ZK_AI double vd_sum(zvd a) {
    double b[4], s = 0;
    _mm256_storeu_pd(b, a);
    for (int i = 0; i < 4; i++) s += b[i];
    return s;
}

#include "gpt2_vecmath_simd.inc"

const gpt2_vecmath *const gpt2_vecmath_avx2_ptr = &vm_avx2;
