#!/usr/bin/env bash
# The held-out oracle: ABC mapped area with lib2.genlib beside it instead of
# examples/oracles/cells.genlib (same flow: strash; dch; map -a).
#   abc_area_lib2.sh EGRAPH.json EXTRACTION.json   -> prints the area
# ABC=... and SMOOTHE=... as for examples/oracles/abc_metrics.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
smoothe="${SMOOTHE:-$here/../../target/release/smoothe}"
abc="${ABC:-$(command -v berkeley-abc || command -v yosys-abc || command -v abc || true)}"
[ -n "$abc" ] || { echo "ABC not found: apt-get install berkeley-abc, or set ABC" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$smoothe" export --format blif -o "$tmp/design.blif" "$1" "$2"
out="$("$abc" -c "read_library $here/lib2.genlib; read_blif $tmp/design.blif; strash; dch; map -a; print_stats" 2>&1)"
area="$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -o 'area *= *[0-9.eE+-]*' | tail -n 1 | sed 's/.*= *//')"
[ -n "$area" ] || { printf 'no area in ABC output:\n%s\n' "$out" >&2; exit 1; }
printf '%s\n' "$area"
