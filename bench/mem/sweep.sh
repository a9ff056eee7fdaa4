#!/usr/bin/env bash
# Measured (not estimated) per-rank memory against rank count for ZeRO stages 0-3: runs `zinc mem measure`
# under mpirun for 1..MAX ranks and each stage on the CPU, writes a table of peak host bytes per rank
# (measured and estimated), and plots it with gnuplot when installed.
#
#   bench/mem/sweep.sh [BUILD_DIR] [MAX_RANKS] [MODEL ARGS...]
#   bench/mem/sweep.sh build-mem 4 --layers 4 --width 256 --vocab 8000 --context 256
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}; shift || true
max=${1:-4}; shift || true
model=("$@")
[ ${#model[@]} -eq 0 ] && model=(--layers 4 --width 256 --vocab 8000 --context 256)
zinc="$root/$build/zinc"
[ -x "$zinc" ] || zinc="$build/zinc"
[ -x "$zinc" ] || { echo "sweep.sh: no zinc binary under $build (build first)" >&2; exit 2; }
out=${OUT:-$root/$build/mem_sweep}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
dat="$out/sweep.dat"
echo "# ranks  measured stage0..3  estimated stage0..3 (peak host bytes per rank; model: ${model[*]})" > "$dat"
for n in $(seq 1 "$max"); do
  row="$n"; est=""
  for s in 0 1 2 3; do
    csv=$("${mpi[@]}" -np "$n" "$zinc" mem measure "${model[@]}" --config "$root/ds_configs/zero3_fp16.json" \
          --stage "$s" --steps 2 --csv)
    m=$(echo "$csv" | awk -F, '$1=="host"{m+=$5; e+=$4} END{print m}')
    e=$(echo "$csv" | awk -F, '$1=="host"{e+=$4} END{print e}')
    row="$row $m"; est="$est $e"
  done
  echo "$row$est" | tee -a "$dat"
done
cat > "$out/sweep.gp" <<GP
set terminal svg size 900,560
set output '$out/sweep.svg'
set title "zinc mem measure: peak host bytes per rank (CPU, ${model[*]})" noenhanced
set xlabel 'ranks'; set ylabel 'MiB per rank'; set grid; set key top right
plot for [s=0:3] '$dat' using 1:(column(s+2)/2**20) with linespoints title sprintf('stage %d measured', s), \
     for [s=0:3] '$dat' using 1:(column(s+6)/2**20) with lines dashtype 2 title sprintf('stage %d estimate', s)
GP
if command -v gnuplot >/dev/null; then gnuplot "$out/sweep.gp" && echo "wrote $out/sweep.svg"
else echo "gnuplot is not installed: skipped the plot (data $dat, script $out/sweep.gp)"; fi
