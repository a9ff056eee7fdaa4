#!/usr/bin/env bash
# CPU seconds per training step of zinc's GPT-2, one thread, for each product backend and dtype: for a
# shared machine, where tokens/s follow the other jobs' load but a one-thread run's own CPU time mostly does
# not. Each cell runs S1 and S2 steps (user + system time from /usr/bin/time) and reports (t2 - t1) /
# (S2 - S1): start-up, initialisation and the end-of-run work cancel. Same shapes and config as
# bench/gpt2/vs_torch.sh (stage 0, AdamW, clipping 1.0, micro batch = batch).
#
#   bench/gpt2/cpu_per_step.sh [shape: readme|124M] [S1 S2] [cells: gemm:dtype ...]
#   e.g. bench/gpt2/cpu_per_step.sh 124M 2 5 openblas:fp32 onednn:fp32 onednn:bf16
set -euo pipefail
cd "$(dirname "$0")/../.."
shape=${1:-readme}
s1=${2:-5}
s2=${3:-25}
shift $(($# < 3 ? $# : 3))
cells=("$@")
[[ ${#cells[@]} -gt 0 ]] || cells=(openblas:fp32 onednn:fp32 onednn:bf16)
[[ -x build/zinc ]] || { echo "cpu_per_step: build/zinc missing: run scripts/build.sh first" >&2; exit 1; }
work=build/bench-gpt2-cpu
mkdir -p "$work"
data=$work/licences.txt
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/GPL-2 /usr/share/common-licenses/Apache-2.0 >"$data"
# --text: bytes as tokens (any vocabulary >= 256 holds them)
if [[ $shape == readme ]]; then model=(--layers 4 --width 128 --heads 4 --context 64 --text "$data"); batch=16
else model=(--layers 12 --width 768 --heads 12 --vocab 50257 --context 64 --text "$data"); batch=4; fi
echo "== $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, uptime:$(uptime | sed 's/.*load/ load/'), shape $shape," \
     "steps $s1 and $s2, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
cpu() { # gemm dtype steps -> CPU seconds
  local bf=""
  [[ $2 == bf16 ]] && bf=', "bf16": {"enabled": true}'
  printf '{"train_batch_size": %d, "train_micro_batch_size_per_gpu": %d, "steps_per_print": 0, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}, "gradient_clipping": 1.0, "zero_optimization": {"stage": 0}%s}\n' \
    "$batch" "$batch" "$bf" >"$work/c.json"
  /usr/bin/time -f "%U %S" -o "$work/t" build/zinc train --model gpt2 --quiet --config "$work/c.json" "${model[@]}" \
    --steps "$3" --seed 7 --threads 1 --sample-tokens 1 --gemm "$1" --report "$work/r.json" --force >/dev/null 2>&1
  awk '{print $1 + $2}' "$work/t"
}
for c in "${cells[@]}"; do
  g=${c%%:*} d=${c##*:}
  a=$(cpu "$g" "$d" "$s1") b=$(cpu "$g" "$d" "$s2")
  loss=$(python3 -c "import json; print('%.6f' % json.load(open('$work/r.json'))['losses'][-1])")
  awk -v g="$g" -v d="$d" -v a="$a" -v b="$b" -v n=$((s2 - s1)) -v l="$loss" \
    'BEGIN { printf "%-9s %-5s %8.1f ms CPU per step  (%.2f s at %d steps, %.2f s more for %d more; last loss %s)\n", g, d, 1000 * (b - a) / n, a, '"$s1"', b - a, n, l }'
done
