#!/usr/bin/env bash
# zinc train --model gpt2 with zero_optimization.offload_param.device "nvme" (stage 3, bf16, clipping,
# accumulation 2) ends with the same param_checksum as the same run with the shard in memory, on 1 and
# 2 ranks. Usage: gpt2_param_nvme.sh ZINC WORKDIR MPIRUN...
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
cfg ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nv\", \"buffer_size\": 5000}" >"$work/nvme.json"
shape=(--layers 2 --width 32 --heads 2 --context 16 --vocab 128 --text /usr/share/common-licenses/MPL-2.0 --steps 4)
sum() { grep -o '"param_checksum": *"[0-9a-f]*"' "$1" | grep -o '[0-9a-f]\{16\}'; }
for np in 1 2; do
  for c in mem nvme; do
    "$@" -np $np "$zinc" train --model gpt2 --quiet --config "$work/$c.json" "${shape[@]}" --report "$work/$c$np.json"
  done
  a=$(sum "$work/mem$np.json") b=$(sum "$work/nvme$np.json")
  echo "ranks $np: in memory $a, offload_param nvme $b"
  [[ -n $a && $a == "$b" ]] || { echo "FAIL: ranks $np: checksums differ"; exit 1; }
done
# every swap request is a span of the timeline (--trace)
"$zinc" train --model gpt2 --quiet --config "$work/nvme.json" "${shape[@]}" --trace "$work/t.json"
grep -q '"name":"param swap in"' "$work/t.json" && grep -q '"name":"param swap out"' "$work/t.json" ||
  { echo "FAIL: no param swap spans in $work/t.json"; exit 1; }
left=$(ls -A "$work/nv")
[[ -z $left ]] || { echo "FAIL: swap files left under $work/nv: $left"; exit 1; }
echo "gpt2_param_nvme: bitwise equal at 1 and 2 ranks"
