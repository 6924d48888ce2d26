#!/usr/bin/env bash
# The loop for its first 200 calls, then model-screened annealing resumed
# from its best label for the last 100 (`search --screen 32` on its log),
# against the ablation's methods at equal calls. Writes experiments/polish.csv
# and polish.md. Compares with the ablation's label logs of the same seeds
# (experiments/out/ablation-twinfree, from
# `NAME=ablation-twinfree SEEDS=0 experiments/ablation.sh`); for a seed the
# ablation did not run, it runs the loop itself.
#   experiments/polish.sh                         # seed 0, every ablation circuit
#   SEEDS="0 1 2" experiments/polish.sh           # what polish.md holds
#   SEEDS="0 1" ABLATION=ablation experiments/polish.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/polish.py "$@"
