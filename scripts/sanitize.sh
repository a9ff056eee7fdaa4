#!/usr/bin/env bash
# Builds zinc with AddressSanitizer and UndefinedBehaviorSanitizer (CPU only, Debug) into build-asan/ and
# runs the test suite there. Any memory error or undefined behaviour aborts its test. The install test is
# left out: a program built against an ASan library needs the ASan runtime preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B build-asan -DZINC_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="$san" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-asan -j "$(nproc 2>/dev/null || echo 2)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --test-dir build-asan --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" -E install_pkgconfig
