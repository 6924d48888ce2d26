#!/usr/bin/env python3
"""Do per-operator costs transfer better than the corpus model? (see opcost.sh)

A diagnostic over the label logs `transfer.sh` leaves in out/NAME (no new
training run): for each esyn circuit left out, a linear cost per operator is
fitted on the other designs' labels, *within* each design (every design has
its own free offset, so only the differences between one design's
extractions teach the costs; non-negative least squares, one cost per
internal operator and one shared by all leaves). Then, on the circuit left
out, with zero oracle calls on it for choosing:

- `held-out Spearman`: how well those costs rank the circuit's own
  labelled extractions (the corpus model's is in NAME.csv);
- `op-cost SmoothE`: linear SmoothE on the e-graph with those costs in
  place of its own, measured by the oracle (it is also the cheapest by
  those costs of the baselines' extractions, so no pick among them could
  differ).

Each is compared with the run's greedy, dag-greedy, linear SmoothE and
corpus-model zero-call results (NAME.csv). Rows are kept by (run, circuit)
in opcost.csv, so runs with other oracles add to it:
    NAME=transfer-sgp-seed1 experiments/opcost.sh
    NAME=transfer-lib2 ORACLE=experiments/oracles/abc_area_lib2.sh experiments/opcost.sh
`WITHIN=selection_gp experiments/opcost.sh` fits the same costs within one
design instead, on the 300 labels of each run of `selection_gp.sh`, and
measures linear SmoothE with them against that run's best label
(opcost_within.csv): would such an extraction be worth a label in the loop?
`--report` redraws opcost.md from both CSVs.
"""
import csv
import json
import os
import sys
from collections import Counter

from abc_common import (BIN, HERE, SHARED, below, cell, fmt, mean, oracle, oracle_label, pct, read_label, run, run_all,
                        spearman, write_rows)

NAME = os.environ.get("NAME", "transfer")
OUT = HERE / "out" / NAME
PAR = int(os.environ.get("PAR", "2"))
STEPS = os.environ.get("STEPS", "1000")
LEAF = "<leaf>"
# WITHIN=selection_gp fits within each run of that experiment instead.
WITHIN = os.environ.get("WITHIN")
WITHIN_OUT = HERE / "out" / (WITHIN or "")
SWEEPS = 20000


def nnls(gram, rhs):
    """argmin w >= 0 of w'Gw/2 - rhs'w by cyclic coordinate descent (the
    problem has one variable per operator, so plain sweeps converge)."""
    n = len(rhs)
    w = [0.0] * n
    for _ in range(SWEEPS):
        moved = 0.0
        for j in range(n):
            if gram[j][j] <= 0:
                continue
            grad = sum(gram[j][k] * w[k] for k in range(n)) - rhs[j]
            new = max(0.0, w[j] - grad / gram[j][j])
            moved = max(moved, abs(new - w[j]))
            w[j] = new
        if moved < 1e-12:
            break
    return w


def counts(nodes, choices, ops):
    """Operator counts of an extraction (leaves pooled as LEAF)."""
    c = Counter(nodes[n]["op"] if nodes[n]["children"] else LEAF for n in choices.values())
    return [c[o] for o in ops]


def operators(graphs):
    """The internal operators of the e-graphs, sorted, then LEAF: the fit's columns."""
    return sorted({n["op"] for g in graphs for n in g["nodes"].values() if n["children"]}) + [LEAF]


def cost_text(price):
    """The non-zero fitted costs, as the tables show them."""
    return " ".join(f"{o}={p:.3g}" for o, p in price.items() if p > 0)


def fit(designs, ops):
    """Per-operator costs from labelled extractions of several designs,
    within each design: counts and costs are centred per design first
    (a free offset each), then non-negative least squares."""
    n = len(ops)
    gram = [[0.0] * n for _ in range(n)]
    rhs = [0.0] * n
    for rows in designs:
        mx = [sum(x[j] for x, _ in rows) / len(rows) for j in range(n)]
        my = sum(y for _, y in rows) / len(rows)
        for x, y in rows:
            d = [x[j] - mx[j] for j in range(n)]
            for j in range(n):
                rhs[j] += d[j] * (y - my)
                for k in range(n):
                    gram[j][k] += d[j] * d[k]
    return nnls(gram, rhs)


def extracts(graph, choices):
    """Whether `choices` (class -> node) is closed in `graph`: every chosen
    node is of its class and every child class is chosen (how a label is
    matched to its e-graph; node names alone recur across designs)."""
    nodes = graph["nodes"]
    return all(n in nodes and nodes[n]["eclass"] == c and all(nodes[k]["eclass"] in choices
                                                                for k in nodes[n]["children"])
               for c, n in choices.items())


