/* The launchers of kernels/cuda_kernels.h on the emulated device: each checks its arguments as the CUDA
 * launcher does, then enqueues the CPU kernel (kernels/cpu_kernels.h, the CUDA kernels' reference) on the
 * stream, so the engine's CUDA device code (base/device/device_cuda.c) runs unchanged on the emulation. The
 * math is therefore the CPU engine's; what the emulation tests is the host code around it. */
#include <math.h>
#include <stdint.h>

#include "cuda_host.h"
#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

static int valid(zinc_dtype t) { return t == ZINC_FP32 || t == ZINC_FP16 || t == ZINC_BF16; }
static size_t esize(zinc_dtype t) { return zinc_dtype_size(t); }

/* ---------------------------------------------------------------- Adam */

typedef struct adam_args {
    const zadam_device_params *dparams; /* device scalars, read when the kernel runs; or NULL: h */
    zadam_hparams h;
    size_t n;
    float *master, *m, *v;
    const void *grad;
    zinc_dtype gdt, pdt;
    void *param_out;
    const uint8_t *decay_mask;
} adam_args;

static void run_adam(void *p) {
    adam_args *a = p;
    zadam_hparams h = a->h;
    if (a->dparams) {
        const zadam_device_params *d = a->dparams;
        if (d->skip) return;
        h = (zadam_hparams){d->lr, d->beta1, d->beta2, d->eps, d->weight_decay, d->bias_correction1,
                            d->bias_correction2, d->grad_factor, d->adamw, 0};
    }
    zadam_step(&h, a->n, a->master, a->m, a->v, a->grad, a->gdt, a->param_out, a->pdt, a->decay_mask);
}

static int launch_adam(adam_args *a, void *stream) {
    if (a->n == 0) return 0;
    if (!a->master || !a->m || !a->v || !a->grad || !valid(a->gdt) || (a->param_out && !valid(a->pdt)))
        return cudaErrorInvalidValue;
    cuda_host_check_span(a->master, a->n * 4, "zcu_adam_step master");
    cuda_host_check_span(a->m, a->n * 4, "zcu_adam_step m");
    cuda_host_check_span(a->v, a->n * 4, "zcu_adam_step v");
    cuda_host_check_span(a->grad, a->n * esize(a->gdt), "zcu_adam_step grad");
    if (a->param_out) cuda_host_check_span(a->param_out, a->n * esize(a->pdt), "zcu_adam_step param_out");
    if (a->decay_mask)
        cuda_host_check_span(a->decay_mask, (a->n + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP, "zcu_adam_step mask");
    return cuda_host_enqueue(stream, run_adam, a, sizeof *a);
}

int zcu_adam_step(const zadam_device_params *dparams, size_t n, float *master, float *m, float *v, const void *grad,
                  zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream) {
    if (!dparams && n) return cudaErrorInvalidValue;
    adam_args a = {.dparams = dparams, .n = n, .master = master, .m = m, .v = v, .grad = grad, .gdt = gdt,
                   .pdt = pdt, .param_out = param_out, .decay_mask = decay_mask};
    return launch_adam(&a, stream);
}

int zcu_adam_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad,
                       zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream) {
    if (!h && n) return cudaErrorInvalidValue;
    if (h && h->lion) return zcu_lion_step_host(h, n, master, m, grad, gdt, param_out, pdt, decay_mask, stream);
    adam_args a = {.n = n, .master = master, .m = m, .v = v, .grad = grad, .gdt = gdt, .pdt = pdt,
                   .param_out = param_out, .decay_mask = decay_mask};
    if (h) a.h = *h;
    return launch_adam(&a, stream);
}

/* ---------------------------------------------------------------- Lion */

typedef struct lion_args {
    zadam_hparams h;
    size_t n;
    float *master, *m;
    const void *grad;
    zinc_dtype gdt, pdt;
    void *param_out;
    const uint8_t *decay_mask;
} lion_args;

