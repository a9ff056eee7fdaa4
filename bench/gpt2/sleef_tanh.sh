#!/usr/bin/env bash
# Why GELU's tanh is computed from SLEEF's exp (examples/gpt2/gpt2_vecmath_simd.inc): times both on this CPU
# (AVX-512F needed). Builds into build/bench-sleef-tanh.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -q avx512f /proc/cpuinfo || { echo "sleef_tanh: this CPU has no AVX-512F" >&2; exit 77; }
mkdir -p build/bench-sleef-tanh
cc -O2 -mavx512f -o build/bench-sleef-tanh/sleef_tanh bench/gpt2/sleef_tanh.c -lsleef
echo "== $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, uptime:$(uptime | sed 's/.*load/ load/')"
build/bench-sleef-tanh/sleef_tanh
