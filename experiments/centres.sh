#!/usr/bin/env bash
# Frozen extraction with the trust region measured to every labelled row
# or centred on the rows the model scores cheapest (`extract --centres N`),
# on the final models the ablation and polish experiments left in
# experiments/out (run those first). Writes experiments/centres.csv and
# centres.md.
#   experiments/centres.sh
#   CENTRES="0 8" ABLATION=ablation experiments/centres.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/centres.py "$@"
