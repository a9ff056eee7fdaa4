#!/bin/sh
# The environment is read in one place: no library or CLI file calls getenv (or secure_getenv) except
# base/core/env.c, whose table documents every variable (docs/env.md). Usage: check_getenv.sh SOURCE_DIR
set -u
cd "$1" || exit 1
for d in runtime zero offload amp kernels cli; do
    [ -d "$d" ] || { echo "missing folder $d: run from the source root"; exit 1; }
done
grep -q 'getenv(' base/core/env.c || { echo "base/core/env.c reads nothing: the check would be vacuous"; exit 1; }
hits=$(grep -rnE 'getenv[[:space:]]*\(' --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
       runtime zero offload amp kernels cli | grep -v '^base/core/env\.c:')
if [ -n "$hits" ]; then
    echo "getenv outside base/core/env.c (add the variable to its table and call zenv_get):"
    echo "$hits"
    exit 1
fi
echo "getenv only in base/core/env.c"
