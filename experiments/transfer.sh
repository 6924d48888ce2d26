#!/usr/bin/env bash
# Transfer of one corpus model to designs it was not trained on, with the
# ABC area oracle: leave-one-out zero-call extraction on the esyn circuits
# (and boole/mul16) against greedy, dag-greedy and linear SmoothE, and
# fine-tuning with 30 calls against a model from scratch. Writes
# experiments/transfer.csv, transfer.md and transfer.svg.
#   experiments/transfer.sh                  # seed 0, budget 100, 30 calls to fine-tune
#   SHIP=1 experiments/transfer.sh           # also copy the corpus model to models/esyn-abc-area.*
#   python3 experiments/transfer.py --report # redraw the table and plot only
#   NAME=transfer-lib2 ORACLE=experiments/oracles/abc_area_lib2.sh experiments/transfer.sh
#                                            # the same with a cell library held out from development
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/transfer.py "$@"
