#!/usr/bin/env bash
# How much room the learned-cost targets of issues 8 and 9 leave: model-free
# annealing with ten times the loop's calls, and the least area any committed
# 300-call run ever measured, against the levels the targets ask for.
# Writes experiments/headroom.csv and headroom.md (about 1.5 hours on 2 cores).
#   experiments/headroom.sh                        # 3000 calls, seeds 0 1 2, every ablation circuit
#   SEEDS=0 CIRCUITS="esyn/mul3" experiments/headroom.sh
#   python3 experiments/headroom.py --report       # redraw the report only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/headroom.py "$@"
