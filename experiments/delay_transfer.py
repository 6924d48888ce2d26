#!/usr/bin/env python3
"""Do learned per-operator delays transfer across designs?

No oracle call: reads the runs `tradeoff.sh` left under `out/NAME` (each
circuit's `train-cost --metric area,delay` model and its label log). Every
model's timing head (one delay per operator, arrival time over the chosen
DAG) predicts the measured delay of every other circuit's labels; the
circuit's own head predicts its own held-out labels (the split `train-cost`
used). Reports the Spearman correlation and the relative mean absolute
error per (head, circuit) pair, against unit depth's Spearman.

    NAME=tradeoff-front python3 experiments/delay_transfer.py

writes `delay_transfer.csv` and `delay_transfer.md`.
"""
import json
import os

from abc_common import HERE, SHARED, in_test_split, mean, model_meta, spearman, write_rows

NAME = os.environ.get("NAME", "tradeoff-front")
OUT = HERE / "out" / NAME
LEAF = "<leaf>"


def arrival(nodes, choices, roots, delays):
    """Arrival time at the roots of the extraction `choices` ({class: node})."""
    memo = {}

    def at(cls):
        if cls in memo:
            return memo[cls]
        node = nodes[choices[cls]]
        kids = [nodes[c]["eclass"] for c in node["children"]]
        if kids:
            t = delays.get(node["op"], 1.0) + max(at(k) for k in kids)
        else:
            t = delays.get(LEAF, 0.0)
        memo[cls] = t
        return t

    return max(at(r) for r in roots)


def main():
    runs = {}
    for d in sorted(OUT.glob("*-s*")):
        model = d / "model.safetensors"
        if not model.exists():
            continue
        circuit = d.name.rsplit("-s", 1)[0].replace("-", "/", 1)
        graph = json.loads((SHARED / f"{circuit}.json").read_text())
        nodes = graph["nodes"]
        labels = [json.loads(line) for line in (d / "model.labels.jsonl").read_text().splitlines() if line.strip()]
        labels = [l for l in labels if "delay" in l.get("metrics", {})]
        delays = model_meta(model)["timing"]["delays"]
        runs[circuit] = (nodes, graph["root_eclasses"], labels, delays)
    rows = []
    for target, (nodes, roots, labels, _) in runs.items():
        unit = {LEAF: 0.0}
        for source, (_, _, _, delays) in runs.items():
            own = source == target
            chosen = [l for l in labels if in_test_split(l["extraction"])] if own else labels
            measured = [l["metrics"]["delay"] for l in chosen]
            predicted = [arrival(nodes, l["choices"], roots, delays) for l in chosen]
            depth = [arrival(nodes, l["choices"], roots, unit) for l in chosen]
            rows.append({"circuit": target, "head": source, "own": int(own), "labels": len(chosen),
                         "spearman": spearman(predicted, measured),
                         "relative_mae": mean([abs(p - y) for p, y in zip(predicted, measured)]) / mean(measured),
                         "unit_depth_spearman": spearman(depth, measured)})
    write_rows(HERE / "delay_transfer.csv", rows)
    circuits = list(runs)
    lines = ["# Do learned delays transfer across designs?", "",
             f"Written by `experiments/delay_transfer.py` from the runs of `NAME={NAME} tradeoff.sh` (no oracle "
             "call). Each circuit's timing head (per-operator delays fitted by `train-cost --metric area,delay`, "
             "300 ABC calls, `strash; map`) predicts the measured delay of another circuit's labels (all of "
             "them), or of its own held-out labels (the diagonal). Cells: Spearman correlation, then the "
             "relative mean absolute error (Spearman with average ranks for ties, so the diagonal can differ in the "
             "third digit from the model file's figure); `constant`: the head predicts every label alike.", ""]
    def mean_of(rs, key):
        vals = [r[key] for r in rs if r[key] == r[key]]
        return mean(vals) if vals else float("nan")

    own = [r for r in rows if r["own"]]
    other = [r for r in rows if not r["own"]]
    if own and other:
        lines += [f"- own head on held-out labels: mean Spearman {mean_of(own, 'spearman'):.3f}, "
                  f"relative error {100 * mean([r['relative_mae'] for r in own]):.2f}%",
                  f"- another circuit's head: mean Spearman {mean_of(other, 'spearman'):.3f} (over the pairs where it varies), "
                  f"relative error {100 * mean([r['relative_mae'] for r in other]):.2f}%",
                  f"- unit depth on the same labels: mean Spearman "
                  f"{mean_of(other, 'unit_depth_spearman'):.3f} (where it varies)", ""]
    lines += ["| labels of \\ head of | " + " | ".join(circuits) + " | unit depth |",
              "|---|" + "---|" * (len(circuits) + 1)]
    for t in circuits:
        cells = []
        for s in circuits:
            r = next(r for r in rows if r["circuit"] == t and r["head"] == s)
            rho = f"{r['spearman']:.3f}" if r["spearman"] == r["spearman"] else "constant"
            cells.append(f"{rho}, {100 * r['relative_mae']:.1f}%")
        unit = next(r for r in rows if r["circuit"] == t and not r["own"]) if len(circuits) > 1 else rows[0]
        u = unit["unit_depth_spearman"]
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {u:.3f} |" if u == u else f"| {t} | " + " | ".join(cells)
                     + " | constant |")
    (HERE / "delay_transfer.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
