#!/usr/bin/env python3
"""The scale_loop.sh study: see that script. Writes scale_loop.csv and
scale_loop.md; its scratch (model, label log, rounds, the frozen model's
extraction) goes to experiments/out/scale_loop/."""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("SMOOTHE_BIN", ROOT / "target" / "release" / "smoothe"))
CACHE = Path(os.environ.get("SCALE_CACHE", Path.home() / ".cache" / "smoothe-scale"))
GRAPH = Path(os.environ.get("GRAPH", CACHE / "mul32-100000.json"))
BUDGET = os.environ.get("BUDGET", "50")
JOBS = os.environ.get("JOBS", "2")
ORACLE = os.environ.get("ORACLE", "examples/oracles/abc_area.sh")
OUT = ROOT / "experiments" / "out" / "scale_loop"


def main():
    if not GRAPH.exists():
        sys.exit(f"{GRAPH} is missing: run experiments/scale.sh first")
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    model = OUT / "model.safetensors"
    cmd = [str(BIN), "train-cost", "--oracle", ORACLE, "--budget", BUDGET, "--jobs", JOBS, "--out", str(model),
           str(GRAPH)]
    print(" ".join(cmd), file=sys.stderr)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"train-cost failed:\n{proc.stderr[-3000:]}")
    rounds = json.load(open(OUT / "model.rounds.json"))
    # The frozen model's own answer, measured by the same oracle.
    frozen = OUT / "frozen.json"
    start = time.perf_counter()
    proc = subprocess.run([str(BIN), "extract", "--model", str(model), str(GRAPH), "-o", str(frozen), "-q"], cwd=ROOT,
                          capture_output=True, text=True)
    frozen_s = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"extract --model failed:\n{proc.stderr[-3000:]}")
    oracle = subprocess.run([str(ROOT / ORACLE), str(GRAPH), str(frozen)], cwd=ROOT, capture_output=True, text=True)
    frozen_area = float(oracle.stdout.strip().splitlines()[-1]) if oracle.returncode == 0 else None
    nodes = sum(1 for _ in json.load(open(GRAPH))["nodes"])
    rows = [dict(round=r["round"], labels=r["labels"], oracle_calls=r["oracle_calls"],
                 best_real_cost=r["best_real_cost"], seconds=round(r["seconds"], 2),
                 label_seconds=round(r["label_seconds"], 2), fit_seconds=round(r["fit_seconds"], 2))
            for r in rounds]
    with open(ROOT / "experiments" / "scale_loop.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    total = sum(r["seconds"] for r in rows)
    labelling = sum(r["label_seconds"] for r in rows)
    fitting = sum(r["fit_seconds"] for r in rows)
    first = rounds[0]
    lines = ["# The learned loop at size", "",
             f"Made by `experiments/scale_loop.sh` on a 2-core machine (2 cores, 24 GiB, no GPU): `train-cost --oracle {ORACLE} --budget"
             f" {BUDGET} --jobs {JOBS}` on `{GRAPH.name}` ({nodes} e-nodes, made by `experiments/scale.sh`;"
             " the command that made it is beside it in the cache).", "",
             f"- Whole command: {wall:.0f} s wall ({wall / 60:.1f} min); rounds: {len(rows)}.",
             f"- Waiting for labels (export and ABC, two at a time): {labelling:.0f} s, {100 * labelling / total:.0f}%"
             " of the rounds' time.",
             f"- Fitting the model: {fitting:.0f} s, {100 * fitting / total:.0f}%.",
             f"- The rest (SmoothE's starts and optima, the model-guided search, features): {total - labelling - fitting:.0f}"
             f" s, {100 * (total - labelling - fitting) / total:.0f}%.",
             f"- Best real area {rows[-1]['best_real_cost']:g}; greedy {first.get('greedy_real_cost')},"
             f" dag-greedy {first.get('dag_greedy_real_cost')}, linear SmoothE {first.get('linear_smoothe_real_cost')},"
             f" the input circuit {first.get('circuit_real_cost')}.",
             f"- `extract --model` (the frozen model, no oracle call): {frozen_s:.0f} s; its extraction measured"
             f" {frozen_area} by the same oracle, against {min(first['greedy_real_cost'], first['dag_greedy_real_cost']):g}"
             " for the better of greedy and dag-greedy.",
             "", "| round | labels | calls | best real | seconds | labelling s | fitting s |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['labels']} | {r['oracle_calls']} | {r['best_real_cost']:g} | {r['seconds']} |"
              f" {r['label_seconds']} | {r['fit_seconds']} |" for r in rows]
    (ROOT / "experiments" / "scale_loop.md").write_text("\n".join(lines) + "\n")
    print("wrote experiments/scale_loop.csv and scale_loop.md", file=sys.stderr)


if __name__ == "__main__":
    main()
