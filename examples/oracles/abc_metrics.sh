#!/usr/bin/env bash
# A real cost oracle with several metrics, measured by ABC after mapping:
#   abc_metrics.sh EGRAPH.json EXTRACTION.json
#   -> {"area": A, "delay": D, "power": P}
# Pick one with `--metric area|delay|power`. Writes the extraction as BLIF
# with `smoothe export`, then maps it in ABC with cells.genlib and prints
# its statistics (power is ABC's switching-activity estimate). The netlist
# keeps each chosen e-node's operand order (older smoothe builds sorted the
# operands, so their labels, mapped from other netlists, are kept apart by
# this line's place in the oracle's identity). The default
# flow, `strash; map`, maps the structure as extracted, delay-oriented with
# area recovery. ABC_SCRIPT=... substitutes another flow, for example a
# restructuring one: put it in the oracle's command line so the label log
# keeps the flows apart:
#   --oracle "ABC_SCRIPT='strash; dch; map' examples/oracles/abc_metrics.sh"
# Needs ABC: Debian's berkeley-abc (or yosys-abc); set ABC=... to choose,
# and SMOOTHE=... for the smoothe binary (default: this checkout's release
# build).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
smoothe="${SMOOTHE:-$here/../../target/release/smoothe}"
abc="${ABC:-$(command -v berkeley-abc || command -v yosys-abc || command -v abc || true)}"
[ -n "$abc" ] || { echo "ABC not found: apt-get install berkeley-abc, or set ABC" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$smoothe" export --format blif -o "$tmp/design.blif" "$1" "$2"
script="${ABC_SCRIPT:-strash; map}"
out="$("$abc" -c "read_library $here/cells.genlib; read_blif $tmp/design.blif; $script; print_stats -p" 2>&1)"
stats="$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep 'area *=' | tail -n 1)"
metric() { printf '%s\n' "$stats" | grep -o "$1 *= *[0-9.eE+-]*" | sed 's/.*= *//'; }
area="$(metric area)" delay="$(metric delay)" power="$(metric power)"
if [ -z "$area" ] || [ -z "$delay" ] || [ -z "$power" ]; then
  printf 'no area, delay and power in ABC output:\n%s\n' "$out" >&2
  exit 1
fi
printf '{"area": %s, "delay": %s, "power": %s}\n' "$area" "$delay" "$power"
