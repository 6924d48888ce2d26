#!/usr/bin/env bash
# The loop's final models frozen under several trust-region charges, measured:
# runs on the run directories frozen_start.sh left (RUNS=its NAME), so run
# that first. Writes experiments/NAME.csv and NAME.md (NAME=frozen_trust).
#   NAME=frozen_decoupled BEFORE=frozen_start.csv frozen_start.sh && frozen_trust.sh
#   TRUSTS="1 0.3" RUNS=frozen_decoupled frozen_trust.sh
#   python3 experiments/frozen_trust.py --report     # redraw the table only
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/frozen_trust.py "$@"
