#!/bin/sh
# What a user of zinc does to build against it, four ways: pkg-config and find_package(zinc), each from the
# build tree and from `cmake --install` into a scratch prefix. The same small program builds every time,
# out of tree, and runs.
set -eu
bin=$1
prefix=$bin/install-check
rm -rf "$prefix"
cmake --install "$bin" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/zinc"
"$prefix/bin/zinc" --version
src=$prefix/consumer-src
mkdir -p "$src"
cat > "$src/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <zinc.h>
int main(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"zero_optimisation\": {}}";
    o.log_level = ZINC_LOG_ERROR;
    zinc_engine *e = NULL;
    if (zinc_create(&o, &e) == ZINC_OK || !strstr(zinc_last_error(), "did you mean")) return 1;
    printf("zinc %s works\n", zinc_version());
    return 0;
}
C
cat > "$src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(zinc 0.1 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE zinc::zinc)
CM

# 1. pkg-config, installed
pc=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs zinc)
cc "$src/consumer.c" $pc -Wl,-rpath,"$prefix/lib" -o "$prefix/consumer-pc-installed"
"$prefix/consumer-pc-installed"
# 2. pkg-config, build tree (zinc-uninstalled.pc)
pc=$(PKG_CONFIG_PATH=$bin pkg-config --cflags --libs zinc)
cc "$src/consumer.c" $pc -o "$prefix/consumer-pc-build"
"$prefix/consumer-pc-build"
# 3. find_package, installed
cmake -S "$src" -B "$prefix/cm-installed" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm-installed" >/dev/null
"$prefix/cm-installed/consumer"
# 4. find_package, build tree
cmake -S "$src" -B "$prefix/cm-build" -Dzinc_DIR="$bin" >/dev/null
cmake --build "$prefix/cm-build" >/dev/null
"$prefix/cm-build/consumer"
# The library exports the public API only: a program calling an internal function does not link.
cat > "$src/internal.c" <<'C'
void zinc__error_clear(void);
int main(void) { zinc__error_clear(); return 0; }
C
pc=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs zinc)
if cc "$src/internal.c" $pc -o "$prefix/internal" 2>"$prefix/internal.log"; then
    echo "a program calling zinc__error_clear (internal) linked against the installed libzinc"
    exit 1
fi
grep -q "zinc__error_clear" "$prefix/internal.log"
echo "4 of 4 ways to build against zinc work; internal symbols are not exported"
