#!/usr/bin/env bash
# zinc train --model gpt2 with optimizer Muon (its default rule: Muon on the hidden 2-D weights, AdamW on the
# embeddings, the tied head, biases and norms), 200 steps at a tiny shape, ZeRO stage 2 with clipping: the
# optimizer state offloaded to CPU and to NVMe gives the in-memory run's losses at every step (issue 39's
# goal: a max difference of at most 1e-6; DeepSpeed's own offload of Muon: 9.37e-2) and its param_checksum.
# Usage: gpt2_muon_offload.sh ZINC WORKDIR PYTHON3
set -euo pipefail
zinc=$1 work=$2 py=$3
rm -rf "$work" && mkdir -p "$work/nv"
cfg() { # $1: the offload_optimizer block or nothing
  printf '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
 "optimizer": {"type": "Muon", "params": {"muon_lr": 0.02, "adam_lr": 0.002, "momentum": 0.95,
   "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
 "zero_optimization": {"stage": 2, "sub_group_size": 4096%s}, "zinc": {"allow_buffered_io": true}}\n' "$1"
}
cfg "" >"$work/mem.json"
cfg ', "offload_optimizer": {"device": "cpu"}' >"$work/cpu.json"
cfg ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nv\"}" >"$work/nvme.json"
shape=(--layers 2 --width 32 --heads 2 --context 32 --text /usr/share/common-licenses/GPL-3 --steps 200 --threads 1)
for c in mem cpu nvme; do
  "$zinc" train --model gpt2 --quiet --config "$work/$c.json" "${shape[@]}" --report "$work/r_$c.json"
done
"$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
r = {c: json.load(open(f"{w}/r_{c}.json")) for c in ("mem", "cpu", "nvme")}
bad = 0
for c in ("cpu", "nvme"):
    a, b = r["mem"]["losses"], r[c]["losses"]
    d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) == 200 else float("inf")
    same = r[c]["param_checksum"] == r["mem"]["param_checksum"]
    print(f"offload {c}: {len(b)} losses, max difference from in memory {d:.3g}, checksum "
          f"{'equal' if same else 'differs'}, loss {a[0]:.4f} -> {b[-1]:.4f}")
    bad |= d > 1e-6 or not same
print("FAIL" if bad else "gpt2_muon_offload: within 1e-6 over 200 steps")
sys.exit(1 if bad else 0)
PY
left=$(ls -A "$work/nv")
[[ -z $left ]] || { echo "FAIL: swap files left under $work/nv: $left"; exit 1; }
