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
    with open(ROOT / "experiments" / "learned.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    report(rows, {r["circuit"]: c for r, c in results})


def rerender():
    """Rewrites learned.md and the plot from learned.csv and the per-round summaries in experiments/out."""
    def num(v):
        try:
            return float(v)
        except ValueError:
            return None
    with open(ROOT / "experiments" / "learned.csv") as f:
        rows = [{k: (v if k == "circuit" else num(v)) for k, v in r.items()} for r in csv.DictReader(f)]
    curves = {}
    for r in rows:
        rounds = json.load(open(OUT / (r["circuit"].replace("/", "_") + ".rounds.json")))
        curves[r["circuit"]] = [(x["oracle_calls"], x["best_real_cost"]) for x in rounds]
    report(rows, curves)


def report(rows, curves):
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
                     f" {int(r['oracle_calls'])} | {r['holdout_spearman']:.3f} |")
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else float("nan")
    esyn = [r for r in rows if r["circuit"].startswith("esyn/")]
    for label, group in [("the esyn circuits (the issue's target: 5% each)", esyn), ("all circuits", rows)]:
        if not group:
            continue
        lines.append(f"\nMean area reduction over {label}:")
        lines.append("")
        for base in ["greedy", "dag_greedy", "linear_smoothe", "best_random"]:
            gains = [100 * (r[base] - r["learned"]) / r[base] for r in group if r[base]]
            lines.append(f"- against {base.replace('_', ' ')}: {mean(gains):.1f}%")
        lowest = min(r["holdout_spearman"] for r in group)
        lines.append(f"- lowest held-out Spearman of the final model: {lowest:.3f}")
    lines.append("\nBest real area per round, over the best of the three baselines: `learned_rounds.svg`.")
    (ROOT / "experiments" / "learned.md").write_text("\n".join(lines) + "\n")
    baselines = {r["circuit"]: min(v for v in (r["greedy"], r["dag_greedy"], r["linear_smoothe"]) if v)
                 for r in rows if any((r["greedy"], r["dag_greedy"], r["linear_smoothe"]))}
    svg(curves, baselines, ROOT / "experiments" / "learned_rounds.svg")


def svg(curves, baselines, path):
    """Best area per round over the best baseline (greedy, dag-greedy, linear SmoothE), one line per circuit
    (no plotting library needed). Below 1 the loop beats every baseline."""
    w, h, pad, legend = 720, 420, 55, 130
    curves = {k: [(x, y / baselines[k]) for x, y in c] for k, c in curves.items() if baselines.get(k)}
    xs = [x for c in curves.values() for x, _ in c]
    ys = [y for c in curves.values() for _, y in c]
    if not xs or not ys:
        return
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys + [1.0]) - 0.01, max(ys + [1.0]) + 0.01
    right = w - pad - legend
    sx = lambda x: pad + (x - x0) / max(x1 - x0, 1e-9) * (right - pad)
    sy = lambda y: h - pad - (y - y0) / max(y1 - y0, 1e-9) * (h - 2 * pad)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{pad}" y1="{h-pad}" x2="{right}" y2="{h-pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h-pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{sy(1.0):.1f}" x2="{right}" y2="{sy(1.0):.1f}" stroke="grey" stroke-dasharray="4 3"/>',
             f'<text x="{(pad + right) / 2}" y="{h-12}" text-anchor="middle">oracle calls (end of each round)</text>',
             f'<text x="14" y="{h/2}" transform="rotate(-90 14 {h/2})" text-anchor="middle">'
             'best real area / best baseline area</text>',
             f'<text x="{pad}" y="{h-pad+14}">{x0}</text><text x="{right}" y="{h-pad+14}" text-anchor="end">{x1}</text>']
    step = 0.02 if y1 - y0 > 0.06 else 0.01
    tick = round(y0 / step) * step
    while tick <= y1:
        if tick >= y0:
            parts.append(f'<text x="{pad-4}" y="{sy(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
            parts.append(f'<line x1="{pad-3}" y1="{sy(tick):.1f}" x2="{pad}" y2="{sy(tick):.1f}" stroke="black"/>')
        tick += step
    for i, (name, c) in enumerate(curves.items()):
        col = colours[i % len(colours)]
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2"/>')
        parts.append(f'<text x="{right + 10}" y="{pad + 16 * i}" fill="{col}">{name}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


if __name__ == "__main__":
    rerender() if sys.argv[1:] == ["--report"] else main()
