#!/usr/bin/env python3
"""How predictable is the oracle? The landscape of real area over extractions.

Reads every label log `ablation.sh` left in experiments/out/ablation (all
methods and seeds, one circuit at a time: thousands of labelled extractions
per circuit) and measures, in the better half of them by area (the region
the loop searches):

- ruggedness: for pairs of labelled extractions that choose differently in
  d classes, the mean absolute area difference (% of the region's median)
  and the share of pairs with equal area, by bucket of d. A smooth landscape
  has small differences at small d that grow with d; a rugged one reaches
  the level of distant pairs within a few classes, and no smooth model of
  whole-extraction features can rank neighbours there;
- aliasing: labelled extractions that share every operator count and
  (parent, child) operator-pair count, which operator-level features cannot
  tell apart, and how much their areas differ;
- structure: the Spearman correlation of area with the e-graph's own DAG
  cost (the linear objective) and, for the esyn circuits (operators `*`,
  `+`, `!`), with the size of the extracted circuit as a structurally hashed
  AND-inverter graph, the structure ABC starts from.

Writes landscape.csv and landscape.md. Pure Python; no oracle calls.
    python3 experiments/landscape.py
"""
import csv
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from abc_common import read_label, spearman

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "datasets"
OUT = HERE / "out" / "ablation"
BUCKETS = [(1, 2), (3, 5), (6, 10), (11, 20), (21, 50), (51, 10 ** 9)]
PAIRS_FROM = 400  # good-region labels sampled for the pairwise measure


def child_class(nodes, k):
    """The class of child `k`: a node id, or (older files) a class id."""
    n = nodes.get(str(k))
    return str(n["eclass"]) if n is not None else str(k)


def reachable(graph, choices):
    """Classes reachable from the roots under `choices`, children first."""
    nodes, seen, order = graph["nodes"], set(), []
    for root in map(str, graph["root_eclasses"]):
        stack = [(root, False)]
        while stack:
            c, done = stack.pop()
            if done:
                order.append(c)
                continue
            if c in seen:
                continue
            seen.add(c)
            stack.append((c, True))
            for k in nodes[choices[c]]["children"]:
                kc = child_class(nodes, k)
                if kc not in seen:
                    stack.append((kc, False))
    return order


def dag_cost(graph, choices):
    return sum(graph["nodes"][choices[c]].get("cost", 1.0) for c in reachable(graph, choices))


def feature_key(graph, choices):
    """Operator counts and (parent operator, child operator) edge counts of
    the extraction: what operator-level features see of it."""
    nodes, key = graph["nodes"], defaultdict(int)
    for c in reachable(graph, choices):
        n = nodes[choices[c]]
        key[n["op"]] += 1
        for k in n["children"]:
            key[(n["op"], nodes[choices[child_class(nodes, k)]]["op"])] += 1
    return tuple(sorted(key.items(), key=str))


def aig_size(graph, choices):
    """AND nodes of the extraction as a structurally hashed AIG (esyn ops)."""
    nodes, table, lit = graph["nodes"], {}, {}
    fresh = [1]

    def new():
        fresh[0] += 1
        return 2 * fresh[0]

    def conj(a, b):
        a, b = min(a, b), max(a, b)
        if a == 0 or a ^ 1 == b:
            return 0
        if a == 1 or a == b:
            return b if a == 1 else a
        if (a, b) not in table:
            table[(a, b)] = new()
        return table[(a, b)]

    order = reachable(graph, choices)
    for c in order:
        n = nodes[choices[c]]
        k = [lit[child_class(nodes, x)] for x in n["children"]]
        op = n["op"]
        if op == "*":
            lit[c] = conj(k[0], k[1])
        elif op == "+":
            lit[c] = conj(k[0] ^ 1, k[1] ^ 1) ^ 1
        elif op == "!":
            lit[c] = k[0] ^ 1
        elif op in ("0", "1"):
            lit[c] = int(op)
        elif op == "&" or not k:
            lit[c] = k[0] if k else new()
        else:
            return None
    fanins = {v >> 1: key for key, v in table.items()}
    outs = []
    for root in map(str, graph["root_eclasses"]):
        n = nodes[choices[root]]
        outs += [lit[child_class(nodes, x)] for x in n["children"]] if n["op"] == "&" else [lit[root]]
    live, stack = set(), [o >> 1 for o in outs]
    while stack:
        v = stack.pop()
        if v in live or v not in fanins:
            continue
        live.add(v)
        stack += [fanins[v][0] >> 1, fanins[v][1] >> 1]
    return len(live)


def labels_of(circuit):
    by_key = {}
    for log in sorted((OUT / circuit.replace("/", "_")).glob("*/*.labels.jsonl")):
        for line in open(log):
            r = read_label(line)
            if r.get("cost") is not None and r.get("choices"):
                by_key[r["extraction"]] = r
    return list(by_key.values())


