#!/usr/bin/env bash
# A real cost oracle: mapped standard-cell area by ABC.
#   abc_area.sh EGRAPH.json EXTRACTION.json   -> prints the area
# The area of abc_metrics.sh beside it, mapped for area after ABC's own
# restructuring (`strash; dch; map -a`, with cells.genlib); see there for
# ABC=... and SMOOTHE=...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
metrics="$(ABC_SCRIPT='strash; dch; map -a' "$here/abc_metrics.sh" "$1" "$2")"
printf '%s\n' "$metrics" | sed -n 's/.*"area": *\([0-9.eE+-]*\).*/\1/p'
