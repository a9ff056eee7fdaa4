/* The optimizers by config type. Adding one: its descriptor file, one row here (HACKING.md, "An
 * optimizer"). */
#include "runtime/optim/optim.h"

#include "base/core/error.h"

/* The descriptors, one per file (optim_<name>.c). */
extern const zopt_desc zopt_adam, zopt_lion, zopt_lamb, zopt_adagrad, zopt_sgd, zopt_muon;

const zopt_desc *zopt_get(zcfg_optimizer_type type) {
    static const zopt_desc *const by_type[ZOPT_COUNT] = {
        [ZOPT_ADAM] = &zopt_adam,       [ZOPT_ADAMW] = &zopt_adam, [ZOPT_LION] = &zopt_lion, [ZOPT_LAMB] = &zopt_lamb,
        [ZOPT_ADAGRAD] = &zopt_adagrad, [ZOPT_SGD] = &zopt_sgd,    [ZOPT_MUON] = &zopt_muon,
    };
    return (unsigned)type < ZOPT_COUNT ? by_type[type] : NULL;
}

uint64_t zopt_tensor_sums_bytes(const zopt_desc *o, int64_t nparams) {
    if (!o->device_sums_workspace) return 0;
    return o->device_sums_workspace() + 2 * sizeof(double) * (uint64_t)nparams;
}

double *zopt_tensor_sums_at(const zopt_desc *o, void *buffer) {
    return (double *)((char *)buffer + (o->device_sums_workspace ? o->device_sums_workspace() : 0));
}

zinc_status zopt_check_placement(const zopt_desc *o, const zdevice *d, bool state_offloaded) {
    if (o->device || d->host_addressable || state_offloaded) return ZINC_OK;
    return ZERR(ZINC_ERR_CONFIG,
                "optimizer %s has only CPU kernels, and its state would be in %s memory the CPU cannot address: "
                "offload it (zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\"), as DeepSpeed runs "
                "it, or train on the cpu device",
                o->name, d->ops->name);
}