def labelled(graphs):
    """The run's corpus labels by circuit: [(choices, cost)], failed calls left out."""
    by_fp = {}
    for line in open(OUT / "labels.jsonl"):
        x = read_label(line)
        if x.get("cost") is not None:
            by_fp.setdefault(x["egraph"], []).append((x["choices"], x["cost"]))
    out = {}
    for rows in by_fp.values():
        matches = [c for c, g in graphs.items() if extracts(g, rows[0][0])]
        if len(matches) != 1 or matches[0] in out:
            raise SystemExit(f"{OUT / 'labels.jsonl'}: labels of one e-graph match {matches or 'no circuit'}")
        out[matches[0]] = rows
    return out


def priced_smoothe(c, graph, price, d, seed):
    """Linear SmoothE on circuit `c` with the operator costs `price` in
    place of its own (a floor keeps every node priced), measured by the
    oracle; its files go to folder `d`."""
    floor = 1e-3 * max(max(price.values()), 1e-9)
    g = json.loads(json.dumps(graph))
    for n in g["nodes"].values():
        n["cost"] = max(price[n["op"] if n["children"] else LEAF], floor)
    d.mkdir(parents=True, exist_ok=True)
    (d / "graph.json").write_text(json.dumps(g))
    run([BIN, "extract", "--method", "smoothe", "--seed", seed, "--threads", 1, "-q", "--time-limit", 0,
         "--steps", STEPS, "-o", d / "smoothe.json", d / "graph.json"])
    return oracle(SHARED / f"{c}.json", d / "smoothe.json")


def one(task):
    c, row, graph, ops, rows = task
    d = OUT / c.replace("/", "_")
    w = fit([r for o, r in rows.items() if o != c], ops)
    price = dict(zip(ops, w))
    own = rows.get(c, [])
    out = dict(run=NAME, oracle=oracle_label().strip('`'), circuit=c, seed=row["seed"], greedy=row["greedy"],
               dag_greedy=row["dag_greedy"],
               linear_smoothe=row["linear_smoothe"], corpus_zero_call=row["zero_call"],
               corpus_held_out_spearman=row["held_out_spearman"],
               held_out_spearman=spearman([sum(a * b for a, b in zip(x, w)) for x, _ in own], [y for _, y in own])
               if len(own) > 2 else None,
               costs=cost_text(price))
    out["op_cost_smoothe"] = priced_smoothe(c, graph, price, d / "opcost", row["seed"])
    print(out, file=sys.stderr)
    return out


def one_within(task):
    """The same costs fitted on one loop run's own labels of its design."""
    row, ops = task
    c, seed = row["circuit"], row["seed"]
    d = WITHIN_OUT / c.replace("/", "_") / str(seed)
    graph = json.load(open(SHARED / f"{c}.json"))
    labels = [read_label(line) for line in open(d / "gp.labels.jsonl")]
    own = [(counts(graph["nodes"], x["choices"], ops), x["cost"]) for x in labels if x.get("cost") is not None]
    price = dict(zip(ops, fit([own], ops)))
    out = dict(circuit=c, seed=seed, better_greedy=row["better_greedy"], linear_smoothe=row["linear_smoothe"],
               best_model_free=row["best_model_free"], loop_best_label=row["gp"],
               op_cost_smoothe=priced_smoothe(c, graph, price, d / "opcost", seed), costs=cost_text(price))
    print(out, file=sys.stderr)
    return out


def within():
    """Costs fitted within one design on the 300 labels of each
    `selection_gp.sh` run (WITHIN=its NAME), then linear SmoothE with them:
    would such an extraction be worth a label in the loop?"""
    with open(HERE / f"{WITHIN}.csv") as f:
        rows = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f) if r["circuit"].startswith("esyn/")]
    ops = operators(json.load(open(SHARED / f"{c}.json")) for c in dict.fromkeys(r["circuit"] for r in rows))
    write_rows(HERE / "opcost_within.csv", run_all(one_within, [(r, ops) for r in rows], PAR))
    report()


def main():
    with open(HERE / f"{NAME}.csv") as f:
        rows = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)]
    rows = [r for r in rows if r["circuit"].startswith("esyn/") and r["zero_call"] is not None]
    graphs = {r["circuit"]: json.load(open(SHARED / f"{r['circuit']}.json")) for r in rows}
    ops = operators(graphs.values())
    # Each labelled extraction's operator counts, once for every fit that uses it.
    counted = {c: [(counts(graphs[c]["nodes"], ch, ops), y) for ch, y in labels]
               for c, labels in labelled(graphs).items()}
    new = run_all(one, [(r["circuit"], r, graphs[r["circuit"]], ops, counted) for r in rows], PAR)
    path = HERE / "opcost.csv"
    kept = []
    if path.exists():
        with open(path) as f:
            kept = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f) if r["run"] != NAME]
    write_rows(path, kept + new)
    report()


