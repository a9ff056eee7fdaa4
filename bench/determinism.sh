#!/usr/bin/env bash
# The cost of zinc.deterministic_reduction (docs/determinism.md), quoted in bench/RESULTS.md: a small GPT-2
# through the zinc program at 2 ranks (1 thread each), ZeRO stages 0 and 2, gradient_accumulation_steps 2,
# the key off and on in alternating runs (so drift in a shared machine's load hits both alike); the report's
# tokens_per_s (training steps only), median and best of REPS runs each, and the checksums (equal with the
# key at every stage; the default path's differ by stage here). Then the engine alone
# (build/bench/bench_grads_determ: a synthetic 4 M-parameter model whose backward only writes its gradients, so
# the step is the reduction, the norm and AdamW): median step time with the key off and on, REPS rounds.
#   bench/determinism.sh [BUILD_DIR]      (default build; REPS=5 STEPS=30 by default)
set -euo pipefail
build=${1:-build}
reps=${REPS:-5}
steps=${STEPS:-30}
zinc="$build/zinc"
[[ -x $zinc ]] || { echo "determinism.sh: $zinc not built (scripts/build.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/tok.bin" <<'PY'
import random, struct, sys
rnd, n = random.Random(7), 60000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *[rnd.randrange(256) for _ in range(n)]))
PY
for stage in 0 2; do
  for det in false true; do
    cat > "$tmp/c$stage$det.json" <<J
{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": $stage},
 "zinc": {"deterministic_reduction": $det}}
J
  done
done
g=(train --model gpt2 --data "$tmp/tok.bin" --vocab 256 --context 64 --layers 4 --width 128 --heads 4 --steps "$steps"
   --threads 1 --quiet --force)
for r in $(seq "$reps"); do
  order=(false true)
  ((r % 2 == 0)) && order=(true false)
  for stage in 0 2; do
    for det in "${order[@]}"; do
      "${mpirun[@]}" "$zinc" "${g[@]}" --config "$tmp/c$stage$det.json" --report "$tmp/r$stage$det.$r.json" > /dev/null 2>&1
    done
  done
done
echo "# after the GPT-2 runs: load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$reps" <<'PY'
import json, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
print("gpt2 4 layers 128 wide, context 64, batch 16 = 2 ranks x micro 4 x gas 2, 1 thread per rank, "
      f"{reps} runs each:")
for stage in (0, 2):
    tps, sums = {}, {}
    for det in ("false", "true"):
        rs = [json.load(open(f"{d}/r{stage}{det}.{r}.json")) for r in range(1, reps + 1)]
        tps[det] = [x["tokens_per_s"] for x in rs]
        sums[det] = rs[0]["param_checksum"]
    off, on = statistics.median(tps["false"]), statistics.median(tps["true"])
    print(f"  stage {stage}: key off median {off:.0f} tokens/s (best {max(tps['false']):.0f}), on {on:.0f} "
          f"(best {max(tps['true']):.0f}): {100 * (off / on - 1):+.1f}% time with the key; checksums off "
          f"{sums['false']}, on {sums['true']}")
PY
echo "engine alone (bench_grads_determ), 2 ranks, 1 thread each, gas 2:"
for r in $(seq "$reps"); do
  for stage in 0 2; do
    "${mpirun[@]}" "$build/bench/bench_grads_determ" --n 4e6 --stage "$stage" --gas 2 --steps 20 --threads 1
  done
done
echo "# after: load $(cut -d' ' -f1-3 /proc/loadavg)"
