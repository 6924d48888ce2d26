#!/usr/bin/env bash
# SmoothE (linear cost) against the greedy baselines on every suite in
# ../shared/datasets. Writes experiments/linear.csv and experiments/linear.md.
#   experiments/linear.sh                 # 30 s limit per instance
#   LIMIT=10 SUITES="rover tensat" experiments/linear.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/linear.py
