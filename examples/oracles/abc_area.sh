#!/usr/bin/env bash
# A real cost oracle: mapped standard-cell area by ABC.
#   abc_area.sh EGRAPH.json EXTRACTION.json   -> prints the area
# Writes the extraction as BLIF with `smoothe export`, then runs
# `strash; dch; map -a; print_stats` in ABC with cells.genlib.
# Needs ABC: Debian's berkeley-abc (or yosys-abc); set ABC=... to choose,
# and SMOOTHE=... for the smoothe binary (default: this checkout's release build).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
smoothe="${SMOOTHE:-$here/../../target/release/smoothe}"
abc="${ABC:-$(command -v berkeley-abc || command -v yosys-abc || command -v abc || true)}"
[ -n "$abc" ] || { echo "ABC not found: apt-get install berkeley-abc, or set ABC" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$smoothe" export --format blif -o "$tmp/design.blif" "$1" "$2"
out="$("$abc" -c "read_library $here/cells.genlib; read_blif $tmp/design.blif; strash; dch; map -a; print_stats" 2>&1)"
area="$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -o 'area *= *[0-9.eE+-]*' | tail -n 1 | sed 's/.*= *//')"
if [ -z "$area" ]; then
  printf 'no area in ABC output:\n%s\n' "$out" >&2
  exit 1
fi
echo "$area"
