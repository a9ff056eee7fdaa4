/* Issue 23's config rules: fp16.min_loss_scale 0 accepted (no floor, as DeepSpeed), a static
 * fp16.loss_scale below 2^-24 refused, train_batch_size above 2^24 refused, a relative nvme_path
 * refused (each message naming the key, the value and the limit). */
#include <string.h>

#include "base/config/config.h"
#include "zt.h"

static zinc_config g_cfg;

static zinc_status load(const char *json) {
    zlog log = {.level = ZINC_LOG_OFF};
    return zcfg_load_text(json, "test", 1, &log, &g_cfg);
}

#define EXPECT_ERR(json, needle1, needle2)                                                                            \
    do {                                                                                                              \
        zinc_status st_ = load(json);                                                                                 \
        ZT_CHECK(st_ == ZINC_ERR_CONFIG && strstr(zinc_last_error(), needle1) && strstr(zinc_last_error(), needle2), \
                 "%s: %s %s", json, zinc_status_name(st_), zinc_last_error());                                        \
    } while (0)

int main(void) {
    zt_name = "config_limits";
    /* The Megatron-DeepSpeed style fp16 block, dynamic scaling with no floor: DeepSpeed 0.19.8 refuses it
     * (DeepSpeedFP16Config: min_loss_scale must be > 0 with dynamic scaling), and so does zinc; a static scale
     * keeps accepting an unused 0, as DeepSpeed does. */
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"loss_scale_window\": 50, "
               "\"hysteresis\": 2, \"min_loss_scale\": 0, \"initial_scale_power\": 12}}",
               "fp16.min_loss_scale", "allowed: 1 or more");
    ZT_OK(load("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 128, \"min_loss_scale\": 0}}"));
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"min_loss_scale\": 0.5}}",
               "fp16.min_loss_scale", "whole number");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"min_loss_scale\": -1}}",
               "fp16.min_loss_scale", "-1");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 1e-300}}", "fp16.loss_scale",
               "2^-24");
    EXPECT_ERR("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 1e30}}", "fp16.loss_scale",
               "65504");
    ZT_OK(load("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 1024}}"));
    EXPECT_ERR("{\"train_batch_size\": 2147483648}", "train_batch_size", "2^24");
    EXPECT_ERR("{\"train_micro_batch_size_per_gpu\": 16777216, \"gradient_accumulation_steps\": 2}",
               "train_batch_size", "2^24");
    ZT_OK(load("{\"train_batch_size\": 16777216}"));
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": "
               "{\"device\": \"nvme\", \"nvme_path\": \"local_nvme\"}}}",
               "offload_optimizer.nvme_path", "relative path");
    EXPECT_ERR("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": "
               "{\"device\": \"nvme\", \"nvme_path\": \"./x\"}}}",
               "nvme_path", "absolute");
    ZT_OK(load("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": "
               "{\"device\": \"nvme\", \"nvme_path\": \"/local_nvme\"}}}"));
    return zt_finish();
}
