#!/usr/bin/env bash
# Whether a model's error bar holds: refits the loops' final models on their
# own label logs (no oracle call) and checks, on their test splits and on
# their frozen picks (trust 1 and 0, measured here), how often the real cost
# lies within two ensemble spreads and within two expected errors. Uses the
# run directories of out/RUNS (frozen_start.sh's and frozen_trust.sh's
# layout; RUNS=frozen_decoupled by default) and makes what a run lacks: the
# 300-call loop at its defaults and the frozen picks. Writes
# experiments/NAME.csv and NAME.md (NAME=calibration).
#   CIRCUITS="esyn/mul3 esyn/C432" SEEDS="0 1" experiments/calibration.sh
#   python3 experiments/calibration.py --report     # redraw the table only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/calibration.py "$@"
