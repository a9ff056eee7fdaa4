#!/usr/bin/env bash
# DeepSpeed 0.19.8 from PyPI (with the torch it requires) and transformers 5.24.0 in build/dsenv: the references
# that the parity tests run beside zinc on the CPU (DS_ACCELERATOR=cpu; transformers' GPT2LMHeadModel for
# gpt2_hf_transformers). Idempotent; about 5 GB; without PyPI it warns and those
# tests skip (exit 77). scripts/test.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
env=build/dsenv py=build/dsenv/bin/python3
want=0.19.8 want_tf=5.24.0
have() {
  DS_ACCELERATOR=cpu "$py" -c "import deepspeed, transformers, sys
sys.exit(deepspeed.__version__ != '$want' or transformers.__version__ != '$want_tf')" 2>/dev/null
}
if [[ -x $py ]] && have; then exit 0; fi
mkdir -p build
if [[ ! -x $py ]] && ! python3 -m venv "$env"; then
  rm -rf "$env"
  echo "ds-venv.sh: warning: python3 -m venv failed; the DeepSpeed parity tests will skip" >&2
  exit 0
fi
if ! timeout 1200 "$py" -m pip install --quiet --disable-pip-version-check --timeout 60 --retries 2 \
    "deepspeed==$want" "transformers==$want_tf"; then
  echo "ds-venv.sh: warning: pip could not install deepspeed==$want and transformers==$want_tf into $env; the" \
       "DeepSpeed parity tests will skip" >&2
  exit 0
fi
have || echo "ds-venv.sh: warning: deepspeed==$want or transformers==$want_tf installed but does not import; the" \
  "parity tests will skip" >&2
