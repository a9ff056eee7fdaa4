#!/usr/bin/env bash
# zinc train --model gpt2 with zero_optimization.offload_param.device "nvme" (stage 3, bf16, clipping,
# accumulation 2) ends with the same param_checksum as the same run with the shard in memory, on 1 and
# 2 ranks: with every element on NVMe (max_in_cpu 0), with part of the shard kept in memory (max_in_cpu
# 7000 of a shard of about 30k / 15k elements, so modules straddle the boundary) and with DeepSpeed's
# default (1e9: all of it in memory, no swap file traffic). Usage: gpt2_param_nvme.sh ZINC WORKDIR MPIRUN...
set -euo pipefail
zinc=$1 work=$2
shift 2
rm -rf "$work" && mkdir -p "$work/nv"
cfg() { # $1: the offload_param block or nothing
  printf '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "sub_group_size": 2048%s}}\n' "$1"
}
cfg "" >"$work/mem.json"
off() { printf ', "offload_param": {"device": "nvme", "nvme_path": "%s", "buffer_size": 5000%s}' "$work/nv" "$1"; }
cfg "$(off ', "max_in_cpu": 0')" >"$work/nvme.json"
cfg "$(off ', "max_in_cpu": 7000')" >"$work/part.json"
cfg "$(off '')" >"$work/resident.json"
shape=(--layers 2 --width 32 --heads 2 --context 16 --vocab 128 --text /usr/share/common-licenses/MPL-2.0 --steps 4)
sum() { grep -o '"param_checksum": *"[0-9a-f]*"' "$1" | grep -o '[0-9a-f]\{16\}'; }
for np in 1 2; do
  for c in mem nvme part resident; do
    "$@" -np $np "$zinc" train --model gpt2 --quiet --config "$work/$c.json" "${shape[@]}" --report "$work/$c$np.json"
  done
  a=$(sum "$work/mem$np.json") b=$(sum "$work/nvme$np.json") c=$(sum "$work/part$np.json") d=$(sum "$work/resident$np.json")
  echo "ranks $np: in memory $a, offload_param nvme $b, max_in_cpu 7000 $c, max_in_cpu default $d"
  [[ -n $a && $a == "$b" && $a == "$c" && $a == "$d" ]] || { echo "FAIL: ranks $np: checksums differ"; exit 1; }
done
# every swap request is a span of the timeline (--trace)
"$zinc" train --model gpt2 --quiet --config "$work/nvme.json" "${shape[@]}" --trace "$work/t.json"
grep -q '"name":"param swap in"' "$work/t.json" && grep -q '"name":"param swap out"' "$work/t.json" ||
  { echo "FAIL: no param swap spans in $work/t.json"; exit 1; }
"$zinc" train --model gpt2 --quiet --config "$work/part.json" "${shape[@]}" --trace "$work/tp.json"
grep -q '"name":"param swap in"' "$work/tp.json" || { echo "FAIL: max_in_cpu 7000: no param swap-in spans"; exit 1; }
# the default keeps the whole shard in memory: the swap file is never read or written
"$zinc" train --model gpt2 --quiet --config "$work/resident.json" "${shape[@]}" --trace "$work/tr.json"
! grep -q '"name":"param swap\|"name":"param prefetch' "$work/tr.json" ||
  { echo "FAIL: max_in_cpu 1e9 (the whole shard in memory) still swapped parameters"; exit 1; }
left=$(ls -A "$work/nv")
[[ -z $left ]] || { echo "FAIL: swap files left under $work/nv: $left"; exit 1; }
echo "gpt2_param_nvme: bitwise equal at 1 and 2 ranks, max_in_cpu 0, 7000 and the default"
