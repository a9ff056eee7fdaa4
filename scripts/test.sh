#!/usr/bin/env bash
# The README's test command: install dependencies, build, run the tests (GPU tests skip without a GPU).
#   scripts/test.sh [--full] [build.sh options...]
# Without --full: the fast subset (ctest label fast, tests/README.md "The fast subset": every subsystem and its
# cheap error paths, minutes on 2 cores), without making the PyPI venvs (the tests that need them skip unless
# an earlier --full made them). --full: the venvs and every test, as CI runs it (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [[ ${1:-} == --full ]]; then
  full=1
  shift
fi
scripts/install-deps.sh

# A Python with safetensors and numpy for the checkpoint export test (tests/test_safetensors.py) and
# tensorboard, whose reader checks the monitors' event files (tests/test_monitor_cli.py), and
# HolisticTraceAnalysis, which reads the per-rank traces as PyTorch's profiler users do (tests/test_trace_hta.py): a venv at
# build/pyenv, which the CMake configure finds. Idempotent; without network it warns and those tests skip.
setup_pyenv() {
  local env=build/pyenv py=build/pyenv/bin/python3
  if [[ -x $py ]] && "$py" -c "import safetensors, numpy, tensorboard, hta" 2>/dev/null; then return 0; fi
  mkdir -p build
  if [[ ! -x $py ]] && ! python3 -m venv "$env"; then
    rm -rf "$env"
    echo "test.sh: warning: python3 -m venv failed (is python3-venv installed?); the safetensors test will skip" >&2
    return 0
  fi
  if ! timeout 600 "$py" -m pip install --quiet --disable-pip-version-check --timeout 20 --retries 1 \
      safetensors numpy tensorboard HolisticTraceAnalysis; then
    echo "test.sh: warning: pip could not install safetensors, numpy and tensorboard into $env (PyPI" \
         "unreachable?); the safetensors, monitor_tensorboard and trace_hta tests will skip" >&2
  fi
  return 0
}
if ((full)); then
  setup_pyenv
  scripts/ds-venv.sh
fi

scripts/build.sh "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
labels=()
((full)) || labels=(-L fast)
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "${labels[@]}"
((full)) || echo "test.sh: ran the fast subset (label fast); scripts/test.sh --full runs every test"
