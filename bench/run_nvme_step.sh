#!/bin/bash
# The optimizer step with NVMe offload (bench_nvme_step: real Adam over a READ_WRITE pass of the on-disk
# optimizer state) against its floor, floor = read_bytes / fio read bandwidth + write_bytes / fio write
# bandwidth, with fio measured on the same file system at the same block size (1 MiB) and queue depth,
# right before every step and after the last one (bench_nvme_step --between runs this script's --fio-pair
# mode), because the virtual disk's bandwidth drifts by 2x over the minutes such a run takes. Each step is
# compared with the mean of the floors measured just before and just after it.
#
#   bench/run_nvme_step.sh [N] [CHUNK] [STEPS]
#
# N default 1e9 parameters (12 GB of fp32 master + m + v on disk, 24 GB moved per step), CHUNK
# (sub_group_size) default 1e8, STEPS default 3. Environment: BUILD (default <repo>/build-bench), BENCH
# (default $BUILD/bench/bench_nvme_step), DIR (default $BUILD/nvme_bench), QD (default 8), ENGINE (fio's
# ioengine, default io_uring), FIO_MIB (fio file size, default 12 x N bytes: what one step reads and
# writes in each direction), THREADS (Adam's threads, default all), EXTRA (more bench_nvme_step options).
# fio: --rw=write then --rw=read, --bs=1M --direct=1 --iodepth=QD --numjobs=1 --size=FIO_MIB M, one file
# laid out first by an untimed write (so the timed writes overwrite, as the step does). Data files are
# removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
MODE=${1:-}
if [ "$MODE" = --fio-pair ]; then set -- ; fi
N=${1:-1e9}
CHUNK=${2:-1e8}
STEPS=${3:-3}
BUILD=${BUILD:-$root/build-bench}
BENCH=${BENCH:-$BUILD/bench/bench_nvme_step}
DIR=${DIR:-$BUILD/nvme_bench}
QD=${QD:-8}
ENGINE=${ENGINE:-io_uring}
THREADS=${THREADS:-0}
EXTRA=${EXTRA:-}
FIO_MIB=${FIO_MIB:-$(awk -v n="$N" 'BEGIN {printf "%d", 12 * n / 1048576}')}

command -v fio >/dev/null || { echo "fio not found: apt-get install -y fio (scripts/install-deps.sh --bench)" >&2; exit 1; }
[ -x "$BENCH" ] || { echo "$BENCH not found: build zinc first" >&2; exit 1; }
mkdir -p "$DIR"
FIOFILE="$DIR/fio-step.dat"
cleanup() { rm -f "$FIOFILE" "${TMPOUT:-}"; rmdir "$DIR" 2>/dev/null || true; }
[ "$MODE" = --fio-pair ] || trap cleanup EXIT

[ "$MODE" = --fio-pair ] || {
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "$(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)," \
     "$(awk '/MemAvailable/ {printf "%.1f GiB available", $2/1048576}' /proc/meminfo)"
echo "# file system: $(findmnt -n -T "$DIR" -o SOURCE,FSTYPE,OPTIONS | tr -s ' '), $(df -h --output=avail "$DIR" | tail -1 | tr -d ' ') free"
echo "# $(fio --version); $BENCH"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ); N=$N chunk=$CHUNK steps=$STEPS qd=$QD fio ${ENGINE} ${FIO_MIB} MiB"
}

fio_bw() { # RW -> MiB/s
    local out
    out=$(fio --name=seq --filename="$FIOFILE" --rw="$1" --bs=1M --direct=1 --iodepth="$QD" --numjobs=1 \
              --size="${FIO_MIB}M" --ioengine="$ENGINE" --output-format=terse --terse-version=3)
    if [ "$1" = read ]; then echo "$out" | awk -F';' '{printf "%.1f", $7 / 1024}'
    else echo "$out" | awk -F';' '{printf "%.1f", $48 / 1024}'; fi
}

if [ "$MODE" = --fio-pair ]; then # called by bench_nvme_step --between
    w=$(fio_bw write); r=$(fio_bw read)
    echo "fio round ${ZINC_BENCH_ROUND:-?}: write $w MiB/s, read $r MiB/s"
    exit 0
fi

echo "# laying out fio's file (untimed write of ${FIO_MIB} MiB)"
fio --name=layout --filename="$FIOFILE" --rw=write --bs=1M --direct=1 --iodepth="$QD" --size="${FIO_MIB}M" \
    --ioengine="$ENGINE" --output-format=terse --terse-version=3 >/dev/null
export FIOFILE QD ENGINE FIO_MIB DIR
TMPOUT=$(mktemp)
echo "## $BENCH --dir $DIR --n $N --chunk $CHUNK --steps $STEPS --queue-depth $QD --threads $THREADS" \
     "--between '$here/run_nvme_step.sh --fio-pair' $EXTRA"
"$BENCH" --dir "$DIR" --n "$N" --chunk "$CHUNK" --steps "$STEPS" --queue-depth "$QD" --threads "$THREADS" \
    --between "$here/run_nvme_step.sh --fio-pair" $EXTRA | tee "$TMPOUT"

echo
echo "## per step: floor = read_bytes / fio read + write_bytes / fio write, from the fio rounds just before"
echo "## and just after the step; ratio = step time / mean of the two floors"
awk '
/^fio round/ { k = $3 + 0; w[k] = $5; r[k] = $8; nr = k > nr ? k : nr }
/^  step [0-9]+:/ { s = $2 + 0; sub(":", "", s); rb[s] = $4; wb[s] = $7; t[s] = $10; ns = s > ns ? s : ns }
function floor_of(k, s) { return rb[s] / (r[k] * 1048576 / 1e9) + wb[s] / (w[k] * 1048576 / 1e9) }
END {
    printf "| step | time (s) | GB moved | fio before: read / write MiB/s | fio after: read / write MiB/s |"
    printf " floor before / after (s) | step / mean floor |\n|---|---|---|---|---|---|---|\n"
    for (s = 1; s <= ns; s++) {
        fb = floor_of(s, s); fa = floor_of(s + 1, s); fm = (fb + fa) / 2;
        printf "| %d | %.3f | %.1f | %s / %s | %s / %s | %.3f / %.3f | %.3f |\n", s, t[s], rb[s] + wb[s],
               r[s], w[s], r[s + 1], w[s + 1], fb, fa, t[s] / fm;
        ratio[s] = t[s] / fm;
    }
    # median of the per-step ratios
    n = ns; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ratio[j] < ratio[i]) { x = ratio[i]; ratio[i] = ratio[j]; ratio[j] = x }
    med = n % 2 ? ratio[(n + 1) / 2] : (ratio[n / 2] + ratio[n / 2 + 1]) / 2;
    printf "median of the per-step ratios: %.3f (target: at most 1.2)\n", med;
}' "$TMPOUT"
