#!/usr/bin/env bash
# KANN's GRU wrapped by zinc (bench/peers/kann_gru.c, issue 41): builds it beside a KANN checkout (KANN is not a
# dependency of zinc: nothing of it enters the tree) against build/libzinc.so, trains it at 1 rank (stage 0)
# and 2 ranks (stage 3), and prints the glue's line count (scripts/count_glue.sh).
#   bench/peers/kann.sh KANN_DIR [OUT]     KANN_DIR: a checkout of github.com/attractivechaos/kann
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kann=${1:?usage: bench/peers/kann.sh KANN_DIR [OUT]}
out=${2:-$root/build/kann}
for f in kann.c kann.h kautodiff.c kautodiff.h; do
  [ -r "$kann/$f" ] || { echo "kann.sh: $kann/$f not found: give a KANN checkout" >&2; exit 1; }
done
[ -r "$root/build/libzinc.so" ] || { echo "kann.sh: build/libzinc.so not built (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
gcc -O2 -std=gnu11 -I"$kann" -I"$root/include" "$here/kann_gru.c" "$kann/kann.c" "$kann/kautodiff.c" \
  -L"$root/build" -lzinc -Wl,-rpath,"$root/build" -lm -o "$out/kann_gru"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$out/kann_gru" --stage 0 --steps 300 2>/dev/null | tail -n 2
mpirun --oversubscribe -np 2 "$out/kann_gru" --stage 3 --steps 300 2>/dev/null | tail -n 2
echo "kann.sh: zinc glue in bench/peers/kann_gru.c: $("$root/scripts/count_glue.sh" "$here/kann_gru.c") lines"
