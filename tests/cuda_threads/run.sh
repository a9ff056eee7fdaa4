#!/usr/bin/env bash
# Runs GPT-2's CUDA kernels (examples/gpt2/gpt2_kernels.cu) on the CPU under a sanitizer, with
# tests/test_gpt2_kernels_cuda.c's checks against gpt2_layers.c: the device code's index arithmetic, bounds,
# shared-memory sizes and barrier placement, exercised where no GPU is. launch_rewrite.py turns the .cu into
# host C++; the headers here stand in for CUDA's (cuda_runtime.h says how). It does not test what only a GPU
# has: its memory model, timing, or nvcc's floating-point contractions.
#   address (default): AddressSanitizer; any access outside a buffer, shared memory included, fails. Each
#           CUDA thread is a fiber, run as far as it can before the next, in order or in reverse
#           (cuda_runtime.h): a missing __syncthreads gives a wrong value on every run.
#   thread: ThreadSanitizer, each CUDA thread an OS thread; a missing __syncthreads shows as a data race.
#   full: the test's whole shape set (about a minute); small (default): gpt2_kernels_small.c's shapes.
# The small set under AddressSanitizer is the ctest gpt2_kernels_threads (about 20 s on 2 cores); run the
# full set and ThreadSanitizer by hand after changing the kernels (ThreadSanitizer's OS threads: minutes).
# Exits 77 (skipped) where g++ or the sanitizer's runtime is missing.
# usage: tests/cuda_threads/run.sh [address|thread] [small|full] [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
san=${1:-address}
what=${2:-small}
out=${3:-$root/build/cuda_threads-$san}
case $san in address | thread) ;; *) echo "run.sh: sanitizer '$san': use address or thread" >&2; exit 2 ;; esac
case $what in small | full) ;; *) echo "run.sh: '$what': use small or full" >&2; exit 2 ;; esac
mkdir -p "$out"
if ! command -v g++ >/dev/null; then echo "run.sh: skipped: no g++" >&2; exit 77; fi
echo 'int main(void) { return 0; }' > "$out/probe.c"
if ! gcc -fsanitize=$san "$out/probe.c" -o "$out/probe" 2>/dev/null || ! "$out/probe"; then
    echo "run.sh: skipped: -fsanitize=$san programs do not build or run here" >&2
    exit 77
fi
blas_cflags=$(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)
blas_libs=$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
flags="-g -O1 -fsanitize=$san -fno-omit-frame-pointer -ffp-contract=off"
inc="-I$here -I$root/include -I$root/examples/gpt2 -I$root/tests -I$root"
python3 "$here/launch_rewrite.py" "$root/examples/gpt2/gpt2_kernels.cu" "$out/gpt2_kernels.cpp"
g++ -std=c++20 $flags -Wall -Wextra -Wno-unknown-pragmas $inc -c "$out/gpt2_kernels.cpp" -o "$out/kernels.o"
g++ -std=c++20 $flags -Wall -Wextra $inc -c "$here/threads_runtime.cpp" -o "$out/runtime.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc $blas_cflags -c "$root/examples/gpt2/gpt2_layers.c" -o "$out/layers.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/examples/gpt2/gpt2_vecmath.c" -o "$out/vecmath.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc $blas_cflags -c "$root/examples/gpt2/gpt2_gemm.c" -o "$out/gemm.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/base/core/error.c" -o "$out/error.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/tests/zt.c" -o "$out/zt.o"
gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/base/core/dtype.c" -o "$out/dtype.o"
if [ "$what" = full ]; then
    main="$root/tests/test_gpt2_kernels_cuda.c"
else
    main="$here/gpt2_kernels_small.c"
fi
gcc -std=c11 $flags -D_GNU_SOURCE -Wall -Wextra $inc -c "$main" -o "$out/main.o"
g++ $flags "$out/main.o" "$out/zt.o" "$out/kernels.o" "$out/runtime.o" "$out/layers.o" "$out/vecmath.o" "$out/gemm.o" "$out/error.o" \
    "$out/dtype.o" $blas_libs -lm -lpthread -ldl -o "$out/gpt2_kernels_$what"
cd "$out"
exec timeout 3600 "./gpt2_kernels_$what"
