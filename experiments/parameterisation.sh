#!/usr/bin/env bash
# Direct logits against per-seed node embeddings through the shared MLP head
# (the published parameterisation), same time budget, same seed.
# Writes experiments/parameterisation.csv and experiments/parameterisation.md.
#   experiments/parameterisation.sh            # 20 s per run
#   LIMIT=5 experiments/parameterisation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
LIMIT=${LIMIT:-20}
S=../shared/datasets
out=experiments/parameterisation.csv
echo "instance,parameterisation,dag_cost,start_cost,steps,ms_per_step,seconds_to_best" > "$out"
for f in eggcc-bril/nested_call.bril herbie/6439 rover/mcm_3_7_21_original_8iteration_egraph \
         rover/box_filter_4iteration_egraph maxsat/maxcut-140-630-0.7-1 tensat/vgg esyn/c7552 flexc/03d369d0-bb23-477a-8ea1-a452efc850fe; do
  for p in logits embedding; do
    tmp=$(mktemp)
    target/release/smoothe extract --method smoothe -q --parameterisation "$p" --time-limit "$LIMIT" -o "$tmp" "$S/$f.json" 2>/dev/null
    python3 - "$tmp" "$f" "$p" >> "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]},{sys.argv[3]},{r['dag_cost']},{r['start_cost']},{r['steps']},{r['ms_per_step']:.2f},{r['seconds_to_best']:.2f}")
PY
    rm -f "$tmp"
  done
done
python3 - "$out" "$LIMIT" > experiments/parameterisation.md <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("# Logits against embeddings\n")
print(f"Made by `experiments/parameterisation.sh` ({sys.argv[2]} s per run, seed 0, this 2-core machine).\n")
print("| instance | start | logits | embedding | logits ms/step | embedding ms/step | logits steps | embedding steps |")
print("|---|---|---|---|---|---|---|---|")
by = {(r["instance"], r["parameterisation"]): r for r in rows}
wins = {"logits": 0, "embedding": 0}
for inst in dict.fromkeys(r["instance"] for r in rows):
    l, e = by[(inst, "logits")], by[(inst, "embedding")]
    if float(l["dag_cost"]) < float(e["dag_cost"]): wins["logits"] += 1
    if float(e["dag_cost"]) < float(l["dag_cost"]): wins["embedding"] += 1
    print(f"| {inst} | {float(l['start_cost']):.6g} | {float(l['dag_cost']):.6g} | {float(e['dag_cost']):.6g} | "
          f"{l['ms_per_step']} | {e['ms_per_step']} | {l['steps']} | {e['steps']} |")
print(f"\nStrictly better: logits on {wins['logits']}, embedding on {wins['embedding']}.")
PY
echo "wrote $out and experiments/parameterisation.md"
