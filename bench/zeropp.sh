#!/bin/bash
# ZeRO++ over a slow link (issue 36): zinc train --model gpt2 at stage 3 on two "nodes" of two ranks each
# (scripts/netns-cluster.sh: two network namespaces joined through a bridge; ranks of one node talk over
# shared memory), the link between the nodes throttled with tc on both node ends (a netem delay with a
# token-bucket child: RATE each way, DELAY each way). For plain stage 3, qwZ, hpZ (2: a node), qgZ and all
# three it records
#   - the bytes that cross the link per step, from the veth counters of node 0's end
#     (/sys/class/net/*/statistics/{tx,rx}_bytes in its namespace): a run of STEPS steps less a run of 2
#     steps, over STEPS - 2 (start-up, wire-up and the build cancel out);
#   - step time and tokens/s (zinc train --report: training steps only) of the STEPS-step run;
#   - its loss curve and final validation loss, beside plain stage 3's;
# and appends a section to bench/RESULTS.md (APPEND=0: only OUT/zeropp.md), plots the loss curves to
# bench/zeropp.svg (gnuplot) and keeps every report under OUT.
#
#   bench/zeropp.sh [STEPS] [OUT]          (root only: namespaces and tc; exit 77 with the reason elsewhere)
#
# STEPS default 100, OUT default build/zeropp. Environment: ZINC (default <repo>/build/zinc), RATE (default
# 200mbit), DELAY (default 1ms), DTYPE (fp32 or bf16, default fp32), SHAPE (default the README's: "--layers 4
# --width 128 --heads 4 --context 64"), TEXT (default Debian's GPL-3), MB (micro batch per rank, default 4),
# THREADS (per rank, default 1), LR (the peak learning rate, default 6e-4: GPT-2 small's; at the README's 2e-3
# this small batch of 16 sequences has one-step loss spikes right after the warm-up, at 1 rank and stage 0 too
# (10.0 at step 21, 3.06 at step 22), which make a step-by-step comparison of two runs meaningless), CONFIGS (default "plain qwz hpz qgz all"), ZERO (more zero_optimization
# members for every config, default "stage3_max_reuse_distance": 0: each module released after its forward and
# gathered again for its backward, as in a model too large to keep them; "" for zinc's defaults), APPEND
# (default 1), PLOT (the loss curves' file, default bench/zeropp.svg), VAL_BATCHES and SAMPLE_TOKENS (the
# trainer's closing validation and sample, defaults 4 and 64: at stage 3 each of their forward passes gathers
# every module over the link, so at 6x384 with V 50257 the default sample alone moves about 25 GB across it;
# the bytes per step cancel them out, the wall time does not). The optimizer and schedule are the README's
# (ds_configs/gpt2_small_cpu.json: AdamW, WarmupDecayLR over 20 warm-up steps, to the run's last step) at LR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
STEPS=${1:-100}
OUT=${2:-$root/build/zeropp}
ZINC=${ZINC:-$root/build/zinc}
RATE=${RATE:-200mbit}
DELAY=${DELAY:-1ms}
VAL_BATCHES=${VAL_BATCHES:-4}
SAMPLE_TOKENS=${SAMPLE_TOKENS:-64}
CONFIGS=${CONFIGS:-plain qwz hpz qgz all}
APPEND=${APPEND:-1}
PLOT=${PLOT:-$here/zeropp.svg}
cluster="$root/scripts/netns-cluster.sh"
# shellcheck source=bench/zeropp_config.sh
. "$here/zeropp_config.sh" # DTYPE, SHAPE, TEXT, MB, THREADS, LR, ZERO and their defaults
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[ -x "$ZINC" ] || { echo "zeropp.sh: $ZINC not found: build zinc first (scripts/build.sh)" >&2; exit 1; }
[ -r "$TEXT" ] || { echo "zeropp.sh: the training text $TEXT is not readable: set TEXT=FILE" >&2; exit 1; }
((STEPS > 2)) || { echo "zeropp.sh: STEPS must be above 2" >&2; exit 1; }
for c in $CONFIGS; do zeropp_zero_of "$c" >/dev/null || exit 1; done
"$cluster" check || { echo "zeropp.sh: no network namespaces here (see above)" >&2; exit 77; }
command -v tc >/dev/null || { echo "zeropp.sh: tc (iproute2) not found" >&2; exit 77; }
mkdir -p "$OUT"
cp "$ZINC" "$OUT/zinc" # a rebuild of the tree while this runs must not change (or remove) the binary under it
ZINC=$OUT/zinc
cname=zp$$
"$cluster" up "$cname" >/dev/null
trap '"$cluster" down "$cname"' EXIT
"$cluster" hostfile "$cname" 2 >"$OUT/hostfile"
# node i's end of the link is ${cname}a / ${cname}b in namespace ${cname}-n0 / -n1: both directions throttled
# (a kernel without sch_netem gets the token bucket alone, and the section says so)
shaping="netem delay $DELAY, tbf $RATE"
for i in 0 1; do
  dev=$cname$(printf '%s' ab | cut -c$((i + 1)))
  if ip netns exec "$cname-n$i" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" 2>/dev/null; then
    ip netns exec "$cname-n$i" tc qdisc add dev "$dev" parent 1: handle 2: tbf rate "$RATE" burst 64kbit latency 100ms
  else
    shaping="tbf $RATE (no delay: this kernel has no netem qdisc)"
    ip netns exec "$cname-n$i" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 64kbit latency 100ms
  fi
