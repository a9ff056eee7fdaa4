/* GPT-2's state and the table of operations it computes with, shared by the one model (gpt2.c) and the
 * devices it computes on: the host (gpt2_host.c: gpt2_layers.c on the engine's threads, the engine's
 * zinc_param_to_f32 / zinc_grad_add_f32) and the GPU (gpt2_cuda.c: cuBLAS and gpt2_kernels.h on the engine's
 * compute stream, built with the CUDA backend only). gpt2.c decides what is computed, in which module entry
 * and into which buffer; the table decides where. Every buffer the table is given was made by its alloc
 * (device memory on the GPU) except where a comment says host. */
#ifndef ZINC_EXAMPLES_GPT2_INTERNAL_H
#define ZINC_EXAMPLES_GPT2_INTERNAL_H

#include <stdbool.h>

#include "gpt2.h"

/* att: the softmax weights (B x H x T x T), or with the table's attention_fwd_lse each row's log-sum-exp
 * (B x H x T). fchg: GELU's output. fch: the fc product GELU reads, which with the table's gelu_fwd_deriv
 * GELU overwrites with its derivative there (all that backward needs of it). */
typedef struct gpt2_block_acts {
    float *ln1, *ln1m, *ln1r, *qkv, *att, *atty, *res2, *ln2, *ln2m, *ln2r, *fch, *fchg;
} gpt2_block_acts;

typedef struct gpt2_ops gpt2_ops;
typedef struct gpt2_cuda gpt2_cuda; /* the GPU path's own state (gpt2_cuda.c) */

struct gpt2_model {
    zinc_engine *e;
    const gpt2_ops *ops;
    gpt2_cuda *cuda;
    gpt2_shape s;
    int T, mb;
    int64_t gas;
    int mod_embed, mod_lnf, *mod_block;
    zinc_param **params; /* registration order: wte, wpe, 12 per block, lnfw, lnfb */
    int *pkind, *player; /* each registered parameter's kind and layer */
    int nparams;
    const float *init;          /* during create only */
    gpt2_model_file *init_file; /* during create only */
    /* or the caller's reader (gpt2_config.init_read), during create only */
    zinc_status (*init_read)(void *ctx, int kind, int layer, int64_t first, int64_t n, float *out);
    void *init_ctx;
    float *w[GPT2_NKINDS];      /* float views of the entered module's parameters */
    float *g[GPT2_NKINDS];      /* float gradients of the module in backward */
    float *scratch;             /* float copies of the entered module's parameters (bf16/fp16 compute), then its
                               float gradients (size: scratch_floats in gpt2.c) */
    int copies;                 /* compute dtype is not fp32: parameters are read through float copies */
    int direct_embed;           /* fp32 compute and gradients: embed's gradients go straight into the engine's */
    int bf16_products;          /* bf16 compute on the host: products in bf16 (gpt2.c: bf16_products) */
    uint16_t *bf16ws;           /* their operands rounded to bf16 (gpt2_matmul_bf16_elems of the largest) */
    int ckpt;                   /* activation checkpointing (zinc_activation_checkpointing): one set of block
                               activations, recomputed from each block's input xs[l] in its backward entry */
    float *xs;                  /* residual stream: (L + 1) x N x C */
    gpt2_block_acts *acts;
    float *lnf, *lnfm, *lnfr, *logits;
    float *dx, *dres, *dln, *datty, *dqkv, *datt, *dfchg, *dfch, *dtmp;
    int32_t *inp, *tgt;    /* host: the token ids of the current forward */
    int32_t *dinp, *dtgt;  /* the same where the table computes (the host path: inp and tgt themselves) */
    double *row_loss;      /* the cross-entropy's per-position losses: gas x N, one slot per micro-step */
    double *row_loss_host; /* host copy of row_loss (device tables only) */
    float *capture;
    double t_engine, t_steps;    /* seconds inside engine calls, and in whole training steps */
    double t_step0, t_micro_end; /* when the current step began, and its latest micro-step ended */
    bool in_step;                /* inside a training step: evaluation's and sampling's engine calls are not in t_engine */
    int shuffle;
    uint64_t shuffle_seed;
};

/* Where the model computes. Each returns ZINC_OK or logs and returns an error; the work may run later
 * (on the GPU: enqueued on the engine's compute stream), except where a comment says it waits. */
