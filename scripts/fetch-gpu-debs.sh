#!/usr/bin/env bash
# Downloads the Debian packages the lent GPU machine lacks (Jansson, liburing) into .deps/ (git-ignored),
# so that the device call can carry them: run once here, then name `.deps` in the call's carry.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >> .git/info/exclude 2>/dev/null || true
cd .deps
apt-get download libjansson4 libjansson-dev liburing2 liburing-dev
ls -l ./*.deb
