#!/usr/bin/env bash
# The whole training process (issue 25): `zinc mem estimate --model gpt2` against `zinc train --model gpt2`'s
# own VmHWM (its report's vmhwm_bytes), with and without activation checkpointing, at a shape given as
# model flags; also the tokens/s of the training steps, so the step time checkpointing costs shows.
#
#   bench/mem/whole_process.sh [BUILD_DIR] [STEPS] [MODEL FLAGS...]
#   e.g. bench/mem/whole_process.sh build 6 --layers 6 --width 384 --heads 6 --context 256
#   MICRO=8 STAGE=0 DTYPE=fp32 THREADS=2 RANKS=1 (environment) set the config.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}; shift || true
steps=${1:-6}; shift || true
model=("$@")
[ ${#model[@]} -eq 0 ] && model=(--layers 6 --width 384 --heads 6 --context 256)
zinc="$root/$build/zinc"; [ -x "$zinc" ] || zinc="$build/zinc"
out=${OUT:-$root/$build/mem_whole_process}; mkdir -p "$out"
micro=${MICRO:-8}; stage=${STAGE:-0}; dtype=${DTYPE:-fp32}; threads=${THREADS:-2}; ranks=${RANKS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
text="$out/data.txt"
[ -s "$text" ] || { for i in $(seq 1 400); do cat /usr/share/common-licenses/MPL-2.0; done | head -c 4000000 > "$text" || true; }
prec=""; [ "$dtype" = bf16 ] && prec='"bf16": {"enabled": true},'; [ "$dtype" = fp16 ] && prec='"fp16": {"enabled": true},'
launch=(); [ "$ranks" -gt 1 ] && launch=(mpirun --oversubscribe --bind-to none -np "$ranks")
printf "%-6s %12s %12s %8s %12s\n" ckpt estimate_MiB vmhwm_MiB "off %" tokens/s
for ckpt in off on; do
  ac=""; [ $ckpt = on ] && ac='"activation_checkpointing": {},'
  cfg="$out/cfg_$ckpt.json"
  echo "{\"train_batch_size\": $((micro * ranks)), \"train_micro_batch_size_per_gpu\": $micro, $prec $ac
         \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}, \"zero_optimization\": {\"stage\": $stage},
         \"steps_per_print\": 1000}" > "$cfg"
  est=$("$zinc" mem estimate --model gpt2 --config "$cfg" --text "$text" --ranks "$ranks" --threads "$threads" \
        --json "${model[@]}" | python3 -c 'import json,sys; print(max(r["whole_process_peak_bytes"] for r in json.load(sys.stdin)["ranks"]))')
  "${launch[@]}" "$zinc" train --model gpt2 --config "$cfg" --text "$text" --steps "$steps" --threads "$threads" \
      --quiet --force --report "$out/report_$ckpt.json" "${model[@]}" 2> "$out/train_$ckpt.log"
  python3 - "$out/report_$ckpt.json" "$est" "$ckpt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); est = int(sys.argv[2]); real = max(r["vmhwm_bytes"])
print("%-6s %12.1f %12.1f %+8.1f %12.0f" % (sys.argv[3], est / 2**20, real / 2**20, 100.0 * (est - real) / real, r["tokens_per_s"]))
PY
done
