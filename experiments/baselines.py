#!/usr/bin/env python3
"""Runs the greedy baselines on every e-graph in ../shared/datasets.

Writes experiments/baselines.csv (suite, instance, method, dag_cost,
seconds, wall_seconds, valid) and experiments/baselines.md (per suite, with
the published reference costs from ../shared/reference/paper_costs.csv).
`seconds` is what `smoothe extract` reports (preprocessing + extraction);
`wall_seconds` is the whole process, JSON loading included.

Usage: python3 experiments/baselines.py  (after `cargo build --release`)
"""
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
BIN = ROOT / "target" / "release" / "smoothe"
METHODS = ["greedy", "dag-greedy"]


def reference_costs():
    """instance -> row of paper_costs.csv (by file stem, also without a 'spec.' prefix)."""
    refs = {}
    path = SHARED / "reference" / "paper_costs.csv"
    if path.exists():
        with open(path) as f:
            for row in csv.DictReader(f):
                refs[(row["suite"], row["instance"])] = row
                refs[(row["suite"], row["instance"].removeprefix("spec."))] = row
    return refs


def run(graph, method):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        start = time.perf_counter()
        proc = subprocess.run([str(BIN), "extract", "--method", method, "-o", out.name, str(graph)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            return None, wall, proc.stderr.strip()
        result = json.load(open(out.name))
        check = subprocess.run([str(BIN), "check", str(graph), out.name], capture_output=True, text=True)
        result["valid"] = check.returncode == 0
        return result, wall, ""


def fmt(x):
    return "" if x is None else f"{x:.6g}"


def main():
    if not BIN.exists():
        sys.exit(f"{BIN} missing: run `cargo build --release` first")
    refs = reference_costs()
    rows = []
    for graph in sorted((SHARED / "datasets").glob("*/*.json")):
        suite, instance = graph.parent.name, graph.stem
        for method in METHODS:
            result, wall, err = run(graph, method)
            if result is None:
                print(f"{suite}/{instance} {method}: FAILED {err}", file=sys.stderr)
                rows.append(dict(suite=suite, instance=instance, method=method, dag_cost="", seconds="",
                                 wall_seconds=f"{wall:.4f}", valid=False))
                continue
            rows.append(dict(suite=suite, instance=instance, method=method, dag_cost=result["dag_cost"],
                             seconds=f"{result['seconds']:.4f}", wall_seconds=f"{wall:.4f}", valid=result["valid"]))
            print(f"{suite}/{instance} {method}: {result['dag_cost']} ({wall:.3f} s)", file=sys.stderr)
    out_dir = ROOT / "experiments"
    with open(out_dir / "baselines.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

    by_key = {(r["suite"], r["instance"], r["method"]): r for r in rows}
    lines = ["# Greedy baselines on ../shared/datasets", "",
             "Made by `python3 experiments/baselines.py` (release build, this 2-core machine).",
             "`ref best` is the published best-known cost (CPLEX 10 h; not always optimal) and",
             "`ref dag-greedy` the published greedy DAG cost, from `../shared/reference/paper_costs.csv`,",
             "where the instance is listed there. Where our greedy costs differ from the published greedy",
             "by the same offset on every method, the published figure is for another version of the file.", ""]
    total_wall = sum(float(r["wall_seconds"]) for r in rows if r["method"] == "dag-greedy")
    invalid = [r for r in rows if not r["valid"]]
    lines += [f"Files: {len(rows) // len(METHODS)}; invalid results: {len(invalid)}; "
              f"load + preprocess + dag-greedy over all files: {total_wall:.2f} s wall "
              f"(slowest {max(float(r['wall_seconds']) for r in rows if r['method'] == 'dag-greedy'):.2f} s).", ""]
    for suite in sorted({r["suite"] for r in rows}):
        lines += [f"## {suite}", "",
                  "| instance | greedy | dag-greedy | ref dag-greedy | ref best | dag-greedy s |",
                  "|---|---|---|---|---|---|"]
        for instance in sorted({r["instance"] for r in rows if r["suite"] == suite}):
            g = by_key[(suite, instance, "greedy")]
            d = by_key[(suite, instance, "dag-greedy")]
            ref = refs.get((suite, instance), {})
            ref_greedy = float(ref["greedy_dag_cost"]) if ref else None
            ref_best = float(ref["oracle_cost"]) if ref else None
            lines.append(f"| {instance} | {fmt(g['dag_cost'] or None)} | {fmt(d['dag_cost'] or None)} | "
                         f"{fmt(ref_greedy)} | {fmt(ref_best)} | {d['seconds']} |")
        lines.append("")
    (out_dir / "baselines.md").write_text("\n".join(lines))
    print(f"wrote {out_dir / 'baselines.csv'} and baselines.md", file=sys.stderr)


if __name__ == "__main__":
    main()
