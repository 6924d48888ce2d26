#!/usr/bin/env bash
# Wall-clock time of training the corpus model (train-cost --budget 100 over
# the six esyn circuits with the ABC area oracle, oracle calls included) at
# --threads 1 and 2, with SmoothE's speed on mul3 that day. Writes
# experiments/corpus_time.csv and corpus_time.md. Run it on a quiet machine.
#   experiments/corpus_time.sh
#   THREADS=2 experiments/corpus_time.sh         # one thread count only
#   python3 experiments/corpus_time.py --report  # redraw the table only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/corpus_time.py "$@"
