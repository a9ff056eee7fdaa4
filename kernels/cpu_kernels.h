/* CPU kernels: Adam/AdamW over a flat shard, gradient statistics, casts and accumulation. Each has a
 * plain-C reference (the *_ref functions, scalar, written for clarity) that tests compare the fast
 * versions with; the fast versions pick AVX-512, AVX2 or scalar code at run time and split the work
 * over threads. Math is fp32; storage may be fp32, fp16 or bf16. */
#ifndef ZINC_KERNELS_CPU_KERNELS_H
#define ZINC_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

/* Per-step scalars of one Adam update. */
typedef struct zadam_hparams {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;
    /* In double: the step's constants lr / bc1 and 1 / sqrt(bc2) are derived in double and rounded to float
     * once, as torch and DeepSpeed's CPU Adam do (1 - beta2^t rounded to float first is off by up to 3
     * float roundings by the time it scales the update). */
    double bias_correction1; /* 1 - beta1^t, or 1 without bias correction */
    double bias_correction2; /* 1 - beta2^t, or 1 without bias correction */
    float grad_factor;       /* one combined unscale-and-clip factor applied to every gradient element */
    int adamw;               /* 1: decoupled weight decay (AdamW); 0: L2 added to the gradient */
    /* 1: the step is Lion (zlion_step_ref), not Adam: it reads lr, beta1, beta2, weight_decay and
     * grad_factor, and leaves v untouched (v may be NULL). zadam_step / zadam_step_ref / the device
     * adam_step operations dispatch on it, so every caller of the Adam step runs either optimizer. */
    int lion;
} zadam_hparams;

/* Weight decay applies per group of ZADAM_MASK_GROUP elements (parameters start on such boundaries in
 * the flat buffer): decay_mask[i / ZADAM_MASK_GROUP] != 0 means element i is decayed. NULL: all decayed. */
#define ZADAM_MASK_GROUP 8

/* One Adam/AdamW step over n elements, as DeepSpeed's FusedAdam / CPUAdam compute it:
 *   g = grad * grad_factor;  if (!adamw && wd) g += wd * p
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
 *   denom = sqrt(v) / sqrt(bc2) + eps
 *   if (adamw && wd) p -= lr*wd*p     (decay uses the pre-update p)
 *   p -= (lr/bc1) * m / denom
 * master/m/v are fp32; grad is in gdt; the updated master is also written to param_out in pdt (may be
 * NULL). decay_mask indexes elements from the start of these arrays (mask_offset elements into the mask's
 * own indexing, which must be a multiple of ZADAM_MASK_GROUP). */
