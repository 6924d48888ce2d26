#!/usr/bin/env bash
# Another metric of the shipped oracle: ABC's delay after mapping
# (`strash; dch; map -a; print_stats -p` with examples/oracles/cells.genlib),
# the "delay" of the shipped abc_metrics.sh. Area-oriented mapping, so the
# delay follows the logic depth the extraction leaves to ABC.
#   abc_delay.sh EGRAPH.json EXTRACTION.json   -> prints the delay
# ABC=... and SMOOTHE=... as for examples/oracles/abc_metrics.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SMOOTHE="${SMOOTHE:-$here/../../target/release/smoothe}"
metrics="$(ABC_SCRIPT='strash; dch; map -a' "$here/../../examples/oracles/abc_metrics.sh" "$1" "$2")"
printf '%s\n' "$metrics" | sed -n 's/.*"delay": *\([0-9.eE+-]*\).*/\1/p'
