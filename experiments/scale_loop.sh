#!/usr/bin/env bash
# The learned loop at size (issue 53): `train-cost` with the ABC area oracle
# on a saturated e-graph of about 100k e-nodes (mul32 by default: `CIRCUITS=
# mul32 SIZES=100000 experiments/scale.sh` makes it), 50 calls, two oracle
# jobs at a time; where its time goes, round by round (rounds.json records
# each round's wall seconds and the seconds spent waiting for labels); then
# `extract --model` with the frozen model, measured by the same oracle.
# Needs the scale cache and ABC.
#   experiments/scale_loop.sh
#   GRAPH=~/.cache/smoothe-scale/mul16-100000.json BUDGET=50 experiments/scale_loop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/scale_loop.py
