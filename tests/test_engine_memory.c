/* Memory accounting: per-rank optimizer bytes are 12 x the padded shard length in stages 1-3 (12 x the
 * padded buffer in stage 0), parameter bytes shrink to the shard in stage 3, gradients are the fp32
 * shard in stages 2-3, and nothing grows from step to step. */
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "zero/partition.h"
#include "zt.h"

static void check_stage(int stage, zinc_dtype t) {
    eu_run r = {.stage = stage, .dtype = t, .overlap_comm = stage >= 2,
                .zero_extra = "\"stage3_max_live_parameters\": 1000000000"};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    int W = zinc_world_size(e);
    /* The flat layout ends with the last parameter (eu_model has 3 layers: fc3.bias is last). */
    zinc_param_info info;
    ZT_OK(zinc_param_get_info(zinc_param_find(e, "fc3.bias"), &info));
    int64_t end = info.flat_offset + info.numel;
    zpartition part;
    zpart_init(&part, end, W, zinc_rank(e));
    uint64_t S = (uint64_t)part.shard, N = (uint64_t)part.padded;
    size_t cs = zinc_dtype_size(t);

    zinc_memory_report rep[3];
    for (int s = 0; s < 5; s++) {
        ZT_OK(mlp_train_step(m, s, NULL, NULL));
        if (s == 0) ZT_OK(zinc_memory_get(e, &rep[0]));
        if (s == 4) ZT_OK(zinc_memory_get(e, &rep[1]));
    }
    /* The engine's buffers count as device memory on a discrete device (ZINC_CPU_DISCRETE=1, a GPU). */
    zinc_mem_kind dk = zinc_device_host_addressable(e) ? ZINC_MEMKIND_HOST : ZINC_MEMKIND_DEVICE;
    const uint64_t *cur = rep[1].current[dk];
    uint64_t opt = cur[ZINC_MEM_MASTER] + cur[ZINC_MEM_EXP_AVG] + cur[ZINC_MEM_EXP_AVG_SQ];
    uint64_t want_opt = 12 * (stage == 0 ? N : S);
    ZT_CHECK(opt == want_opt, "stage %d %s ranks %d: optimizer bytes %llu, expected 12 x %llu = %llu", stage,
             zinc_dtype_name(t), W, (unsigned long long)opt, (unsigned long long)(stage == 0 ? N : S),
             (unsigned long long)want_opt);
    uint64_t want_params = stage == 3 ? S * cs : N * cs;
    ZT_CHECK(cur[ZINC_MEM_PARAMS] == want_params, "stage %d %s: parameter bytes %llu, expected %llu", stage,
             zinc_dtype_name(t), (unsigned long long)cur[ZINC_MEM_PARAMS], (unsigned long long)want_params);
    /* Stages 0-1 accumulate in grad_accum_dtype: the compute dtype, as DeepSpeed 0.19.8's default. */
    uint64_t gs = stage <= 1 ? cs : 4;
    uint64_t want_grads = (stage <= 1 ? N * gs : 0) + (stage >= 1 ? S * 4 : 0);
    ZT_CHECK(cur[ZINC_MEM_GRADS] == want_grads, "stage %d %s: gradient bytes %llu, expected %llu", stage,
             zinc_dtype_name(t), (unsigned long long)cur[ZINC_MEM_GRADS], (unsigned long long)want_grads);
    ZT_CHECK(cur[ZINC_MEM_GATHER] == 0, "stage %d: %llu gather bytes still held after the step", stage,
             (unsigned long long)cur[ZINC_MEM_GATHER]);
    if (stage == 3)
        ZT_CHECK(rep[1].peak[dk][ZINC_MEM_GATHER] > 0, "stage 3 gathered nothing");
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        ZT_CHECK(rep[0].current_total[k] == rep[1].current_total[k],
                 "stage %d %s: %s bytes grew from %llu after step 1 to %llu after step 5", stage, zinc_dtype_name(t),
                 zinc_mem_kind_name((zinc_mem_kind)k), (unsigned long long)rep[0].current_total[k],
                 (unsigned long long)rep[1].current_total[k]);
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "engine_memory";
    for (int stage = 0; stage <= 3; stage++) {
        check_stage(stage, ZINC_FP32);
        check_stage(stage, ZINC_BF16);
        check_stage(stage, ZINC_FP16);
    }
    return zt_finish();
}
