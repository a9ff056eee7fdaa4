/* The checks zinc_create makes of a loaded config beyond the config's own rules (the device it asks for can
 * run here; the monitors' directories can be made), in one function that `zinc config check` calls too, so
 * that a file the check accepts is not refused by the run for these (engine_internal.h). */
#include <stdbool.h>
#include <string.h>

#include "base/core/env.h"
#include "base/core/error.h"
#include "runtime/engine/engine_internal.h"
#include "runtime/monitor/monitor.h"

bool zengine_cuda_allowed(void) {
    const char *x = zenv_get(ZENV_EXPERIMENTAL_CUDA);
    return x && !strcmp(x, "1");
}

zinc_status zengine_check_run(const zinc_config *cfg, zinc_device_kind option_device, bool monitors) {
    zinc_status st = ZINC_OK;
    zinc_device_kind want = option_device != ZINC_DEVICE_AUTO ? option_device : cfg->device;
    if (want == ZINC_DEVICE_CUDA && !zengine_cuda_allowed())
        FAIL(ZINC_ERR_UNSUPPORTED, "device cuda: zinc's CUDA device backend is compiled but has never run on a GPU "
                                   "yet; set ZINC_EXPERIMENTAL_CUDA=1 in the environment to try it, or use device "
                                   "cpu (zinc.device in the config or --device cpu)");
    if (monitors) TRY(zmon_check(&cfg->tensorboard, &cfg->csv_monitor));
fail:
    return st;
}
