/* GPT-2 wrapped through the zinc engine (public API only): learned token and position embeddings, pre-LN
 * blocks (causal multi-head attention, GELU-tanh MLP 4x), final LayerNorm, output projection tied to the
 * token embedding; no dropout, LayerNorm eps 1e-5; the loss and softmax see the first `vocab` logits only.
 *
 * Modules, in forward order: "embed" (wte, wpe), "h0" .. "h<L-1>" (one per block, 12 tensors each),
 * "lnf". In stage 3 the engine gathers one module at a time. On a cpu engine the model computes on the
 * host in float (matrix products through OpenBLAS's sgemm, gpt2_layers.c; attention in blocks through
 * sgemm, gpt2_attention.c; tanh and exp through SLEEF, gpt2_vecmath.h; every loop on the engine's threads
 * through zinc_parallel_for, so the model has no thread pool of its own): bf16/fp16 parameters are
 * converted to float at each module entry (zinc_param_to_f32) and float gradients are added into the
 * engine's buffers before each exit (zinc_grad_add_f32, which applies the loss scale). On a cuda engine it
 * computes the same on the GPU (gpt2_cuda.c: cuBLAS and gpt2_kernels.h on the engine's compute stream; its
 * activations on the device), in a build with that path (the CUDA backend and gpt2_kernels.cu).
 *
 * The tied embedding, by re-entering "embed" (include/zinc.h, "Re-entry"): after "lnf" the forward enters
 * "embed" again to read wte for the output projection (logits, loss, and the gradient at lnf's output,
 * dlogits wte); backward's single entry of "embed" then computes wte's whole gradient, the projection's
 * dlogits^T lnf (both buffers kept from the forward) plus the token rows'. No module is entered twice for
 * backward, so at stages 2-3 the embedding takes a bucket slot and is reduced once per micro-step like any
 * module (no held buffer). The model keeps no copy of wte: with fp32 compute it reads wte in place and, with
 * fp32 gradients, writes the embedding's gradients straight into the engine's buffers; with bf16/fp16 it
 * converts wte (and its gradient) through its one float scratch, max(2 x one block, padded_vocab x
 * channels) floats (fp32: one block), on top of the activations (about (16 C + H T) x B x T x layers
 * floats on the GPU; on the host (16 C + H): its blocked attention keeps one log-sum-exp per row and head,
 * not the softmax matrix) and the logits (B x T x vocab floats).
 *
 * Data: llm.c's sequential loader (gpt2_files.h). The global window k of the run is
 * step * train_batch_size + (micro_step * world + rank) * micro_batch + b, so any rank count with the same
 * train_batch_size sees the same windows per step. */
#ifndef ZINC_EXAMPLES_GPT2_H
#define ZINC_EXAMPLES_GPT2_H

#include <stdint.h>

#include "gpt2_files.h"
#include "zinc.h"

typedef struct gpt2_config {
    gpt2_shape shape;
    int context;                /* T of training windows, 1..shape.max_context */
    const float *init;          /* all parameters in llm.c's order (gpt2_files.h), or NULL: GPT-2's initialisation
                             (normal 0.02, residual projections 0.02/sqrt(2 L), biases 0, LayerNorm 1/0,
                             padding rows of wte 0) seeded by the engine seed */
    gpt2_model_file *init_file; /* or an open llm.c file (gpt2_model_open) of this shape, read piece by piece
                                   while the engine builds (zinc_build_ranged): no copy of the model */
    /* or the caller's reader of another format (a Hugging Face safetensors file: cli/checkpoint/gpt2_hf.c),
     * asked the same way for elements [first, first + n) of kind's tensor of `layer` (0 for global kinds) in
     * this model's layout (llm.c's: matrices [out, in], wte with its padding rows), as fp32 */
    zinc_status (*init_read)(void *ctx, int kind, int layer, int64_t first, int64_t n, float *out);
    void *init_ctx;
} gpt2_config;

typedef struct gpt2_model gpt2_model;

/* The model's own memory for a configuration, without an engine: its activations and scratch (in GPU
 * memory with on_gpu, else host memory) and its further host bytes (token ids, OpenBLAS's buffers of
 * `threads` threads): what gpt2_create declares to the engine (zinc_memory_declare), from the same
 * table it allocates from. For `zinc mem estimate --model gpt2`. */
