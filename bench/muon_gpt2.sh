#!/bin/bash
# GPT-2 trained with Muon through `zinc train --model gpt2` (issue 39), at the README's shape (scripts/
# run-example.sh: 4 layers, 128 channels, 4 heads, context 64, byte vocabulary, ds_configs/gpt2_small_cpu.json's
# batch of 16 and ZeRO stage 2, 1 rank, on Debian's GPL-3 with its last 10% as validation):
#   A. offload: Muon for OFFLOAD_STEPS steps with the optimizer state in memory, offloaded to CPU and to NVMe
#      (files under OUT/nv): the largest difference of a step's loss from the in-memory run's, the checksums;
#   B. Muon against AdamW for STEPS steps, validation loss every 100 steps:
#      - adamw:       the README's config as it is (AdamW, WarmupDecayLR to a peak of 2e-3 over 20 steps);
#      - muon_readme: the same file with optimizer.type Muon (muon_lr 0.02, adam_lr 2e-3): WarmupDecayLR sets
#                     every group's lr to its absolute value, in DeepSpeed as in zinc, so both halves run at
#                     the README's 2e-3 peak;
#      - adamw_cos, muon_cos: WarmupCosineLR (20 warm-up steps, cosine to STEPS, a ratio of each base lr), so
#                     Muon's half keeps its 0.02 beside AdamW's 2e-3; AdamW at 2e-3 under the same schedule.
# It writes OUT/muon_gpt2.md (the tables), bench/muon_gpt2.svg (training loss, a 20-step moving average, and
# the validation losses; gnuplot, as bench/zeropp.sh draws its curves), and with APPEND=1 (the default)
# appends the section to bench/RESULTS.md.
#
#   bench/muon_gpt2.sh [STEPS] [OUT]      STEPS default 1000 (the README's), OUT default build/muon_gpt2
#
# Environment: ZINC (default <repo>/build/zinc), OFFLOAD_STEPS (default 200), THREADS (default 1),
# RUNS (default "adamw muon_readme adamw_cos muon_cos"), APPEND, PLOT (default bench/muon_gpt2.svg).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
STEPS=${1:-1000}
OUT=${2:-$root/build/muon_gpt2}
ZINC=${ZINC:-$root/build/zinc}
OFFLOAD_STEPS=${OFFLOAD_STEPS:-200}
THREADS=${THREADS:-1}
RUNS=${RUNS:-adamw muon_readme adamw_cos muon_cos}
APPEND=${APPEND:-1}
PLOT=${PLOT:-$here/muon_gpt2.svg}
TEXT=/usr/share/common-licenses/GPL-3
CFG=$root/ds_configs/gpt2_small_cpu.json
[ -x "$ZINC" ] || { echo "muon_gpt2.sh: $ZINC not found: build zinc first (scripts/build.sh)" >&2; exit 1; }
[ -r "$TEXT" ] || { echo "muon_gpt2.sh: $TEXT is not readable" >&2; exit 1; }
mkdir -p "$OUT/nv"
shape=(--layers 4 --width 128 --heads 4 --context 64 --text "$TEXT" --threads "$THREADS" --quiet --force)
muon='--set optimizer={"type":"Muon","params":{"muon_lr":0.02,"adam_lr":0.002,"momentum":0.95,"betas":[0.9,0.95],"eps":1e-8,"weight_decay":0.1}}'
cosine="--set scheduler={\"type\":\"WarmupCosineLR\",\"params\":{\"warmup_num_steps\":20,\"total_num_steps\":$STEPS}}"
train() { # $1: report name; the rest: more zinc train arguments
  local name=$1
  shift
  echo "muon_gpt2.sh: $name" >&2
  # shellcheck disable=SC2086
  "$ZINC" train --model gpt2 --config "$CFG" "${shape[@]}" --report "$OUT/$name.json" "$@"
}

# A: offload (the README's schedule over OFFLOAD_STEPS steps)
# shellcheck disable=SC2086
train off_mem --steps "$OFFLOAD_STEPS" $muon --set scheduler.params.total_num_steps="$OFFLOAD_STEPS"
# shellcheck disable=SC2086
train off_cpu --steps "$OFFLOAD_STEPS" $muon --set scheduler.params.total_num_steps="$OFFLOAD_STEPS" \
  --set 'zero_optimization.offload_optimizer={"device":"cpu"}'
# shellcheck disable=SC2086
train off_nvme --steps "$OFFLOAD_STEPS" $muon --set scheduler.params.total_num_steps="$OFFLOAD_STEPS" \
  --set "zero_optimization.offload_optimizer={\"device\":\"nvme\",\"nvme_path\":\"$OUT/nv\"}" \
  --set zinc.allow_buffered_io=true

# B: Muon against AdamW
for r in $RUNS; do
  case $r in
  adamw) train adamw --steps "$STEPS" --val-every 100 ;;
  muon_readme) train muon_readme --steps "$STEPS" --val-every 100 $muon ;;
  adamw_cos) train adamw_cos --steps "$STEPS" --val-every 100 $cosine ;;
  muon_cos) train muon_cos --steps "$STEPS" --val-every 100 $muon $cosine ;;
  *) echo "muon_gpt2.sh: unknown run $r" >&2; exit 1 ;;
  esac
