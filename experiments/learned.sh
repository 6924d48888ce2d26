#!/usr/bin/env bash
# The learned-cost loop with the ABC area oracle on the esyn and boole
# circuits of ../shared/datasets. Writes experiments/learned.csv,
# experiments/learned.md and experiments/learned_rounds.svg.
#   experiments/learned.sh                       # budget 300 per circuit
#   BUDGET=100 CIRCUITS="esyn/mul3" experiments/learned.sh
#   python3 experiments/learned.py --report      # redraw the table and plot only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/learned.py "$@"
