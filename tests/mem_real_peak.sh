#!/usr/bin/env bash
# The estimate against each rank's real peak: `zinc mem measure --check` on the CPU for stages 0-3 x
# fp32/bf16/fp16 x offload none/cpu/nvme (stage 0 has no offload) at 1 and 2 ranks. --check fails a run
# when a rank's VmHWM, less its resident bytes before zinc_build, is off the estimate's prediction by more
# than TOL % + SLACK MiB (Open MPI's shared-memory fragments and the allocator's small blocks do not
# scale with the model). The model holds 40-60 MiB of state per rank at 1 rank.
#
#   tests/mem_real_peak.sh ZINC_BINARY RANKS DTYPE_CONFIG MPIRUN [MPIRUN ARGS...]
#   e.g. tests/mem_real_peak.sh build/zinc 2 zero1_bf16 mpirun --oversubscribe
set -uo pipefail
zinc=$1; ranks=$2; configs=$3; shift 3
src=${ZINC_SOURCE_DIR:?ZINC_SOURCE_DIR must name the source tree}
tol=${TOL:-5}; slack=${SLACK:-1}
model=(--layers 2 --width 128 --vocab 16000 --context 64)
fails=0; runs=0
for np in $ranks; do
  for cfg in $configs; do
    for stage in 0 1 2 3; do
      for off in none cpu nvme; do
        [ "$stage" = 0 ] && [ "$off" != none ] && continue
        out=$("$@" -np "$np" "$zinc" mem measure "${model[@]}" --config "$src/ds_configs/$cfg.json" \
              --stage "$stage" --offload "$off" --steps 2 --check --csv --rss-tolerance "$tol" \
              --rss-slack "$slack" 2>&1)
        rc=$?
        runs=$((runs + 1))
        line=$(echo "$out" | awk -F, '$1=="process" && $2 ~ /less_baseline/ {printf " %s: real %.2f MiB est %.2f MiB (%+.1f%%)", $2, $5/1048576, $4/1048576, 100*$6/$4}')
        if [ $rc -ne 0 ]; then
          fails=$((fails + 1))
          echo "FAIL np=$np $cfg stage=$stage offload=$off:$line"
          echo "$out" | grep -v '^-\|^ \|^$\|Primary job\|mpirun detected\|exit code\|Process name\|Exit code\|a non-zero\|the job to be' | tail -20
        else
          echo "ok   np=$np $cfg stage=$stage offload=$off:$line"
        fi
      done
    done
  done
done
echo "$((runs - fails)) of $runs runs within ${tol}% + ${slack} MiB of the real peak"
[ $fails -eq 0 ]
