#!/usr/bin/env bash
# The loop's final model frozen against linear SmoothE, after the loop began
# to label extract --model's own linear-SmoothE start: the loop at its
# defaults (300 calls), extract --model and extract --method smoothe at
# theirs, both measured, against an earlier ablation's frozen and linear
# results at the same seeds. Writes experiments/NAME.csv and NAME.md
# (NAME=frozen_start by default).
#   experiments/frozen_start.sh                                  # ABC area, seed 0, against selection_gp.csv
#   NAME=frozen_start-aig METRIC="AIG size" ORACLE=experiments/oracles/abc_aig.sh BEFORE=ablation-aig.csv experiments/frozen_start.sh
#   python3 experiments/frozen_start.py --report                 # redraw the table only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/frozen_start.py "$@"
