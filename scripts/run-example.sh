#!/usr/bin/env bash
# The README's main job: install dependencies, build, and train a small GPT-2 (examples/gpt2: 4 layers,
# 128 channels, 4 heads, context 64, byte-level vocabulary) on the CPU in one process for 500 steps, on
# real text that Debian installs everywhere (the licence texts of base-files, an Essential package). It
# shows the loss falling, the validation loss (the last 10% of the text), tokens/s, and ends with a
# generated sample. Arguments replace the default ones and go to `zinc train` (the example MLP:
# scripts/run-example.sh --model mlp --config ds_configs/zero2_fp16.json --steps 300).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh > build.log 2>&1 || { tail -50 build.log; exit 1; }
if [[ $# -eq 0 ]]; then
  lic=/usr/share/common-licenses
  cat "$lic/GPL-3" "$lic/GPL-2" "$lic/LGPL-2.1" "$lic/MPL-2.0" "$lic/GFDL-1.3" "$lic/Apache-2.0" > build/licences.txt
  set -- --model gpt2 --config ds_configs/gpt2_small_cpu.json --text build/licences.txt --layers 4 --width 128 \
    --heads 4 --context 64 --steps 1000 --val-every 100 --sample-every 1000 --sample-tokens 300
fi
exec build/zinc train "$@"
