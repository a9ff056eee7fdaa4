#!/bin/sh
# A config problem under mpirun is reported once per job (by rank 0), with every problem of the file in that
# one message, and every rank exits 1. Arguments: MPIRUN... ZINC_BINARY
set -u
zinc=$(eval echo "\${$#}")
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
printf '{"train_batch_size": 7, "optimizer": {"type": "Adam", "params": {"eps": 0}}, "fp16": {"enabled": "yes"}}\n' \
    > "$dir/bad.json"
n=$#
i=1
set -- "$@"
cmd=""
for a in "$@"; do
    [ $i -lt $n ] && cmd="$cmd '$a'"
    i=$((i + 1))
done
eval "$cmd -np 2 '$zinc' train --config '$dir/bad.json' --steps 2" > "$dir/out.txt" 2>&1
rc=$?
said=$(grep -c 'invalid ds_config (3 problems)' "$dir/out.txt")
trail=$(grep -c '\.c:[0-9]' "$dir/out.txt")
if [ "$rc" -eq 0 ] || [ "$said" -ne 1 ] || [ "$trail" -ne 0 ] || ! grep -q 'fp16.enabled' "$dir/out.txt" ||
    ! grep -q 'optimizer.params.eps' "$dir/out.txt" || ! grep -q 'train_batch_size' "$dir/out.txt"; then
    echo "FAIL: exit $rc, the config error said $said times, $trail internal trails; output:"
    cat "$dir/out.txt"
    exit 1
fi
echo "config error reported once per job, all three problems, exit $rc"
