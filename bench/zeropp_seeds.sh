#!/bin/bash
# ZeRO++'s loss curves against plain stage 3 over several initialisation seeds (issue 36): is a step whose loss
# jumps away from plain's a property of the quantizers or of one trajectory? The losses do not depend on the
# link, so this runs on one host: 4 ranks under mpirun, split into two "nodes" of 2 by the test hook
# ZINC_TEST_RANKS_PER_NODE (tests/hooks/zinc, the hooks build of the CLI), the same job as bench/zeropp.sh
# (bench/zeropp_config.sh writes both configs). For each seed and config it records the largest step-loss gap to
# plain's after step 20, the second largest, the median, the number of steps more than 2% away and the final
# validation loss against plain's; it writes OUT/seeds.md and appends a section to bench/RESULTS.md (APPEND=0:
# only OUT/seeds.md).
#
#   bench/zeropp_seeds.sh [STEPS] [OUT]
#
# STEPS default 300, OUT default build/zeropp_seeds. Environment: ZINC (default <repo>/build/tests/hooks/zinc),
# SEEDS (--seed values, default "1234 1235 1236 1237 1238 1239"; 1234 is zinc train's default), CONFIGS (default
# "qwz qgz all": each compared with plain of the same seed), DTYPE, MB, LR, ZERO, SHAPE, TEXT, THREADS as in
# bench/zeropp.sh, APPEND (default 1), PLOT (default none: an svg of the first seed's loss curves, plain's beside
# each config's, from OUT/losses.dat).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
STEPS=${1:-300}
OUT=${2:-$root/build/zeropp_seeds}
ZINC=${ZINC:-$root/build/tests/hooks/zinc}
SEEDS=${SEEDS:-1234 1235 1236 1237 1238 1239}
CONFIGS=${CONFIGS:-qwz qgz all}
APPEND=${APPEND:-1}
PLOT=${PLOT:-}
# shellcheck source=bench/zeropp_config.sh
. "$here/zeropp_config.sh" # DTYPE, SHAPE, TEXT, MB, THREADS, LR, ZERO and their defaults
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[ -x "$ZINC" ] || { echo "zeropp_seeds.sh: $ZINC not found: build the hooks CLI first (cmake --build build --target zinc_cli_hooks)" >&2; exit 1; }
[ -r "$TEXT" ] || { echo "zeropp_seeds.sh: the training text $TEXT is not readable: set TEXT=FILE" >&2; exit 1; }
((STEPS > 20)) || { echo "zeropp_seeds.sh: STEPS must be above 20 (the gaps are taken after step 20)" >&2; exit 1; }
for c in plain $CONFIGS; do zeropp_zero_of "$c" >/dev/null || exit 1; done
mkdir -p "$OUT"
cp "$ZINC" "$OUT/zinc" # a rebuild of the tree while this runs must not change (or remove) the binary under it
ZINC=$OUT/zinc

for seed in $SEEDS; do
  for c in plain $CONFIGS; do
    f="$OUT/$c.json"
    zeropp_write_config "$c" "$STEPS" "$f"
    # shellcheck disable=SC2086
    ZINC_TEST_RANKS_PER_NODE=2 mpirun --oversubscribe -x ZINC_TEST_RANKS_PER_NODE -np 4 --bind-to none \
      "$ZINC" train --model gpt2 --config "$f" --text "$TEXT" $SHAPE --seed "$seed" --steps "$STEPS" \
      --threads "$THREADS" --val-every "$STEPS" --report "$OUT/$c.seed$seed.json" --force --quiet \
      >"$OUT/$c.seed$seed.log" 2>&1 ||
      { echo "zeropp_seeds.sh: $c, seed $seed failed: $OUT/$c.seed$seed.log" >&2; tail -5 "$OUT/$c.seed$seed.log" >&2; exit 1; }
    echo "zeropp_seeds.sh: seed $seed, $c done" >&2
  done
done

python3 - "$OUT" "$SEEDS" "$CONFIGS" <<'PY'
import json, statistics, sys
out, seeds, configs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
names = {"qwz": "qwZ", "hpz": "hpZ (2)", "qgz": "qgZ", "all": "qwZ + hpZ + qgZ"}
lines = ["| seed | config | largest gap after step 20 | 2nd largest | median | steps > 2% | final val loss vs plain |",
         "|---|---|---|---|---|---|---|"]
for seed in seeds:
    base = json.load(open(f"{out}/plain.seed{seed}.json"))
    for c in configs:
        r = json.load(open(f"{out}/{c}.seed{seed}.json"))
        gaps = sorted(((abs(a - b) / abs(b), i + 1) for i, (a, b) in enumerate(zip(r["losses"], base["losses"])) if i >= 20),
                      reverse=True)
        dv = (r["final_val_loss"] - base["final_val_loss"]) / base["final_val_loss"]
        lines.append(f"| {seed} | {names[c]} | {100 * gaps[0][0]:.2f}% (step {gaps[0][1]}) | {100 * gaps[1][0]:.2f}% | "
                     f"{100 * statistics.median(g for g, _ in gaps):.2f}% | {sum(1 for g, _ in gaps if g > 0.02)} | {100 * dv:+.2f}% |")
open(f"{out}/seeds.md", "w").write("\n".join(lines) + "\n")
rep = {c: json.load(open(f"{out}/{c}.seed{seeds[0]}.json")) for c in ["plain"] + configs}
with open(f"{out}/losses.dat", "w") as f:
    for i in range(len(rep["plain"]["losses"])):
        f.write(f"{i + 1} " + " ".join(f"{rep[c]['losses'][i]:.6f}" for c in ["plain"] + configs) + "\n")
print("\n".join(lines))
PY

first_seed=${SEEDS%% *}
# shellcheck disable=SC2086
if [ -n "$PLOT" ]; then zeropp_plot "$OUT/losses.dat" "$PLOT" "GPT-2 ($SHAPE), $DTYPE, stage 3, 2 nodes x 2 ranks, seed $first_seed" \
    plain $CONFIGS; fi

if [ "$APPEND" = 1 ]; then
  {
    echo
    echo "## ZeRO++ loss curves over initialisation seeds (issue 36), $DTYPE, $(date -u +%Y-%m-%d)"
    echo
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')). The job of"
    echo "bench/zeropp.sh (GPT-2 \`$SHAPE\`, 4 ranks as 2 nodes of 2, micro batch $MB per rank, $STEPS steps, peak LR $LR,"
    echo "zero_optimization extra \`${ZERO:-none}\`) on one host. Command: \`SEEDS=\"$SEEDS\" DTYPE=$DTYPE bench/zeropp_seeds.sh $STEPS\`."
    echo
    cat "$OUT/seeds.md"
  } >>"$here/RESULTS.md"
fi
