#!/usr/bin/env bash
# How time and memory grow with e-graph size (issue 53): e-graphs built by
# `smoothe saturate` from ABC-generated circuits and a shipped one, at
# several node limits, cached outside git (with the command that made
# each); then load+preprocess (`info`), greedy, dag-greedy and SmoothE at
# batch 8 for 30 s on each. Writes experiments/scale.csv and scale.md.
#   experiments/scale.sh
#   SIZES="10000 100000 300000 1000000" LIMITS="30 300" CIRCUITS="mul16" experiments/scale.sh
#   KEEP=1 REDO=1 SIZES=300000 experiments/scale.sh   # SmoothE again on the cached graphs
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/scale.py