def within_lines(ws):
    """The table of `within()`'s rows."""
    lines = ["", "## Fitted within the design, on the loop's own labels", "",
             "The same costs fitted on the 300 labels of one `selection_gp.sh` run (`WITHIN=selection_gp`, "
             "`examples/oracles/abc_area.sh`), then linear SmoothE with them (the run's seed), measured: is such an "
             "extraction worth a label in the loop?", "",
             "| circuit | seed | better greedy | linear SmoothE | best model-free (300 calls) | loop's best label |"
             " op-cost SmoothE | costs |", "|---|---|---|---|---|---|---|---|"]
    for r in ws:
        lines.append(f"| {r['circuit']} | {r['seed']} | {fmt(r['better_greedy'])} | {fmt(r['linear_smoothe'])} | "
                     f"{fmt(r['best_model_free'])} | {fmt(r['loop_best_label'])} | {fmt(r['op_cost_smoothe'])} | "
                     f"{r['costs'] or 'none'} |")
    lower = sum(r["op_cost_smoothe"] < r["loop_best_label"] for r in ws)
    return lines + ["", f"- Op-cost SmoothE below the loop's best label: {lower} of {len(ws)} runs; on average "
                    f"{below(mean([pct(r['op_cost_smoothe'], r['loop_best_label']) for r in ws]))} it and "
                    f"{below(mean([pct(r['op_cost_smoothe'], r['linear_smoothe']) for r in ws]))} linear SmoothE "
                    "(`costs` none: every fitted cost is zero, so SmoothE minimises the node count)."]


def report():
    with open(HERE / "opcost.csv") as f:
        rows = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)]
    lines = ["# Per-operator costs learned within designs, against the corpus model",
             "",
             "Made by `experiments/opcost.sh` from the label logs of the transfer runs named below (each with its "
             "oracle; no new training). For each esyn circuit left out, one cost per internal operator and one for "
             "all leaves is fitted by non-negative least squares on the other five designs' labels, within each "
             "design (a free offset per design). On the circuit left out, with no oracle call to choose: `held-out "
             "Spearman` ranks its own labels by those costs (`corpus`: the corpus model's, from the run's CSV); "
             "`op-cost SmoothE` is linear SmoothE with those costs in place of the e-graph's (1000 steps, the run's "
             "seed), measured. `corpus zero-call` is the run's `extract --model` with its leave-one-out model.",
             "",
             "| run | circuit | greedy | dag-greedy | linear SmoothE | corpus zero-call | op-cost SmoothE |"
             " corpus held-out Spearman | held-out Spearman | costs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['circuit']} | {fmt(r['greedy'])} | {fmt(r['dag_greedy'])} | "
                     f"{fmt(r['linear_smoothe'])} | {fmt(r['corpus_zero_call'])} | {fmt(r['op_cost_smoothe'])} | "
                     f"{fmt(r['corpus_held_out_spearman'], 3)} | {fmt(r['held_out_spearman'], 3)} | {r['costs']} |")
    lines += ["", "By run: mean % below linear SmoothE (positive: smaller), circuits where the extraction is worse "
              "than the better of greedy and dag-greedy, mean held-out Spearman.", "",
              "| run | oracle | corpus zero-call % | op-cost SmoothE % | worse than better greedy (corpus / op-cost) |"
              " held-out Spearman (corpus / op-cost) |",
              "|---|---|---|---|---|---|"]
    runs = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    for name, rs in list(runs.items()) + [("all", rows)]:
        def worse(k):
            return sum(1 for r in rs if r[k] > min(r["greedy"], r["dag_greedy"]))
        oracles = " ".join(f"`{o}`" for o in dict.fromkeys(r["oracle"] for r in rs))
        lines.append(f"| {name} | {oracles if name != 'all' else '-'} | "
                     f"{fmt(mean([pct(r['corpus_zero_call'], r['linear_smoothe']) for r in rs]), 2)} | "
                     f"{fmt(mean([pct(r['op_cost_smoothe'], r['linear_smoothe']) for r in rs]), 2)} | "
                     f"{worse('corpus_zero_call')} / {worse('op_cost_smoothe')} of {len(rs)} | "
                     f"{fmt(mean([r['corpus_held_out_spearman'] for r in rs]), 3)} / "
                     f"{fmt(mean([r['held_out_spearman'] for r in rs]), 3)} |")
    within_csv = HERE / "opcost_within.csv"
    if within_csv.exists():
        with open(within_csv) as f:
            lines += within_lines([{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)])
    (HERE / "opcost.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    report() if "--report" in sys.argv else within() if WITHIN else main()
