#!/usr/bin/env bash
# Ablation of the learned-cost loop against model-free search at equal
# oracle calls, with the ABC area oracle, on the esyn circuits and
# boole/mul16 of ../shared/datasets. Writes experiments/ablation.csv,
# ablation_curves.csv, ablation.md and ablation.svg.
#   experiments/ablation.sh                               # 3 seeds, 300 calls
#   SEEDS="0" CIRCUITS="esyn/mul3" experiments/ablation.sh
#   KEEP=1 SEEDS="1" experiments/ablation.sh              # add a seed to the last results
#   python3 experiments/ablation.py --report              # redraw the table and plot only
#   experiments/ablation.sh --refreeze                    # redo only the frozen extractions
#   METHODS="loop" experiments/ablation.sh                # rerun the loop, keep the other methods' logs
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/ablation.py "$@"
