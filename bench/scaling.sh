#!/bin/bash
# Scaling curves of the GPT-2 trainer (issue 26, item 5): zinc train --model gpt2 at 1..N ranks under mpirun,
#   weak scaling:   a fixed micro batch per rank (train_batch_size = MB x ranks): ideal = the same step time,
#                   tokens/s growing with the ranks; speedup = tokens/s(n) / tokens/s(1);
#   strong scaling: a fixed global batch GB (micro batch GB / ranks): ideal = step time / ranks;
#                   speedup = step time(1) / step time(n) (the same as the tokens/s ratio);
# each run with --report (tokens/s over the training steps only) and, when the program has it, --trace
# (zinc trace summary --json: each run's per-phase breakdown, rank 0 and the slowest rank).
#
#   bench/scaling.sh [N] [OUT]
#
# N default 2 ranks, OUT default build/scaling. Writes OUT/scaling.md (the tables), OUT/scaling.svg (speedup
# against ranks, weak and strong, with the ideal line; gnuplot) and each run's report and trace.
# Environment: ZINC (default <repo>/build/zinc), MPIRUN (default "mpirun --oversubscribe --allow-run-as-root
# --bind-to none"), STAGE (ZeRO stage, default 2), STEPS (default 12), SHAPE (default "--layers 4 --width 128
# --heads 4 --context 128"), MB (weak: micro batch per rank, default 4), GB (strong: global batch, default 8,
# divisible by every rank count), ZERO (more zero_optimization members, default "overlap_comm": true,
# "reduce_bucket_size": 200000, about one block of the default shape, so reduce-scatters can overlap backward),
# TRACE_STEPS (the steps traced, default 3:6: past the first steps' warm-up), TEXT (training text, default
# Debian's MPL-2.0 licence), THREADS (per rank;
# default: cores / ranks, zinc train's own default), LAUNCH (instead of "$MPIRUN -np n": a command prefix
# that runs n ranks, with {n} replaced), NETNS=1 (the ranks on two "nodes": two network namespaces joined
# over TCP by scripts/netns-cluster.sh, one rank per node at 2 ranks; root only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
N=${1:-2}
OUT=${2:-$root/build/scaling}
ZINC=${ZINC:-$root/build/zinc}
MPIRUN=${MPIRUN:-mpirun --oversubscribe --allow-run-as-root --bind-to none}
STAGE=${STAGE:-2}
STEPS=${STEPS:-12}
SHAPE=${SHAPE:---layers 4 --width 128 --heads 4 --context 128}
MB=${MB:-4}
GB=${GB:-8}
TEXT=${TEXT:-/usr/share/common-licenses/MPL-2.0}
ZERO=${ZERO:-\"overlap_comm\": true, \"reduce_bucket_size\": 200000}
TRACE_STEPS=${TRACE_STEPS:-3:6}
THREADS=${THREADS:-}
LAUNCH=${LAUNCH:-}
NETNS=${NETNS:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[ -x "$ZINC" ] || { echo "scaling.sh: $ZINC not found: build zinc first (scripts/build.sh)" >&2; exit 1; }
[ -r "$TEXT" ] || { echo "scaling.sh: the training text $TEXT is not readable: set TEXT=FILE" >&2; exit 1; }
for ((n = 1; n <= N; n++)); do
  if ((GB % n)); then echo "scaling.sh: GB=$GB is not divisible by $n ranks" >&2; exit 1; fi
done
mkdir -p "$OUT"
if [ -n "$NETNS" ]; then
  cluster="$root/scripts/netns-cluster.sh"
  [ -x "$cluster" ] || { echo "scaling.sh: NETNS=1 needs $cluster (not in this tree)" >&2; exit 1; }
  ((N <= 2)) || { echo "scaling.sh: NETNS=1 has two nodes: N must be 1 or 2" >&2; exit 1; }
  "$cluster" check || { echo "scaling.sh: no network namespaces here (see above)" >&2; exit 77; }
  cname=zs$$
  "$cluster" up "$cname"
  trap '"$cluster" down "$cname"' EXIT
  "$cluster" hostfile "$cname" 1 >"$OUT/hostfile"
  LAUNCH="$cluster mpirun $cname --allow-run-as-root --hostfile $OUT/hostfile -np {n}"
fi
trace_flag=0
"$ZINC" train --help 2>/dev/null | grep -q -- '--trace ' && trace_flag=1

config() { # micro batch, global batch -> file
  local f="$OUT/ds_mb$1_gb$2.json"
  printf '{"train_batch_size": %d, "train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 1,\n' "$2" "$1" >"$f"
  printf ' "zero_optimization": {"stage": %d, %s}, "steps_per_print": 1000000,\n' "$STAGE" "$ZERO" >>"$f"
  printf ' "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}}}\n' >>"$f"
  echo "$f"
}

run() { # mode, ranks, micro batch
  local mode=$1 n=$2 mb=$3 gb=$(($3 * $2))
  local cfg name="$1_np$2"
  cfg=$(config "$mb" "$gb")
  local extra=(--report "$OUT/$name.report.json" --force --quiet)
  ((trace_flag)) && extra+=(--trace "$OUT/$name.trace.json" --trace-steps "$TRACE_STEPS")
  [ -n "$THREADS" ] && extra+=(--threads "$THREADS")
  local prefix
  if [ -n "$LAUNCH" ]; then prefix=${LAUNCH//\{n\}/$n}; else prefix="$MPIRUN -np $n"; fi
  rm -f "$OUT/$name.trace.json"
  echo "scaling.sh: $name: $prefix zinc train --model gpt2 (micro batch $mb, global batch $gb, stage $STAGE)" >&2
  # shellcheck disable=SC2086
  $prefix "$ZINC" train --model gpt2 --config "$cfg" --text "$TEXT" --steps "$STEPS" $SHAPE "${extra[@]}" \
    >"$OUT/$name.log" 2>&1 || { echo "scaling.sh: $name failed:" >&2; tail -20 "$OUT/$name.log" >&2; exit 1; }
  if ((trace_flag)); then
    "$ZINC" trace summary "$OUT/$name.trace.json" --json >"$OUT/$name.summary.json"
    "$ZINC" trace summary "$OUT/$name.trace.json" >"$OUT/$name.summary.txt"
  fi
}

for ((n = 1; n <= N; n++)); do
  run weak "$n" "$MB"
  run strong "$n" $((GB / n))
done

python3 - "$OUT" "$N" "$trace_flag" <<'PY'
import json, os, sys
out, N, traced = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rows = {}
for mode in ("weak", "strong"):
    for n in range(1, N + 1):
        r = json.load(open(os.path.join(out, f"{mode}_np{n}.report.json")))
        tps = r["tokens_per_s"]
        step_ms = 1e3 * r["tokens_per_step"] / tps
        rows[mode, n] = dict(tps=tps, step_ms=step_ms, gflops=r.get("flops_per_s", 0) / 1e9,
                             batch=r["tokens_per_step"] // r["shape"]["context"])
lines = ["| scaling | ranks | global batch | tokens/s | step ms | GFLOP/s | speedup | ideal | efficiency |",
         "|---|---|---|---|---|---|---|---|---|"]
dat = []
for n in range(1, N + 1):
    w, s = rows["weak", n], rows["strong", n]
    ws = w["tps"] / rows["weak", 1]["tps"]
    ss = rows["strong", 1]["step_ms"] / s["step_ms"]
    for mode, x, sp in (("weak", w, ws), ("strong", s, ss)):
        lines.append(f"| {mode} | {n} | {x['batch']} | {x['tps']:.0f} | {x['step_ms']:.1f} | {x['gflops']:.2f} | "
                     f"{sp:.2f} | {n} | {100 * sp / n:.0f}% |")
    dat.append(f"{n} {ws:.6f} {ss:.6f}")
open(os.path.join(out, "scaling.dat"), "w").write("\n".join(dat) + "\n")
md = ["## Speedup", ""] + lines
if traced:
    cats = ["forward", "backward", "recompute", "comm", "wait", "optimizer", "pool", "data", "engine"]
    md += ["", "## Where the step time goes (zinc trace summary; % of step time, rank 0 / slowest rank)", "",
           "| run | mean step ms (rank 0) | " + " | ".join(cats) + " | comm hidden / exposed ms | untracked |",
           "|---|---|" + "---|" * len(cats) + "---|---|"]
    for mode in ("weak", "strong"):
        for n in range(1, N + 1):
            s = json.load(open(os.path.join(out, f"{mode}_np{n}.summary.json")))
            r0 = s["ranks"][0]
            slow = s["ranks"][s.get("slowest_rank", {}).get("rank", 0)]
            def pct(r, c):
                p = r["phases"].get(c)
                return f"{p['pct']:.1f}" if p else "-"
            cells = [f"{pct(r0, c)} / {pct(slow, c)}" for c in cats]
            un = 100 * r0["untracked_ms"] / r0["step_ms_total"] if r0["step_ms_total"] else 0
            md.append(f"| {mode} np{n} | {r0['mean_step_ms']:.1f} | " + " | ".join(cells) +
                      f" | {r0['comm_hidden_ms']:.1f} / {r0['comm_exposed_ms']:.1f} | {un:.1f} |")
else:
    md += ["", "(this zinc has no --trace: no per-phase breakdown)"]
open(os.path.join(out, "scaling.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY

if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal svg size 720,480 noenhanced
set output "$OUT/scaling.svg"
set title "zinc GPT-2 ($SHAPE, stage $STAGE): speedup against ranks"
set xlabel "ranks"
set ylabel "speedup over 1 rank"
set xrange [1:$N]
set yrange [0:*]
set xtics 1
set grid
set key top left
plot x with lines dashtype 2 lc rgb "#808080" title "ideal", \
     "$OUT/scaling.dat" using 1:2 with linespoints lw 2 title sprintf("weak (micro batch %d per rank)", $MB), \
     "$OUT/scaling.dat" using 1:3 with linespoints lw 2 title sprintf("strong (global batch %d)", $GB)
GP
  echo "scaling.sh: wrote $OUT/scaling.md and $OUT/scaling.svg" >&2
else
  echo "scaling.sh: wrote $OUT/scaling.md (gnuplot not installed: no plot; Debian gnuplot-nox)" >&2
fi
