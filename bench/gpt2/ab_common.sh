# Sourced by the A/B tokens/s scripts of bench/gpt2 (program_ab.sh, threads_ab.sh): the shared token file
# (licence texts as bytes, llm.c's token format), config, machine line and run function, so both time the
# same run. Expects $work; reads SHAPE_L / SHAPE_C / SHAPE_H / STEPS / REPS / THREADS.
L=${SHAPE_L:-4} C=${SHAPE_C:-128} H=${SHAPE_H:-4} steps=${STEPS:-15} reps=${REPS:-3}
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
ab_threads=()
[[ -n ${THREADS:-} ]] && ab_threads=(--threads "$THREADS")

# run TAG PROGRAM [VAR=VALUE ...]: one training run of PROGRAM with the environment given; prints the
# report's tokens/s, the time split and the final loss (equal losses: both computed the same).
run() {
  local tag=$1 prog=$2
  shift 2
  env "$@" "$prog" train --model gpt2 --quiet --config "$work/c.json" --layers $L --width $C --heads $H \
    --vocab 50257 --context 64 --data "$work/tok.bin" --steps $steps --seed 7 --sample-tokens 1 \
    "${ab_threads[@]}" --force --report "$work/r.json" > "$work/log" 2>&1 || { echo "$tag failed:"; tail -5 "$work/log"; exit 1; }
  python3 -c "import json; r = json.load(open('$work/r.json')); t = r['time_split']; print('%-34s %7.1f tokens/s  model %5.1f s  engine %4.1f s  final loss %.9f' % ('$tag', r['tokens_per_s'], t['model_compute_s'], t['engine_s'], r['final_loss']))"
}
