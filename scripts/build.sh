#!/usr/bin/env bash
# Configures and builds zinc with its tests and benchmarks into build/ (BUILD_TESTING=ON; CUDA code is
# compiled when nvcc is found).
# Extra arguments go to cmake's configure step, e.g. scripts/build.sh -DZINC_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DZINC_WERROR=ON -DBUILD_TESTING=ON "$@"
cmake --build build -j "$jobs"