static void run_lion(void *p) {
    lion_args *a = p;
    zlion_step_ref(&a->h, a->n, a->master, a->m, a->grad, a->gdt, a->param_out, a->pdt, a->decay_mask);
}

int zcu_lion_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m, const void *grad,
                       zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream) {
    if (n == 0) return 0;
    if (!h || !master || !m || !grad || !valid(gdt) || (param_out && !valid(pdt))) return cudaErrorInvalidValue;
    cuda_host_check_span(master, n * 4, "zcu_lion_step master");
    cuda_host_check_span(m, n * 4, "zcu_lion_step m");
    cuda_host_check_span(grad, n * esize(gdt), "zcu_lion_step grad");
    if (param_out) cuda_host_check_span(param_out, n * esize(pdt), "zcu_lion_step param_out");
    if (decay_mask)
        cuda_host_check_span(decay_mask, (n + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP, "zcu_lion_step mask");
    lion_args a = {.h = *h, .n = n, .master = master, .m = m, .grad = grad, .gdt = gdt, .pdt = pdt,
                   .param_out = param_out, .decay_mask = decay_mask};
    return cuda_host_enqueue(stream, run_lion, &a, sizeof a);
}

/* ---------------------------------------------------------------- LAMB */

typedef struct lamb_args {
    zlamb_hparams h;
    float coeff;
    size_t n;
    float *master, *m, *v;
    const void *grad;
    zinc_dtype gdt, pdt;
    void *param_out;
    const uint8_t *decay_mask;
    double *out; /* sums only */
    int accumulate;
} lamb_args;

/* The CPU device's kernels (as the Adam launchers above): an engine on the emulated device then computes
 * LAMB bit for bit as on the cpu device, so a test can tell its host code from the CUDA kernels' sum order. */
static void run_lamb_sums(void *p) {
    lamb_args *a = p;
    double w = 0, u = 0;
    if (a->n) zlamb_sums(&a->h, a->n, a->master, a->m, a->v, a->grad, a->gdt, a->decay_mask, &w, &u);
    a->out[0] = a->accumulate ? a->out[0] + w : w;
    a->out[1] = a->accumulate ? a->out[1] + u : u;
}

static void run_lamb_apply(void *p) {
    lamb_args *a = p;
    zlamb_apply(&a->h, a->coeff, a->n, a->master, a->m, a->v, a->grad, a->gdt, a->param_out, a->pdt,
                    a->decay_mask);
}

static void check_lamb_spans(const lamb_args *a, const char *what) {
    cuda_host_check_span(a->master, a->n * 4, what);
    cuda_host_check_span(a->m, a->n * 4, what);
    cuda_host_check_span(a->v, a->n * 4, what);
    cuda_host_check_span(a->grad, a->n * esize(a->gdt), what);
    if (a->param_out) cuda_host_check_span(a->param_out, a->n * esize(a->pdt), what);
    if (a->decay_mask) cuda_host_check_span(a->decay_mask, (a->n + ZADAM_MASK_GROUP - 1) / ZADAM_MASK_GROUP, what);
}

size_t zcu_lamb_sums_workspace_bytes(void) { return (size_t)ZCU_STATS_BLOCKS * 2 * sizeof(double); }

int zcu_lamb_sums(const struct zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                  const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, void *workspace, double *out,
                  int accumulate, void *stream) {
    if (!h || !out || !valid(gdt)) return cudaErrorInvalidValue;
    if (n && (!master || !m || !v || !grad || !workspace)) return cudaErrorInvalidValue;
    if (n == 0 && accumulate) return 0;
    lamb_args a = {.h = *h, .n = n, .master = (float *)master, .m = (float *)m, .v = (float *)v, .grad = grad,
                   .gdt = gdt, .decay_mask = decay_mask, .out = out, .accumulate = accumulate};
    cuda_host_check_span(out, 2 * sizeof(double), "zcu_lamb_sums out");
    if (n) {
        check_lamb_spans(&a, "zcu_lamb_sums");
        cuda_host_check_span(workspace, zcu_lamb_sums_workspace_bytes(), "zcu_lamb_sums workspace");
    }
    return cuda_host_enqueue(stream, run_lamb_sums, &a, sizeof a);
}

int zcu_lamb_apply(const struct zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v,
                   const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask,
                   void *stream) {
    if (n == 0) return 0;
    if (!h || !master || !m || !v || !grad || !valid(gdt) || (param_out && !valid(pdt))) return cudaErrorInvalidValue;
    lamb_args a = {.h = *h, .coeff = coeff, .n = n, .master = master, .m = m, .v = v, .grad = grad, .gdt = gdt,
                   .pdt = pdt, .param_out = param_out, .decay_mask = decay_mask};
    check_lamb_spans(&a, "zcu_lamb_apply");
    return cuda_host_enqueue(stream, run_lamb_apply, &a, sizeof a);
}

/* ---------------------------------------------------------------- gradient statistics */

size_t zcu_grad_stats_workspace_bytes(void) { return (size_t)ZCU_STATS_BLOCKS * (sizeof(double) + sizeof(int)); }

typedef struct stats_args {
    const void *x;
    zinc_dtype t;
    size_t n;
    zcu_grad_stats_result *out;
    int accumulate;
} stats_args;

static void run_stats(void *p) {
    stats_args *a = p;
    zgrad_stats s = {0, 0, SIZE_MAX};
    if (a->n) zgrad_stats(a->x, a->t, a->n, &s);
    a->out->sumsq = (a->accumulate ? a->out->sumsq : 0.0) + s.sumsq;
    a->out->nonfinite = (a->accumulate ? a->out->nonfinite : 0) | (s.nonfinite != 0);
}

int zcu_grad_stats(const void *x, zinc_dtype t, size_t n, void *workspace, zcu_grad_stats_result *out, int accumulate,
                   void *stream) {
    if (!out || !valid(t)) return cudaErrorInvalidValue;
    if (n == 0 && accumulate) return 0;
    if (n && (!x || !workspace)) return cudaErrorInvalidValue;
    cuda_host_check_span(x, n * esize(t), "zcu_grad_stats x");
    cuda_host_check_span(workspace, zcu_grad_stats_workspace_bytes(), "zcu_grad_stats workspace");
    cuda_host_check_span(out, sizeof *out, "zcu_grad_stats out");
    stats_args a = {x, t, n, out, accumulate};
    return cuda_host_enqueue(stream, run_stats, &a, sizeof a);
}

/* ---------------------------------------------------------------- finalize */

typedef struct finalize_args {
    const zcu_grad_stats_result *stats;
    const float *loss_scale;
    zcu_finalize_args a;
    zadam_device_params *dparams;
} finalize_args;

static void run_finalize(void *p) {
    finalize_args *f = p;
    double inv = (double)f->a.base_factor / (f->loss_scale ? (double)*f->loss_scale : 1.0);
    double norm = sqrt(f->stats->sumsq) * inv;
    double clip = f->a.clip > 0 && norm + 1e-6 > f->a.clip ? f->a.clip / (norm + 1e-6) : 1.0;
    zadam_device_params *d = f->dparams;
    d->lr = f->a.lr;
    d->beta1 = f->a.beta1;
    d->beta2 = f->a.beta2;
    d->eps = f->a.eps;
    d->weight_decay = f->a.weight_decay;
    d->bias_correction1 = f->a.bias_correction1;
    d->bias_correction2 = f->a.bias_correction2;
    d->adamw = f->a.adamw;
    d->grad_factor = (float)(inv * clip);
    d->skip = f->stats->nonfinite != 0;
    d->true_norm = (float)norm;
    d->clip_coef = (float)clip;
}

int zcu_adam_finalize(const zcu_grad_stats_result *stats, const float *loss_scale, zcu_finalize_args a,
                      zadam_device_params *dparams, void *stream) {
    if (!stats || !dparams || (const void *)stats == (const void *)dparams) return cudaErrorInvalidValue;
    finalize_args f = {stats, loss_scale, a, dparams};
    return cuda_host_enqueue(stream, run_finalize, &f, sizeof f);
}

/* ---------------------------------------------------------------- elementwise */

typedef enum { EW_AXPY, EW_CAST_FROM, EW_CAST_TO, EW_SCALE, EW_FILL, EW_RANDOM } ew_kind;

typedef struct ew_args {
    ew_kind kind;
    void *dst;
    const void *src;
    zinc_dtype t;
    float a, b;
    size_t n;
    int accumulate;
    uint64_t seed;
} ew_args;

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void store(void *p, zinc_dtype t, size_t i, float v) {
    if (t == ZINC_FP32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == ZINC_FP16 ? zinc_f32_to_fp16(v) : zinc_f32_to_bf16(v);
}

static void run_ew(void *p) {
    ew_args *e = p;
    switch (e->kind) {
    case EW_AXPY: zaxpy_f32(e->dst, e->src, e->t, e->a, e->n, e->accumulate); break;
    case EW_CAST_FROM: zcast_from_f32(e->dst, e->t, e->src, e->n); break;
    case EW_CAST_TO: zcast_to_f32(e->dst, e->src, e->t, e->n); break;
    case EW_SCALE: zscale_inplace(e->dst, e->t, e->a, e->n); break;
    case EW_FILL:
    case EW_RANDOM:
        for (size_t i = 0; i < e->n; i++) {
            float v = e->a;
            if (e->kind == EW_RANDOM) v = e->a + e->b * (float)((double)(mix(e->seed ^ mix(i)) >> 40) * 0x1.0p-24);
            store(e->dst, e->t, i, v);
        }
        break;
    }
}

static int launch_ew(ew_args *e, void *stream, size_t dst_es, size_t src_es, const char *what) {
    if (e->n == 0) return 0;
    if (!e->dst || (!e->src && e->kind <= EW_CAST_TO) || !valid(e->t)) return cudaErrorInvalidValue;
    cuda_host_check_span(e->dst, e->n * dst_es, what);
    if (e->src) cuda_host_check_span(e->src, e->n * src_es, what);
    return cuda_host_enqueue(stream, run_ew, e, sizeof *e);
}

int zcu_axpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate, void *stream) {
    ew_args e = {EW_AXPY, dst, src, t, scale, 0, n, accumulate, 0};
    return launch_ew(&e, stream, 4, esize(t), "zcu_axpy_f32");
}

int zcu_cast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n, void *stream) {
    ew_args e = {EW_CAST_FROM, dst, src, t, 0, 0, n, 0, 0};
    return launch_ew(&e, stream, esize(t), 4, "zcu_cast_from_f32");
}

