/* Scalar dtype conversions for the public API (models read parameters and write gradients with them).
 * The vectorised bulk conversions live in kernels/. */
#include <math.h>
#include <string.h>

#include "zinc.h"

size_t zinc_dtype_size(zinc_dtype t) { return t == ZINC_FP32 ? 4 : 2; }

const char *zinc_dtype_name(zinc_dtype t) {
    switch (t) {
    case ZINC_FP32: return "fp32";
    case ZINC_FP16: return "fp16";
    case ZINC_BF16: return "bf16";
    }
    return "?";
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float zinc_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t zinc_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float zinc_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        float v = ldexpf((float)man, -24); /* subnormal: exact in fp32 */
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t zinc_f32_to_fp16(float f) {
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                       /* below the smallest normal 2^-14: subnormal or 0 */
        float v = u2f(a) * 16777216.0f;          /* scale by 2^24: the subnormal mantissa */
        return sign | (uint16_t)lrintf(v);       /* lrintf rounds to nearest even */
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even at bit 13 */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

float zinc_load_f32(const void *buf, zinc_dtype t, size_t i) {
    switch (t) {
    case ZINC_FP32: return ((const float *)buf)[i];
    case ZINC_FP16: return zinc_fp16_to_f32(((const uint16_t *)buf)[i]);
    case ZINC_BF16: return zinc_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

void zinc_add_f32(void *buf, zinc_dtype t, size_t i, float v) {
    switch (t) {
    case ZINC_FP32: ((float *)buf)[i] += v; break;
    case ZINC_FP16: {
        uint16_t *p = (uint16_t *)buf + i;
        *p = zinc_f32_to_fp16(zinc_fp16_to_f32(*p) + v);
        break;
    }
    case ZINC_BF16: {
        uint16_t *p = (uint16_t *)buf + i;
        *p = zinc_f32_to_bf16(zinc_bf16_to_f32(*p) + v);
        break;
    }
    }
}
