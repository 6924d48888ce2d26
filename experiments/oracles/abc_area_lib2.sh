#!/usr/bin/env bash
# The held-out oracle: ABC mapped area with lib2.genlib beside it instead of
# examples/oracles/cells.genlib. It runs the shipped abc_metrics.sh (same
# flow: strash; dch; map -a) from a scratch folder where lib2.genlib is its
# cells.genlib, and prints the area.
#   abc_area_lib2.sh EGRAPH.json EXTRACTION.json   -> prints the area
# ABC=... and SMOOTHE=... as for examples/oracles/abc_metrics.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SMOOTHE="${SMOOTHE:-$here/../../target/release/smoothe}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$here/../../examples/oracles/abc_metrics.sh" "$tmp/abc_metrics.sh"
cp "$here/lib2.genlib" "$tmp/cells.genlib"
metrics="$(ABC_SCRIPT='strash; dch; map -a' "$tmp/abc_metrics.sh" "$1" "$2")"
printf '%s\n' "$metrics" | sed -n 's/.*"area": *\([0-9.eE+-]*\).*/\1/p'
