#!/usr/bin/env bash
# What the tied embedding costs the GPT-2 example (examples/gpt2) in peak resident memory, and whether two
# builds train alike: `zinc train --model gpt2` at a shape whose embedding dominates (vocabulary 50257,
# padded 50304; SHAPE_L layers, SHAPE_C channels), 1 rank, B=4, T=64, 3 steps, fp32 and bf16 at ZeRO stages
# 0, 2 and 3 (fp32 stage 0 also with gradient accumulation 2), peak RSS from /usr/bin/time. Given a second
# zinc program (BEFORE: e.g. one built from an older commit, same libzinc), it runs every case with both,
# one after the other, and says whether their per-step losses (the --report's "losses", full precision)
# are bitwise equal or how far apart they are. AFTER: the program measured (default build/zinc).
#
#   bench/gpt2/tied_rss.sh [BEFORE [AFTER]]
set -euo pipefail
cd "$(dirname "$0")/../.."
L=${SHAPE_L:-2} C=${SHAPE_C:-256} H=${SHAPE_H:-4}
before=${1:-}
work=build/bench-gpt2-tied
rm -rf "$work" && mkdir -p "$work"
zinc=${2:-$PWD/build/zinc}
python3 - "$work" <<'PY'
import struct, sys
d = b"".join(open("/usr/share/common-licenses/" + f, "rb").read() for f in ("GPL-3", "GPL-2", "Apache-2.0"))
with open(sys.argv[1] + "/tok.bin", "wb") as f:
    f.write(struct.pack("<256i", *([20240520, 1, len(d)] + [0] * 253)))
    f.write(struct.pack("<%dH" % len(d), *d))
PY
cfg() { # stage dtype gas
  local dt=""
  [[ $2 == bf16 ]] && dt='"bf16": {"enabled": true},'
  cat > "$work/c$1$2$3.json" <<JSON
{"train_batch_size": $((4 * $3)), "train_micro_batch_size_per_gpu": 4, "steps_per_print": 0, $dt
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}, "zero_optimization": {"stage": $1}}
JSON
}
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F\ %H:%M) UTC"
echo "== shape: $L layers, $C channels, $H heads, vocabulary 50257 (padded 50304), B=4, T=64, 1 rank, 3 steps"
run() { # program tag stage dtype gas
  /usr/bin/time -f %M -o "$work/rss.$2" "$1" train --model gpt2 --quiet --config "$work/c$3$4$5.json" --layers $L \
    --width $C --heads $H --vocab 50257 --context 64 --data "$work/tok.bin" --steps 3 --seed 7 \
    --sample-tokens 1 --force --report "$work/r.$2.json" > "$work/log.$2" 2>&1 || { echo "$2 failed:"; tail -5 "$work/log.$2"; exit 1; }
}
for dtype in fp32 bf16; do
  for stage in 0 2 3; do
    for gas in 1 2; do
      [[ $gas == 2 && ($dtype != fp32 || $stage != 0) ]] && continue
      cfg $stage $dtype $gas
      run "$zinc" after $stage $dtype $gas
      line="$dtype stage $stage accumulation $gas: peak RSS $(($(cat "$work/rss.after") / 1024)) MiB"
      if [[ -n $before ]]; then
        run "$before" before $stage $dtype $gas
        cmp=$(python3 - "$work" <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/r.after.json"))["losses"]
b = json.load(open(sys.argv[1] + "/r.before.json"))["losses"]
if a == b:
    print("losses bitwise equal")
else:
    print("losses differ: max relative %.2e" % max(abs(x - y) / abs(y) for x, y in zip(a, b)))
PY
)
        line="$line (before: $(($(cat "$work/rss.before") / 1024)) MiB); $cmp"
      fi
      echo "$line"
    done
  done
done
