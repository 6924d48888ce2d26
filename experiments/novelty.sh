#!/usr/bin/env bash
# The loop labelling one extraction per feature row, against itself before
# that change (polish.csv) and the model-free methods at equal calls
# (ablation.csv, and random picks from the new pool). Writes
# experiments/novelty.csv and novelty.md.
#   experiments/novelty.sh                    # seeds 0 1 2, every circuit
#   SEEDS=0 CIRCUITS="esyn/mul3" experiments/novelty.sh
#   KEEP=1 SEEDS="1 2" experiments/novelty.sh        # add seeds to the last CSV
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/novelty.py "$@"
