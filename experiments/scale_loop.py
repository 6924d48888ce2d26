#!/usr/bin/env python3
"""The scale_loop.sh study: see that script. Writes scale_loop.csv and
scale_loop.md; its scratch (model, label log, rounds) goes to
experiments/out/scale_loop/."""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "smoothe"
CACHE = Path(os.environ.get("SCALE_CACHE", Path.home() / ".cache" / "smoothe-scale"))
GRAPH = Path(os.environ.get("GRAPH", CACHE / "mul8-100000.json"))
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
             f"Made by `experiments/scale_loop.sh` on this 2-core machine: `train-cost --oracle {ORACLE} --budget"
             f" {BUDGET} --jobs {JOBS}` on `{GRAPH.name}` ({nodes} e-nodes, made by `experiments/scale.sh`;"
             " the command that made it is beside it in the cache).", "",
             f"- Whole command: {wall:.0f} s wall ({wall / 60:.1f} min); rounds: {len(rows)}.",
             f"- Waiting for labels (export and ABC, two at a time): {labelling:.0f} s, {100 * labelling / total:.0f}%"
             " of the rounds' time.",
             f"- Fitting the model: {fitting:.0f} s, {100 * fitting / total:.0f}%.",
             f"- The rest (SmoothE's starts and optima, the model-guided search, features): {total - labelling - fitting:.0f}"
             f" s, {100 * (total - labelling - fitting) / total:.0f}%.",
             f"- Best real area {rows[-1]['best_real_cost']:g}; greedy {first.get('greedy_real_cost')},"
             f" dag-greedy {first.get('dag_greedy_real_cost')}, linear SmoothE {first.get('linear_smoothe_real_cost')}.",
             "", "| round | labels | calls | best real | seconds | labelling s | fitting s |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['labels']} | {r['oracle_calls']} | {r['best_real_cost']:g} | {r['seconds']} |"
              f" {r['label_seconds']} | {r['fit_seconds']} |" for r in rows]
    (ROOT / "experiments" / "scale_loop.md").write_text("\n".join(lines) + "\n")
    print("wrote experiments/scale_loop.csv and scale_loop.md", file=sys.stderr)


if __name__ == "__main__":
    main()
