#!/bin/bash
# Checkpoints that do not stop training (issue 38): zinc train --model gpt2 with --save-every EVERY over STEPS
# steps, three ways on RANKS ranks: no saves, synchronous saves, and checkpoint.writer.decoupled saves. For
# each it records the run's wall time (zinc train --report "seconds": the loop, saves included) and tokens/s
# over it, and, from checkpoint.writer.show_statistics's log lines (rank 0), the time training was blocked per
# save, the bytes per save, the writer's GB/s and its thread's CPU seconds per save. Appends a section to
# bench/RESULTS.md (APPEND=0: only OUT/ckpt_async.md).
#
#   bench/ckpt_async.sh [STEPS] [OUT]
#
# STEPS default 100, OUT default build/ckpt_async. Environment: ZINC (default <repo>/build/zinc), SHAPE (default
# "--layers 6 --width 384 --heads 6 --context 64"), EVERY (default 10), RANKS (default 1), TEXT (default
# Debian's GPL-3), SAVE (the checkpoint directory's parent, default OUT: put it on the file system to measure),
# APPEND (default 1), EXTRA (more zinc train arguments for every run, e.g. a smaller batch:
# "--set train_batch_size=2 --set train_micro_batch_size_per_gpu=1"), KEEP (--keep-last of both saving runs,
# default 2: 100 steps of GPT-2 124M would otherwise leave 20 checkpoints of 1.4 GiB), PAIRS (default 0: after
# the three runs, N more pairs of a no-save run and a decoupled run back to back, in alternating order, whose
# tokens/s ratios, their mean (with its standard error) and median are tabled: on a shared machine the load moves
# one run's tokens/s by more than the saves cost), WARM_MIB
# (default 0: before each run, fault in and free this many MiB with build/bench/bench_first_touch, so that every
# run starts on memory the VM's host backs; where the balloon reports free pages, memory left idle costs up to 8x
# more to touch first: bench/RESULTS.md, "First touch"). The config is ds_configs/gpt2_small_cpu.json (AdamW, stage 2).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
STEPS=${1:-100}
OUT=${2:-$root/build/ckpt_async}
ZINC=${ZINC:-$root/build/zinc}
SHAPE=${SHAPE:---layers 6 --width 384 --heads 6 --context 64}
EVERY=${EVERY:-10}
RANKS=${RANKS:-1}
TEXT=${TEXT:-/usr/share/common-licenses/GPL-3}
SAVE=${SAVE:-$OUT}
APPEND=${APPEND:-1}
EXTRA=${EXTRA:-}
KEEP=${KEEP:-2}
PAIRS=${PAIRS:-0}
WARM_MIB=${WARM_MIB:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$ZINC" ] || { echo "ckpt_async.sh: $ZINC not found: build zinc first (scripts/build.sh)" >&2; exit 1; }
[ -r "$TEXT" ] || { echo "ckpt_async.sh: the training text $TEXT is not readable: set TEXT=FILE" >&2; exit 1; }
mkdir -p "$OUT" "$SAVE"
cp "$ZINC" "$OUT/zinc" # a rebuild of the tree while this runs must not change (or remove) the binary under it
ZINC=$OUT/zinc
warm=$root/build/bench/bench_first_touch
if ((WARM_MIB > 0)); then
  [ -x "$warm" ] || { echo "ckpt_async.sh: WARM_MIB needs $warm (cmake --build build --target bench_first_touch)" >&2; exit 1; }
fi
launch=()
((RANKS > 1)) && launch=(mpirun -np "$RANKS" --oversubscribe)

run() { # NAME [zinc train arguments...]
  local name=$1
  shift
  rm -rf "$SAVE/ckpt_$name"
  ((WARM_MIB > 0)) && "$warm" --mib "$WARM_MIB" --idle 0 --reps 1 >"$OUT/$name.warm" 2>&1
  # shellcheck disable=SC2086
  "${launch[@]}" "$ZINC" train --model gpt2 --config "$root/ds_configs/gpt2_small_cpu.json" --text "$TEXT" \
    --steps "$STEPS" $SHAPE --report "$OUT/$name.json" --force --set checkpoint.writer.show_statistics=true \
    $EXTRA "$@" >"$OUT/$name.log" 2>&1 || { echo "ckpt_async.sh: run $name failed:" >&2; tail -5 "$OUT/$name.log" >&2; exit 1; }
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date -u +%H:%M)
run nosave
run sync --save "$SAVE/ckpt_sync" --save-every "$EVERY" --keep-last "$KEEP"
run decoupled --save "$SAVE/ckpt_decoupled" --save-every "$EVERY" --keep-last "$KEEP" --set checkpoint.writer.decoupled=true
for ((i = 1; i <= PAIRS; i++)); do
  # the order alternates (no saves first in odd pairs, decoupled first in even ones): a machine that drifts
  # one way over the pairs then favours each side equally
  ((i % 2)) && run "nosave_$i"
  run "decoupled_$i" --save "$SAVE/ckpt_decoupled_$i" --save-every "$EVERY" --keep-last "$KEEP" \
    --set checkpoint.writer.decoupled=true
  rm -rf "$SAVE/ckpt_decoupled_$i"
  ((i % 2)) || run "nosave_$i"
done

# fio's sequential O_DIRECT write on the same file system (io_uring, io_buffer_size blocks, two in flight,
# fsync at the end), of one save's bytes: the floor the writer's GB/s is compared with.
bytes=$(grep -o -m1 'rank 0, step [0-9]*: [0-9]* bytes' "$OUT/decoupled.log" | awk '{print $5}')
fio_gbs=""
if command -v fio >/dev/null && [ -n "$bytes" ]; then
  # (O_DIRECT: a whole number of MiB; before this was a %-format, Python 3.11 refused the f-string's backslashes
  # and set -e ended the script before its table)
  mib=$((bytes / 1048576)) bs=64
  ((mib < bs)) && bs=$mib
  if fio --name=ckpt --filename="$SAVE/fio.tmp" --rw=write --bs="${bs}M" --size="${mib}M" --direct=1 \
    --ioengine=io_uring --iodepth=2 --end_fsync=1 --output-format=json >"$OUT/fio.json" 2>"$OUT/fio.log"; then
    fio_gbs=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]["write"]; print("%.2f" % (j["bw_bytes"] / 1e9))' "$OUT/fio.json") ||
      fio_gbs=""
  else
    echo "ckpt_async.sh: fio failed (see $OUT/fio.log); the table says not run" >&2
  fi
  rm -f "$SAVE/fio.tmp"
