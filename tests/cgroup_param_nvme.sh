#!/usr/bin/env bash
# A GPT-2 run with its parameters and optimizer state on NVMe inside a memory cgroup (v2, else v1) at a
# fixed limit finishes (no OOM kill) with the param_checksum of the same run in memory. Skips (77) with the
# reason where no memory cgroup can be made. Usage: cgroup_param_nvme.sh ZINC WORKDIR
set -uo pipefail
zinc=$1 work=$2 limit=$((256 << 20))
rm -rf "$work" && mkdir -p "$work/nv"
if [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && mkdir "/sys/fs/cgroup/zinc-test-$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/zinc-test-$$
  echo $limit >"$cg/memory.max" || { rmdir "$cg"; echo "SKIP: cannot set memory.max in $cg"; exit 77; }
elif mkdir "/sys/fs/cgroup/memory/zinc-test-$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/memory/zinc-test-$$
  echo $limit >"$cg/memory.limit_in_bytes"
else
  echo "SKIP: no memory cgroup can be made here (cgroup v2 without a writable subtree_control, no v1 memory hierarchy, or no permission)"
  exit 77
fi
trap 'rmdir "$cg" 2>/dev/null' EXIT
cfg() {
  printf '{"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}, "zero_optimization": {"stage": 3%s}}\n' "$1"
}
cfg "" >"$work/mem.json"
cfg ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nv\", \"buffer_size\": 100000, \"max_in_cpu\": 0},
 \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nv\"}" >"$work/nvme.json"
shape=(--layers 2 --width 64 --heads 2 --context 32 --text /usr/share/common-licenses/GPL-3 --steps 3)
"$zinc" train --model gpt2 --quiet --config "$work/mem.json" "${shape[@]}" --report "$work/a.json" || exit 1
bash -c 'echo $$ >"$0/cgroup.procs"; exec "$@"' "$cg" "$zinc" train --model gpt2 --quiet --config "$work/nvme.json" \
  "${shape[@]}" --report "$work/b.json"
rc=$?
[[ $rc == 0 ]] || { echo "FAIL: the run under the ${limit}-byte cgroup exited with $rc (137: OOM-killed)"; exit 1; }
a=$(grep -o '"param_checksum": *"[0-9a-f]*"' "$work/a.json") b=$(grep -o '"param_checksum": *"[0-9a-f]*"' "$work/b.json")
[[ -n $a && $a == "$b" ]] || { echo "FAIL: $a vs $b"; exit 1; }
echo "cgroup_param_nvme: under $cg ($limit bytes): $b, as in memory"