void zadam_step_ref(const zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad,
                    zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
void zadam_step(const zadam_hparams *h, size_t n, float *master, float *m, float *v, const void *grad, zinc_dtype gdt,
                void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);

/* One Lion step over n elements (Chen et al. 2023; DeepSpeed's FusedLion / CPU Lion, torch's Lion):
 *   g = grad * grad_factor
 *   c = b1*m + (1-b1)*g
 *   if (wd && decayed) p = p * (1 - lr*wd)     (decoupled decay, pre-update p; 1 - lr*wd rounded once)
 *   p = p - lr * sign(c)                        (sign(0) = 0, as torch.sign)
 *   m = b2*m + (1-b2)*g
 * Arguments as zadam_step without v. The fast version (SIMD through the compiler's vectoriser, threads on
 * the current pool) computes the same operations in the same order: bitwise equal to the reference. */
void zlion_step_ref(const zadam_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                    void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
void zlion_step(const zadam_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);

/* Adagrad as DeepSpeed's DeepSpeedCPUAdagrad computes it (csrc/includes/cpu_adagrad.h, Step_1), per element,
 * all in float, no bias correction:
 *   g = grad * grad_factor
 *   gw = (wd && decayed) ? p*wd + g : g         (weight decay added to the gradient...)
 *   sum = sum + gw*gw                            (...of the sum of squares only)
 *   p = (g / (sqrt(sum) + eps)) * (-lr) + p      (eps after the square root; the update uses g, not gw)
 * sum is the one state tensor (zinc's store keeps it where Adam keeps exp_avg). Arguments as zadam_step
 * with sum for m. The fast version is bitwise equal to the reference, on the current pool. */
typedef struct zadagrad_hparams {
    float lr, eps, weight_decay, grad_factor;
} zadagrad_hparams;
void zadagrad_step_ref(const zadagrad_hparams *h, size_t n, float *master, float *sum, const void *grad, zinc_dtype gdt,
                       void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
void zadagrad_step(const zadagrad_hparams *h, size_t n, float *master, float *sum, const void *grad, zinc_dtype gdt,
                   void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);

/* SGD as torch.optim.SGD computes it (torch/optim/sgd.py, _single_tensor_sgd), per element, all in float:
 *   g = grad * grad_factor
 *   if (maximize) g = -g
 *   if (wd && decayed) g = g + wd*p               (L2: grad.add(param, alpha=wd))
 *   if (mu != 0):
 *       buf = first ? g : buf*mu + (1-tau)*g      (the first step's buffer is g itself, not dampened)
 *       g = nesterov ? g + mu*buf : buf
 *   p = p - lr*g                                  (param.add_(grad, alpha=-lr): the same bits)
 * lr, mu, wd and 1-tau (computed in double from the config's dampening) are rounded to float once per
 * step; every product is rounded before its sum (no fused multiply-add; torch's CPU add(alpha=) fuses it,
 * so torch differs from this by a rounding per operation in ~10% of elements: docs/optimizers.md). With
 * mu 0 the buffer is neither read nor written. buf is the one state tensor (kept where Adam keeps exp_avg).
 * `first` is 1 at the first step taken (t == 1). Arguments as zadam_step with buf for m. The fast version is
 * bitwise equal to the reference, on the current pool. */
typedef struct zsgd_hparams {
    float lr, momentum, one_minus_dampening, weight_decay, grad_factor;
    int nesterov, maximize, first;
} zsgd_hparams;
void zsgd_step_ref(const zsgd_hparams *h, size_t n, float *master, float *buf, const void *grad, zinc_dtype gdt,
                   void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
void zsgd_step(const zsgd_hparams *h, size_t n, float *master, float *buf, const void *grad, zinc_dtype gdt,
               void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);

/* Muon (DeepSpeed 0.19.8 original_muon.py muon_update, MuonWithAuxAdam.step), for one matrix's elements, in
 * float:
 *   g = grad * grad_factor
 *   m = m + (1 - beta) * (g - m)                       (momentum.lerp_(grad, 1 - beta))
 *   u = nesterov ? g + beta * (m - g) : m                (grad.lerp_(momentum, beta))
 *   U = NS5(u as rows x cols) * sqrt(max(1, rows / cols))  (the whole matrix: zmuon_newton_schulz)
 *   if (wd && decayed) p = p * (1 - lr * wd);  p = p - lr * (U * upd_scale)
 * zmuon_momentum is the first two lines for one element (the engine's assembly and the step share it);
 * zmuon_apply_ref the last line over n elements with U given. upd_scale is 1 / the clip factor at ZeRO
 * stages 1-3, where DeepSpeed clips the orthogonalised update (grad_factor then has no clip in it), and 1
 * at stage 0, where it clips the gradient (runtime/engine/engine_muon.c cites the lines). */
typedef struct zmuon_hparams {
    zadam_hparams adam; /* the AdamW half (its own lr, betas, eps, weight decay, bias corrections) */
    float lr, beta, weight_decay, grad_factor, upd_scale; /* the Muon half */
    int nesterov;
} zmuon_hparams;
static inline float zmuon_momentum(float m, float g, float beta) { return m + (1.0f - beta) * (g - m); }
static inline float zmuon_nesterov(float m, float g, float beta) { return g + beta * (m - g); }
/* u[i] = zmuon_nesterov(zmuon_momentum(m[i], g, beta), g, beta) with g = grad[i] * grad_factor: the
 * matrix elements' Nesterov momentum, which the engine assembles (m is only read). Returns the sum of
 * g * g over the n elements, in double. */
double zmuon_nesterov_ref(const zmuon_hparams *h, size_t n, const float *m, const void *grad, zinc_dtype gdt, float *u);
/* The Muon elements [0, n): m updated from the gradient, the master from U (upd), param_out written. */
void zmuon_apply_ref(const zmuon_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                     const float *upd, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
/* The quintic Newton-Schulz iteration (coefficients 3.4445, -4.7750, 2.0315; `steps` iterations) of the
 * rows x cols matrix x, in place, times sqrt(max(1, rows / cols)): the wide orientation (transposed when
 * rows > cols), x / (||x||_F + 1e-7), then X = a X + (b A + c A A) X with A = X X^T (DeepSpeed runs it in
 * bf16 on an accelerator, fp32 elsewhere; "gram" is the same iteration in exact arithmetic). work holds
 * zmuon_ns_work_floats(rows, cols) floats. The three products of a step are GEMMs:
 *   - blas non-NULL: cblas_sgemm (float storage, float accumulation, the BLAS's blocking), in row blocks on
 *     the current pool (one call when it has one thread). Normwise error vs float64 on GPT-2's shapes:
 *     bench/RESULTS.md ("Muon"); the tests hold it under 1e-5 (tests/test_engine_muon.c);
 *   - blas NULL: plain loops with double accumulation (about 30x slower; the fallback without a CBLAS). */
struct zlog;
typedef struct zmuon_blas {
    /* cblas_sgemm's C prototype; the enums are ints (CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112) */
    void (*sgemm)(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
} zmuon_blas;
/* The process's CBLAS: cblas_sgemm already defined in the process (the zinc program links OpenBLAS), else
 * the file ZINC_BLAS_LIBRARY names, else libopenblas.so.0, libcblas.so.3, libblas.so.3 (base/core/dynlib.h).
 * Loaded once per process (later calls return the same table); an error (ZINC_ERR_DEVICE) names the
 * files tried and the fix, and a later call tries again. */
zinc_status zmuon_blas_load(const zmuon_blas **out, const struct zlog *log);
size_t zmuon_ns_work_floats(int64_t rows, int64_t cols);
/* Newton-Schulz steps (muon_update's ns_steps default; DeepSpeed's engine never passes another) and the
 * multiply-adds of `steps` of them on a rows x cols matrix (n = the smaller side, k = the larger): per step
 * X X^T (2 n^2 k), A A (2 n^3), B X (2 n^2 k). */
#define ZMUON_NS_STEPS 5
double zmuon_ns_flops(int64_t rows, int64_t cols, int steps);
void zmuon_newton_schulz(float *x, int64_t rows, int64_t cols, int steps, float *work, const zmuon_blas *blas);

/* LAMB (DeepSpeed's FusedLamb), per parameter tensor: with g = grad * grad_factor,
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g           (moments not bias-corrected)
 *   u = m / (eps_inside_sqrt ? sqrt(v + eps) : sqrt(v) + eps);  if (wd && decayed) u += wd*p
 *   coeff = clamp(||p|| / ||u||, min_coeff, max_coeff), or 1 where either norm is 0   (over the TENSOR)
 *   p -= (step * coeff) * u,  step = lr * sqrt(bc2) / bc1  (lr without bias correction)
 * The norms span the whole tensor, which ZeRO may split across chunks and ranks, so the step is two
 * passes: zlamb_sums over each local piece of a tensor (||p||^2 and ||u||^2 of the piece, in double,
 * nothing stored), the pieces summed over the tensor and the ranks, zlamb_coeff, then zlamb_apply with the
 * tensor's coeff (stores m, v, p and param_out). Both passes compute u identically. The reference versions
 * are single-threaded scalar loops; the others run the SIMD path of zkernels_simd_name on the current pool
 * (apply bitwise equal to the reference; sums in per-lane double partials within a chunk and per chunk in
 * chunk order: independent of the thread count, within double rounding of the reference). The CUDA
 * kernels are zcu_lamb_sums / zcu_lamb_apply (kernels/cuda_kernels.h). */
typedef struct zlamb_hparams {
    float lr, beta1, beta2, eps, weight_decay, grad_factor;
    double bias_correction1, bias_correction2; /* 1 - beta^t, or 1 without bias correction */
    float max_coeff, min_coeff;
    int eps_inside_sqrt;
} zlamb_hparams;
void zlamb_sums_ref(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v,
                    const void *grad, zinc_dtype gdt, const uint8_t *decay_mask, double *wsq, double *usq);
void zlamb_sums(const zlamb_hparams *h, size_t n, const float *master, const float *m, const float *v, const void *grad,
                zinc_dtype gdt, const uint8_t *decay_mask, double *wsq, double *usq);
float zlamb_coeff(const zlamb_hparams *h, double wsq, double usq);
void zlamb_apply_ref(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v, const void *grad,
                     zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);
void zlamb_apply(const zlamb_hparams *h, float coeff, size_t n, float *master, float *m, float *v, const void *grad,
                 zinc_dtype gdt, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask);

/* Sum of squares (in double, in a fixed order independent of thread count: blocks of ZSTATS_BLOCK
 * elements summed left to right, block sums added left to right) and the count of non-finite elements,
 * of x[i]. Also the index of the first non-finite element (or SIZE_MAX). */
#define ZSTATS_BLOCK 4096
typedef struct zgrad_stats {
    double sumsq;
    size_t nonfinite;
    size_t first_nonfinite;
} zgrad_stats;
void zgrad_stats_ref(const void *x, zinc_dtype t, size_t n, zgrad_stats *out);
/* C has one namespace for typedef and function names, so the type zgrad_stats and a function of the same
 * name cannot both exist: the function is zgrad_stats_compute, and a function-like macro keeps the call
 * spelling zgrad_stats(x, t, n, &out) working (a macro name not followed by '(' is the type). */
#define zgrad_stats(x, t, n, out) zgrad_stats_compute((x), (t), (n), (out))
void zgrad_stats_compute(const void *x, zinc_dtype t, size_t n, zgrad_stats *out);
/* Streaming: the statistics of x[0, n), the elements [offset, offset + n) of a longer vector whose earlier
 * elements acc already holds, added onto acc (first_nonfinite counted from the vector's start; acc starts
 * zeroed). With every offset a multiple of ZSTATS_BLOCK the result is bitwise zgrad_stats of the whole
 * vector: its sum adds the same block sums in the same order. */
void zgrad_stats_add(const void *x, zinc_dtype t, size_t n, size_t offset, zgrad_stats *acc);
/* The block sums zgrad_stats adds, one per ZSTATS_BLOCK of x[0, n) (the last one partial when n is not a
 * multiple), into out[0, ceil(n / ZSTATS_BLOCK)): bitwise the sums zgrad_stats(_add) would add for those
 * blocks at any block-aligned offset, so sums kept from here and added in block order give its sumsq. A
 * non-finite element makes its block's sum non-finite (a finite fp32 square sums far below double's range). */
void zgrad_block_sums(const void *x, zinc_dtype t, size_t n, double *out);

/* dst[i] (fp32) = (accumulate ? dst[i] : 0) + scale * src[i] (src in t). */
void zaxpy_f32(float *dst, const void *src, zinc_dtype t, float scale, size_t n, int accumulate);
/* dst (in t) = src (fp32), rounded to nearest even. */
void zcast_from_f32(void *dst, zinc_dtype t, const float *src, size_t n);
/* dst (fp32) = src (in t). */
void zcast_to_f32(float *dst, const void *src, zinc_dtype t, size_t n);
/* x (in t) *= scale, in place. */
void zscale_inplace(void *x, zinc_dtype t, float scale, size_t n);

/* ZeRO++ symmetric block quantization (kernels/quant_cpu.c), DeepSpeed 0.19.8's Type::Symmetric math
 * (csrc/includes/quantization_utils.h, dequantization_utils.h) in float, per block of `block` elements (the
 * last block of n may be shorter), bits 8 (qwZ) or 4 (qgZ; one value per byte here, the packing is the
 * caller's):
 *   m = max |x| over the block (a NaN counts as the largest),  s = m == 0 ? 1 : 2^bits / (2 m)
 *   q = clamp(rint(x * s), -2^(bits-1), 2^(bits-1) - 1)      (half to even, as __float2int_rn)
 *   scales[block index] = 1 / s                               (what DeepSpeed stores and sends)
 *   dequantize: y = (float)q * scale, rounded to y's dtype (nearest even).
 * DeepSpeed's kernel reads its input as fp16 (CUDAQuantizer converts fp32 and bf16 to fp16 first); zinc
 * quantizes the stored value itself, so fp32 and bf16 parameters are not rounded to fp16 on the way.
 * Error per element, against the exact value x (tests/test_kernels_quant.c checks it in float64):
 * |deq(q(x)) - x| <= (m / 2^bits)(1 + 2^-12) (half a step; 2^-12 covers the float roundings of s, x s, 1/s and
 * q scale, each 2^-24 relative of values up to 2^(bits-1) steps) where |x| s < 2^(bits-1) - 1/2, and
 * <= (m / 2^(bits-1))(1 + 2^-12) (one step) at the top of the range (x = m maps to 2^(bits-1), clamped to
 * 2^(bits-1) - 1), plus the rounding of the result to a 16-bit dtype (2^-8 |y| for bf16, 2^-11 |y| + 2^-25
 * for fp16). The fast versions run on the
 * current pool with the SIMD path of zkernels_simd_name and are bitwise equal to the references. */
void zk_quant_sym_ref(const void *x, zinc_dtype t, size_t n, size_t block, int bits, int8_t *q, float *scales);
void zk_quant_sym(const void *x, zinc_dtype t, size_t n, size_t block, int bits, int8_t *q, float *scales);
void zk_dequant_sym_ref(const int8_t *q, const float *scales, size_t n, size_t block, void *y, zinc_dtype t);
void zk_dequant_sym(const int8_t *q, const float *scales, size_t n, size_t block, void *y, zinc_dtype t);

/* dst = src (bytes), through streaming stores where dst is aligned to the SIMD width (a copy nobody reads
 * again soon: the cache stays the caller's), and with f32 (bytes a multiple of 4) 1 if any float of it is
 * non-finite, else 0. On the calling thread. The reference: memcpy and an isfinite loop. */
int zk_copy_stream_ref(void *dst, const void *src, size_t bytes, int f32);
int zk_copy_stream(void *dst, const void *src, size_t bytes, int f32);

/* Which SIMD path the fast kernels use ("avx512", "avx2", "scalar"); ZINC_SIMD=scalar|avx2|avx512 in the
 * environment forces a lower one (for tests and benchmarks). */
const char *zkernels_simd_name(void);
/* Selects the SIMD path by name ("scalar", "avx2", "avx512"; NULL: back to the default, which honours
 * ZINC_SIMD). Returns 0, or -1 (nothing changed) for an unknown name or a path this CPU lacks. Not to be
 * called while kernels run on other threads. */
int zkernels_set_simd(const char *name);
/* What the kernels have to report, or NULL: today only an unusable ZINC_SIMD value (found when the SIMD path
 * is first chosen, which this call forces). The kernels never print or log on their own: zinc_create logs
 * this through the engine's log callback. */
const char *zkernels_warning(void);
/* Threads. The fast kernels run on a thread pool (kernels/thread_pool.h): the one made current on the
 * calling thread with zkernels_use_pool (an engine's device does that around its kernel calls, so each
 * engine uses its own), else a process default pool made on first use. zkernels_use_pool returns the
 * previous pool, to restore; NULL selects the default. */
typedef struct zpool zpool;
zpool *zkernels_use_pool(zpool *p);
/* The default pool's size (for tests and benchmarks): n threads, 0 = the CPUs this process may run on.
 * Not to be called while kernels run on the default pool. */
void zkernels_set_threads(int n);
/* Threads the kernels called on this thread use: the current pool's, else the default's. */
int zkernels_threads(void);
/* The default pool (made now if needed; NULL if it could not be made, and the kernels then run on the
 * calling thread). */
zpool *zkernels_default_pool(void);
/* CPUs this process may run on (its affinity mask), at least 1. */
int zkernels_cpu_count(void);

#endif
