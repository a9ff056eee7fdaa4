#!/usr/bin/env bash
# Formats C sources with the project's .clang-format (clang-format 14).
#   scripts/format.sh [FILE...]   format these files (default: the C files changed against HEAD)
#   scripts/format.sh --check     list the library's C files whose formatting differs; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null || { echo "format.sh: $CF not found (Debian: apt-get install clang-format)" >&2; exit 2; }
if [[ ${1:-} == --check ]]; then
  bad=0
  while IFS= read -r f; do
    if ! "$CF" "$f" | cmp -s - "$f"; then echo "$f"; bad=1; fi
  done < <(git ls-files 'base/*.[ch]' 'runtime/*.[ch]' 'zero/*.[ch]' 'offload/*.[ch]' 'amp/*.[ch]' 'kernels/*.[ch]' 'cli/*.[ch]')
  exit $bad
fi
if [[ $# -eq 0 ]]; then
  mapfile -t files < <(git diff --name-only HEAD -- '*.c' '*.h' | while read -r f; do [[ -f $f ]] && echo "$f"; done)
else
  files=("$@")
fi
[[ ${#files[@]} -eq 0 ]] || "$CF" -i "${files[@]}"