done
echo "zeropp.sh: link shaping: $shaping" >&2
link_bytes() { # tx + rx of node 0's end
  ip netns exec "$cname-n0" sh -c "echo \$((\$(cat /sys/class/net/${cname}a/statistics/tx_bytes) + \$(cat /sys/class/net/${cname}a/statistics/rx_bytes)))"
}

run() { # config, steps -> bytes across the link
  local c=$1 s=$2 f="$OUT/$1.json"
  zeropp_write_config "$c" "$s" "$f" || exit 1
  local b0 b1
  b0=$(link_bytes)
  # shellcheck disable=SC2086
  "$cluster" mpirun "$cname" --allow-run-as-root --hostfile "$OUT/hostfile" -np 4 --map-by slot --bind-to none \
    "$ZINC" train --model gpt2 --config "$f" --text "$TEXT" $SHAPE --steps "$s" --threads "$THREADS" \
    --val-every "$s" --val-batches "$VAL_BATCHES" --sample-tokens "$SAMPLE_TOKENS" --report "$OUT/$c.s$s.report.json" --force --quiet >"$OUT/$c.s$s.log" 2>&1 ||
    { echo "zeropp.sh: $c ($s steps) failed: $OUT/$c.s$s.log" >&2; tail -5 "$OUT/$c.s$s.log" >&2; exit 1; }
  b1=$(link_bytes)
  echo $((b1 - b0))
}

for c in $CONFIGS; do
  short=$(run "$c" 2)
  long=$(run "$c" "$STEPS")
  echo "$c $short $long" >>"$OUT/bytes.txt"
  echo "zeropp.sh: $c: $(((long - short) / (STEPS - 2))) bytes across the link per step" >&2
done

python3 - "$OUT" "$STEPS" "$CONFIGS" "$RATE" "$DELAY" "$DTYPE" "$SHAPE" <<'EOF'
import json, sys
out, steps, configs, rate, delay, dtype, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), *sys.argv[4:]
rows = {}
for line in open(f"{out}/bytes.txt"):
    c, short, long = line.split()
    rows[c] = (int(long) - int(short)) / (steps - 2)
names = {"plain": "plain stage 3", "qwz": "qwZ", "hpz": "hpZ (2)", "qgz": "qgZ", "all": "qwZ + hpZ + qgZ"}
rep = {c: json.load(open(f"{out}/{c}.s{steps}.report.json")) for c in configs}
base = rep.get("plain")
lines = ["| config | bytes across the link per step | vs plain | step time (s) | tokens/s | vs plain | final val loss | vs plain | largest step-loss gap after step 20 |",
         "|---|---|---|---|---|---|---|---|---|"]
for c in configs:
    r = rep[c]
    st = r["time_split"]["train_steps_s"] / max(1, r["steps"])
    tps = r["tokens_per_s"]
    vl = r["final_val_loss"]
    if base:
        gap = max((abs(a - b) / abs(b) for a, b in zip(r["losses"][20:], base["losses"][20:])), default=0)
        vb = f"{rows['plain'] / rows[c]:.2f}x fewer" if c != "plain" else ""
        vt = f"{tps / base['tokens_per_s']:.2f}x" if c != "plain" else ""
        vv = f"{100 * (vl - base['final_val_loss']) / base['final_val_loss']:+.2f}%" if c != "plain" else ""
        g = f"{100 * gap:.2f}%" if c != "plain" else ""
    else:
        vb = vt = vv = g = ""
    lines.append(f"| {names[c]} | {rows[c] / 1e6:.3f} MB | {vb} | {st:.3f} | {tps:.0f} | {vt} | {vl:.4f} | {vv} | {g} |")
open(f"{out}/zeropp.md", "w").write("\n".join(lines) + "\n")
with open(f"{out}/losses.dat", "w") as f:
    for i in range(steps):
        f.write(f"{i + 1} " + " ".join(f"{rep[c]['losses'][i]:.6f}" for c in configs) + "\n")
print("\n".join(lines))
EOF

# shellcheck disable=SC2086
zeropp_plot "$OUT/losses.dat" "$PLOT" "GPT-2 ($SHAPE), stage 3, 2 nodes x 2 ranks, link $shaping" $CONFIGS

if [ "$APPEND" = 1 ]; then
  {
    echo
    echo "## ZeRO++ over a throttled link (issue 36), $DTYPE"
    echo
    echo "Machine: $(nproc) shared cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), loaded by other"
    echo "work (timings are noisy); $(date -u +%Y-%m-%d). Two \"nodes\" of 2 ranks each (network namespaces,"
    echo "scripts/netns-cluster.sh; intra-node traffic over shared memory), the link throttled on both ends with tc"
    echo "($shaping). GPT-2 \`$SHAPE\`, vocabulary 256, micro batch $MB per rank, $STEPS steps,"
    echo "$THREADS thread per rank, zero_optimization extra: \`${ZERO:-none}\`, AdamW and WarmupDecayLR (peak $LR, 20 warm-up steps) to step $STEPS."
    echo "Bytes across the link: node 0's veth counters (tx + rx), a $STEPS-step run less a"
    echo "2-step run, per step. Loss curves: $(basename "$PLOT"). Command: \`bench/zeropp.sh $STEPS\` (DTYPE=$DTYPE)."
    echo
    cat "$OUT/zeropp.md"
  } >>"$here/RESULTS.md"
fi
