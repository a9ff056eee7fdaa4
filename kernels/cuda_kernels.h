/* CUDA kernels behind plain C launchers: fused Adam/AdamW over a flat shard, deterministic gradient
 * statistics, the device-side "finalize step" that turns the reduced statistics into the Adam factor,
 * and elementwise helpers (accumulate, casts, scale, fill). Only built with the CUDA backend
 * (ZINC_HAVE_CUDA); the header itself is C11 and names no CUDA type.
 *
 * Conventions for every launcher below:
 *   - Every pointer argument is a DEVICE pointer unless it says otherwise.
 *   - `stream` is a cudaStream_t cast to void * (NULL = the legacy default stream).
 *   - The launcher only enqueues work on `stream`: it never synchronizes the device or the stream, never
 *     allocates, and never copies to or from the host.
 *   - The return value is a cudaError_t as an int: 0 (cudaSuccess) when the launch was enqueued,
 *     otherwise the CUDA error (cudaGetErrorString((cudaError_t)rc) names it; zcu_error_string below
 *     does the same without CUDA headers). 1 (cudaErrorInvalidValue) is also returned for bad arguments
 *     (a NULL required pointer, an unknown dtype). n == 0 is a no-op that returns 0.
 *   - Math is fp32 (double where it says so); half storage is converted with round-to-nearest-even
 *     (__float2half_rn / __float2bfloat16_rn), which matches zinc_f32_to_fp16 / zinc_f32_to_bf16 bit for
 *     bit (NaN payloads aside: a NaN stays a NaN).
 *   - Arrays need only element alignment. When all the arrays of one call share their offset from a
 *     16-byte boundary (in elements), the kernels peel up to 3 leading elements and then use 16-byte
 *     accesses for fp32 arrays and 8-byte accesses for fp16/bf16 arrays (4 elements per access); otherwise
 *     they fall back to scalar accesses. A scalar tail covers n not divisible by 4. */
#ifndef ZINC_KERNELS_CUDA_KERNELS_H
#define ZINC_KERNELS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The per-step scalars of one Adam step as the kernel reads them: a struct in DEVICE memory, written by
 * zcu_adam_finalize (or by cudaMemcpyAsync from a host copy), so that a whole step runs without a host
 * round trip. Field meanings are those of zadam_hparams (kernels/cpu_kernels.h). */
typedef struct zadam_device_params {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;
    double bias_correction1; /* 1 - beta1^t, or 1 (double, as zadam_hparams) */
    double bias_correction2; /* 1 - beta2^t, or 1 */
    float grad_factor;       /* combined unscale-and-clip factor applied to every gradient element */
    int adamw;               /* 1: decoupled weight decay; 0: L2 added to the gradient */
    int skip;                /* != 0: the Adam kernel returns without reading or writing anything */
    float true_norm;         /* diagnostics written by zcu_adam_finalize: the unscaled global grad norm */
    float clip_coef;         /* diagnostics: the clip coefficient applied (1 when not clipped) */
} zadam_device_params;

/* The output of the gradient statistics, in DEVICE memory. */
typedef struct zcu_grad_stats_result {
    double sumsq;  /* sum of squares of the elements, accumulated in double */
    int nonfinite; /* 1 if any element was inf or nan, else 0 */
    int pad_;
} zcu_grad_stats_result;

/* ---------------------------------------------------------------- Adam */

/* One fused Adam/AdamW step over n elements of a flat fp32 shard, exactly the math of zadam_step_ref:
 *   g = grad * grad_factor;  if (!adamw && wd) g += wd * p
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
 *   denom = sqrt(v) / sqrt(bc2) + eps
 *   if (adamw && wd) p -= lr*wd*p            (pre-update p)
 *   p -= (lr/bc1) * m / denom
 * master, m, v: fp32, updated in place. grad: gdt (fp32, fp16, bf16). param_out: the updated master
 * converted to pdt, or NULL for none. decay_mask: one byte per ZADAM_MASK_GROUP (8) elements counted
 * from the start of these arrays (device memory), NULL = every element decayed. dparams: DEVICE pointer
 * to the step's scalars; if dparams->skip != 0 nothing is written. One launch, grid-stride. */
int zcu_adam_step(const zadam_device_params *dparams, size_t n, float *master, float *m, float *v, const void *grad,
                  zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream);

/* The same with the scalars passed from the host by value (h is a HOST pointer, read before return;
 * skip is taken as 0). For tests and for callers that know the factor on the host. */
struct zadam_hparams;
int zcu_adam_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad,
                       zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream);

/* One fused Lion step (h->lion; the math of zlion_step_ref, bit for bit): master, m fp32 in place, grad
 * in gdt, param_out in pdt or NULL, decay_mask as zcu_adam_step. h is a HOST pointer read before return.
 * zcu_adam_step_host with h->lion set calls it. */
int zcu_lion_step_host(const struct zadam_hparams *h, size_t n, float *master, float *m, const void *grad,
                       zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask, void *stream);

/* ---------------------------------------------------------------- LAMB */
/* LAMB's two passes over one piece of a parameter tensor (the math of zlamb_sums_ref / zlamb_apply_ref,
 * kernels/cpu_kernels.h; h is a HOST pointer read before return; decay_mask as zcu_adam_step, or NULL).
 * zcu_lamb_sums: out[0] = (accumulate ? out[0] : 0) + ||master||^2 and out[1] likewise + ||u||^2, in double,
 * deterministic as zcu_grad_stats (fixed grid, fixed trees, no atomics; within ~1e-12 relative of the
 * reference, whose order differs); the state is only read. out: 2 doubles of DEVICE memory; workspace: at
 * least zcu_lamb_sums_workspace_bytes() bytes of device memory, not shared between calls that may run
 * concurrently. accumulate lets the pieces of one tensor feed one pair, in a fixed order.
 * zcu_lamb_apply: the moments stored, master -= (step * coeff) * u, param_out written in pdt (or NULL);
 * bit for bit the reference's results. */
