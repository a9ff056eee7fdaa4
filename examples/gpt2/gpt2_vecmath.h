/* GPT-2's element-wise math on float arrays (GELU, the exponentials of softmax and cross-entropy, row
 * maxima), vectorised through SLEEF where the build has it (Debian's libsleef-dev: exp accurate to 1 ulp,
 * AVX-512 or AVX2 by what the CPU has; GELU's tanh from it, gpt2_vecmath_simd.inc) instead of one libm call
 * per element. Each element's result
 * depends on that element only, never on where a range starts or ends (partial vectors go through the same
 * vector code, padded), so splitting the work over threads changes no bit. gpt2_vecmath_get() picks the widest
 * instance the CPU runs once; its name says which (tests, benchmarks). */
#ifndef ZINC_EXAMPLES_GPT2_VECMATH_H
#define ZINC_EXAMPLES_GPT2_VECMATH_H

#include <stdint.h>

/* The model's loops that the compiler vectorises itself (row sums in LANES partial sums, column sums, bias
 * and residual adds, the attention's row updates), built for AVX-512, AVX2 and baseline x86-64 with the CPU
 * picking one at load (target_clones): ISO C allows neither FMA contraction nor reassociation, so every
 * clone does the same operations in the same order and writes the same bits, only wider. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ZINC_GPT2_NO_CLONES)
#define GPT2_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GPT2_VECTOR_CLONES
#endif

#define GPT2_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GPT2_GELU_A 0.044715f

typedef struct gpt2_vecmath {
    const char *name; /* "avx512-sleef", "avx2-sleef" or "scalar-libm" */
    /* out = 0.5 x (1 + th), th = tanh(sqrt(2/pi) (x + 0.044715 x^3)), and its derivative d out / d x into
     * deriv, which may be x (each element read before it is written): backward needs the derivative and
     * out, never x or the tanh */
    void (*gelu_fwd)(float *out, float *deriv, const float *x, int64_t n);
    /* dst[i] = exp(src[i] - shift), the exponential taken in double and rounded to float (dst may be src, or
     * NULL: not stored); returns the sum of the n exponentials in double, added in an order fixed by n */
    double (*exp_shift)(float *dst, const float *src, int64_t n, float shift);
    /* dst[i] = exp(src[i] - shift) in float (dst may be src); returns their sum in float, in an order fixed
     * by n (the attention's softmax) */
    float (*exp_shift_f32)(float *dst, const float *src, int64_t n, float shift);
    /* the largest of x[0..n-1], n >= 1 (no NaN handling: a NaN logit gives a NaN loss either way) */
    float (*max)(const float *x, int64_t n);
} gpt2_vecmath;

const gpt2_vecmath *gpt2_vecmath_get(void);
/* The instances (NULL where the build has no SLEEF); gpt2_vecmath_get() chooses among them. */
extern const gpt2_vecmath gpt2_vecmath_scalar;
extern const gpt2_vecmath *const gpt2_vecmath_avx512_ptr, *const gpt2_vecmath_avx2_ptr;

#endif
