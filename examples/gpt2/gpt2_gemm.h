/* GPT-2's one matrix product on the host, row-major: C[M,N] = alpha op(A) op(B) + beta C with op(X) = X or
 * X^T ('N' / 'T'), computed by the backend chosen at run time: OpenBLAS's cblas_sgemm (always there) or
 * oneDNN's dnnl_sgemm (its own AVX-512 JIT kernels, whatever OPENBLAS_CORETYPE says; libdnnl.so.2, Debian's
 * libdnnl2, loaded at first use). Every call runs on the calling thread alone (the layers split their products over
 * the engine's threads): OpenBLAS set to one thread, oneDNN's OpenMP to one thread per calling thread, so
 * neither library starts threads of its own. */
#ifndef ZINC_EXAMPLES_GPT2_GEMM_H
#define ZINC_EXAMPLES_GPT2_GEMM_H

#include <stdint.h>

#include "zinc.h"

typedef enum gpt2_gemm_backend { GPT2_GEMM_OPENBLAS = 0, GPT2_GEMM_ONEDNN = 1 } gpt2_gemm_backend;

/* "openblas", "onednn" or "auto" (oneDNN where it loads, else OpenBLAS) into *out; where oneDNN does not
 * load, "onednn" is refused with an error naming the package. */
zinc_status gpt2_gemm_parse(const char *name, gpt2_gemm_backend *out);
/* The backend every later gpt2_sgemm uses (process-wide). Default: auto. */
void gpt2_gemm_select(gpt2_gemm_backend b);
gpt2_gemm_backend gpt2_gemm_selected(void);
const char *gpt2_gemm_name(gpt2_gemm_backend b);
/* 1 when libdnnl.so.2 loads (tried once). */
int gpt2_gemm_have_onednn(void);

/* fn over [0, n) in pieces on e's threads (zinc_parallel_for), or on the caller alone without an engine:
 * the model's loops. With oneDNN selected each piece runs with asynchronous signals held back (see
 * gpt2_gemm.c: oneDNN's products must not be interrupted by a handler), once per piece rather than once
 * per product; they are delivered when the piece ends. */
void gpt2_par(zinc_engine *e, int64_t n, void (*fn)(void *, int64_t, int64_t), void *ctx);

/* The precision of the model's matrix products on the host, process-wide like the backend (torch's
 * set_float32_matmul_precision): AUTO multiplies in bf16 when the compute dtype is bf16, in float otherwise;
 * BF16 rounds the operands to bf16 at any compute dtype (fp32 weights and gradients with bf16 products is
 * torch autocast's scheme); FP32 always multiplies in float (bf16 weights widened). */
typedef enum gpt2_products { GPT2_PRODUCTS_AUTO = 0, GPT2_PRODUCTS_FP32 = 1, GPT2_PRODUCTS_BF16 = 2 } gpt2_products;
/* "auto", "fp32" or "bf16" into *out; "bf16" is refused (naming why) where gpt2_gemm_bf16_available() is 0,
 * so call it after gpt2_gemm_select. */
zinc_status gpt2_products_parse(const char *name, gpt2_products *out);
void gpt2_products_select(gpt2_products p);
gpt2_products gpt2_products_selected(void);
const char *gpt2_products_name(gpt2_products p);

void gpt2_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* 1 when gpt2_gemm_bf16 runs on bf16 dot products: oneDNN selected, and its bf16 product works on this CPU
 * (AVX-512; tried once on a 1 x 1 x 1 product). */
int gpt2_gemm_bf16_available(void);
/* The same product of bf16 operands (raw bf16 bits) into float C, through oneDNN's bf16 GEMM
 * (dnnl_gemm_bf16bf16f32: exported by libdnnl though not in its public header; declared in gpt2_gemm.c).
 * Where gpt2_gemm_bf16_available() is 0 it widens the operands and runs gpt2_sgemm (slow, same result up to
 * the float summation order). */
void gpt2_gemm_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t lda,
                    const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
