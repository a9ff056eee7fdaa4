#!/bin/sh
# The installed library and program never read the test hooks (docs/env.md): `cmake --install` into a
# scratch prefix, then, with hooks set that would change what they do (ZINC_CPU_DISCRETE=1 turns the cpu
# device into a discrete one, ZINC_FAKE_MEM_AVAILABLE=1 makes the pre-flight refuse any build):
# - a program built against the installed libzinc (pkg-config) builds an engine on a host-addressable cpu;
# - the installed zinc passes `mem measure`.
# The test copy of the program (tests/hooks/zinc, which reads the hooks) must refuse the same command, so
# the check is shown able to fail.
set -eu
bin=$1
hooks_zinc=$2
prefix=$bin/install-nohooks
rm -rf "$prefix"
cmake --install "$bin" --prefix "$prefix" >/dev/null
mkdir -p "$prefix/src"
cat > "$prefix/src/hooks.c" <<'C'
#include <stdio.h>
#include <zinc.h>
static zinc_status zeros(void *ud, const zinc_param_info *p, uint64_t seed, float *out) {
    (void)ud, (void)seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = 0.0f;
    return ZINC_OK;
}
int main(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1}";
    o.device = ZINC_DEVICE_CPU;
    o.log_level = ZINC_LOG_ERROR;
    zinc_engine *e = NULL;
    if (zinc_create(&o, &e) != ZINC_OK) return fprintf(stderr, "create: %s\n", zinc_last_error()), 1;
    int m = zinc_module_add(e, "m");
    int64_t shape[1] = {100000};
    if (!zinc_param_add(e, m, "w", 1, shape, ZINC_PARAM_DECAY)) return 1;
    if (zinc_build(e, zeros, NULL) != ZINC_OK) {
        fprintf(stderr, "the installed libzinc read a test hook: zinc_build failed: %s\n", zinc_last_error());
        return 1;
    }
    if (!zinc_device_host_addressable(e)) {
        fprintf(stderr, "the installed libzinc read ZINC_CPU_DISCRETE: the cpu device is not host-addressable\n");
        return 1;
    }
    zinc_destroy(e);
    printf("installed libzinc ignores the test hooks\n");
    return 0;
}
C
pc=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs zinc)
cc "$prefix/src/hooks.c" $pc -Wl,-rpath,"$prefix/lib" -o "$prefix/hooks"
export ZINC_CPU_DISCRETE=1 ZINC_FAKE_MEM_AVAILABLE=1
"$prefix/hooks"
"$prefix/bin/zinc" mem measure --params 10000 >"$prefix/measure.log" 2>&1 || {
    cat "$prefix/measure.log"
    echo "the installed zinc read a test hook (ZINC_FAKE_MEM_AVAILABLE=1 refused its build)"
    exit 1
}
if "$hooks_zinc" mem measure --params 10000 >"$prefix/measure-hooks.log" 2>&1; then
    echo "the test build of zinc ($hooks_zinc) ignored ZINC_FAKE_MEM_AVAILABLE=1: this check cannot fail"
    exit 1
fi
grep -q "MemAvailable\|memory" "$prefix/measure-hooks.log"
echo "the installed libzinc and zinc ignore the test hooks; the test build reads them"
