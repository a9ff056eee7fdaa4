#!/usr/bin/env bash
# Lines of zinc glue in an example: the lines between its "zinc glue" and "end of zinc glue" markers, plus
# the lines outside them that call zinc (zinc_ or a glue function cnn_zinc_ / the CK macro), without blank
# lines and comments. The measure issue 41 states its goal in (a darknet wrap in at most 50 lines).
#   scripts/count_glue.sh FILE [MAX]     prints the count; with MAX exits 1 when the count is above it
set -euo pipefail
file=${1:?usage: scripts/count_glue.sh FILE [MAX]}
max=${2:-}
[ -r "$file" ] || { echo "count_glue.sh: cannot read $file" >&2; exit 2; }
count=$(awk '
  /end of zinc glue/ { glue = 0; next }
  /zinc glue \*\//    { glue = 1; next }
  /^[ \t]*$/          { next }
  incomment           { if ($0 ~ /\*\//) incomment = 0; next }
  /^[ \t]*\/\*/       { if ($0 !~ /\*\//) incomment = 1; next }
  glue                { n++; next }
  /zinc_|CK\(/        { n++ }
  END                 { print n + 0 }' "$file")
echo "$count"
if [ -n "$max" ] && [ "$count" -gt "$max" ]; then
  echo "count_glue.sh: $file has $count lines of zinc glue, above $max" >&2
  exit 1
fi