zinc_status gpt2_memory(const gpt2_config *cfg, int micro_batch, int64_t grad_accum_steps, zinc_dtype compute_dtype,
                        zinc_dtype grad_dtype, int checkpointing, int threads, int on_gpu, uint64_t *activations,
                        uint64_t *scratch, uint64_t *host_extra);

/* Registers the modules and parameters and builds the engine (zinc_build). The engine is on device cpu,
 * or cuda in a build with the GPU path (else ZINC_ERR_UNSUPPORTED, saying so; a missing cuBLAS is
 * ZINC_ERR_DEVICE naming the library). */
zinc_status gpt2_create(zinc_engine *e, const gpt2_config *cfg, gpt2_model **out);
void gpt2_destroy(gpt2_model *m);

/* Forward and backward of one micro-batch: windows holds B rows of T+1 tokens (inputs are the first T,
 * targets the last T). Adds the sum of the B*T losses to *loss_sum. The gradient is that of the
 * micro-batch's mean loss (times the loss scale). */
zinc_status gpt2_microstep(gpt2_model *m, const uint16_t *windows, int B, double *loss_sum);
/* Forward only (no gradients): adds the sum of the B*T losses to *loss_sum. B <= micro batch. */
zinc_status gpt2_eval(gpt2_model *m, const uint16_t *windows, int B, double *loss_sum);
/* Forward only over one sequence of n tokens (1..context): the first `vocab` logits of its last position. */
zinc_status gpt2_next_logits(gpt2_model *m, const uint16_t *tokens, int n, float *logits);

/* One optimizer step on the sequential windows of `data` (gpt2_window with the engine's batch sizes):
 * zinc_grad_accum_steps micro-steps, then zinc_step. *loss = the mean over all train_batch_size x T
 * positions of the global batch (every rank), from this step's forward passes before its update. */
zinc_status gpt2_train_step(gpt2_model *m, const gpt2_tokens *data, int64_t step, zinc_step_info *info, double *loss);
/* The same step in its parts, for a driver that runs the step itself (the zinc program's trainer): micro-step j
 * (0 .. zinc_grad_accum_steps - 1) of global step `step`, then, after zinc_step, the step's mean loss over
 * every rank (collective). gpt2_times counts zinc_step's time as the engine's, as in gpt2_train_step. */
zinc_status gpt2_train_microstep(gpt2_model *m, const gpt2_tokens *data, int64_t step, int64_t j);
zinc_status gpt2_step_loss(gpt2_model *m, double *loss);
/* From now on training windows are read through gpt2_window_shuffled with this seed (--shuffle). */
void gpt2_shuffle(gpt2_model *m, uint64_t seed);
/* Mean loss over `batches` global batches (train_batch_size windows each, from window 0) of `data`,
 * forward only, shared across ranks. Collective. */
zinc_status gpt2_val_loss(gpt2_model *m, const gpt2_tokens *data, int64_t batches, double *loss);

/* Collective: every parameter (fp32 master weights) in llm.c's order, gpt2_num_params floats. */
zinc_status gpt2_gather_llmc(gpt2_model *m, float *out);

/* Test hook: the float gradient of the last micro-step's loss w.r.t. every parameter, in llm.c's order,
 * as the model computed it before handing it to the engine (unscaled; NULL to stop capturing). Where the
 * model writes into the engine's fp32 buffers directly (the embedding, fp32), it is what the micro-step
 * added there (the buffer after minus before: exact when the buffer started at 0, as in a step's first
 * micro-step at stage 0). */
void gpt2_capture_grads(gpt2_model *m, float *out);

/* Seconds spent in gpt2_train_step so far, and the part of them inside engine calls (module entries
 * and exits: stage-3 gathers and gradient reduction; zinc_step: the reduction's end, clipping, Adam; the
 * loss's all-reduce); the rest is the model's own compute. Validation and sampling are not counted. */
void gpt2_times(const gpt2_model *m, double *steps_s, double *engine_s);

const gpt2_shape *gpt2_model_shape(const gpt2_model *m);
int gpt2_model_context(const gpt2_model *m);
/* 1 when the model's host products run in bf16 (bf16 compute, or --products bf16: gpt2_gemm.h). */
int gpt2_model_bf16_products(const gpt2_model *m);

#endif
