#!/usr/bin/env bash
# Installs the Debian packages zinc needs to build, test and benchmark. Idempotent: only missing packages
# are installed, and it says which. Works as root or through sudo.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --bench  also fio (the NVMe benchmark against fio)
set -euo pipefail

pkgs=(build-essential cmake pkg-config libjansson-dev liburing-dev libopenmpi-dev openmpi-bin python3 python3-venv
      libopenblas-dev libsleef-dev protobuf-c-compiler libprotobuf-c-dev libdnnl2)
# A one-node Slurm for tests/test_slurm.py (srun, zinc launch inside salloc): ~12 MB installed, the test starts
# its own daemons (the packages' services are not used or configured).
pkgs+=(munge slurmctld slurmd slurm-client)
# gnuplot draws `zinc mem plot` and `zinc trace plot`; their tests skip without it, so CI installs it.
pkgs+=(gnuplot-nox)
if [[ "${1:-}" == "--bench" ]]; then pkgs+=(fio); fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present (${pkgs[*]})"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
