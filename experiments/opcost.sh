#!/usr/bin/env bash
# Per-operator costs learned within designs from a transfer run's label log,
# against that run's corpus model: held-out ranking and zero-call extraction
# by linear SmoothE with the learned costs. Adds the run's rows to
# experiments/opcost.csv and redraws opcost.md.
#   experiments/opcost.sh                                   # NAME=transfer (run transfer.sh first)
#   NAME=transfer-lib2 ORACLE=experiments/oracles/abc_area_lib2.sh experiments/opcost.sh
#   WITHIN=selection_gp experiments/opcost.sh               # costs fitted within each selection_gp.sh run
#   python3 experiments/opcost.py --report                  # redraw the tables only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/opcost.py "$@"
