#!/usr/bin/env bash
# The loop ranking its screened pool by a Gaussian process over the
# extractions themselves (`--acquisition selection-gp`: a Hamming kernel on
# the choices) instead of the ensemble, against the loop and the model-free
# methods of novelty.csv at equal calls. Writes experiments/selection_gp.csv
# and selection_gp.md.
#   experiments/selection_gp.sh               # seeds 0 1 2, every circuit
#   SEEDS=0 CIRCUITS="esyn/mul3" experiments/selection_gp.sh
#   KEEP=1 SEEDS="1 2" experiments/selection_gp.sh   # add seeds to the last CSV
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/selection_gp.py "$@"
