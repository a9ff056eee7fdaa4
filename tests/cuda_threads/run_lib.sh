#!/usr/bin/env bash
# Runs zinc's own CUDA kernels (kernels/*.cu: fused Adam, Lion, LAMB, gradient statistics and the step's
# finalize, casts / axpy / scale / fill) on CPU threads under a sanitizer, with the GPU tests' checks against
# their C references (tests/test_kernels_cuda.c, test_kernels_lamb_cuda.c: bitwise where the kernels promise
# it). The same harness as run.sh (which says what it does and does not test); the large sizes and the
# statistics' fixed grid are built smaller (-DZT_CUDA_BIG, -DZCU_STATS_BLOCKS=32) and the LAMB test runs every
# 7th of its 96 cases (-DZT_CUDA_COMBO_STRIDE), since every CUDA thread is an OS thread here.
#   address (default) | thread: the sanitizer, as run.sh.
#   broken: builds the kernels with a constant deliberately changed (Adam's 1 - beta2 from beta1, Lion's
#           sign, LAMB's eps) and passes only if the checks then fail on each: the harness can see a wrong
#           kernel. (CI runs it as the ctest kernels_cuda_threads_broken.) It runs only the checks of the
#           kernels it breaks (ZT_CUDA_ONLY=adam,lion and the LAMB test), without a sanitizer (the address
#           run has that job) and at -O2: the same checks, in a fraction of the time.
# Exits 77 (skipped) where g++ or the sanitizer's runtime is missing.
# usage: tests/cuda_threads/run_lib.sh [address|thread|broken] [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:-address}
case $mode in address | thread) san=$mode ;; broken) san=address ;; *) echo "run_lib.sh: '$mode': use address, thread or broken" >&2; exit 2 ;; esac
out=${2:-$root/build/cuda_threads-lib-$mode}
mkdir -p "$out"
if ! command -v g++ >/dev/null; then echo "run_lib.sh: skipped: no g++" >&2; exit 77; fi
echo 'int main(void) { return 0; }' > "$out/probe.c"
if ! gcc -fsanitize=$san "$out/probe.c" -o "$out/probe" 2>/dev/null || ! "$out/probe"; then
    echo "run_lib.sh: skipped: -fsanitize=$san programs do not build or run here" >&2
    exit 77
fi
flags="-g -O1 -fsanitize=$san -fno-omit-frame-pointer -ffp-contract=off -DZCU_STATS_BLOCKS=32"
[ "$mode" = broken ] && flags="-g -O2 -fno-omit-frame-pointer -ffp-contract=off -DZCU_STATS_BLOCKS=32"
inc="-I$here -I$root/include -I$root/tests -I$root"
kobjs=()
for cu in adam lion lamb grad_stats elementwise; do
    python3 "$here/launch_rewrite.py" "$root/kernels/$cu.cu" "$out/$cu.cpp"
    if [ "$mode" = broken ]; then # one wrong constant per kernel family; each must be caught
        case $cu in
        adam) sed -i 's/op.omb2 = __fsub_rn(1.0f, s.b2);/op.omb2 = __fsub_rn(1.0f, s.b1);/' "$out/$cu.cpp" ;;
        lion) sed -i 's/s.omb2 = 1.0f - h->beta2;/s.omb2 = 1.0f - h->beta1;/' "$out/$cu.cpp" ;;
        lamb) sed -i 's/s.eps = h->eps;/s.eps = 2 * h->eps;/' "$out/$cu.cpp" ;;
        esac
    fi
    g++ -std=c++20 $flags -Wall -Wextra -Wno-unknown-pragmas $inc -c "$out/$cu.cpp" -o "$out/$cu.o"
    kobjs+=("$out/$cu.o")
done
g++ -std=c++20 $flags -Wall -Wextra $inc -c "$here/threads_runtime.cpp" -o "$out/runtime.o"
# The C references: the library's CPU kernels, as the GPU tests link them (the internal static library).
lib=$root/build/libzinc_internal.a
[ -f "$lib" ] || { echo "run_lib.sh: $lib not built (cmake --build build --target zinc_internal)" >&2; exit 2; }
gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/tests/zt.c" -o "$out/zt.o"
status=0
for t in test_kernels_cuda:1001 test_kernels_lamb_cuda:1003; do
    name=${t%%:*} big=${t##*:}
    gcc -std=c11 $flags -D_GNU_SOURCE -DZT_CUDA_BIG=$big -DZT_CUDA_BIGGER=4099 -DZT_CUDA_COMBO_STRIDE=7 -Wall -Wextra $inc \
        -c "$root/tests/$name.c" -o "$out/$name.o"
    g++ $flags "$out/$name.o" "$out/zt.o" "${kobjs[@]}" "$out/runtime.o" "$lib" -lm -lpthread -ldl \
        -o "$out/$name"
    if [ "$mode" = broken ]; then
        log="$out/$name.log"
        if (cd "$out" && ZT_CUDA_ONLY=adam,lion timeout 1800 "./$name" > "$log" 2>&1); then
            echo "run_lib.sh: $name passed with broken kernels: the harness cannot see a wrong kernel" >&2
            status=1
        fi
        for what in $( [ "$name" = test_kernels_cuda ] && echo "adam lion" || echo "lamb"); do
            if ! grep -q "FAIL.*$what" "$log" && ! grep -qi "FAIL.*$what" "$log"; then
                echo "run_lib.sh: $name: no failure names the broken $what kernel" >&2
                status=1
            else
                echo "run_lib.sh: $name: the broken $what kernel was caught ($(grep -ci "FAIL.*$what" "$log") failures)"
            fi
        done
    else
        (cd "$out" && timeout 1800 "./$name") || status=1
    fi
done
exit $status
