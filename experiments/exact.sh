#!/usr/bin/env bash
# Certified extraction (issue 54): --method ilp, auto and smoothe at one time
# limit on every shared e-graph; resumable. Writes experiments/exact.csv and
# experiments/exact.md.
#   experiments/exact.sh                                   # 60 s per run
#   LIMIT=600 METHODS=ilp UNPROVEN=1 SUITES="esyn tensat rover maxsat set" experiments/exact.sh
#   REPORT=1 experiments/exact.sh                          # redraw exact.md only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/exact.py