int zcu_cast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n, void *stream) {
    ew_args e = {EW_CAST_TO, dst, src, t, 0, 0, n, 0, 0};
    return launch_ew(&e, stream, 4, esize(t), "zcu_cast_to_f32");
}

int zcu_scale_inplace(void *x, zinc_dtype t, float scale, size_t n, void *stream) {
    ew_args e = {EW_SCALE, x, NULL, t, scale, 0, n, 0, 0};
    return launch_ew(&e, stream, esize(t), 0, "zcu_scale_inplace");
}

int zcu_fill(void *x, zinc_dtype t, float value, size_t n, void *stream) {
    ew_args e = {EW_FILL, x, NULL, t, value, 0, n, 0, 0};
    return launch_ew(&e, stream, esize(t), 0, "zcu_fill");
}

int zcu_fill_random(void *x, zinc_dtype t, size_t n, uint64_t seed, float lo, float hi, void *stream) {
    ew_args e = {EW_RANDOM, x, NULL, t, lo, hi - lo, n, 0, seed};
    return launch_ew(&e, stream, esize(t), 0, "zcu_fill_random");
}

/* ---------------------------------------------------------------- host helpers */

int zcu_device_count(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

const char *zcu_error_string(int rc) { return cudaGetErrorString((cudaError_t)rc); }
