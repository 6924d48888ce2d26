#!/usr/bin/env bash
# The fixed-point cap inside cyclic components: SmoothE at several
# --max-sweeps on shared e-graphs with cyclic components and on the
# saturated e-graphs that scale.sh caches. Writes experiments/sweeps.csv
# and experiments/sweeps.md.
#   experiments/sweeps.sh                        # caps 10, 4 and 2
#   CAPS="10 4" LIMIT=10 experiments/sweeps.sh
#   REPORT=1 experiments/sweeps.sh               # redraw sweeps.md only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/sweeps.py
