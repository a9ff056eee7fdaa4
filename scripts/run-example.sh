#!/usr/bin/env bash
# The README's main job: install dependencies, build, and train the example MLP on the CPU in one process
# with a ds_configs file. Arguments are passed to `zinc train` (default: ZeRO-2, fp16 with dynamic loss
# scaling, 300 steps).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh > build.log 2>&1 || { tail -50 build.log; exit 1; }
if [[ $# -eq 0 ]]; then set -- --config ds_configs/zero2_fp16.json --steps 300; fi
exec build/zinc train "$@"
