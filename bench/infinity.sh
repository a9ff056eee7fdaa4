#!/usr/bin/env bash
# ZeRO-Infinity on the CPU: GPT-2 at growing shapes, stage 3, with the parameter shard and the optimizer
# state on NVMe (offload_param / offload_optimizer device "nvme"), under a memory cgroup (v2, else v1) at
# LIMIT; beside each, the same step with everything in memory (no cgroup): peak RSS, bytes read and written
# per step (GNU time's file-system blocks: O_DIRECT IO counts), seconds per step, and the floor
# max(in-memory step time, bytes moved / disk bandwidth) from FIO_MBS (MB/s measured by fio on the same file
# system, O_DIRECT; or FIO_READ_MBS and FIO_WRITE_MBS apart) when given, else measured here by fio just before
# the runs (15 s of reads and 15 s of writes under NVME_DIR, 1 MiB requests at depth 8, io_uring, O_DIRECT: a
# shared virtual disk's speed moves by a third within hours, so figures from another time or machine make a
# wrong floor), else none. Seconds per step are the training
# steps' own (the report's tokens_per_s: the trainer's closing validation and sample are not counted), and
# the bytes per step are those of the steps too, per store, from the offloaded run's --trace
# (bench/infinity_io.py); GNU time's whole-process figures (build, validation, sample) are printed beside.
#   bench/infinity.sh [ZINC] [NVME_DIR]     env: LIMIT (default 3G), SHAPES ("6x384 12x768"), STEPS (3),
#                                            CONTEXT (64), FIO_MBS, VAL_BATCHES (4: the trainer's
#                                            closing validation after the last step, forward passes that
#                                            read every module),
#                                            PREFETCH_BUCKET (2e7), MAX_LIVE (3e7), MEM (1; 0: no in-memory
#                                            run, the floor is the disk's part alone, a lower bound of the
#                                            floor, so the ratio is an upper bound; for shapes whose in-memory
#                                            step does not fit this machine's RAM, 36x1280), MAX_IN_CPU (0:
#                                            offload_param.max_in_cpu, parameter elements per rank kept in
#                                            memory; DeepSpeed's default 1e9 would hold these shapes whole),
#                                            FIO_DEPTH (8: fio's queue depth; the parameter store's ring is
#                                            deeper, (buffer_count + 1) x buffer pieces, 96 here, the state
#                                            store's aio.queue_depth 8, and this disk reads faster deeper)
# Without a cgroup it can make (no root, no delegated controller) it says so and runs without a limit.
set -euo pipefail
zinc=${1:-build/zinc}
nv=${2:-$PWD/build/infinity_nvme}
LIMIT=${LIMIT:-3G} SHAPES=${SHAPES:-"6x384 12x768"} STEPS=${STEPS:-3} CONTEXT=${CONTEXT:-64} VAL_BATCHES=${VAL_BATCHES:-4}
# the prefetch: stage3_prefetch_bucket_size elements in flight, stage3_max_live_parameters gathered in all
# (a module larger than the bucket is never prefetched: 12x768's blocks are 7.1M elements)
PREFETCH_BUCKET=${PREFETCH_BUCKET:-20000000} MAX_LIVE=${MAX_LIVE:-30000000} MAX_IN_CPU=${MAX_IN_CPU:-0} FIO_DEPTH=${FIO_DEPTH:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"; [[ -n ${cg:-} ]] && rmdir "$cg" 2>/dev/null || true' EXIT
cp "$zinc" "$work/zinc" # a rebuild of the tree while this runs must not change (or remove) the binary under it
zinc=$work/zinc
mkdir -p "$nv"
cg=""
if [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && mkdir /sys/fs/cgroup/zinc-infinity-$$ 2>/dev/null; then
  cg=/sys/fs/cgroup/zinc-infinity-$$
  echo "$LIMIT" >"$cg/memory.max"
  cgv=v2
elif mkdir /sys/fs/cgroup/memory/zinc-infinity-$$ 2>/dev/null; then
  cg=/sys/fs/cgroup/memory/zinc-infinity-$$
  echo "$LIMIT" >"$cg/memory.limit_in_bytes"
  cgv=v1
else
  echo "note: no memory cgroup could be made (needs root or a delegated memory controller): no limit"
fi
cfg() { # $1: offload (0/1)
  # the gathers, buckets and persistence held small (the same math: only how much is held at once)
  local z='"stage": 3, "sub_group_size": 4194304, "stage3_max_live_parameters": '"$MAX_LIVE"',
    "stage3_prefetch_bucket_size": '"$PREFETCH_BUCKET"', "stage3_max_reuse_distance": 0, "reduce_bucket_size": 5000000,
    "stage3_param_persistence_threshold": 0'
  [[ $1 == 1 ]] && z+=", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$nv\", \"buffer_size\": 4194304, \"max_in_cpu\": $MAX_IN_CPU},
    \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$nv\"}"
  printf '{"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.0006}}, "zero_optimization": {%s}}\n' "$z"
}
cfg 0 >"$work/mem.json"
cfg 1 >"$work/nvme.json"
run() { # $1 config, $2 shape, $3 in cgroup (0/1) -> "peak_kib inblocks outblocks seconds checksum"
  local L=${2%x*} W=${2#*x}
  local cmd=("$zinc" train --model gpt2 --quiet --config "$1" --layers "$L" --width "$W" --heads $((W / 64))
    --context "$CONTEXT" --text /usr/share/common-licenses/GPL-3 --steps "$STEPS" --val-batches "$VAL_BATCHES" --val-every 1000000000 --report "$work/r.json" --force
    --sample-tokens 1)
  [[ $3 == 1 ]] && cmd+=(--trace "$work/trace.json")
  rm -f "$work/r.json"
  if [[ $3 == 1 && -n $cg ]]; then
    /usr/bin/time -f "%M %I %O %e" -o "$work/t" bash -c 'echo $$ >"$0/cgroup.procs"; exec "$@"' "$cg" "${cmd[@]}" >"$work/log" 2>&1 ||
      { echo "FAIL: $2 under the cgroup: $(tail -2 "$work/log")" >&2; return 1; }
  else
    /usr/bin/time -f "%M %I %O %e" -o "$work/t" "${cmd[@]}" >"$work/log" 2>&1 ||
      { echo "FAIL: $2: $(tail -2 "$work/log")" >&2; return 1; }
  fi
  local sps # the training steps' seconds: steps x tokens per step / tokens_per_s
  sps=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["steps"] * r["tokens_per_step"] / r["tokens_per_s"])' "$work/r.json")
  echo "$(tail -1 "$work/t" | cut -d' ' -f1-3) $sps $(grep -o '"param_checksum": *"[0-9a-f]*"' "$work/r.json" | grep -o '[0-9a-f]\{16\}')"
}
if [[ -z ${FIO_MBS:-}${FIO_READ_MBS:-}${FIO_WRITE_MBS:-} ]] && command -v fio >/dev/null; then
  for rw in read write; do
    fio --name="$rw" --filename="$nv/fio.tmp" --size=2G --direct=1 --ioengine=io_uring --bs=1M --iodepth="$FIO_DEPTH" \
      --rw="$rw" --runtime=15 --time_based --output-format=json >"$work/fio_$rw.json" 2>"$work/fio.log" ||
      { echo "fio failed ($(tail -1 "$work/fio.log")): no floor" >&2; break; }
    mbs=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]; print(round(j["bw_bytes"] / 1e6))' \
      "$work/fio_$rw.json" "$rw")
    if [[ $rw == read ]]; then FIO_READ_MBS=$mbs; else FIO_WRITE_MBS=$mbs; fi
  done
  rm -f "$nv/fio.tmp"
  echo "fio under $nv ($(date -u +%H:%M)): read ${FIO_READ_MBS:-?} MB/s, write ${FIO_WRITE_MBS:-?} MB/s"
fi
echo "limit $LIMIT (${cgv:-none}), $STEPS steps, context $CONTEXT, fp32, AdamW, nvme_path $nv"
printf '%-8s %12s %12s %10s %10s %12s %12s %7s %s\n' shape peak_mem peak_nvme s/step_mem s/step_nvme read/step write/step ratio bitwise
for s in $SHAPES; do
  # the offloaded run first: the one under the limit, the one that matters most
  read -r pn ib ob tn cn <<<"$(run "$work/nvme.json" "$s" 1)"
  echo "  $s offloaded: peak $((pn / 1024)) MiB, $tn s in steps, whole process read $((ib / 2048)) MiB, written $((ob / 2048)) MiB ($(date -u +%H:%M), load $(cut -d' ' -f1-3 /proc/loadavg))"
  python3 "$(dirname "$0")/infinity_io.py" "$work/trace.json" | sed 's/^/    /'
  read -r _ rps wps <<<"$(python3 "$(dirname "$0")/infinity_io.py" "$work/trace.json" | grep IO_PER_STEP)"
  if [[ ${MEM:-1} == 0 ]]; then
    pm=0 tm=0 cm="not run"
  else
    read -r pm _ _ tm cm <<<"$(run "$work/mem.json" "$s" 0)"
  fi
  ib=$((rps * STEPS / 512)) ob=$((wps * STEPS / 512)) # the steps' bytes, in the blocks the floor below reads
  # the disk's time: bytes read / fio's read bandwidth + bytes written / its write bandwidth
  floor=$(awk -v t="$tm" -v r=$((ib * 512)) -v w=$((ob * 512)) -v fr="${FIO_READ_MBS:-${FIO_MBS:-0}}" \
    -v fw="${FIO_WRITE_MBS:-${FIO_MBS:-0}}" -v n="$STEPS" \
    'BEGIN { d = fr > 0 && fw > 0 ? (r / (fr * 1e6) + w / (fw * 1e6)) / n : 0; s = t / n; print (d > s ? d : s) }')
  echo "  $s floor $floor s/step (in memory $(awk -v t="$tm" -v n="$STEPS" 'BEGIN{print t/n}'), disk $(awk -v r=$((ib * 512)) \
    -v w=$((ob * 512)) -v fr="${FIO_READ_MBS:-${FIO_MBS:-0}}" -v fw="${FIO_WRITE_MBS:-${FIO_MBS:-0}}" -v n="$STEPS" \
    'BEGIN { print (fr > 0 && fw > 0 ? (r / (fr * 1e6) + w / (fw * 1e6)) / n : 0) }'))"
  printf '%-8s %9d MiB %9d MiB %10.3f %10.3f %8d MiB %8d MiB %7.2f %s\n' "$s" $((pm / 1024)) $((pn / 1024)) \
    "$(awk -v t="$tm" -v n="$STEPS" 'BEGIN{print t/n}')" "$(awk -v t="$tn" -v n="$STEPS" 'BEGIN{print t/n}')" \
    $((rps >> 20)) $((wps >> 20)) "$(awk -v t="$tn" -v n="$STEPS" -v f="$floor" 'BEGIN{print t/n/f}')" \
    "$(if [[ ${MEM:-1} == 0 ]]; then echo "not compared ($cn)"; elif [[ $cm == "$cn" ]]; then echo "== ($cm)"; else echo "!= ($cm vs $cn)"; fi)"
done
