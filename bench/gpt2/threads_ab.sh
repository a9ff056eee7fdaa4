#!/usr/bin/env bash
# Tokens/s of `zinc train --model gpt2` built two ways, run alternately in one session so that both see
# the same machine load: A = a zinc program whose model loops use OpenMP (run with libgomp's default
# wait policy and with OMP_WAIT_POLICY=passive), B = one whose loops run on the engine's thread pool
# (zinc_parallel_for). Shape: SHAPE_L layers, SHAPE_C channels, SHAPE_H heads, vocabulary 50257 (padded
# 50304), B=4, T=64, 1 rank, ZeRO stage 0, fp32, STEPS steps (default 15), REPS rounds (default 3); the
# figure is the report's tokens_per_s (training steps only). Both programs use build/libzinc.so.
#
#   bench/gpt2/threads_ab.sh A_PROGRAM [B_PROGRAM]
set -euo pipefail
cd "$(dirname "$0")/../.."
a=$1
b=${2:-$PWD/build/zinc}
work=build/bench-gpt2-threads
. bench/gpt2/ab_common.sh
for r in $(seq 1 "$reps"); do
  run "A OpenMP (default wait policy)" "$a" OMP_WAIT_POLICY=
  run "A OpenMP (OMP_WAIT_POLICY=passive)" "$a" OMP_WAIT_POLICY=passive
  run "B engine pool (zinc_parallel_for)" "$b"
done