struct zlamb_hparams;
size_t zcu_lamb_sums_workspace_bytes(void);
int zcu_lamb_sums(const struct zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                  const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, void *workspace, double *out,
                  int accumulate, void *stream);
int zcu_lamb_apply(const struct zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v,
                   const void *grad, zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask,
                   void *stream);

/* ---------------------------------------------------------------- gradient statistics */

/* The fixed grid of zcu_grad_stats: ZCU_STATS_BLOCKS blocks of ZCU_STATS_THREADS threads on every device,
 * so the order of the sum, and therefore its value, never depends on the GPU model. (The CPU-thread
 * harness, tests/cuda_threads/run_lib.sh, builds the kernels with fewer blocks: one OS thread per CUDA
 * thread makes 1024 blocks of barriers take minutes there.) */
#ifndef ZCU_STATS_BLOCKS
#define ZCU_STATS_BLOCKS 1024
#endif
#define ZCU_STATS_THREADS 256

/* Bytes of device workspace zcu_grad_stats needs (per-block partial sums and flags). */
size_t zcu_grad_stats_workspace_bytes(void);

/* One pass over x (n elements of dtype t): out->sumsq = (accumulate ? out->sumsq : 0) + sum x[i]^2 and
 * out->nonfinite = (accumulate ? out->nonfinite : 0) | any(!isfinite(x[i])). Deterministic: each thread
 * sums its grid-stride elements in double in index order, each block reduces its threads with a fixed
 * shared-memory tree and writes one partial to `workspace`; a second single-block kernel reduces the
 * ZCU_STATS_BLOCKS partials with a fixed tree. No atomics. Same input, same bits, on every run.
 * (Values agree with zgrad_stats_ref to ~1e-12 relative; the order of the sum differs.)
 * workspace: at least zcu_grad_stats_workspace_bytes() bytes of device memory, not shared between
 * calls that may run concurrently. accumulate lets several buffers feed one result, in a fixed order. */
int zcu_grad_stats(const void *x, zinc_dtype t, size_t n, void *workspace, zcu_grad_stats_result *out, int accumulate,
                   void *stream);

/* ---------------------------------------------------------------- finalize the step on the device */

/* Host-side inputs of zcu_adam_finalize (passed by value into the kernel). */
typedef struct zcu_finalize_args {
    float lr, beta1, beta2, eps, weight_decay;
    double bias_correction1, bias_correction2; /* double, as zadam_hparams */
    int adamw;
    float clip;        /* gradient clipping max norm; <= 0 disables clipping */
    float base_factor; /* 1 / (loss_scale * world * gas) when loss_scale is NULL; 1 / (world * gas) when
                          the loss scale is read from the device (loss_scale != NULL) */
} zcu_finalize_args;

/* One single-thread kernel that writes *dparams from the reduced statistics, exactly as the CPU engine
 * computes its factor (in double, rounded to float at the end):
 *   inv_total_scale = base_factor / (loss_scale ? *loss_scale : 1)
 *   true_norm = sqrt(stats->sumsq) * inv_total_scale
 *   clip_coef = (clip > 0 && true_norm + 1e-6 > clip) ? clip / (true_norm + 1e-6) : 1
 *   grad_factor = inv_total_scale * clip_coef
 *   skip = stats->nonfinite != 0
 * and copies lr, betas, eps, weight_decay, bias corrections and adamw from `a`. stats must hold the
 * GLOBAL sum of squares and overflow flag (after the cross-rank reduction, which the caller does).
 * loss_scale: optional DEVICE pointer to the current (fp32) loss scale; NULL = folded into base_factor.
 * All pointers are device pointers; stats and dparams may not alias. */
int zcu_adam_finalize(const zcu_grad_stats_result *stats, const float *loss_scale, zcu_finalize_args a,
                      zadam_device_params *dparams, void *stream);

/* ---------------------------------------------------------------- elementwise helpers */

/* dst[i] (fp32) = (accumulate ? dst[i] : 0) + scale * src[i] (src in t). Rounded as the CPU reference
 * (a separate multiply and add, no FMA contraction), so results match zaxpy_f32 bit for bit. */
int zcu_axpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate, void *stream);
/* dst (in t) = src (fp32), round to nearest even. */
int zcu_cast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n, void *stream);
/* dst (fp32) = src (in t). */
int zcu_cast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n, void *stream);
/* x (in t) *= scale, in place (computed in fp32, rounded once to t). */
int zcu_scale_inplace(void *x, zinc_dtype t, float scale, size_t n, void *stream);
/* x (in t) = value (rounded once to t). */
int zcu_fill(void *x, zinc_dtype t, float value, size_t n, void *stream);
/* x (in t) = uniform random in [lo, hi) from a counter-based hash of (seed, i): the same seed gives the
 * same values on every device. For benchmarks and tests (fresh inputs without a host copy). */
int zcu_fill_random(void *x, zinc_dtype t, size_t n, uint64_t seed, float lo, float hi, void *stream);

/* ---------------------------------------------------------------- small host helpers */

/* Number of CUDA devices; 0 when there is none or the driver is missing (never an error). */
int zcu_device_count(void);
/* cudaGetErrorString for a code returned by the launchers above. */
const char *zcu_error_string(int rc);

#ifdef __cplusplus
}
#endif

#endif
