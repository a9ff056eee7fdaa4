/* Reference (scalar, single-threaded) versions of the CPU kernels: the specification the fast versions in
 * adam_cpu.c / adam_avx2.c / adam_avx512.c are tested against. Written for clarity, not speed. The
 * operations and their order are those of the header comment in cpu_kernels.h (DeepSpeed CPUAdam's
 * arithmetic with 1/sqrt(bc2) as a multiplier), in fp32, one multiply or add at a time. */
#include <math.h>

#include "kernels/cpu_kernels.h"

static float load_f32(const void *buf, zinc_dtype t, size_t i) { return zinc_load_f32(buf, t, i); }

static void store_f32(void *buf, zinc_dtype t, size_t i, float x) {
    switch (t) {
    case ZINC_FP32: ((float *)buf)[i] = x; break;
    case ZINC_FP16: ((uint16_t *)buf)[i] = zinc_f32_to_fp16(x); break;
    case ZINC_BF16: ((uint16_t *)buf)[i] = zinc_f32_to_bf16(x); break;
    }
}

void zadam_step_ref(const zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad,
                    zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    if (h->lion) {
        zlion_step_ref(h, n, master, m, grad, gdt, param_out, pdt, decay_mask);
        return;
    }
    const float one_minus_b1 = 1.0f - h->beta1;
    const float one_minus_b2 = 1.0f - h->beta2;
    const float inv_sqrt_bc2 = (float)(1.0 / sqrt(h->bias_correction2)); /* in double, rounded once */
    const float step_size = (float)((double)h->lr / h->bias_correction1);
    const float lr_wd = h->lr * h->weight_decay;
    const int has_wd = h->weight_decay != 0.0f;

    for (size_t i = 0; i < n; i++) {
        int decayed = decay_mask == NULL || decay_mask[i / ZADAM_MASK_GROUP] != 0;
        float p = master[i];

        float g = load_f32(grad, gdt, i) * h->grad_factor;
        if (!h->adamw && has_wd && decayed) g = g + h->weight_decay * p; /* L2 */

        float mi = h->beta1 * m[i] + one_minus_b1 * g;
        float vi = h->beta2 * v[i] + one_minus_b2 * (g * g);
        float denom = sqrtf(vi) * inv_sqrt_bc2 + h->eps;

        if (h->adamw && has_wd && decayed) p = p - lr_wd * p; /* decoupled decay, pre-update p */
        p = p - step_size * (mi / denom);

        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        if (param_out) store_f32(param_out, pdt, i, p);
    }
}

void zgrad_stats_ref(const void *x, zinc_dtype t, size_t n, zgrad_stats *out) {
    double total = 0.0;
    size_t nonfinite = 0, first = SIZE_MAX;
    for (size_t b = 0; b < n; b += ZSTATS_BLOCK) {
        size_t end = n - b < ZSTATS_BLOCK ? n : b + ZSTATS_BLOCK;
        double block = 0.0;
        for (size_t i = b; i < end; i++) {
            double d = (double)load_f32(x, t, i);
            block += d * d;
            if (!isfinite(d)) {
                if (nonfinite == 0) first = i;
                nonfinite++;
            }
        }
        total += block;
    }
    out->sumsq = total;
    out->nonfinite = nonfinite;
    out->first_nonfinite = first;
}
