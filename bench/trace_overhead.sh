#!/usr/bin/env bash
# The timeline's cost (issue 26: at most 2% on the step with --trace on, nothing with it off), quoted in
# bench/RESULTS.md. Runs build/bench/bench_trace_overhead (the example MLP's steps timed one by one, tracing
# off and on in alternating engines of one process) on three shapes: many small modules and short steps (the
# worst case: the most spans per second of compute), a middle one, and 2 ranks at stage 2 (collectives and
# their waits traced too). Each also prints the spans one traced step records and what a call site costs
# with tracing off (one relaxed load and a branch, measured), whose product is what tracing off adds.
#   bench/trace_overhead.sh [BUILD_DIR]      (default build; REPS=5 STEPS=40 by default)
set -euo pipefail
build=${1:-build}
reps=${REPS:-5}
steps=${STEPS:-40}
b="$build/bench/bench_trace_overhead"
[[ -x $b ]] || { echo "trace_overhead.sh: $b not built (cmake --build $build --target bench_trace_overhead)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
common=(--steps "$steps" --reps "$reps")
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$b" "${common[@]}" --hidden 32 --depth 8 --in-dim 32 --batch 16 --micro 4 --threads 1 --trace "$tmp/a.json"
"$b" "${common[@]}" --hidden 256 --depth 4 --in-dim 64 --batch 64 --micro 8 --threads 1 --trace "$tmp/b.json"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "${mpirun[@]}" -np 2 "$b" "${common[@]}" --hidden 256 \
    --depth 4 --in-dim 64 --batch 64 --micro 8 --threads 1 --stage 2 --trace "$tmp/c.json"