fi
LOAD="$load0 at $t_start UTC, $(cut -d" " -f1-3 /proc/loadavg) at $(date -u +%H:%M) UTC" KEEP=$KEEP PAIRS=$PAIRS WARM_MIB=$WARM_MIB FIO_GBS=$fio_gbs python3 - "$OUT" "$STEPS" "$EVERY" "$RANKS" "$SHAPE" "$EXTRA" <<'EOF' >"$OUT/ckpt_async.md"
import functools, json, os, re, sys, datetime
out, steps, every, ranks, shape, extra = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                          sys.argv[5], sys.argv[6])
@functools.cache
def report(name):  # zinc train --report of run NAME, read once
    return json.load(open(f"{out}/{name}.json"))
rows = {}
for name in ("nosave", "sync", "decoupled"):
    r = report(name)
    toks = r["tokens_per_step"] * (r["steps"] - r["resumed_from_step"])
    stats = [tuple(float(x) if x else None for x in m.groups()) for m in re.finditer(
        r"rank 0, step \d+: (\d+) bytes, [\w ]+? write ([\d.]+) s \(([\d.]+) GB/s[^)]*\), snapshot ([\d.]+) s, "
        r"training blocked ([\d.]+) s \([^;]*;(?: polls [\d.]+ s, of which waiting for the writer ([\d.]+) s)?",
        open(f"{out}/{name}.log").read())]
    stats = [s[:5] + (s[5] or 0,) for s in stats]
    cpu = [float(x) for x in re.findall(r"rank 0, step \d+: .*writer thread: CPU ([\d.]+) s", open(f"{out}/{name}.log").read())]
    rows[name] = (r["seconds"], toks / r["seconds"], stats, cpu)
base = rows["nosave"][1]
sync_blocked = sum(s[4] for s in rows["sync"][2]) / max(1, len(rows["sync"][2]))
print(f"\n## Decoupled checkpoint writer (issue 38), {datetime.date.today()}\n")
print(f"Machine: 2-core CPU VM, shared (load average, 1/5/15 min: {os.environ.get('LOAD')}). "
      f"`bench/ckpt_async.sh {steps}` (GPT-2 `{shape}`, {ranks} rank(s), stage 2 "
      f"AdamW{', ' + extra if extra else ''}, `--save-every {every} --keep-last {os.environ.get('KEEP', '2')}`, checkpoints on the build tree's file system; "
      "checkpoint.writer.show_statistics figures of rank 0; fio: one save's bytes written sequentially with "
      f"O_DIRECT through io_uring, 64 MiB blocks, 2 in flight, on the same file system: "
      f"{os.environ.get('FIO_GBS') or 'not run'} GB/s)"
      + (f"; before each run, {os.environ['WARM_MIB']} MiB faulted in and freed (WARM_MIB)"
         if os.environ.get("WARM_MIB", "0") != "0" else "") + ".\n")
