#!/usr/bin/env bash
# Runs zinc's own CUDA kernels (kernels/*.cu: fused Adam, Lion, LAMB, gradient statistics and the step's
# finalize, casts / axpy / scale / fill) on the CPU under a sanitizer, with the GPU tests' checks against
# their C references (tests/test_kernels_cuda.c, test_kernels_lamb_cuda.c: bitwise where the kernels promise
# it). The same harness as run.sh (which says what it does and does not test); a CUDA thread is a fiber
# (cuda_runtime.h). The large sizes are built smaller (-DZT_CUDA_BIG: still more than one turn of the
# grid-stride loops on the emulated device's 16 blocks, with odd tails) and the statistics' fixed grid 4
# blocks (-DZCU_STATS_BLOCKS=4: several blocks, each thread several turns, a 4-thread second pass).
#   address (default) | thread: the sanitizer, as run.sh.
#   broken: builds the kernels with the changes plant.py lists (a constant in each optimizer family, a
#           missing barrier), each taken at run time when ZT_PLANT names it, without a sanitizer (the address
#           run has that job) and at -O0 (quick to build), and passes only if the checks pass with none
#           changed and fail with each, every failure in the checks plant.py names for it: the harness sees
#           a wrong kernel, a family's checks see their own, and the emulator shows a missing barrier.
#           (CI runs it as the ctest kernels_cuda_threads_broken.)
# Each program prints its checks passed and the launches and CUDA threads it ran; fewer checks than the
# floors below fail the run (a case dropped by mistake shows; raise a floor when cases are added).
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
if [ "$mode" != broken ] && { ! gcc -fsanitize=$san "$out/probe.c" -o "$out/probe" 2>/dev/null || ! "$out/probe"; }; then
    echo "run_lib.sh: skipped: -fsanitize=$san programs do not build or run here" >&2
    exit 77
fi
# The checks each program passes at least (the address run; broken runs the same programs).
declare -A floor=([test_kernels_cuda]=1902 [test_kernels_lamb_cuda]=3280)
flags="-g1 -O1 -fsanitize=$san -fno-omit-frame-pointer -ffp-contract=off -DZCU_STATS_BLOCKS=4"
[ "$mode" = broken ] && flags="-g1 -O0 -ffp-contract=off -DZCU_STATS_BLOCKS=4"
inc="-I$here -I$root/include -I$root/tests -I$root"
lib=$root/build/libzinc_internal.a
[ -f "$lib" ] || { echo "run_lib.sh: $lib not built (cmake --build build --target zinc_internal)" >&2; exit 2; }
t0=$SECONDS

# Compiles in the background, at most nproc at a time; join waits for all and fails if one did.
jobs=$(nproc 2>/dev/null || echo 2)
pids=()
compile_failed=0
bg() {
    if [ ${#pids[@]} -ge "$jobs" ]; then
        wait "${pids[0]}" || compile_failed=1
        pids=("${pids[@]:1}")
    fi
    "$@" &
    pids+=($!)
}
join() {
    for p in "${pids[@]}"; do wait "$p" || compile_failed=1; done
    pids=()
    [ $compile_failed = 0 ] || { echo "run_lib.sh: a compile failed (above)" >&2; exit 2; }
}

kobjs=()
for cu in lamb adam lion elementwise grad_stats; do # longest to build first
    python3 "$here/launch_rewrite.py" "$root/kernels/$cu.cu" "$out/$cu.cpp"
    [ "$mode" = broken ] && python3 "$here/plant.py" apply $cu "$out/$cu.cpp"
    bg g++ -std=c++20 $flags -Wall -Wextra -Wno-unknown-pragmas $inc -c "$out/$cu.cpp" -o "$out/$cu.o"
    kobjs+=("$out/$cu.o")
done
bg g++ -std=c++20 $flags -O2 -Wall -Wextra $inc -c "$here/threads_runtime.cpp" -o "$out/runtime.o" # the emulator, not under test
# The C references: the library's CPU kernels, as the GPU tests link them (the internal static library).
bg gcc -std=c11 $flags -D_GNU_SOURCE $inc -c "$root/tests/zt.c" -o "$out/zt.o"
progs=(test_kernels_cuda:20011 test_kernels_lamb_cuda:20011)
for t in "${progs[@]}"; do
    name=${t%%:*} big=${t##*:}
    bg gcc -std=c11 $flags -D_GNU_SOURCE -DZT_CUDA_BIG=$big -DZT_CUDA_BIGGER=70001 -Wall -Wextra $inc \
        -c "$root/tests/$name.c" -o "$out/$name.o"
done
join
for t in "${progs[@]}"; do
    name=${t%%:*}
    bg g++ $flags "$out/$name.o" "$out/zt.o" "${kobjs[@]}" "$out/runtime.o" "$lib" -lm -lpthread -ldl -o "$out/$name"
done
join
echo "run_lib.sh: built in $((SECONDS - t0)) s"

status=0
# run NAME LOG [VAR=VALUE...]: runs a program, its output to LOG and (address, thread) the terminal.
run() {
    local name=$1 log=$2 rc=0
    shift 2
    (cd "$out" && env "$@" timeout 600 "./$name") > "$log" 2>&1 || rc=$?
    return $rc
}
# checked NAME LOG: the checks passed are at least the floor.
checked() {
    local n
    n=$(sed -n "s/^[a-z_]*: \([0-9]*\) passed, [0-9]* failed$/\1/p" "$2")
    if [ -z "$n" ] || [ "$n" -lt "${floor[$1]}" ]; then
        echo "run_lib.sh: $1 passed ${n:-no} checks, fewer than the ${floor[$1]} it passes in full: a case was lost" >&2
        return 1
    fi
}
for t in "${progs[@]}"; do
    name=${t%%:*}
    t1=$SECONDS
    if [ "$mode" != broken ]; then
        run "$name" "$out/$name.log" || status=1
        grep -v '^emu: \|WARNING: ASan' "$out/$name.log" | tail -n 40
        checked "$name" "$out/$name.log" || status=1
    else
        # None changed: every check passes (so the failures below come from the change alone).
        if ! run "$name" "$out/$name.clean.log"; then
            tail -n 20 "$out/$name.clean.log"
            echo "run_lib.sh: $name fails with no constant changed" >&2
            status=1
        fi
        checked "$name" "$out/$name.clean.log" || status=1
        while read -r fam prog first; do
            [ "$prog" = "$name" ] || continue
            [ "$first" = - ] && first=
            log="$out/$name.$fam.log"
            if run "$name" "$log" ZT_PLANT=$fam; then
                echo "run_lib.sh: $name passed with the $fam change: the harness cannot see it" >&2
                status=1
                continue
            fi
            nfail=$(grep -c '^FAIL' "$log" || true)
            others=$(grep '^FAIL' "$log" | grep -vc "^FAIL [^ ]*: $first" || true)
            if [ "$nfail" = 0 ] || [ "$others" != 0 ]; then
                echo "run_lib.sh: $name with the $fam change: $nfail failures, $others of other checks" >&2
                grep '^FAIL' "$log" | grep -v "^FAIL [^ ]*: $first" | head -n 5 >&2 || true
                tail -n 5 "$log" >&2
                status=1
            else
                echo "run_lib.sh: $name: the $fam change was caught ($nfail failures${first:+, all of the $first checks})"
            fi
        done < <(python3 "$here/plant.py" list)
    fi
    echo "run_lib.sh: $name: $(grep '^emu: ' "$out/$name"*.log | head -n 1 | sed 's/.*emu: //') in $((SECONDS - t1)) s"
done
exit $status
