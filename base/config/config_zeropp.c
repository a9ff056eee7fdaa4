/* ZeRO++ (zero_quantized_weights, zero_hpz_partition_size, zero_quantized_gradients): DeepSpeed 0.19.8's
 * constraints, refused here with its reasons and the fix. DeepSpeed reads the three only in stage 3
 * (runtime/zero/stage3.py, partition_parameters.py); its stage 1/2 optimizer never looks at them, so a
 * stage 0-2 job would silently train without what was asked for: zinc refuses that instead. What needs the
 * node layout (hpZ's groups inside a node) is checked when the engine knows it (zero/zeropp.c). */
#include "base/config/config_internal.h"

#define ZPP "zero_optimization."

void zcfg_resolve_zeropp(zcfg_loader *L) {
    const zinc_config *c = L->c;
    const zcfg_zero *z = &c->zero;
    const struct {
        bool on;
        const char *key, *what;
    } keys[] = {
        {z->quantized_weights, ZPP "zero_quantized_weights", "true"},
        {z->quantized_gradients, ZPP "zero_quantized_gradients", "true"},
        {z->hpz_partition_size > 1, ZPP "zero_hpz_partition_size", "above 1"},
    };
    if (z->stage != 3) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (keys[i].on)
                zcfg_problem(L, keys[i].key,
                             "is %s at stage %d; ZeRO++ works in stage 3 only (DeepSpeed 0.19.8 reads it in "
                             "runtime/zero/stage3.py alone, so stage %d would train without it). Set "
                             "zero_optimization.stage to 3, or remove the key",
                             keys[i].what, z->stage, z->stage);
        return;
    }
    if (z->quantized_gradients && !z->reduce_scatter)
        zcfg_problem(L, ZPP "zero_quantized_gradients",
                     "needs zero_optimization.reduce_scatter true (DeepSpeed 0.19.8, stage3.py: \"when enable "
                     "all_to_all_reduce, reduce_scatter should also be enabled for data type checks.\"); remove "
                     "reduce_scatter or set it true");
    if (z->quantized_gradients && c->deterministic_reduction)
        zcfg_problem(L, ZPP "zero_quantized_gradients",
                     "and zinc.deterministic_reduction exclude each other (its fixed tree sums fp32 gradients; qgZ "
                     "sends INT4 ones): set one of them false");
    if (z->hpz_partition_size > 1) {
        /* utils/groups.py _create_zero_param_parallel_group: min(size, world) must divide the world */
        int g = z->hpz_partition_size < c->world_size ? z->hpz_partition_size : c->world_size;
        if (c->world_size % g)
            zcfg_problem(L, ZPP "zero_hpz_partition_size",
                         "%d does not divide the %d ranks of this job (DeepSpeed 0.19.8, utils/groups.py: \"%d is "
                         "not divisible by %d\"); use a divisor of the rank count, such as the ranks per node",
                         z->hpz_partition_size, c->world_size, c->world_size, g);
    }
}
