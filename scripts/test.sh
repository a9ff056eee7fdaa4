#!/usr/bin/env bash
# The README's test command: install dependencies, build, run every test (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
