#!/usr/bin/env python3
"""Learned cost loop against ABC mapped area (see learned.sh).

For each circuit: the real area of greedy, dag-greedy, linear SmoothE (as
labelled inside train-cost), of the best of BUDGET uniform random valid
extractions labelled by the same oracle, and of train-cost's best after
BUDGET oracle calls; the final model's held-out rank correlation; and the
best real area per round (plotted to learned_rounds.svg).
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"
BIN = Path(os.environ.get("SMOOTHE_BIN", ROOT / "target" / "release" / "smoothe"))
ORACLE = ROOT / "examples" / "oracles" / "abc_area.sh"
BUDGET = int(os.environ.get("BUDGET", "300"))
JOBS = int(os.environ.get("JOBS", "2"))
PAR = int(os.environ.get("PAR", "2"))
CIRCUITS = os.environ.get("CIRCUITS", "").split() or \
    [f"esyn/{p.stem}" for p in sorted((SHARED / "esyn").glob("*.json"))] + ["boole/mul16"]
OUT = ROOT / "experiments" / "out" / "learned"


def oracle(graph, extraction):
    p = subprocess.run([str(ORACLE), str(graph), str(extraction)], capture_output=True, text=True)
    return float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None


def extract(graph, method, seed, path):
    subprocess.run([str(BIN), "extract", "--method", method, "--seed", str(seed), "-q", "-o", str(path), str(graph)],
                   check=True, capture_output=True)


def random_best(graph, n, jobs):
    with tempfile.TemporaryDirectory() as d:
        def one(seed):
            path = Path(d) / f"r{seed}.json"
            extract(graph, "random", seed, path)
            return oracle(graph, path)
        with ThreadPoolExecutor(jobs) as pool:
            costs = [c for c in pool.map(one, range(n)) if c is not None]
    return min(costs) if costs else None


def run_circuit(name):
    graph = SHARED / f"{name}.json"
    stem = name.replace("/", "_")
    model = OUT / f"{stem}.safetensors"
    labels = OUT / f"{stem}.labels.jsonl"
    cmd = [str(BIN), "train-cost", "--oracle", str(ORACLE), "--budget", str(BUDGET), "--jobs", str(max(1, JOBS // PAR)),
           "-q", "--out", str(model), "--labels", str(labels), str(graph)]
    print(" ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    rounds = json.load(open(model.with_suffix(".rounds.json")))
    last = rounds[-1]
    rand = random_best(graph, BUDGET, max(1, JOBS // PAR))
    row = dict(circuit=name, greedy=last["greedy_real_cost"], dag_greedy=last["dag_greedy_real_cost"],
               linear_smoothe=last["linear_smoothe_real_cost"], best_random=rand,
               learned=last["best_real_cost"], oracle_calls=last["oracle_calls"],
               holdout_spearman=last["report"]["holdout_spearman"], holdout_mae=last["report"]["holdout_mae"])
    print(row, file=sys.stderr)
    return row, [(r["oracle_calls"], r["best_real_cost"]) for r in rounds]


def main():
    # Start from an empty label log: the budget caps the log over all runs.
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    # Circuits run PAR at a time, each with JOBS // PAR parallel oracle calls.
    with ThreadPoolExecutor(PAR) as pool:
        results = list(pool.map(run_circuit, CIRCUITS))
    rows = [r for r, _ in results]
    curves = {r["circuit"]: c for r, c in results}
    with open(ROOT / "experiments" / "learned.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    def pct(a, b):
        return "" if a is None or b is None else f"{100 * (b - a) / b:.1f}"
    lines = ["# Learned cost loop, ABC mapped area", "",
             f"Made by `experiments/learned.sh` (budget {BUDGET} oracle calls per circuit, oracle"
             " `examples/oracles/abc_area.sh`: `strash; dch; map -a` with `examples/oracles/cells.genlib`).",
             "`vs X %` is how much smaller the learned loop's area is than X's.", "",
             "| circuit | greedy | dag-greedy | linear SmoothE | best of random | learned | vs greedy % |"
             " vs dag-greedy % | vs linear % | vs random % | calls | held-out Spearman |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['circuit']} | {r['greedy']} | {r['dag_greedy']} | {r['linear_smoothe']} | {r['best_random']} |"
                     f" {r['learned']} | {pct(r['learned'], r['greedy'])} | {pct(r['learned'], r['dag_greedy'])} |"
                     f" {pct(r['learned'], r['linear_smoothe'])} | {pct(r['learned'], r['best_random'])} |"
                     f" {r['oracle_calls']} | {r['holdout_spearman']:.3f} |")
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else float("nan")
    for base in ["greedy", "dag_greedy", "linear_smoothe"]:
        gains = [100 * (r[base] - r["learned"]) / r[base] for r in rows if r[base]]
        lines.append(f"\nMean area reduction against {base}: {mean(gains):.1f}%.")
    lines.append("\nBest real area per round: `learned_rounds.svg`.")
    (ROOT / "experiments" / "learned.md").write_text("\n".join(lines) + "\n")
    svg(curves, ROOT / "experiments" / "learned_rounds.svg")


def svg(curves, path):
    """Best area per round, normalised to round 0, one line per circuit (no plotting library needed)."""
    w, h, pad = 640, 400, 50
    xs = [x for c in curves.values() for x, _ in c]
    ys = [y / c[0][1] for c in curves.values() for _, y in c if c[0][1]]
    if not xs or not ys:
        return
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    y0, y1 = y0 - 0.01, max(y1, 1.0) + 0.01
    sx = lambda x: pad + (x - x0) / max(x1 - x0, 1e-9) * (w - 2 * pad)
    sy = lambda y: h - pad - (y - y0) / max(y1 - y0, 1e-9) * (h - 2 * pad)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{pad}" y1="{h-pad}" x2="{w-pad}" y2="{h-pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h-pad}" stroke="black"/>',
             f'<text x="{w/2}" y="{h-12}" text-anchor="middle">oracle calls</text>',
             f'<text x="14" y="{h/2}" transform="rotate(-90 14 {h/2})" text-anchor="middle">best area / round-0 best</text>',
             f'<text x="{pad}" y="{h-pad+14}">{x0}</text><text x="{w-pad}" y="{h-pad+14}" text-anchor="end">{x1}</text>',
             f'<text x="{pad-4}" y="{sy(y1)}" text-anchor="end">{y1:.2f}</text>',
             f'<text x="{pad-4}" y="{sy(y0)}" text-anchor="end">{y0:.2f}</text>']
    for i, (name, c) in enumerate(curves.items()):
        col = colours[i % len(colours)]
        pts = " ".join(f"{sx(x):.1f},{sy(y / c[0][1]):.1f}" for x, y in c)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2"/>')
        parts.append(f'<text x="{w-pad-150}" y="{pad + 14*i}" fill="{col}">{name}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
