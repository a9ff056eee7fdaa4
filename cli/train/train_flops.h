/* zinc train's FLOP/s and MFU: from the model's FLOPs per sample (zinc_flops_per_sample, which the model
 * declares: examples/gpt2/gpt2_flops.h, examples/mlp) and the time, against a peak that --peak-flops gives
 * (a number, FLOP/s per rank) or measures ("sgemm": every rank runs OpenBLAS sgemm on its threads for
 * 0.2 s at start, together, so ranks sharing a machine share it as training does). Without --peak-flops
 * there is no MFU, only FLOP/s: a CPU's sgemm rate is not a hardware peak, and on a GPU it is not the
 * GPU's, so zinc does not guess one. */
#ifndef ZINC_CLI_TRAIN_FLOPS_H
#define ZINC_CLI_TRAIN_FLOPS_H

#include <jansson.h>
#include <stddef.h>

#include "cli/train/train.h"

/* --peak-flops's value: a number > 0 (1.2e12, per rank) or "sgemm". 0, or -1 with why filled. */
int zcli_peak_parse(const char *text, double *per_rank, int *measure, char *why, size_t cap);
/* After the build (every rank: the sgemm calibration is collective): the job's peak into t->peak_flops (0:
 * none). 0, or -1 after printing why. */
int zcli_flops_start(zcli_train *t);
/* " | 1.23 GFLOP/s | MFU 4.5%" for `samples` samples in `seconds` (the whole job's), or "" when the model
 * declared no FLOPs. An MFU above 100% is shown as "MFU 103.8% (above peak)" and warned about once (rank 0),
 * naming the peak's source. */
void zcli_flops_text(zcli_train *t, double samples, double seconds, char *out, size_t cap);
/* The report's keys: flops_per_sample, flops_per_s over flops_train_seconds (the training steps' time: the
 * micro-steps, zinc_step, the loss), and with a peak peak_flops_per_s (the job's: per rank x ranks),
 * peak_source ("given" or "sgemm"), peak_backend (with sgemm: the products' backend that was calibrated,
 * "OpenBLAS sgemm", "oneDNN sgemm" or "oneDNN bf16 gemm"), mfu (a fraction), mfu_above_peak. 0, or -1. */
int zcli_flops_report(const zcli_train *t, json_t *j);

#endif
