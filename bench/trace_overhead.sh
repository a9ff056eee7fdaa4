#!/usr/bin/env bash
# The timeline's cost (issue 26: at most 2% on the step with --trace on, nothing with it off), quoted in
# bench/RESULTS.md. Runs build/bench/bench_trace_overhead (the example MLP's steps timed one by one, tracing
# off and on in alternating engines of one process) on three shapes: many small modules and short steps (the
# worst case: the most spans per second of compute), a middle one, and 2 ranks at stage 2 (collectives and
# their waits traced too). Each also prints the spans one traced step records and what a call site costs
# with tracing off (one relaxed load and a branch, measured), whose product is what tracing off adds.
#   bench/trace_overhead.sh [BUILD_DIR]      (default build; REPS=5 STEPS=40 by default)
set -euo pipefail
build=${1:-build}
reps=${REPS:-5}
steps=${STEPS:-40}
b="$build/bench/bench_trace_overhead"
[[ -x $b ]] || { echo "trace_overhead.sh: $b not built (cmake --build $build --target bench_trace_overhead)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
common=(--steps "$steps" --reps "$reps")
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$b" "${common[@]}" --hidden 32 --depth 8 --in-dim 32 --batch 16 --micro 4 --threads 1 --trace "$tmp/a.json"
"$b" "${common[@]}" --hidden 256 --depth 4 --in-dim 64 --batch 64 --micro 8 --threads 1 --trace "$tmp/b.json"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "${mpirun[@]}" -np 2 "$b" "${common[@]}" --hidden 256 \
    --depth 4 --in-dim 64 --batch 64 --micro 8 --threads 1 --stage 2 --trace "$tmp/c.json"
# GPT-2 through the zinc program (the trainer's data, modules and pool), 1 rank: the report's tokens_per_s
# (training steps only) with and without --trace (window: every step but the first, closing after the last,
# so the file is written at the end of the run, outside the steps, as the MLP part leaves its write untimed).
zinc="$build/zinc"
python3 - "$tmp/tok.bin" <<'PY'
import random, struct, sys
rnd, n = random.Random(7), 40000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *[rnd.randrange(256) for _ in range(n)]))
PY
cat > "$tmp/g.json" <<'J'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
 "zero_optimization": {"stage": 2}, "steps_per_print": 0}
J
gsteps=${GPT2_STEPS:-30}
g=(train --model gpt2 --config "$tmp/g.json" --data "$tmp/tok.bin" --vocab 256 --context 64 --layers 4 --width 128
   --heads 4 --steps "$gsteps" --threads 1 --quiet --force)
for r in $(seq "$reps"); do
  order=(off on)
  (( r % 2 == 0 )) && order=(on off) # alternated, so drift in the machine's load hits both alike
  for mode in "${order[@]}"; do
    extra=()
    [[ $mode == on ]] && extra=(--trace "$tmp/g.trace.json" --trace-steps "2:$((gsteps + 1))")
    "$zinc" "${g[@]}" --report "$tmp/g_$mode.$r.json" "${extra[@]}" > /dev/null 2>&1
  done
done
python3 - "$tmp" "$reps" <<'PY'
import json, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
tps = {m: [json.load(open(f"{d}/g_{m}.{r}.json"))["tokens_per_s"] for r in range(1, reps + 1)] for m in ("off", "on")}
off, on = statistics.median(tps["off"]), statistics.median(tps["on"])
boff, bon = max(tps["off"]), max(tps["on"])
t = json.load(open(f"{d}/g.trace.json"))
n = len([e for e in t["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0])
print(f"gpt2 4 layers 128 wide, context 64, batch 8, stage 2, 1 thread ({reps} runs each, {n} spans in a file):\n"
      f"  median {off:.0f} tokens/s off, {on:.0f} on: tracing on {100 * (off / on - 1):+.2f}% time; best run "
      f"{boff:.0f} off, {bon:.0f} on: {100 * (boff / bon - 1):+.2f}%; runs off {sorted(round(x) for x in tps['off'])}, "
      f"on {sorted(round(x) for x in tps['on'])}")
PY
