/* Private to kernels/adam_*.c: the per-step Adam constants, the scalar element update (used by the scalar
 * path and by the SIMD tails, so every path computes the same operations in the same order), inline
 * scalar dtype conversions (bit-identical to base/core/dtype.c), and the per-ISA chunk kernels.
 *
 * The element update uses separate multiplies and adds, never fused multiply-add, so that the scalar,
 * AVX2 and AVX-512 paths round identically (the build compiles C11 in ISO mode, where gcc does not
 * contract a*b+c). Weight decay is selected per element (decayed or not), never multiplied by zero, so
 * undecayed elements are untouched by it even when p is inf or nan. */
#ifndef ZINC_KERNELS_ADAM_SCALAR_H
#define ZINC_KERNELS_ADAM_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu_kernels.h"

/* pdt value meaning "no param_out". */
#define ZK_NO_OUT (-1)

typedef struct zk_adam_consts {
    float gf;       /* grad_factor */
    float b1, omb1; /* beta1, 1 - beta1 */
    float b2, omb2; /* beta2, 1 - beta2 */
    float eps;
    float ibc2; /* 1 / sqrt(bias_correction2) */
    float step; /* lr / bias_correction1 */
    float wd;   /* weight decay (L2 mode) */
    float lrwd; /* lr * weight decay (AdamW mode) */
    int l2;     /* L2 mode with wd != 0: g += wd * p */
    int dw;     /* AdamW mode with wd != 0: p -= lr*wd*p */
} zk_adam_consts;

static inline zk_adam_consts zk_adam_consts_make(const zadam_hparams *h) {
    zk_adam_consts c;
    c.gf = h->grad_factor;
    c.b1 = h->beta1;
    c.omb1 = 1.0f - h->beta1;
    c.b2 = h->beta2;
    c.omb2 = 1.0f - h->beta2;
    c.eps = h->eps;
    c.ibc2 = (float)(1.0 / sqrt(h->bias_correction2)); /* in double, rounded once */
    c.step = (float)((double)h->lr / h->bias_correction1);
    c.wd = h->weight_decay;
    c.lrwd = h->lr * h->weight_decay;
    c.l2 = !h->adamw && h->weight_decay != 0.0f;
    c.dw = h->adamw && h->weight_decay != 0.0f;
    return c;
}

/* ---------------------------------------------------------------- scalar dtype conversions */
static inline uint32_t zk_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float zk_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float zk_bf16_to_f32(uint16_t h) { return zk_u2f((uint32_t)h << 16); }
static inline uint16_t zk_f32_to_bf16(float f) {
    uint32_t u = zk_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float zk_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (e == 0x1f) return zk_u2f(sign | 0x7f800000u | (man << 13));
    if (e == 0) {
        float v = (float)man * 0x1.0p-24f; /* exact: subnormal or zero */
        return sign ? -v : v;
    }
    return zk_u2f(sign | ((e + 112u) << 23) | (man << 13));
}
static inline uint16_t zk_f32_to_fp16(float f) {
    uint32_t u = zk_f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a < 0x38800000u) return sign | (uint16_t)lrintf(zk_u2f(a) * 16777216.0f);
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}
static inline float zk_load(const void *buf, zinc_dtype t, size_t i) {
    switch (t) {
    case ZINC_FP16: return zk_fp16_to_f32(((const uint16_t *)buf)[i]);
    case ZINC_BF16: return zk_bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return ((const float *)buf)[i];
    }
}
static inline void zk_store(void *buf, int t, size_t i, float x) {
    switch (t) {
    case ZINC_FP32: ((float *)buf)[i] = x; break;
    case ZINC_FP16: ((uint16_t *)buf)[i] = zk_f32_to_fp16(x); break;
    case ZINC_BF16: ((uint16_t *)buf)[i] = zk_f32_to_bf16(x); break;
    default: break;
    }
}

/* ---------------------------------------------------------------- the element update */
/* One element: returns the new master value and updates *m, *v. `decay` says whether this element is
 * decayed (its mask byte, or 1 without a mask). The same operations, in this order, are what the SIMD
 * bodies do lane by lane. */
static inline float zk_adam_elem(const zk_adam_consts *c, float p, float *m, float *v, float graw, int decay) {
    float g = graw * c->gf;
    if (c->l2 && decay) g = g + c->wd * p;
    float mm = c->b1 * *m + c->omb1 * g;
    float vv = c->b2 * *v + c->omb2 * (g * g);
    float denom = sqrtf(vv) * c->ibc2 + c->eps;
    if (c->dw && decay) p = p - c->lrwd * p;
    p = p - c->step * (mm / denom);
    *m = mm;
    *v = vv;
    return p;
}

/* Elements [i0, n) of one chunk (mask already offset to the chunk's start; element i uses
 * mask[i / ZADAM_MASK_GROUP]). */
static inline void zk_adam_scalar_range(const zk_adam_consts *c, size_t i0, size_t n, float *p, float *m, float *v,
                                        const void *g, zinc_dtype gdt, void *po, int pdt, const uint8_t *mask) {
    for (size_t i = i0; i < n; i++) {
        int dec = mask ? mask[i / ZADAM_MASK_GROUP] != 0 : 1;
        float x = zk_adam_elem(c, p[i], &m[i], &v[i], zk_load(g, gdt, i), dec);
        p[i] = x;
        if (po) zk_store(po, pdt, i, x);
    }
}

