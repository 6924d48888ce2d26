#!/usr/bin/env bash
# A control oracle that operator-level features can represent: the number
# of AND nodes of the extraction's and-inverter graph after ABC's structural
# hashing (`strash; print_stats`), with no optimisation or mapping. An AND or
# an OR costs one node, a NOT none, and strash merges only identical
# structure, so the count is close to a linear function of operator counts,
# but not the one the e-graph's own node costs give (esyn: AND 2, OR 4,
# NOT 1). Experiments run it beside ABC area to tell a learned model's own
# failures from an oracle that does not follow structure.
#   abc_aig.sh EGRAPH.json EXTRACTION.json   -> prints the AND count
# ABC=... and SMOOTHE=... as for examples/oracles/abc_metrics.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
smoothe="${SMOOTHE:-$here/../../target/release/smoothe}"
abc="${ABC:-$(command -v berkeley-abc || command -v yosys-abc || command -v abc || true)}"
[ -n "$abc" ] || { echo "ABC not found: apt-get install berkeley-abc, or set ABC" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$smoothe" export --format blif -o "$tmp/design.blif" "$1" "$2"
out="$("$abc" -c "read_blif $tmp/design.blif; strash; print_stats" 2>&1)"
ands="$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -o 'and *= *[0-9]*' | tail -n 1 | sed 's/.*= *//')"
[ -n "$ands" ] || { printf 'no AND count in ABC output:\n%s\n' "$out" >&2; exit 1; }
printf '%s\n' "$ands"
