#!/usr/bin/env bash
# zinc's GPT-2 against a PyTorch reference of the same architecture (bench/gpt2/torch_gpt2.py, nanoGPT-style),
# interleaved in one run: the README's main job shape (4 layers, 128 channels, vocabulary 256, T 64, B 16) and
# GPT-2 124M (12 layers, 768 channels, vocabulary 50257, T 64, B 4), 1 and 2 threads, fp32, bf16 (zinc: the
# bf16 config, DeepSpeed's bf16 weights; torch: autocast) and amp (zinc: fp32 config with --products bf16,
# autocast's scheme; torch: autocast), each round after waiting for a load below 1.2 (a round that waited in
# vain says UNDER LOAD).
# Prints the machine, OpenBLAS's core, every run and a markdown table of medians for bench/RESULTS.md.
# --cpu-steps S1,S2 adds each program's CPU seconds per step at 1 thread (from runs of S1 and S2 steps): on a
# shared machine, steadier than wall-clock tokens/s.
# PyTorch (CPU) comes from PyPI into a venv made here on first use (ZINC_TORCH_VENV, default
# ~/.cache/zinc/torch-venv); it is a benchmark peer, never part of zinc. About 15 minutes with the defaults.
#
#   bench/gpt2/vs_torch.sh [--rounds 2] [--steps-readme 20] [--steps-124m 6] [--shapes readme,124M]
#                          [--threads 1,2] [--dtypes fp32,bf16,amp] [--quiet-load 1.2] [--max-wait 300]
#                          [--gemm auto|openblas|onednn] [--cpu-steps S1,S2]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${ZINC_TORCH_VENV:-$HOME/.cache/zinc/torch-venv}
if ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
  echo "vs_torch: installing torch and numpy into $venv (PyPI; once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
[[ -x build/zinc ]] || { echo "vs_torch: build/zinc missing: run scripts/build.sh first" >&2; exit 1; }
exec python3 bench/gpt2/vs_torch.py --zinc "$PWD/build/zinc" --python "$venv/bin/python" \
  --work "$PWD/build/bench-gpt2-torch" "$@"
