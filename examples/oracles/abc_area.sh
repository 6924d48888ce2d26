#!/usr/bin/env bash
# A real cost oracle: mapped standard-cell area by ABC.
#   abc_area.sh EGRAPH.json EXTRACTION.json   -> prints the area
# The area of abc_metrics.sh beside it (`strash; dch; map -a; print_stats -p`
# in ABC with cells.genlib); see there for ABC=... and SMOOTHE=...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
metrics="$("$here/abc_metrics.sh" "$1" "$2")"
printf '%s\n' "$metrics" | sed -n 's/.*"area": *\([0-9.eE+-]*\).*/\1/p'
