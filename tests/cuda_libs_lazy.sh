#!/bin/sh
# A build with the CUDA backend neither needs nor maps a CUDA library until a GPU is used (issue 15).
#
#   cuda_libs_lazy.sh needed LIBZINC ZINC_CLI
#     No NEEDED entry of either names the CUDA runtime, cuBLAS(Lt), NCCL or the driver (readelf -d); neither
#     leaves a CUDA, cuBLAS or NCCL function to be bound at run time (nm -D), so nothing can pull one in
#     lazily; libzinc exports none of its private static CUDA runtime.
#   cuda_libs_lazy.sh maps ZINC_CLI MAPS_AT_EXIT_SO MPI_INIT_ONLY SOURCE_DIR [LIBCUDA_STUB]
#     CPU training runs of the CLI's MLP (device cpu, and device auto: what a user without
#     ZINC_EXPERIMENTAL_CUDA gets) with maps_at_exit.c preloaded: no libcudart, libcublas(Lt), libnccl or
#     libcuda is mapped when the run ends. With LIBCUDA_STUB (the toolkit's stubs/libcuda.so) the driver's
#     name libcuda.so.1 is made loadable, so a CUDA runtime call on the way would map it and fail the test.
#     The maps must show libmpi, or the capture itself failed. CUDA libraries that MPI maps on
#     its own (MPI_INIT_ONLY: MPI_Init and MPI_Finalize under the same conditions; a CUDA-aware MPI may
#     load the driver) are named and not counted against zinc. A third run (device cpu) starts
#     the CLI through its ELF interpreter with --inhibit-cache: libraries found only through ld.so.cache
#     (the CUDA toolkit's, where it is installed outside the system folders) cannot be found, as on a
#     machine without them, and the run must still train.
# In a build without the CUDA backend both hold trivially (there is no CUDA code); they still run.
set -u
bad='lib(cudart|cublas|cublasLt|nccl|cuda)\.so'
mode=$1; shift
case $mode in
needed)
    fails=0
    for f in "$@"; do
        need=$(readelf -d "$f" | grep NEEDED | grep -E "$bad")
        undef=$(nm -D --undefined-only "$f" | grep -E ' (cuda|__cuda|cublas|nccl)[A-Za-z_]')
        if [ -n "$need" ] || [ -n "$undef" ]; then
            echo "FAIL $f needs CUDA libraries at load time:"; echo "$need"; echo "$undef" | head -20
            fails=$((fails + 1))
        fi
        case $f in *libzinc*)
            exported=$(nm -D --defined-only "$f" | grep -E ' T (cuda|__cuda)[A-Za-z_]')
            if [ -n "$exported" ]; then
                echo "FAIL $f exports its CUDA runtime:"; echo "$exported" | head -5; fails=$((fails + 1))
            fi;;
        esac
        echo "$f: NEEDED $(readelf -d "$f" | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
    done
    [ $fails -eq 0 ] && echo "no CUDA library needed at load time"
    exit $((fails != 0));;
maps)
    zinc=$1; preload=$2; mpi_only=$3; src=$4; stub=${5:-}
    dir=$(mktemp -d) || exit 1
    trap 'rm -rf "$dir"' EXIT
    if [ -n "$stub" ] && [ -f "$stub" ]; then
        mkdir "$dir/driver" && ln -s "$stub" "$dir/driver/libcuda.so.1"
        LD_LIBRARY_PATH="$dir/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LD_LIBRARY_PATH
        echo "libcuda.so.1 loadable from $dir/driver (the toolkit's stub)"
    fi
    ZINC_MAPS_OUT="$dir/maps-mpi.txt" LD_PRELOAD=$preload "$mpi_only" > "$dir/log-mpi.txt" 2>&1 ||
        { echo "FAIL: $mpi_only (MPI_Init and MPI_Finalize) failed:"; cat "$dir/log-mpi.txt"; exit 1; }
    mpi_cuda=$(grep -E "/$bad" "$dir/maps-mpi.txt" | awk '{print $NF}' | sort -u)
    [ -n "$mpi_cuda" ] && echo "MPI maps these on its own (not counted):" && echo "$mpi_cuda"
    fails=0
    interp=$(readelf -l "$zinc" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
    runs="cpu auto"
    "$interp" --help 2>/dev/null | grep -q -- --inhibit-cache && runs="$runs no-ld.so.cache"
    for run in $runs; do
        device=$run; launch=""
        [ "$run" = no-ld.so.cache ] && device=cpu && launch="$interp --inhibit-cache"
        out="$dir/maps-$run.txt"
        ZINC_MAPS_OUT=$out LD_PRELOAD=$preload $launch "$zinc" train --config "$src/ds_configs/zero2_fp16.json" \
            --steps 3 --device "$device" --threads 1 > "$dir/log-$run.txt" 2>&1
        rc=$?
        if [ $rc -ne 0 ] || ! [ -s "$out" ]; then
            echo "FAIL $run: exit $rc, maps captured: $([ -s "$out" ] && echo yes || echo no)"
            tail -20 "$dir/log-$run.txt"; fails=$((fails + 1)); continue
        fi
        # the zinc program links the library statically (zinc_internal): libmpi shows the capture works
        if ! grep -q 'libmpi\.so' "$out"; then
            echo "FAIL $run: the maps show no libmpi: the capture is broken"
            fails=$((fails + 1)); continue
        fi
        cuda=$(grep -E "/$bad" "$out" | awk '{print $NF}' | sort -u | grep -vxF "${mpi_cuda:-/}")
        if [ -n "$cuda" ]; then
            echo "FAIL $run: a CPU run mapped CUDA libraries:"; echo "$cuda"; fails=$((fails + 1))
        else
            echo "ok   $run: $(awk '$NF ~ /\.so/ {print $NF}' "$out" | sort -u | wc -l) files mapped, no CUDA library"
        fi
    done
    exit $((fails != 0));;
esac
echo "usage: $0 needed FILE... | maps ZINC_CLI MAPS_AT_EXIT_SO MPI_INIT_ONLY SOURCE_DIR [LIBCUDA_STUB]"; exit 2
