#!/usr/bin/env bash
# From a circuit to a better circuit (issue 53): each input circuit (mul16
# from ABC's generator; the six esyn circuits as their dag-greedy
# extraction exported to BLIF) is saturated, extracted (dag-greedy,
# SmoothE, and the best of `train-cost` with the ABC area oracle), exported
# back to BLIF and proven equivalent to its input by ABC `cec`; each
# extraction's area is compared with the input mapped alone by the
# oracle's own flow. Writes experiments/roundtrip.csv and roundtrip.md.
#   experiments/roundtrip.sh
#   NAME=roundtrip-100k CIRCUITS="mul16 C432" NODE_LIMIT=100000 BUDGET=50 experiments/roundtrip.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/roundtrip.py