print("| run | wall s | tokens/s (saves included) | vs no saves | saves | MiB per save | blocked per save, ms | "
      "max, ms | vs synchronous | waited for the writer, ms (all saves) | writer GB/s | writer CPU s per save |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
# blocked per save: the time training was blocked by the save call, the optimizer's guarded copies and the
# polls, less the time spent waiting for a writer still at work (zinc_checkpoint_wait at the end of the run,
# or a next save's wait), which is reported apart
for name, (sec, tps, st, cpu) in rows.items():
    n = len(st)
    own = [s[4] - s[5] for s in st]
    blocked = sum(own) / n if n else 0
    waited = sum(s[5] for s in st)
    mib = st[0][0] / 1048576 if n else 0
    gbs = sum(s[2] for s in st) / n if n else 0
    rel = f"{100 * blocked / sync_blocked:.1f}%" if n and sync_blocked else ""
    print(f"| {name} | {sec:.2f} | {tps:.0f} | {100 * tps / base:.1f}% | {n} | {mib:.1f} | "
          f"{1000 * blocked:.1f} | {1000 * max(own, default=0):.1f} | {rel} | {1000 * waited:.1f} | {gbs:.2f} | "
          f"{f'{sum(cpu) / len(cpu):.3f}' if cpu else ''} |")
pairs = int(os.environ.get("PAIRS", "0"))
def run_of(name):  # tokens/s; the run's length in its own median steps; tokens/s without step 1
    r = report(name)
    raw = r.get("step_seconds", [])
    st = sorted(raw)
    med = st[len(st) // 2] if st else 0
    n = r["steps"] - r["resumed_from_step"]
    steady = r["tokens_per_step"] * (n - 1) / (r["seconds"] - raw[0]) if len(raw) > 1 else 0
    return r["tokens_per_step"] * n / r["seconds"], r["seconds"] / med if med else 0, steady
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
def after_save(name):  # sum over the save intervals of (their steps' time - EVERY x the median of their later half)
    st = report(name).get("step_seconds", [])
    ex = 0.0
    for s0 in range(every, len(st) - every + 1, every):  # the EVERY steps after the save at step s0
        w = st[s0:s0 + every]
        ex += sum(w) - every * median(w[every // 2:])
    return ex, sum(st)
def writer_cost(dec, nos):  # the share of the run the steps after each save lost, less the same in the no-save run
    (ed, td), (en, tn) = after_save(dec), after_save(nos)
    return ed / td - en / tn if td and tn else None
if pairs:
    ratios, nratios = [], []
    print(f"\n{pairs} more pair(s) back to back (no saves first in odd pairs, decoupled first in even ones). The \"in median steps\" column"
          " divides each run's wall time by its own median step time (report step_seconds) first: a machine"
          " uniformly slower during one run cancels out, while the writer's cost, in the few steps after each save,"
          " does not.")
    print("The writer's cost column: the time the steps right after each save took beyond their interval's later"
          " half (median), as a share of the run, less the same share in the no-save run (steps of the same data):"
          " within each run, so the machine's drift between runs cancels; it assumes the writer is done within"
          " half an interval. The steps 2-N column leaves each run's first step out: the decoupled run's includes"
          " the fault-in of its snapshot image (zinc_checkpoint_reserve), once per run.\n")
    print("| pair | tokens/s, no saves | tokens/s, decoupled | decoupled / no saves | the same in median steps | "
          "steps 2-N | writer's cost after each save | step 1 s, no saves / decoupled |")
    print("|---|---|---|---|---|---|---|---|")
    steadies = []
    costs = []
    for i in range(1, pairs + 1):
        (a, na, sa), (b, nb, sb) = run_of(f"nosave_{i}"), run_of(f"decoupled_{i}")
        steadies.append(sb / sa if sa and sb else 0)
        s1 = [report(f"{k}_{i}").get("step_seconds", [0])[0] for k in ("nosave", "decoupled")]
        ratios.append(b / a)
        nr = na / nb if na and nb else 0
        nratios.append(nr)
        wc = writer_cost(f"decoupled_{i}", f"nosave_{i}")
        costs.append(wc)
        print(f"| {i} | {a:.1f} | {b:.1f} | {100 * b / a:.1f}% | {f'{100 * nr:.1f}%' if nr else 'n/a'} | "
              f"{f'{100 * steadies[-1]:.1f}%' if steadies[-1] else 'n/a'} | "
              f"{f'{100 * wc:.1f}%' if wc is not None else 'n/a'} | {s1[0]:.2f} / {s1[1]:.2f} |")
    mean = sum(ratios) / len(ratios)
    sd = (sum((x - mean) ** 2 for x in ratios) / (len(ratios) - 1)) ** 0.5 if len(ratios) > 1 else 0
    print(f"\nMean decoupled / no saves over the pairs: {100 * mean:.1f}%"
          + (f" (standard error {100 * sd / len(ratios) ** 0.5:.1f}%)" if len(ratios) > 1 else "")
          + f"; median {100 * median(ratios):.1f}%"
          + (f" (in median steps: {100 * median(nratios):.1f}%; steps 2-N: {100 * median(steadies):.1f}%)"
             if all(nratios) and all(steadies) else "")
          + (f"; the writer's cost after each save, median {100 * median(costs):.1f}% of the run." if
             all(c is not None for c in costs) else "."))
EOF
cat "$OUT/ckpt_async.md"
if [ "$APPEND" = 1 ]; then cat "$OUT/ckpt_async.md" >>"$here/RESULTS.md"; fi
