/* Placeholder until the io_uring store lands (issue 5): refuses NVMe offload with a clear error. */
#include "engine_internal.h"
#include "error.h"
#include "state.h"

zinc_status zstate_create_nvme(zinc_engine *e, int64_t n, zstate **out) {
    (void)e, (void)n, (void)out;
    return ZERR(ZINC_ERR_UNSUPPORTED, "zero_optimization.offload_optimizer.device \"nvme\" is not available yet");
}
