/* zinc.deterministic_reduction: what the fixed reduction tree of zero/grads_determ.c needs, refused here with
 * the values and the fix. The tree is the pairwise one over the global micro-batch index m = j x world + r;
 * its node boundaries fall on every split of world x gradient_accumulation_steps only when both are powers
 * of two. Its additions are fp32 ones, so the gradients must be fp32 end to end. Lamb sums per-tensor norms
 * over the ranks' shards, whose boundaries move with the rank count. The cuda device reduces through NCCL,
 * whose backend has no point-to-point send here. */
#include "base/config/config_internal.h"

static const char *const KEY = "zinc.deterministic_reduction";

static bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

void zcfg_resolve_determinism(zcfg_loader *L) {
    const zinc_config *c = L->c;
    if (!c->deterministic_reduction) return;
    if (!power_of_two(c->world_size))
        zcfg_problem(L, KEY,
                     "needs a power-of-two number of ranks; this job has %d. Run 1, 2, 4, 8, ... ranks, or set it "
                     "false (the fixed tree over the micro-batches has node boundaries on every split only for "
                     "powers of two)",
                     c->world_size);
    int64_t gas = c->gradient_accumulation_steps;
    if (gas > 0 && !power_of_two(gas))
        zcfg_problem(L, KEY,
                     "needs gradient_accumulation_steps a power of two; it is %lld. Choose train_batch_size and "
                     "train_micro_batch_size_per_gpu so that it is 1, 2, 4, 8, ..., or set it false",
                     (long long)gas);
    if (c->fp16.enabled || c->bf16_enabled)
        zcfg_problem(L, KEY,
                     "is for fp32 training; %s.enabled is true. Disable %s (16-bit gradients round before the "
                     "sum, so no tree makes them split-independent), or set it false",
                     c->fp16.enabled ? "fp16" : "bf16", c->fp16.enabled ? "fp16" : "bf16");
    else if (c->comm_dtype != ZINC_FP32)
        zcfg_problem(L, KEY,
                     "needs fp32 gradient communication; communication_data_type is %s. Remove it or set it "
                     "\"fp32\", or set it false",
                     zinc_dtype_name(c->comm_dtype));
    else if (c->grad_accum_dtype != ZINC_FP32)
        zcfg_problem(L, KEY,
                     "needs fp32 gradient accumulation; data_types.grad_accum_dtype is %s. Remove it or set it "
                     "\"fp32\", or set it false",
                     zinc_dtype_name(c->grad_accum_dtype));
    if (c->optimizer.type == ZOPT_LAMB)
        zcfg_problem(L, KEY,
                     "does not support the Lamb optimizer (its per-tensor norms are summed over the ranks' shards, "
                     "whose boundaries move with the rank count); use Adam, AdamW, Lion or Adagrad, or set it false");
    if (c->device == ZINC_DEVICE_CUDA)
        zcfg_problem(L, KEY,
                     "runs on the cpu device only (the cuda device reduces through NCCL, which has no fixed-tree "
                     "path in zinc); set zinc.device \"cpu\", or set it false");
}