/* ---------------------------------------------------------------- the LAMB element update */
typedef struct zk_lamb_consts {
    float gf, b1, omb1, b2, omb2, eps, wd, step;
    int eps_inside, decay;
} zk_lamb_consts;

static inline zk_lamb_consts zk_lamb_consts_make(const zlamb_hparams *h) {
    zk_lamb_consts c;
    c.gf = h->grad_factor;
    c.b1 = h->beta1;
    c.omb1 = 1.0f - h->beta1;
    c.b2 = h->beta2;
    c.omb2 = 1.0f - h->beta2;
    c.eps = h->eps;
    c.wd = h->weight_decay;
    /* DeepSpeed's FusedLamb: lr * sqrt(bc2) / bc1 (moments themselves not corrected); in double, rounded once. */
    c.step = (float)((double)h->lr * sqrt(h->bias_correction2) / h->bias_correction1);
    c.eps_inside = h->eps_inside_sqrt;
    c.decay = h->weight_decay != 0.0f;
    return c;
}

/* The new moments and the update u of one element; the SIMD bodies do the same operations lane by lane. */
static inline float zk_lamb_update(const zk_lamb_consts *c, float p, float *m, float *v, float graw, int decayed) {
    float g = graw * c->gf;
    float mm = c->b1 * *m + c->omb1 * g;
    float vv = c->b2 * *v + c->omb2 * (g * g);
    float denom = c->eps_inside ? sqrtf(vv + c->eps) : sqrtf(vv) + c->eps;
    float u = mm / denom;
    if (c->decay && decayed) u = u + c->wd * p;
    *m = mm;
    *v = vv;
    return u;
}

/* Elements [i0, n): ||p||^2 and ||u||^2 added, left to right, to *wsq and *usq (the state is only read). */
static inline void zk_lamb_sums_range(const zk_lamb_consts *c, size_t i0, size_t n, const float *p, const float *m,
                                      const float *v, const void *g, zinc_dtype gdt, const uint8_t *mask, double *wsq,
                                      double *usq) {
    double w = *wsq, s = *usq;
    for (size_t i = i0; i < n; i++) {
        float mi = m[i], vi = v[i], pi = p[i];
        float u = zk_lamb_update(c, pi, &mi, &vi, zk_load(g, gdt, i), mask ? mask[i / ZADAM_MASK_GROUP] != 0 : 1);
        w += (double)pi * (double)pi;
        s += (double)u * (double)u;
    }
    *wsq = w;
    *usq = s;
}

/* Elements [i0, n): the moments stored, p -= sc * u (sc = step * coeff), param_out written unless pdt is
 * ZK_NO_OUT. */
static inline void zk_lamb_apply_range(const zk_lamb_consts *c, float sc, size_t i0, size_t n, float *p, float *m,
                                       float *v, const void *g, zinc_dtype gdt, void *po, int pdt,
                                       const uint8_t *mask) {
    for (size_t i = i0; i < n; i++) {
        float x = p[i];
        float u = zk_lamb_update(c, x, &m[i], &v[i], zk_load(g, gdt, i), mask ? mask[i / ZADAM_MASK_GROUP] != 0 : 1);
        x = x - sc * u;
        p[i] = x;
        if (pdt != ZK_NO_OUT) zk_store(po, pdt, i, x);
    }
}

/* ---------------------------------------------------------------- per-ISA chunk kernels */
/* Each works on one chunk with no threading of its own; pdt is ZK_NO_OUT when po is NULL. */
typedef struct zk_ops {
    const char *name;
    void (*adam)(const zk_adam_consts *c, size_t n, float *p, float *m, float *v, const void *g, zinc_dtype gdt,
                 void *po, int pdt, const uint8_t *mask);
    void (*axpy)(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate);
    void (*cast_from)(void *dst, zinc_dtype t, const float *src, size_t n);
    void (*cast_to)(float *dst, const void *src, zinc_dtype t, size_t n);
    void (*scale)(void *x, zinc_dtype t, float scale, size_t n);
    /* LAMB's two passes over one chunk: sums set *wsq, *usq (not added to); apply takes sc = step * coeff. */
    void (*lamb_sums)(const zk_lamb_consts *c, size_t n, const float *p, const float *m, const float *v, const void *g,
                      zinc_dtype gdt, const uint8_t *mask, double *wsq, double *usq);
    void (*lamb_apply)(const zk_lamb_consts *c, float sc, size_t n, float *p, float *m, float *v, const void *g,
                       zinc_dtype gdt, void *po, int pdt, const uint8_t *mask);
    int (*copy_stream)(void *dst, const void *src, size_t bytes, int f32); /* zk_copy_stream */
} zk_ops;

/* The chunk kernels of the SIMD path in use (adam_cpu.c; lamb_cpu.c uses them too). */
const zk_ops *zk_current_ops(void);

/* The pool a kernel of nch chunks of ZK_CHUNK_ELEMS elements runs on, or NULL for the calling thread
 * (adam_cpu.c; lion_cpu.c uses it too). */
#define ZK_CHUNK_ELEMS ((size_t)65536)
struct zpool;
struct zpool *zk_pool_for(size_t nch);

extern const zk_ops zk_ops_avx2;
extern const zk_ops zk_ops_avx512;

#endif