struct gpt2_ops {
    const char *name;
    int device; /* buffers are device memory: the host reads them through to_host only */
    /* Extra float scratch the embedding's forward needs for a widened wte (gpt2_embed_fwd's wte_f32). */
    int embed_widens;
    zinc_status (*alloc)(gpt2_model *m, void **p, size_t bytes); /* zeroed */
    void (*release)(gpt2_model *m, void *p);
    zinc_status (*zero)(gpt2_model *m, void *p, size_t bytes);
    /* From host memory that may be reused at once. */
    zinc_status (*to_device)(gpt2_model *m, void *dst, const void *host_src, size_t bytes);
    /* Into host memory; waits for the work that writes src. */
    zinc_status (*to_host)(gpt2_model *m, void *host_dst, const void *src, size_t bytes);
    /* The entered module's parameter p as n floats; its float gradient g (of the unscaled loss) added into
     * the engine's, times the loss scale. */
    zinc_status (*to_f32)(gpt2_model *m, float *dst, const zinc_param *p, int64_t n);
    zinc_status (*grad_add)(gpt2_model *m, zinc_param *p, const float *g, int64_t n);
    /* gpt2_layers.h's functions, with the same contracts. embed_fwd's wte is in dtype t (the engine's
     * parameter); wte_f32 is padded_vocab x C floats of scratch when embed_widens and t is not fp32. */
    zinc_status (*embed_fwd)(gpt2_model *m, float *out, const int32_t *inp, const void *wte, zinc_dtype t,
                             const float *wpe, float *wte_f32, int B, int T);
    zinc_status (*embed_bwd)(gpt2_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B,
                             int T);
    zinc_status (*layernorm_fwd)(gpt2_model *m, float *out, float *mean, float *rstd, const float *x, const float *w,
                                 const float *b, int64_t N);
    zinc_status (*layernorm_bwd)(gpt2_model *m, float *dx, float *dw, float *db, const float *dout, const float *x,
                                 const float *w, const float *mean, const float *rstd, int64_t N);
    zinc_status (*matmul_fwd)(gpt2_model *m, float *out, const float *x, const float *W, const float *b, int64_t N,
                              int IC, int OC);
    zinc_status (*matmul_bwd)(gpt2_model *m, float *dx, float *dW, float *db, const float *dout, const float *x,
                              const float *W, int64_t N, int IC, int OC);
    zinc_status (*attention_fwd)(gpt2_model *m, float *out, float *att, const float *qkv, int B, int T);
    zinc_status (*attention_bwd)(gpt2_model *m, float *dqkv, float *datt, const float *dout, const float *qkv,
                                 const float *att, int B, int T);
    zinc_status (*gelu_fwd)(gpt2_model *m, float *out, const float *x, int64_t n);
    zinc_status (*gelu_bwd)(gpt2_model *m, float *dx, const float *x, const float *dout, int64_t n);
    /* y = a + b: the residual adds of a table without matmul_fwd_res (which the host table has, so it has no add) */
    zinc_status (*add)(gpt2_model *m, float *y, const float *a, const float *b, int64_t n);
    /* Optional (NULL: the entries above are used). Attention that keeps each row's log-sum-exp (lse, B x H x
     * T) instead of the softmax matrix, its backward reading the forward's out (gpt2_layers.h's _blocked):
     * no datt scratch. GELU whose forward also writes its derivative, over x (gpt2_layers.h's _deriv function; its
     * backward is then matmul_bwd_set's dx_mul, which the table must have). */
    zinc_status (*attention_fwd_lse)(gpt2_model *m, float *out, float *lse, const float *qkv, int B, int T);
    zinc_status (*attention_bwd_lse)(gpt2_model *m, float *dqkv, const float *dout, const float *out, const float *qkv,
                                     const float *lse, int B, int T);
    zinc_status (*gelu_fwd_deriv)(gpt2_model *m, float *out, float *deriv, const float *x, int64_t n);
    /* Optional: matmul_bwd writing dx (dx = dout W, times dx_mul element by element when given; dW and db
     * still added) instead of adding to it, so the model skips zeroing dx first (NULL: zero, then
     * matmul_bwd). */
    zinc_status (*matmul_bwd_set)(gpt2_model *m, float *dx, const float *dx_mul, float *dW, float *db,
                                  const float *dout, const float *x, const float *W, int64_t N, int IC, int OC);
    /* Optional: out = res + matmul_fwd's product, the bits of the product and then `add` (NULL: those two). */
    zinc_status (*matmul_fwd_res)(gpt2_model *m, float *out, const float *x, const float *W, const float *b,
                                  const float *res, int64_t N, int IC, int OC);
    /* row_loss[i] = the loss of row i (N doubles); the caller sums them on the host (gpt2.c). */
    zinc_status (*crossentropy)(gpt2_model *m, float *dlogits, const float *logits, const int32_t *targets, int64_t N,
                                float dscale, double *row_loss);
};

extern const gpt2_ops gpt2_host_ops;

/* Resident bytes of OpenBLAS's buffers: its pool at the first sgemm plus each calling thread's packing
 * buffers (touched by the blocked product), measured with bench/mem/whole_process.sh (1-3.4 MiB at 1-2
 * threads and widths 192-384); the test mem_whole_matrix keeps them honest against the process's VmHWM. */
#define GPT2_BLAS_BASE_BYTES ((size_t)0)
#define GPT2_BLAS_THREAD_BYTES ((size_t)3 << 19)
/* The same for oneDNN (--gemm onednn, gpt2_gemm.h), which replaces OpenBLAS's: its library's resident pages
 * and JIT kernels once loaded, and each thread's packing buffers (peak RSS at the README shape, 1-2 threads:
 * 10-12 MiB above the OpenBLAS run's). */
#define GPT2_ONEDNN_BASE_BYTES ((size_t)19 << 19)
#define GPT2_ONEDNN_THREAD_BYTES ((size_t)2 << 20)

/* The GPU path (gpt2_cuda.c, built with the CUDA backend only): gpt2_cuda_create loads cuBLAS and binds a
 * handle to the engine's compute stream (m->cuda), gpt2_cuda_destroy waits for the stream and frees it. */
extern const gpt2_ops gpt2_cuda_ops;
zinc_status gpt2_cuda_create(gpt2_model *m);
void gpt2_cuda_destroy(gpt2_model *m);

#endif
