/* CUDA on CPU threads (see run.sh): __nv_bfloat16 with round-to-nearest-even conversion, NaN kept NaN. */
#pragma once
#include <stdint.h>
#include <string.h>
struct __nv_bfloat16 { uint16_t bits; };
inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.bits << 16; float f; memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) h.bits = (uint16_t)((u >> 16) | 0x40);
    else h.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return h;
}