def measure(circuit):
    graph = json.load(open(SHARED / f"{circuit}.json"))
    labels = labels_of(circuit)
    if len(labels) < 50:
        return None
    costs = sorted(r["cost"] for r in labels)
    median = costs[len(costs) // 2]
    good = [r for r in labels if r["cost"] <= median]
    row = dict(circuit=circuit, labels=len(labels), region=len(good),
               region_low=min(r["cost"] for r in good), region_high=median)
    rng = random.Random(0)
    sample = rng.sample(good, min(len(good), PAIRS_FROM))
    pairs = [set(r["choices"].items()) for r in sample]
    diffs = defaultdict(list)
    for i in range(len(sample)):
        for j in range(i + 1, len(sample)):
            d = len({c for c, _ in pairs[i] ^ pairs[j]})
            diffs[d].append(abs(sample[i]["cost"] - sample[j]["cost"]))
    for lo, hi in BUCKETS:
        v = [x for d, xs in diffs.items() if lo <= d <= hi for x in xs]
        key = f"d{lo}_{hi}" if hi < 10 ** 9 else f"d{lo}_"
        row[f"{key}_pairs"] = len(v)
        row[f"{key}_diff_pct"] = 100 * sum(v) / len(v) / median if v else None
        row[f"{key}_equal"] = sum(1 for x in v if x == 0) / len(v) if v else None
    # Aliasing: distinct labelled extractions (all labels) with equal
    # operator and operator-pair counts, and how far their areas differ.
    groups = defaultdict(list)
    for r in labels:
        groups[feature_key(graph, r["choices"])].append(r["cost"])
    shared = [g for g in groups.values() if len(g) > 1]
    row["aliased_labels"] = sum(len(g) for g in shared) / len(labels)
    row["aliased_spread_pct"] = (100 * sum(max(g) - min(g) for g in shared) / len(shared) / median) if shared else None
    row["aliased_unequal"] = sum(1 for g in shared if max(g) > min(g)) / len(shared) if shared else None
    area = [r["cost"] for r in good]
    row["rho_dag_cost"] = spearman([dag_cost(graph, r["choices"]) for r in good], area)
    aig = [aig_size(graph, r["choices"]) for r in good] if circuit.startswith("esyn/") else [None]
    row["rho_aig"] = spearman(aig, area) if None not in aig else None
    print(row, file=sys.stderr)
    return row


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    circuits = sys.argv[1:] or [f"esyn/{p.stem}" for p in sorted((SHARED / "esyn").glob("*.json"))] + ["boole/mul16"]
    rows = [r for r in map(measure, circuits) if r]
    if not rows:
        sys.exit("no label logs in experiments/out/ablation: run experiments/ablation.sh first")
    with open(HERE / "landscape.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    heads = [f"{lo}-{hi}" if hi < 10 ** 9 else f"{lo}+" for lo, hi in BUCKETS]
    keys = [f"d{lo}_{hi}" if hi < 10 ** 9 else f"d{lo}_" for lo, hi in BUCKETS]
    out = ["# How predictable is ABC area? The landscape the loop searches", "",
           "Made by `experiments/landscape.py` from every label `ablation.sh` logged (all methods and seeds; "
           "ABC mapped area with `examples/oracles/abc_area.sh`). The region is the better half of a circuit's "
           "labelled extractions by area. Pairs are drawn from 400 of its labels; `d` is the number of classes "
           "whose choice differs.", "",
           "## Mean area difference of two extractions d classes apart (% of the region's median), "
           "the share of equal-area pairs and the number of pairs", "",
           "| circuit | labels | region area | " + " | ".join(f"d {h}" for h in heads) + " |",
           "|---|---|---|" + "---|" * len(heads)]
    for r in rows:
        cells = [f"{fmt(r[f'{k}_diff_pct'], '.2f')} ({fmt(r[f'{k}_equal'], '.0%')}, {r[f'{k}_pairs']})" for k in keys]
        out.append(f"| {r['circuit']} | {r['labels']} | {r['region_low']:g}-{r['region_high']:g} | "
                   + " | ".join(cells) + " |")
    out += ["", "## Aliasing: distinct extractions that operator-level features cannot tell apart", "",
            "Over all labels: the share of labelled extractions whose operator counts and (parent, child) "
            "operator-pair counts equal another's, the share of such groups whose areas differ, and the mean "
            "area range within a group (% of the region's median).", "",
            "| circuit | labels in a shared group | groups with different areas | mean range in a group % |",
            "|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['circuit']} | {r['aliased_labels']:.0%} | {fmt(r['aliased_unequal'], '.0%')} | "
                   f"{fmt(r['aliased_spread_pct'], '.2f')} |")
    out += ["", "## Spearman correlation of area with structure, in the region", "",
            "| circuit | e-graph DAG cost (linear objective) | structurally hashed AIG size |", "|---|---|---|"]
    for r in rows:
        out.append(f"| {r['circuit']} | {fmt(r['rho_dag_cost'], '.3f')} | {fmt(r['rho_aig'], '.3f')} |")
    (HERE / "landscape.md").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
