#!/usr/bin/env bash
# zinc's GPT-2 (zinc train --model gpt2) against llm.c's own CPU trainer (train_gpt2.c, built with its
# Makefile's flags: -Ofast -march=native -fopenmp) at the same shape, batch and sequence length, on the same
# machine in the same run; then the peak resident memory per rank of zinc at ZeRO stages 0-3 on 1, 2 and 4
# ranks next to llm.c's single process.
#
#   bench/gpt2/run_vs_llmc.sh [LLMC_DIR]
#
# LLMC_DIR: a checkout of github.com/karpathy/llm.c (default build-peers/llm.c, cloned when missing). The
# peer is built in build-peers/llmc-bin (ignored by git, never committed). The model file that llm.c loads
# (it always opens ./gpt2_124M.bin) is written by zinc itself (--steps 0 --save, then checkpoint export
# --format llmc); the token files are the Debian licence texts as bytes (ids < 256 are valid GPT-2 ids).
# llm.c's trainer fixes B=4, T=64 and 41 steps, with a validation pass every 10 steps and sampling every
# 20: its tokens/s comes from its own per-step times (steps 1-40), zinc's from its report (training steps
# only). BENCH_PARTS="speed rss" (default) picks the parts. Shape: SHAPE_L layers, SHAPE_C channels, SHAPE_H heads, vocabulary 50257 (padded 50304).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
L=${SHAPE_L:-4} C=${SHAPE_C:-128} H=${SHAPE_H:-4}
parts=${BENCH_PARTS:-speed rss}
llmc=${1:-build-peers/llm.c}
if [[ ! -f $llmc/train_gpt2.c ]]; then git clone --depth 1 https://github.com/karpathy/llm.c "$llmc"; fi
bin=build-peers/llmc-bin
mkdir -p "$bin"
cc=${CC:-gcc}
$cc -Ofast -Wno-unused-result -Wno-ignored-pragmas -Wno-unknown-attributes -march=native -fopenmp -DOMP \
  -I "$llmc" "$llmc/train_gpt2.c" -lm -lgomp -o "$bin/train_gpt2"
work=build-peers/gpt2-bench
rm -rf "$work" && mkdir -p "$work/dev/data/tinyshakespeare"
lic=/usr/share/common-licenses
cat $lic/GPL-3 $lic/GPL-2 $lic/LGPL-2.1 $lic/MPL-2.0 $lic/GFDL-1.3 $lic/Apache-2.0 > "$work/text.txt"
python3 - "$work" <<'PY'
import struct, sys
w = sys.argv[1]
d = open(w + "/text.txt", "rb").read()
cut = len(d) * 9 // 10
for name, part in (("train", d[:cut]), ("val", d[cut:])):
    with open(f"{w}/dev/data/tinyshakespeare/tiny_shakespeare_{name}.bin", "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(part)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(part), *part))
# llm.c's trainer samples from the <|endoftext|> id its tokenizer file gives (and reads it uninitialised
# without one): a tokenizer file (magic 20240328, version 2, vocabulary, eot id; then length-prefixed
# strings) whose first 256 entries are the bytes themselves
with open(w + "/gpt2_tokenizer.bin", "wb") as f:
    f.write(struct.pack("<256I", *([20240328, 2, 50257, 50256] + [0] * 252)))
    for i in range(50257):
        b = bytes([i]) if i < 256 else b"<%d>" % i
        f.write(struct.pack("<B", len(b)) + b)
PY
cfg() { # stage ranks
  cat > "$work/z$1_$2.json" <<JSON
{"train_batch_size": $((4 * $2)), "train_micro_batch_size_per_gpu": 4, "steps_per_print": 0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}},
 "zero_optimization": {"stage": $1}}
JSON
}
for s in 0 1 2 3; do for n in 1 2 4; do cfg $s $n; done; done
zinc=$root/build/zinc
train=$work/dev/data/tinyshakespeare/tiny_shakespeare_train.bin
$zinc train --model gpt2 --quiet --config "$work/z0_1.json" --layers $L --width $C --heads $H --vocab 50257 \
  --max-context 64 --context 64 --data "$train" --steps 0 --save "$work/init"
$zinc checkpoint export --format llmc "$work/init" --out "$work/gpt2_124M.bin" --force

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F\ %H:%M) UTC"
echo "== shape: $L layers, $C channels, $H heads, vocabulary 50257 (padded 50304), B=4, T=64, fp32; OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}"
[[ $parts == *speed* ]] && (cd "$work" && /usr/bin/time -f "llmc peak RSS %M KiB" "$root/$bin/train_gpt2" > llmc.log 2> llmc.time) || true
[[ $parts == *speed* ]] && llmc_tps=$(awk '/^step [0-9]+: train loss/ { n = $2; sub(":", "", n); if (n + 0 >= 1) { ms += $(NF - 1); k++ } }
  END { if (k) printf "%.0f", 256 * k / (ms / 1000); else print 0 }' "$work/llmc.log")
[[ $parts == *speed* ]] && echo "llm.c train_gpt2 (OpenMP): $llmc_tps tokens/s (steps 1-40); $(cat "$work/llmc.time" | tail -1)"
for s in 0 2; do
  [[ $parts == *speed* ]] || break
  $zinc train --model gpt2 --quiet --config "$work/z${s}_1.json" --init "$work/gpt2_124M.bin" --context 64 --data "$train" \
    --steps 40 --force --report "$work/z$s.report.json" > /dev/null 2>&1
  tps=$(python3 -c "import json; print('%.0f' % json.load(open('$work/z$s.report.json'))['tokens_per_s'])")
  echo "zinc stage $s, 1 rank: $tps tokens/s; ratio to llm.c $(python3 -c "print('%.2f' % ($tps / max(1, $llmc_tps)))")"
done
mpi="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
for n in 1 2 4; do
  [[ $parts == *rss* ]] || break
  for s in 0 1 2 3; do
    $mpi -np $n sh -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$work" $zinc train --model gpt2 \
      --quiet --config "$work/z${s}_$n.json" --init "$work/gpt2_124M.bin" --context 64 --data "$train" --steps 3 \
      > /dev/null 2>&1 || echo "zinc stage $s x$n failed"
    printf "zinc stage %d, %d rank(s): peak RSS per rank (MiB):" $s $n
    for r in $(seq 0 $((n - 1))); do printf " %.0f" "$(echo "$(tail -1 "$work/rss.$r") / 1024" | bc -l)"; done
    echo
    rm -f "$work"/rss.*
  done
done
