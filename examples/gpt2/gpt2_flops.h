/* GPT-2's FLOPs per training sample (one sequence of T tokens), counted from its matrix products, and
 * their declaration to the engine (zinc_module_flops) so that zinc reports FLOP/s and MFU. */
#ifndef ZINC_EXAMPLES_GPT2_FLOPS_H
#define ZINC_EXAMPLES_GPT2_FLOPS_H

#include "gpt2.h"

typedef struct gpt2_flops {
    double embed_fwd, embed_bwd; /* "embed": the tied output projection (its forward entry also takes dx) */
    double block_fwd, block_bwd; /* each "h<l>" */
    double lnf_fwd, lnf_bwd;     /* "lnf": no matrix product */
    double total;                /* everything: 6 N T + 12 L T^2 C */
} gpt2_flops;

/* The count for shape s and context T (multiply-add = 2; LayerNorm, GELU, softmax and biases left out):
 *   block forward  24 T C^2 (qkv 6, attproj 2, fc 8, fcproj 8) + 4 T^2 C (Q K^T and P V, whole T x T as
 *                  PaLM's MFU counts it, though the causal kernel skips the blocks above the diagonal);
 *   block backward twice its forward (input and weight gradients);
 *   embed          the projection x wte[:V]^T: 2 T C V for the logits and 2 T C V for dlogits wte in its
 *                  forward entry, 2 T C V for wte's gradient in its backward entry.
 * Summed: 6 T (12 L C^2 + C V) + 12 L T^2 C, i.e. 6 N per token (N the matrix weights, the tied head
 * once) plus the attention's 12 L T C per token. */
gpt2_flops gpt2_count_flops(const gpt2_shape *s, int T);
/* Declares the count to m's engine, per module (after gpt2_create). */
zinc_status gpt2_declare_flops(gpt2_model *m);

#endif
