#!/usr/bin/env bash
# A frozen model with and without the measurements it keeps (the real cost
# of every feature row it labelled), on the loop's final models, with the
# ABC area oracle. Writes experiments/measured.csv and measured.md.
#   experiments/measured.sh                                # seed 0, 300 calls, every circuit
#   SEEDS="0 1" CIRCUITS="esyn/mul3" experiments/measured.sh
#   NAME=measured-delay METRIC=delay ORACLE=experiments/oracles/abc_delay.sh experiments/measured.sh
#   python3 experiments/measured.py --report               # redraw the table only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/measured.py "$@"
