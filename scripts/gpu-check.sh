#!/usr/bin/env bash
# The one script run on the lent GPU machine (see docs/gpu.md): unpacks the carried .deps/*.deb (Jansson,
# liburing) into /tmp/pfx, builds everything for sm_90, runs every test (gpu and mpi labels included),
# runs bench_adam_cuda and the PyTorch peer (torch_adam.py) in the same call, writes logs under $OUT
# (default /tmp/zinc-gpu-out) and prints a short table last.
#
#   scripts/gpu-check.sh [--no-tests] [--no-bench] [--n 1e9]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/zinc-gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
RUN_TESTS=1 RUN_BENCH=1 N=1e9
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-tests) RUN_TESTS=0 ;;
    --no-bench) RUN_BENCH=0 ;;
    --n) N=$2; shift ;;
    *) echo "usage: $0 [--no-tests] [--no-bench] [--n 1e9]" >&2; exit 2 ;;
  esac
  shift
done
log() { echo "[gpu-check $(date +%H:%M:%S)] $*"; }

# ---------------------------------------------------------------- dependencies brought as .deb files
P=/tmp/pfx/usr
if compgen -G ".deps/*.deb" >/dev/null; then
  mkdir -p /tmp/pfx
  for f in .deps/*.deb; do dpkg -x "$f" /tmp/pfx; done
  # The .pc files say prefix=/usr: point them at the unpacked tree.
  for pc in "$P"/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    [[ -f $pc ]] && sed -i -e "s|=/usr\$|=$P|" -e "s|=/usr/|=$P/|" "$pc"
  done
  log "unpacked $(ls .deps/*.deb | wc -l) packages into /tmp/pfx"
fi
export PKG_CONFIG_PATH="$P/lib/x86_64-linux-gnu/pkgconfig:$P/share/pkgconfig:${PKG_CONFIG_PATH:-}"
export LD_LIBRARY_PATH="$P/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export CMAKE_PREFIX_PATH="$P:${CMAKE_PREFIX_PATH:-}"
export LIBRARY_PATH="$P/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
export CPATH="$P/include:${CPATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  nvcc --version | tail -1
  cmake --version | head -1
  mpirun --version 2>&1 | head -1
  git rev-parse HEAD 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# ---------------------------------------------------------------- build
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
log "configure + build in $BUILD"
build_rc=0
{
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DZINC_WERROR=ON -DZINC_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$P" &&
  cmake --build "$BUILD" -j "$(nproc)"
} > "$OUT/build.log" 2>&1 || build_rc=$?
tail -5 "$OUT/build.log"
log "build rc=$build_rc"

# bench_adam_cuda comes from bench/cuda.cmake; if bench/CMakeLists.txt does not include it, build it here.
BENCH_BIN=$(find "$BUILD" -name bench_adam_cuda -type f -perm -u+x 2>/dev/null | head -1)
if [[ -z $BENCH_BIN && -f $BUILD/libzinc.so ]]; then
  BENCH_BIN=$BUILD/bench_adam_cuda_direct
  gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -I. -I/usr/local/cuda/include bench/bench_adam_cuda.c \
      -o "$BENCH_BIN" -L"$BUILD" -lzinc -L/usr/local/cuda/lib64 -lcudart -lm \
      -Wl,-rpath,"$BUILD:/usr/local/cuda/lib64" >> "$OUT/build.log" 2>&1 || BENCH_BIN=
fi

# ---------------------------------------------------------------- tests
tests_summary="not run"
if [[ $RUN_TESTS == 1 && $build_rc == 0 ]]; then
  log "ctest (all labels)"
  ctest --test-dir "$BUILD" --output-on-failure -j 8 --timeout 600 > "$OUT/ctest.log" 2>&1
  ctest_rc=$?
  tests_summary=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
  skipped=$(grep -c "(Skipped)" "$OUT/ctest.log" || true)
  tests_summary="$tests_summary; skipped: $skipped; rc=$ctest_rc"
  grep -E "Failed|\*\*\*|Skipped" "$OUT/ctest.log" | head -30
  log "gpu-labelled tests:"
  ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/ctest-gpu.log" 2>&1
  grep -E "Test +#|tests passed|tests failed" "$OUT/ctest-gpu.log"
fi

# ---------------------------------------------------------------- benchmarks: zinc, then the torch peer
if [[ $RUN_BENCH == 1 ]]; then
  if [[ -n $BENCH_BIN ]]; then
    log "bench_adam_cuda --n $N"
    "$BENCH_BIN" --n "$N" 2>&1 | tee "$OUT/bench_adam_cuda.txt"
  else
    echo "bench_adam_cuda was not built" | tee "$OUT/bench_adam_cuda.txt"
  fi
  peer=
  for cand in ../shared/peers/torch_adam.py shared/peers/torch_adam.py bench/peers/torch_adam.py; do
    [[ -f $cand ]] && { peer=$cand; break; }
  done
  if [[ -n $peer ]]; then
    log "peer: python3 $peer --n $N --cpu-n 1e7"
    python3 "$peer" --n "$N" --cpu-n 1e7 2>&1 | tee "$OUT/torch_adam.txt"
  else
    echo "torch_adam.py not found" | tee "$OUT/torch_adam.txt"
  fi
fi

# ---------------------------------------------------------------- the table
python3 - "$OUT" "$tests_summary" > "$OUT/summary.txt" <<'PY'
import re, sys, os
out, tests = sys.argv[1], sys.argv[2]
def read(name):
    try: return open(os.path.join(out, name)).read()
    except OSError: return ""
z = {}
for line in read("bench_adam_cuda.txt").splitlines():
    if line.startswith("zinc-bench "):
        kv = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
        z[kv.get("case")] = kv
t = {}
for line in read("torch_adam.txt").splitlines():
    m = re.match(r"\s*([\d.]+)M\s+(.*?)\s+([\d.]+) ms\s+(\d+) GB/s", line)
    if m: t[m.group(2).strip()] = float(m.group(3))
    m = re.match(r"device copy ceiling: (\d+) GB/s", line)
    if m: t["ceiling"] = float(m.group(1))
print(f"tests: {tests}")
ceil = z.get("device_copy", {}).get("gbps", "?")
print(f"device copy ceiling: zinc {ceil} GB/s, torch {t.get('ceiling', '?')} GB/s")
print(f"{'case':26s} {'bpp':>4s} {'ms':>9s} {'GB/s':>7s} {'%ceil':>6s} {'torch ms':>9s} {'vs torch':>8s}")
peer = {"flat": "flat  torch AdamW fused", "gpt2": "gpt2-124M torch AdamW fused"}
for name in ("flat_adam_bf16", "flat_adam_fp32", "flat_adam_fp32_copy", "flat_step_bf16",
             "gpt2_adam_bf16", "gpt2_adam_fp32", "gpt2_adam_fp32_copy", "gpt2_step_bf16"):
    kv = z.get(name)
    if not kv: continue
    ms = float(kv["ms"]); tm = t.get(peer[name.split("_")[0]])
    extra = f" (step/adam {kv['ratio']})" if "ratio" in kv else ""
    vs = f"{tm / ms:7.2f}x" if tm else "      -"
    print(f"{name:26s} {kv['bpp']:>4s} {ms:9.3f} {float(kv['gbps']):7.0f} {float(kv['pct_ceiling']):6.1f} "
          f"{(f'{tm:9.3f}' if tm else '        -')} {vs}{extra}")
print("vs torch = torch fused AdamW ms / zinc ms (torch: all fp32, 28 B/param, in place)")
PY
echo
echo "==================== zinc gpu-check summary (logs in $OUT) ===================="
cat "$OUT/summary.txt"
[[ $build_rc == 0 ]]
