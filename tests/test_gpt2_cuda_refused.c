/* GPT-2 built without its GPU path (zinc_gpt2_nogpu_emulated: the CUDA backend without
 * examples/gpt2/gpt2_cuda.c, as a build whose tree lacks gpt2_kernels.cu) refuses an engine on device cuda
 * with a message that says why and what to do, and builds nothing; the same build on device cpu trains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "base/device/device.h"
#include "zt.h"

static zt_logcap log_cap = {.echo = ZINC_LOG_OFF};
#define g_log zt_logcap_first(&log_cap, ZINC_LOG_ERROR, NULL) /* the first error */

static zinc_status make(zinc_device_kind dev, zinc_engine **e, gpt2_model **m) {
    static const gpt2_shape S = {8, 11, 1, 2, 8, 16};
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 2, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";
    o.device = dev;
    o.log_level = ZINC_LOG_WARN;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &log_cap;
    o.cpu_threads = 1;
    *e = NULL, *m = NULL;
    zinc_status st = zinc_create(&o, e);
    gpt2_config c = {.shape = S, .context = 8, .init = NULL};
    return st == ZINC_OK ? gpt2_create(*e, &c, m) : st;
}

int main(void) {
    zt_name = "gpt2_cuda_refused";
    if (zdev_cuda_count() == 0) return zt_skip("no GPU (or zinc built without the CUDA backend)");
    setenv("ZINC_EXPERIMENTAL_CUDA", "1", 1);
    zinc_engine *e;
    gpt2_model *m;
    zinc_status st = make(ZINC_DEVICE_CUDA, &e, &m);
    ZT_CHECK(st == ZINC_ERR_UNSUPPORTED && !m, "gpt2 on cuda without the GPU path: status %d, want unsupported",
             (int)st);
    ZT_CHECK(strstr(g_log, "this build of the GPT-2 example has no GPU path") && strstr(g_log, "--device cpu"),
             "the message says why and what to do: %s", g_log);
    gpt2_destroy(m);
    zinc_destroy(e);
    zt_logcap_clear(&log_cap);
    ZT_OK(make(ZINC_DEVICE_CPU, &e, &m));
    uint16_t win[2 * 9];
    for (int i = 0; i < 18; i++) win[i] = (uint16_t)(i % 11);
    double loss = 0;
    ZT_OK(gpt2_microstep(m, win, 2, &loss));
    ZT_CHECK(loss > 0, "a cpu micro-step on the same build: loss %g", loss);
    gpt2_destroy(m);
    zinc_destroy(e);
    return zt_finish();
}
