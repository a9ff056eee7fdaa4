#!/bin/sh
# A production build by default: configuring zinc with no options, and configuring it as a subproject
# (add_subdirectory) of a project that turns BUILD_TESTING on, registers no test and creates none of the
# test or benchmark targets, the CUDA emulation or the test-hook copies (ZINC_CUDA=OFF for speed: the
# choice does not depend on it).
set -eu
src=$1
work=$2/production-configure
rm -rf "$work"
mkdir -p "$work/parent"
check() { # build dir, what
    n=$(ctest --test-dir "$1" -N | sed -n 's/^Total Tests: //p')
    [ "$n" = 0 ] || { echo "$2: $n tests registered, want 0"; exit 1; }
    cmake --build "$1" --target help >"$1/targets.txt"
    bad=$(grep -E 'test_|bench_|_emulated|zinc_env_hooks|zinc_cli_hooks|fuzz_' "$1/targets.txt" || true)
    [ -z "$bad" ] || { echo "$2 has test targets:"; echo "$bad"; exit 1; }
    echo "$2: no tests, no test targets"
}
cmake -S "$src" -B "$work/top" -DZINC_CUDA=OFF >"$work/top.log" 2>&1 || { cat "$work/top.log"; exit 1; }
check "$work/top" "a default configure"
cat >"$work/parent/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(parent C)
include(CTest)
add_subdirectory("$src" zinc)
CM
cmake -S "$work/parent" -B "$work/parent-build" -DZINC_CUDA=OFF -DBUILD_TESTING=ON >"$work/parent.log" 2>&1 ||
    { cat "$work/parent.log"; exit 1; }
check "$work/parent-build" "zinc as a subproject with BUILD_TESTING=ON"
grep -q ' zinc$' "$work/parent-build/targets.txt" || { echo "the subproject has no zinc target"; exit 1; }
