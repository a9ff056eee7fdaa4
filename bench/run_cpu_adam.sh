#!/bin/bash
# Side-by-side CPU Adam: zinc's bench_adam_cpu and PyTorch's CPU AdamW (fused and foreach) at the same
# thread counts on the same machine. Usage: bench/run_cpu_adam.sh [N] [threads] [reps]
#   N default 1e8; threads default "1,2,<all cores>"; reps default 10. BUILD=<build dir> (default build),
#   or BENCH=<path to bench_adam_cpu>.
# Also runs the shared peer script (/work/shared/peers/torch_adam.py) once per thread count, which does one
# thread count per call and times 5 steps after 1 warm-up (its GPU part is skipped without CUDA).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
N=${1:-1e8}
ALL=$(nproc)
THREADS=${2:-$(printf "1\n2\n%s\n" "$ALL" | awk '!seen[$0]++' | paste -sd,)}
REPS=${3:-10}
BUILD=${BUILD:-$root/build}
BENCH=${BENCH:-$BUILD/bench/bench_adam_cpu}
PEER=${PEER:-/work/shared/peers/torch_adam.py}

echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# N=$N threads=$THREADS reps=$REPS"
echo "## zinc: $BENCH --n $N --threads $THREADS --reps $REPS"
"$BENCH" --n "$N" --threads "$THREADS" --reps "$REPS"
if python3 -c 'import torch' 2>/dev/null; then
  echo "## torch: python3 $here/torch_cpu_adam.py --cpu-n $N --threads $THREADS --reps $REPS"
  python3 "$here/torch_cpu_adam.py" --cpu-n "$N" --threads "$THREADS" --reps "$REPS"
  if [ -f "$PEER" ]; then
    for t in ${THREADS//,/ }; do
      echo "## peer: python3 $PEER --n 1e3 --cpu-n $N --cpu-threads $t"
      python3 "$PEER" --n 1e3 --cpu-n "$N" --cpu-threads "$t" | grep -v '^device copy' || true
    done
  fi
else
  echo "## torch: not installed (pip install torch), skipped"
fi