done

python3 - "$OUT" "$STEPS" "$OFFLOAD_STEPS" "$RUNS" <<'PY'
import json, sys
out, steps, osteps, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
rep = lambda n: json.load(open(f"{out}/{n}.json"))
names = {"adamw": "AdamW, README schedule (WarmupDecayLR, peak 2e-3)",
         "muon_readme": "Muon, README schedule (both halves peak 2e-3)",
         "adamw_cos": "AdamW, WarmupCosineLR (2e-3)",
         "muon_cos": "Muon, WarmupCosineLR (Muon 0.02, AdamW half 2e-3)"}
lines = [f"Offload, Muon, {osteps} steps (README schedule over {osteps} steps):", "",
         "| optimizer state | final loss | final val loss | max \\|loss - in memory\\| over the steps | param_checksum | tokens/s |",
         "|---|---|---|---|---|---|"]
m = rep("off_mem")
for n, what in (("off_mem", "in memory"), ("off_cpu", "offload cpu"), ("off_nvme", "offload nvme")):
    r = rep(n)
    d = max(abs(a - b) for a, b in zip(m["losses"], r["losses"]))
    lines.append(f"| {what} | {r['final_loss']:.4f} | {r['final_val_loss']:.4f} | {d:.3g} | {r['param_checksum']} "
                 f"| {r['tokens_per_s']:.0f} |")
lines += ["", f"Muon against AdamW, {steps} steps, validation loss (4 batches of the held-out 10%) every 100 steps:", ""]
head = "| step | " + " | ".join(names[r] for r in runs) + " |"
lines += [head, "|---|" + "---|" * len(runs)]
R = {r: rep(r) for r in runs}
vsteps = [v["step"] for v in R[runs[0]]["val_losses"]]
for i, s in enumerate(vsteps):
    lines.append(f"| {s} | " + " | ".join(f"{R[r]['val_losses'][i]['loss']:.4f}" for r in runs) + " |")
lines.append("| tokens/s | " + " | ".join(f"{R[r]['tokens_per_s']:.0f}" for r in runs) + " |")
open(f"{out}/muon_gpt2.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
with open(f"{out}/train.dat", "w") as f:  # 20-step moving average of the training loss
    for i in range(steps):
        lo = max(0, i - 19)
        f.write(f"{i + 1} " + " ".join(f"{sum(R[r]['losses'][lo:i + 1]) / (i + 1 - lo):.6f}" for r in runs) + "\n")
with open(f"{out}/val.dat", "w") as f:
    for i, s in enumerate(vsteps):
        f.write(f"{s} " + " ".join(f"{R[r]['val_losses'][i]['loss']:.6f}" for r in runs) + "\n")
with open(f"{out}/titles", "w") as f:
    f.write("\n".join(names[r] for r in runs) + "\n")
PY

if command -v gnuplot >/dev/null; then
  plot="" k=2
  while IFS= read -r t; do
    plot+="${plot:+, }'$OUT/train.dat' using 1:$k with lines lw 1 lc $((k - 1)) title '$t (training, 20-step mean)'"
    plot+=", '$OUT/val.dat' using 1:$k with linespoints pt 7 lw 2 lc $((k - 1)) title 'validation'"
    k=$((k + 1))
  done <"$OUT/titles"
  gnuplot -e "set terminal svg size 900,540; set output '$PLOT'; set xlabel 'step'; set ylabel 'loss'; \
set key top right font ',10'; set yrange [1.3:3.2]; \
set title 'GPT-2 (4 layers, 128 channels, context 64, bytes), the README job: Muon vs AdamW, 1 rank, stage 2'; plot $plot"
fi

if [ "$APPEND" = 1 ]; then
  {
    echo
    echo "## GPT-2 with Muon: offload vs memory, and Muon vs AdamW at the README shape (issue 39)"
    echo
    echo "Machine: $(nproc) shared cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), loaded by other"
    echo "work (load average $(cut -d' ' -f1-3 /proc/loadavg); tokens/s are noisy); $(date -u '+%Y-%m-%d %H:%M UTC'). \`zinc train --model gpt2\`,"
    echo "the README job's shape and config (ds_configs/gpt2_small_cpu.json: batch 16, stage 2, clipping 1.0), 1 rank,"
    echo "$THREADS thread, Debian's GPL-3 as bytes. Muon: muon_lr 0.02, adam_lr 2e-3, momentum 0.95, betas (0.9, 0.95),"
    echo "weight decay 0.1, on GPT-2's hidden matrices (qkv, attention projection, fc, fc projection); AdamW on the rest."
    echo "Loss curves: $(basename "$PLOT"). Command: \`bench/muon_gpt2.sh $STEPS\`."
    echo
    cat "$OUT/muon_gpt2.md"
  } >>"$here/RESULTS.md"
fi
