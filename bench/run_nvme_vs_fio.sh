#!/bin/bash
# zinc's NVMe store IO (bench_nvme_store) against fio on the same file system, same block size (1 MiB) and
# queue depth, alternating the two so a noisy (virtual) disk affects both alike. Prints every run, then a
# table of medians and the ratios zinc/fio.
#
#   bench/run_nvme_vs_fio.sh [SIZE_MIB] [QUEUE_DEPTHS] [REPS]
#
# SIZE_MIB (default 4096): fio's file size, and the optimizer state bench_nvme_store keeps (master + m + v,
# three files of SIZE_MIB/3 each). QUEUE_DEPTHS default "8,32" (8 is zinc's and DeepSpeed's default). REPS
# default 5 (runs of each program per queue depth). Environment: BUILD (default <repo>/build-bench), BENCH
# (default $BUILD/bench/bench_nvme_store), DIR (default $BUILD/nvme_bench: must be on the file system to
# measure), ENGINES (default "io_uring,libaio"), CHUNK (bench_nvme_store --chunk, default its own 4Mi).
#
# Like with like: bench_nvme_store's WRITE pass only writes (12 B/element, overwriting the files its build
# wrote), its READ pass only reads, and its READ_WRITE pass reads and writes every byte (its "each way"
# figure is the bytes of one direction over the pass time). So: WRITE pass vs fio --rw=write, READ pass vs
# fio --rw=read. fio's file is laid out by an untimed write first, so its timed writes are overwrites too.
# The READ_WRITE figure is printed for reference; fio has no direct counterpart.
# fio: --bs=1M --direct=1 --iodepth=Q --numjobs=1 --size=SIZE_MIB M --ioengine=E, one file.
# Data files are removed at the end (also on failure or Ctrl-C).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SIZE_MIB=${1:-4096}
QDS=${2:-8,32}
REPS=${3:-5}
BUILD=${BUILD:-$root/build-bench}
BENCH=${BENCH:-$BUILD/bench/bench_nvme_store}
DIR=${DIR:-$BUILD/nvme_bench}
ENGINES=${ENGINES:-io_uring,libaio}
CHUNK=${CHUNK:-}

command -v fio >/dev/null || { echo "fio not found: apt-get install -y fio (scripts/install-deps.sh --bench)" >&2; exit 1; }
[ -x "$BENCH" ] || { echo "$BENCH not found: build zinc first" >&2; exit 1; }
mkdir -p "$DIR"
FIOFILE="$DIR/fio-seq.dat"
RAW=$(mktemp)
cleanup() { rm -f "$FIOFILE" "$RAW"; rmdir "$DIR" 2>/dev/null || true; }
trap cleanup EXIT

echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "$(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "# file system: $(findmnt -n -T "$DIR" -o SOURCE,FSTYPE,OPTIONS | tr -s ' ')"
echo "# $(fio --version); $BENCH"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ); size ${SIZE_MIB} MiB, queue depths $QDS, engines $ENGINES, $REPS reps"

# fio_run RW QD ENGINE -> MiB/s
fio_run() {
    local out
    out=$(fio --name=seq --filename="$FIOFILE" --rw="$1" --bs=1M --direct=1 --iodepth="$2" --numjobs=1 \
              --size="${SIZE_MIB}M" --ioengine="$3" --output-format=terse --terse-version=3)
    # terse v3: field 7 read bandwidth, field 48 write bandwidth (KiB/s)
    if [ "$1" = read ]; then echo "$out" | awk -F';' '{printf "%.1f", $7 / 1024}'
    else echo "$out" | awk -F';' '{printf "%.1f", $48 / 1024}'; fi
}

fio_set() { # QD REP
    local e rw bw
    for e in ${ENGINES//,/ }; do
        for rw in write read; do
            bw=$(fio_run "$rw" "$1" "$e")
            echo "fio-$e $rw $1 $bw" >>"$RAW"
            printf "  rep %d qd %-3s fio %-8s %-5s %8.1f MiB/s\n" "$2" "$1" "$e" "$rw" "$bw"
        done
    done
}

zinc_set() { # QD REP
    local out w rw r wait
    out=$("$BENCH" --dir "$DIR" --mib "$SIZE_MIB" --queue-depth "$1" ${CHUNK:+--chunk "$CHUNK"})
    w=$(echo "$out" | awk '/  WRITE pass/ {print $5}')
    rw=$(echo "$out" | awk '/READ_WRITE pass/ {print $5}')
    r=$(echo "$out" | awk '/  READ pass/ {print $5}')
    wait=$(echo "$out" | sed -n 's/.*blocked on IO \([0-9.]*\) s.*/\1/p')
    echo "zinc write $1 $w" >>"$RAW"
    echo "zinc read $1 $r" >>"$RAW"
    echo "zinc rw $1 $rw" >>"$RAW"
    printf "  rep %d qd %-3s zinc WRITE pass %6s MiB/s, READ pass %6s MiB/s, READ_WRITE %6s MiB/s each way" \
        "$2" "$1" "$w" "$r" "$rw"
    printf " (blocked on IO %s s of all passes)\n" "$wait"
}

echo "# laying out fio's file (untimed write)"
fio --name=layout --filename="$FIOFILE" --rw=write --bs=1M --direct=1 --iodepth=8 --size="${SIZE_MIB}M" \
    --ioengine=io_uring --output-format=terse --terse-version=3 >/dev/null

for rep in $(seq 1 "$REPS"); do
    for q in ${QDS//,/ }; do
        if [ $((rep % 2)) -eq 1 ]; then fio_set "$q" "$rep"; zinc_set "$q" "$rep"
        else zinc_set "$q" "$rep"; fio_set "$q" "$rep"; fi
    done
done

# median PROG RW QD
median() {
    awk -v p="$1" -v rw="$2" -v q="$3" '$1 == p && $2 == rw && $3 == q {print $4}' "$RAW" | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) printf "%.1f", v[(NR + 1) / 2];
             else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
range() {
    awk -v p="$1" -v rw="$2" -v q="$3" '$1 == p && $2 == rw && $3 == q {print $4}' "$RAW" | sort -g |
        awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%.0f-%.0f", lo, hi; else print "-"}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "-") printf "%.2f", a / b; else print "-"}'; }

echo
echo "## medians of $REPS runs (MiB/s; min-max in brackets); ratio = zinc / fio"
echo "| qd | direction | zinc | fio io_uring | fio libaio | zinc/fio io_uring | zinc/fio libaio |"
echo "|---|---|---|---|---|---|---|"
for q in ${QDS//,/ }; do
    for rw in write read; do
        z=$(median zinc "$rw" "$q")
        fu=$(median fio-io_uring "$rw" "$q")
        fl=$(median fio-libaio "$rw" "$q")
        echo "| $q | $rw | $z [$(range zinc "$rw" "$q")] | $fu [$(range fio-io_uring "$rw" "$q")] |" \
             "$fl [$(range fio-libaio "$rw" "$q")] | $(ratio "$z" "$fu") | $(ratio "$z" "$fl") |"
    done
    echo "| $q | zinc READ_WRITE pass, each way | $(median zinc rw "$q") [$(range zinc rw "$q")] | | | | |"
done
