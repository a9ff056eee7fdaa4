#!/bin/sh
# What a CPU run costs in a build with the CUDA backend against a CPU-only build (issue 15): for each
# zinc CLI given as LABEL=PATH, the peak resident memory (VmHWM, from GNU time's %M) and wall time of
# `zinc --version` and of a short CPU training run of the example MLP, the median of RUNS runs each
# (default 5), and the shared libraries the training run maps (counted from /proc/<pid>/maps at exit
# when MAPS_AT_EXIT names tests/maps_at_exit.c's module, e.g. build/tests/libzinc_maps_at_exit.so).
#
#   bench/cuda_libs_cost.sh cpu-only=/tmp/cpu/zinc cuda-old=/old/build/zinc cuda-new=build/zinc
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-5}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
measure() { # prints "median_maxrss_KiB median_wall_s" of RUNS runs of the command
    i=0; : > "$tmp/m"
    while [ $i -lt "$runs" ]; do
        /usr/bin/time -f "%M %e" -o "$tmp/t" "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
        cat "$tmp/t" >> "$tmp/m"; i=$((i + 1))
    done
    echo "$(cut -d' ' -f1 "$tmp/m" | median) $(cut -d' ' -f2 "$tmp/m" | median)"
}
printf '| build | `--version` peak MiB | `--version` s | train peak MiB | train s | files mapped (CUDA) |\n|---|---|---|---|---|---|\n'
for arg in "$@"; do
    label=${arg%%=*}; zinc=${arg#*=}
    set -- "$zinc" train --config "$src/ds_configs/zero2_fp16.json" --steps 20 --device cpu --threads 1 --quiet
    v=$(measure "$zinc" --version) || exit 1
    t=$(measure "$@") || exit 1
    maps="-"
    if [ -n "${MAPS_AT_EXIT:-}" ]; then
        ZINC_MAPS_OUT="$tmp/maps" LD_PRELOAD=$MAPS_AT_EXIT "$@" > /dev/null 2>&1
        all=$(awk '$NF ~ /\.so/ {print $NF}' "$tmp/maps" | sort -u | wc -l)
        cuda=$(awk '$NF ~ /lib(cudart|cublas|cublasLt|nccl|cuda)\.so/ {print $NF}' "$tmp/maps" | sort -u | wc -l)
        maps="$all ($cuda)"
    fi
    echo "$v $t" | awk -v l="$label" -v m="$maps" '{printf "| %s | %.1f | %.3f | %.1f | %.3f | %s |\n", l, $1/1024, $2, $3/1024, $4, m}'
done
