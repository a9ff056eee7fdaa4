#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs a program against the installed header
# and library found through pkg-config: what a user of `cmake --install` does.
set -eu
bin=$1
prefix=$bin/install-check
rm -rf "$prefix"
cmake --install "$bin" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/zinc"
"$prefix/bin/zinc" --version
pc=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs zinc)
cat > "$prefix/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <zinc.h>
int main(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"zero_optimisation\": {}}";
    o.log_level = ZINC_LOG_ERROR;
    zinc_engine *e = NULL;
    if (zinc_create(&o, &e) == ZINC_OK || !strstr(zinc_last_error(), "did you mean")) return 1;
    printf("installed zinc %s works\n", zinc_version());
    return 0;
}
C
cc "$prefix/consumer.c" $pc -Wl,-rpath,"$prefix/lib" -o "$prefix/consumer"
"$prefix/consumer"
