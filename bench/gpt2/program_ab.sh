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
L=${SHAPE_L:-4} C=${SHAPE_C:-128} H=${SHAPE_H:-4} steps=${STEPS:-15} reps=${REPS:-3}
a=$1 b=$2
work=build/bench-gpt2-program-ab
rm -rf "$work" && mkdir -p "$work"
python3 - "$work" <<'PY'
import struct, sys
d = b"".join(open("/usr/share/common-licenses/" + f, "rb").read() for f in ("GPL-3", "GPL-2", "Apache-2.0"))
with open(sys.argv[1] + "/tok.bin", "wb") as f:
    f.write(struct.pack("<256i", *([20240520, 1, len(d)] + [0] * 253)))
    f.write(struct.pack("<%dH" % len(d), *d))
PY
cat > "$work/c.json" <<JSON
{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}, "zero_optimization": {"stage": 0}}
JSON
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F\ %H:%M) UTC"
echo "== shape: $L layers, $C channels, $H heads, vocabulary 50257, B=4, T=64, 1 rank, stage 0, fp32, $steps steps"
threads=()
[[ -n ${THREADS:-} ]] && threads=(--threads "$THREADS")
run() { # tag program
  "$2" train --model gpt2 --quiet --config "$work/c.json" --layers $L --width $C --heads $H --vocab 50257 \
    --context 64 --data "$work/tok.bin" --steps $steps --seed 7 --sample-tokens 1 "${threads[@]}" \
    --report "$work/r.json" > "$work/log" 2>&1 || { echo "$1 failed:"; tail -5 "$work/log"; exit 1; }
  python3 -c "import json; r = json.load(open('$work/r.json')); t = r['time_split']; print('%-3s %7.1f tokens/s  model %5.1f s  engine %4.1f s  final loss %.9f' % ('$1', r['tokens_per_s'], t['model_compute_s'], t['engine_s'], r['final_loss']))"
}
for r in $(seq 1 "$reps"); do
  run A "$a"
  run B "$b"
done
