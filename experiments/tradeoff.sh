#!/usr/bin/env bash
# Area under a delay target with learned per-operator delays, against the
# baselines' (area, delay) points; see experiments/tradeoff.py for what is
# measured and the settings (CIRCUITS, SEEDS, FLOW, NAME, LIMIT, SAMPLES, PAR).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/tradeoff.py "$@"
