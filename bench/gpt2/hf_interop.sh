#!/bin/bash
# Hugging Face GPT-2 interop at the 124M shape (issue 38): the time and peak RSS of `zinc train --init HFDIR
# --steps 0 --save` against the same run from GPT-2's own initialisation (the difference is the import), and of
# `zinc checkpoint export --format hf` against the plain safetensors export of the same checkpoint; then the
# round trip checked tensor by tensor (bytes). The HF model is written here with numpy (random weights, the
# GPT2LMHeadModel names and Conv1D layout, no download). Appends a section to bench/RESULTS.md (APPEND=0: only
# OUT/hf_interop.md).
#
#   bench/gpt2/hf_interop.sh [OUT]
#
# OUT default build/hf_interop (about 3 GB: the HF file, a checkpoint with its Adam state, two exports).
# Environment: ZINC (default <repo>/build/zinc), PY (a Python with numpy, default build/pyenv/bin/python3),
# APPEND (default 1). The config: fp32, ZeRO stage 0, AdamW, micro batch 1, context 64.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${1:-$root/build/hf_interop}
ZINC=${ZINC:-$root/build/zinc}
PY=${PY:-$root/build/pyenv/bin/python3}
APPEND=${APPEND:-1}
[ -x "$ZINC" ] || { echo "hf_interop.sh: $ZINC not found: build zinc first (scripts/build.sh)" >&2; exit 1; }
"$PY" -c 'import numpy' || { echo "hf_interop.sh: $PY has no numpy: set PY" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT/hf"
"$PY" - "$OUT" <<'PYEOF'
import json, struct, sys
import numpy as np
out = sys.argv[1]
V, T, C, L, H = 50257, 1024, 768, 12, 12
rng = np.random.default_rng(0)
shapes = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
for l in range(L):
    p = "transformer.h.%d." % l
    shapes += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)), (p + "attn.c_attn.weight", (C, 3 * C)),
               (p + "attn.c_attn.bias", (3 * C,)), (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
               (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)), (p + "mlp.c_fc.weight", (C, 4 * C)),
               (p + "mlp.c_fc.bias", (4 * C,)), (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,))]
shapes += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
h, off = {"__metadata__": {"format": "pt"}}, 0
for n, s in shapes:
    b = int(np.prod(s)) * 4
    h[n] = {"dtype": "F32", "shape": list(s), "data_offsets": [off, off + b]}
    off += b
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
with open(out + "/hf/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(t)) + t)
    for n, s in shapes:
        f.write((rng.standard_normal(s, dtype=np.float32) * 0.02).tobytes())
json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T,
           "n_embd": C, "n_layer": L, "n_head": H, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5},
          open(out + "/hf/config.json", "w"))
toks = rng.integers(0, V, 4096, dtype=np.uint16)
with open(out + "/tok.bin", "wb") as f:
    f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)) + toks.tobytes())
json.dump({"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": 0}},
          open(out + "/c0.json", "w"))
PYEOF
measure() { # NAME CMD...: wall seconds and max RSS (KiB) of CMD into $OUT/NAME.time
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$OUT/$name.time" "$@" > "$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
}
train=("$ZINC" train --model gpt2 --quiet --config "$OUT/c0.json" --data "$OUT/tok.bin" --context 64 --steps 0)
measure fresh "${train[@]}" --layers 12 --width 768 --heads 12 --max-context 1024 --save "$OUT/ck_fresh"
measure import "${train[@]}" --init "$OUT/hf" --save "$OUT/ck"
measure export_st "$ZINC" checkpoint export "$OUT/ck" --out "$OUT/plain.safetensors"
measure export_hf "$ZINC" checkpoint export --format hf "$OUT/ck" --out "$OUT/hf_out"
"$PY" - "$OUT" <<'PYEOF' > "$OUT/compare.txt"
import json, struct, sys
def read(p):
    d = open(p, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n]); h.pop("__metadata__", None)
    return {k: d[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = read(sys.argv[1] + "/hf/model.safetensors"), read(sys.argv[1] + "/hf_out/model.safetensors")
bad = [k for k in a if a[k] != b.get(k)]
print("%d tensors, %d differ%s" % (len(a), len(bad), (": " + ", ".join(bad[:3])) if bad else " (byte for byte)"))
PYEOF
row() { read -r s k < "$OUT/$1.time"; printf '| %s | %s | %.1f | %.0f |\n' "$2" "$3" "$s" "$((k / 1024))"; }
{
  echo "## Hugging Face GPT-2 import and export at 124M (issue 38), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores shared with other builds (load $(cut -d' ' -f1-3 /proc/loadavg))."
  echo "Command: \`bench/gpt2/hf_interop.sh\` (fp32, stage 0, 1 rank, micro batch 1, context 64; random weights, 124,439,808"
  echo "parameters, a 498 MB HF file). Round trip: $(cat "$OUT/compare.txt")."
  echo
  echo "| run | what | seconds | peak RSS MiB |"
  echo "|---|---|---|---|"
  row fresh "zinc train --steps 0 --save, GPT-2's initialisation" "engine, model, save: the baseline"
  row import "zinc train --init HFDIR --steps 0 --save" "the same, weights read from the HF file (ranged, 4 MiB pieces)"
  row export_st "zinc checkpoint export (safetensors)" "the plain export, streamed"
  row export_hf "zinc checkpoint export --format hf" "HF names, 48 matrices transposed, wte unpadded"
  echo
} > "$OUT/hf_interop.md"
cat "$OUT/hf_interop.md"
if [ "$APPEND" = 1 ]; then cat "$OUT/hf_interop.md" >> "$root/bench/RESULTS.md"; fi
