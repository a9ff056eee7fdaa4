#!/bin/bash
# Muon's optimizer step at 1 and 2 ranks beside AdamW's (issue 39): build/bench/bench_muon_step (GPT-2 124M's
# matrices, LAYERS blocks of 768x2304, 768x768, 768x3072, 3072x768, all marked Muon) timed around zinc_step,
# then the Newton-Schulz kernel alone per shape (build/bench/bench_muon_cpu --compare: cblas_sgemm against the
# double-accumulating loops, their GFLOP/s and difference). The goal: Muon's step at 2 ranks at most 0.6x
# its 1-rank step (the matrices' owners split the Newton-Schulz FLOPs, engine_muon.c).
#
#   bench/muon.sh [BUILD]
#
# BUILD default <repo>/build. Environment: LAYERS (default 12: GPT-2 124M), STEPS (timed steps, default 3),
# STAGE (ZeRO stage, default 1), THREADS (kernel threads per rank, default 1: one core per rank, so the
# 2-rank run has twice the cores; OpenBLAS's own threads are held to 1 the same way), MPIRUN (default
# "mpirun --oversubscribe --allow-run-as-root --bind-to none"), SKIP_KERNEL=1 (no bench_muon_cpu run).
# Prints one line per run; the ratios at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-$root/build}
LAYERS=${LAYERS:-12}
STEPS=${STEPS:-3}
STAGE=${STAGE:-1}
THREADS=${THREADS:-1}
MPIRUN=${MPIRUN:-mpirun --oversubscribe --allow-run-as-root --bind-to none}
export OPENBLAS_NUM_THREADS=1
bench=$BUILD/bench/bench_muon_step
[ -x "$bench" ] || { echo "muon.sh: $bench not built (cmake --build $BUILD --target bench_muon_step)" >&2; exit 1; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A wall
for opt in AdamW Muon; do
    for n in 1 2; do
        line=$($MPIRUN -np "$n" "$bench" --optimizer "$opt" --layers "$LAYERS" --steps "$STEPS" --stage "$STAGE" \
            --threads "$THREADS" 2>/dev/null | grep '^optimizer')
        echo "$line"
        wall[$opt$n]=$(echo "$line" | sed -E 's/.*step ([0-9.]+) ms wall.*/\1/')
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v a1="${wall[AdamW1]}" -v a2="${wall[AdamW2]}" -v m1="${wall[Muon1]}" -v m2="${wall[Muon2]}" 'BEGIN {
    printf "Muon 2 ranks / 1 rank: %.2f (goal <= 0.6); AdamW 2 / 1: %.2f; Muon / AdamW: %.0fx at 1 rank, %.0fx at 2\n",
        m2 / m1, a2 / a1, m1 / a1, m2 / a2 }'
if [ "${SKIP_KERNEL:-0}" != 1 ]; then
    for s in 0 1 2 3; do "$BUILD/bench/bench_muon_cpu" --threads "$THREADS" --only "$s" --compare | grep -v '^one'; done
fi
