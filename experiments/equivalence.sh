#!/usr/bin/env bash
# Same seed, same threads, same answers: runs a fixed set of step-bounded
# commands (linear SmoothE, the learned loop with the toy oracle and with
# ABC area and delay, frozen extraction, search) with one binary and writes
# their results to OUT/raw. Run it with the build before a refactor and
# after, then compare the two with equivalence.py (which ignores times and
# paths):
#   BIN=/tmp/before/smoothe OUT=/tmp/eq-before experiments/equivalence.sh
#   OUT=/tmp/eq-after experiments/equivalence.sh
#   experiments/equivalence.py /tmp/eq-before /tmp/eq-after
# Needs ABC for the area-and-delay loop (skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BIN:-target/release/smoothe}"
out="${OUT:?set OUT to a folder}"
rm -rf "$out" && mkdir -p "$out/raw"
export SMOOTHE="$(realpath "$bin")"
run() { "$bin" "$@" -q --threads 1 2>>"$out/raw/stderr.log"; }
c432=../shared/datasets/esyn/C432.json
for f in datasets/esyn/mul3.json "$c432" datasets/diospyros/vector_mac_root_21.json; do
  [ -f "$f" ] || continue
  g="${f#*datasets/}"; g="${g%.json}"
  n="${g//\//_}"
  run extract --method smoothe --steps 150 --time-limit 0 --seed 0 "$f" -o "$out/raw/$n.smoothe.json"
done
run extract --model models/esyn-abc-area.safetensors --seed 0 --steps 150 --time-limit 0 "$c432" -o "$out/raw/corpus-frozen.json"
run train-cost --oracle examples/oracles/toy.py --budget 48 --initial 16 --rounds 2 --per-round 16 --seed 0 --steps 150 --time-limit 0 --out "$out/raw/toy.safetensors" datasets/esyn/mul3.json
run extract --model "$out/raw/toy.safetensors" --seed 0 --steps 150 --time-limit 0 datasets/esyn/mul3.json -o "$out/raw/toy-frozen.json"
run search --oracle examples/oracles/toy.py --budget 30 --seed 0 --labels "$out/raw/search.labels.jsonl" datasets/esyn/mul3.json -o "$out/raw/search.json"
if command -v berkeley-abc >/dev/null || command -v yosys-abc >/dev/null; then
  run train-cost --oracle examples/oracles/abc_metrics.sh --metric area,delay --budget 48 --initial 16 --rounds 2 --per-round 16 --seed 0 --steps 150 --time-limit 0 --out "$out/raw/timed.safetensors" datasets/esyn/mul3.json
  run extract --model "$out/raw/timed.safetensors" --objective area --constraint 'delay<=12' --seed 0 --steps 150 --time-limit 0 datasets/esyn/mul3.json -o "$out/raw/timed-frozen.json"
fi
ls "$out/raw"
