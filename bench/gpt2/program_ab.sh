#!/usr/bin/env bash
# Tokens/s of `zinc train --model gpt2` from two zinc programs (e.g. before and after a change to the
# model), run alternately in one session so both see the same machine load. Shape: SHAPE_L layers,
# SHAPE_C channels, SHAPE_H heads, vocabulary 50257 (padded 50304), B=4, T=64, 1 rank, ZeRO stage 0, fp32,
# STEPS steps (default 15), REPS rounds (default 3), THREADS threads (default: the program's); the figure
# is the report's tokens_per_s (training steps only), and the final loss shows whether both computed the
# same.
#
#   bench/gpt2/program_ab.sh A_PROGRAM B_PROGRAM
set -euo pipefail
cd "$(dirname "$0")/../.."
a=$1 b=$2
work=build/bench-gpt2-program-ab
. bench/gpt2/ab_common.sh
for r in $(seq 1 "$reps"); do
  run A "$a"
  run B "$b"
done
