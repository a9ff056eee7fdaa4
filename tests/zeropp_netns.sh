#!/bin/bash
# ZeRO++ on two "nodes" of two ranks (issue 36): network namespaces from scripts/netns-cluster.sh, so each
# node's ranks share memory and MPI_COMM_TYPE_SHARED sees two nodes (no ZINC_TEST_RANKS_PER_NODE). zinc train
# --model gpt2 (small shape, 6 steps, stage 3; no module persistent, none kept from its forward to its backward,
# as in a model too large for that) checks, with the bytes of node 0's veth end:
#   - hpZ (2: the node) ends bitwise where plain stage 3 does (the parameter checksum) and sends fewer bytes
#     across the link (its backward gathers stay inside the node);
#   - qwZ, qgZ and all three send fewer bytes across the link than plain stage 3 (all three: fewer than 0.35x;
#     qgZ alone only saves on the gradients, which the gathers outweigh here), and their last loss is within 2%
#     of plain's;
#   - hpZ 4 (a group over both nodes) is refused, naming the nodes.
# Root only (namespaces): exits 77 with the reason elsewhere.
#   tests/zeropp_netns.sh ZINC SOURCE_DIR WORKDIR
set -uo pipefail
ZINC=$1
SRC=$2
WORK=$3
cluster="$SRC/scripts/netns-cluster.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
why=$("$cluster" check 2>&1) || { echo "skip: $why"; exit 77; }
mkdir -p "$WORK"
cname=zt$$
"$cluster" up "$cname" >/dev/null || { echo "FAIL: cannot make the cluster"; exit 1; }
trap '"$cluster" down "$cname"' EXIT
"$cluster" hostfile "$cname" 2 >"$WORK/hostfile"
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
link_bytes() {
  ip netns exec "$cname-n0" sh -c "echo \$((\$(cat /sys/class/net/${cname}a/statistics/tx_bytes) + \$(cat /sys/class/net/${cname}a/statistics/rx_bytes)))"
}
declare -A bytes
run() { # name, zero members -> status; bytes[name], WORK/name.report.json
  local f="$WORK/$1.json"
  printf '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1000000,\n' >"$f"
  printf ' "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0%s}}\n' "$2" >>"$f"
  local b0
  b0=$(link_bytes)
  "$cluster" mpirun "$cname" --allow-run-as-root --hostfile "$WORK/hostfile" -np 4 --map-by slot --bind-to none \
    "$ZINC" train --model gpt2 --config "$f" --text "$SRC/README.md" --layers 2 --width 64 --heads 2 --context 32 \
    --steps 6 --threads 1 --report "$WORK/$1.report.json" --force --quiet >"$WORK/$1.log" 2>&1
  local st=$?
  bytes[$1]=$(($(link_bytes) - b0))
  return $st
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$WORK/$1.report.json" "$2"; }

run plain "" || fail "plain stage 3: $(tail -3 "$WORK/plain.log")"
run hpz ', "zero_hpz_partition_size": 2' || fail "hpZ: $(tail -3 "$WORK/hpz.log")"
run qwz ', "zero_quantized_weights": true' || fail "qwZ: $(tail -3 "$WORK/qwz.log")"
run qgz ', "zero_quantized_gradients": true' || fail "qgZ: $(tail -3 "$WORK/qgz.log")"
run all ', "zero_quantized_weights": true, "zero_hpz_partition_size": 2, "zero_quantized_gradients": true' ||
  fail "all three: $(tail -3 "$WORK/all.log")"
if ((fails == 0)); then
  [ "$(field plain param_checksum)" = "$(field hpz param_checksum)" ] ||
    fail "hpZ's parameters differ from plain stage 3's: $(field hpz param_checksum) vs $(field plain param_checksum)"
  p=${bytes[plain]}
  echo "bytes across the link: plain $p, hpZ ${bytes[hpz]}, qwZ ${bytes[qwz]}, qgZ ${bytes[qgz]}, all ${bytes[all]}"
  ((bytes[hpz] < p)) || fail "hpZ sent ${bytes[hpz]} bytes across the link, plain $p"
  ((bytes[qwz] < p)) || fail "qwZ sent ${bytes[qwz]} bytes across the link, plain $p"
  ((bytes[qgz] < p)) || fail "qgZ sent ${bytes[qgz]} bytes across the link, plain $p"
  ((bytes[all] * 100 < p * 35)) || fail "all three sent ${bytes[all]} bytes across the link, plain $p"
  for c in qwz qgz all; do
    python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['final_loss']; b = json.load(open(sys.argv[2]))['final_loss']
sys.exit(0 if abs(a - b) <= 0.02 * abs(b) else 1)" "$WORK/$c.report.json" "$WORK/plain.report.json" ||
      fail "$c: last loss $(field $c final_loss), plain $(field plain final_loss)"
  done
fi
if run hpz4 ', "zero_hpz_partition_size": 4'; then
  fail "hpZ 4 over two nodes was accepted"
elif ! grep -q "spans nodes" "$WORK/hpz4.log"; then
  fail "hpZ 4: not the reason expected: $(grep -m1 -i error "$WORK/hpz4.log")"
fi
((fails == 0)) && echo "zeropp_netns: passed" || echo "zeropp_netns: $fails failed"
exit $((fails > 0))
