#!/usr/bin/env bash
# The estimate against the real peak (issue 15): `zinc mem measure` for stages 0-3 at 1-2 ranks with
# DeepSpeed's default bucket sizes (reduce_bucket_size 5e8: one bucket is the whole model), "before"
# (the old code paths: whole-tensor init_fn, unsplit MPI calls) and "after" (zinc_build_ranged, MPI calls
# of ZINC_MPI_PIECE_ELEMENTS). Prints, per run, the engine's counted host bytes (what the estimate was
# before issue 15), the estimate of the process's peak (with the init scratch and MPI temporaries), and
# each rank's real growth (VmHWM less VmRSS before zinc_build), largest over ranks.
#
#   bench/mem/real_peak.sh [BUILD_DIR] [DTYPE fp32|bf16|fp16] [MODEL ARGS...]
#   RANKS="3 4" MODES=after bench/mem/real_peak.sh ...   other rank counts; only the current code paths
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}; shift || true
dtype=${1:-bf16}; shift || true
model=("$@")
[ ${#model[@]} -eq 0 ] && model=(--layers 2 --width 512 --vocab 32000 --context 256)
zinc="$root/$build/zinc"; [ -x "$zinc" ] || zinc="$build/zinc"
out=${OUT:-$root/$build/mem_real_peak}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --oversubscribe --bind-to none)
case $dtype in
  fp32) prec='' ;;
  bf16) prec='"bf16": {"enabled": true},' ;;
  fp16) prec='"fp16": {"enabled": true},' ;;
  *) echo "real_peak.sh: dtype must be fp32, bf16 or fp16" >&2; exit 2 ;;
esac
printf "%-6s %-5s %-6s %12s %12s %12s %8s %8s\n" stage ranks mode counted_MiB estimate_MiB real_MiB "cnt %" "est %"
for np in ${RANKS:-1 2}; do
  for s in 0 1 2 3; do
    cfg="$out/ds_stage${s}_$dtype.json"
    echo "{ $prec \"zero_optimization\": {\"stage\": $s} }" > "$cfg"
    for mode in ${MODES:-before after}; do
      if [ $mode = before ]; then env=(ZINC_MPI_PIECE_ELEMENTS=2147483647); extra=(--init whole)
      else env=(); extra=(); fi
      json=$(env "${env[@]}" "${mpi[@]}" -np "$np" "$zinc" mem measure "${model[@]}" --config "$cfg" --steps 2 \
             --json "${extra[@]}")
      echo "$json" > "$out/stage${s}_np${np}_${dtype}_$mode.json"
      echo "$json" | python3 -c "
import json, sys
j = json.load(sys.stdin); p = j['process']
counted = sum(r['estimate'] for r in j['rows'] if r['kind'] in ('host', 'pinned'))
real = max(r['growth'] for r in p['ranks'])
M = 1048576
print('%-6d %-5d %-6s %12.1f %12.1f %12.1f %+7.1f%% %+7.1f%%' % ($s, $np, '$mode', counted / M, p['estimate'] / M,
      real / M, 100.0 * (real - counted) / counted, 100.0 * (real - p['estimate']) / p['estimate']))"
    done
  done
done
