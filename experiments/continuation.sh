#!/usr/bin/env bash
# Does a frozen model's search gain from starting under a weaker trust
# charge? `extract --model --continuation SHARES` on the final models of an
# ablation run (the loop's, and those fitted to the sampler's and random
# picks' labels), each extraction measured by the ABC area oracle. Writes
# experiments/continuation.csv and continuation.md. Needs the ablation's runs
# (experiments/out/ablation-twinfree, from
# `NAME=ablation-twinfree SEEDS=0 experiments/ablation.sh`).
#   experiments/continuation.sh
#   ARMS="none 0.1,0.3" CIRCUITS="esyn/mul3" experiments/continuation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 experiments/continuation.py "$@"
