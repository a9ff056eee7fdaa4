/* gpt2_vecmath.h: the scalar instance (libm, one call per element: what runs without SLEEF or on a CPU
 * without AVX2) and the choice among the instances. */
#include "gpt2_vecmath.h"

#include <math.h>
#include <stddef.h>

static void s_gelu_fwd(float *out, float *deriv, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], t = tanhf(GPT2_GELU_K * (GPT2_GELU_A * v * (v * v) + v)), sech2 = 1.0f - t * t;
        out[i] = (0.5f * v) * (1.0f + t);
        deriv[i] = (0.5f * v) * sech2 * (GPT2_GELU_K * (3.0f * GPT2_GELU_A * v * v + 1.0f)) + 0.5f * (1.0f + t);
    }
}

static double s_exp_shift(float *dst, const float *src, int64_t n, float shift) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = exp((double)(src[i] - shift));
        if (dst) dst[i] = (float)e;
        sum += e;
    }
    return sum;
}

static float s_exp_shift_f32(float *dst, const float *src, int64_t n, float shift) {
    float sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (dst[i] = expf(src[i] - shift));
    return sum;
}

static float s_max(const float *x, int64_t n) {
    float r = x[0];
    for (int64_t i = 1; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

const gpt2_vecmath gpt2_vecmath_scalar = {"scalar-libm", s_gelu_fwd, s_exp_shift, s_exp_shift_f32, s_max};

#ifndef ZINC_GPT2_SLEEF
const gpt2_vecmath *const gpt2_vecmath_avx512_ptr = NULL, *const gpt2_vecmath_avx2_ptr = NULL;
#endif

const gpt2_vecmath *gpt2_vecmath_get(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (gpt2_vecmath_avx512_ptr && __builtin_cpu_supports("avx512f")) return gpt2_vecmath_avx512_ptr;
    if (gpt2_vecmath_avx2_ptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return gpt2_vecmath_avx2_ptr;
#endif
    return &gpt2_vecmath_scalar;
}
