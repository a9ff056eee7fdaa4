/* What the end of a training run reads without a second copy of the model (the parameters streamed through
 * zinc_master_foreach), and the process's real peak for the report. Shared by zinc train (the MLP) and
 * zinc train --model gpt2. */
#ifndef ZINC_CLI_TRAIN_MEMORY_H
#define ZINC_CLI_TRAIN_MEMORY_H

#include <jansson.h>
#include <stdint.h>

#include "zinc.h"

/* Collective: the FNV-1a hash of every parameter's fp32 master weights, in registration order, and their
 * L2 norm, streamed piece by piece (at most 4 MiB beyond the engine's buffers). */
zinc_status zcli_param_checksum(zinc_engine *e, uint64_t *sum, double *l2_norm);

/* This process's VmHWM (peak resident bytes) from /proc/self/status; 0 where unreadable. */
uint64_t zcli_vmhwm_bytes(void);

/* Collective: every rank's VmHWM as a JSON array (rank order), for the report's "vmhwm_bytes"; NULL on
 * failure. */
json_t *zcli_vmhwm_all(zinc_engine *e);

#endif
