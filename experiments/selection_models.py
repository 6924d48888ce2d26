#!/usr/bin/env python3
"""Would a model over the extraction's choices do what the operator-level
ensemble does not? Two checks on the finished 300-call loops under
`experiments/out/RUNS` (circuit/seed folders as `frozen_start.sh` and
`calibration.sh` leave them), each against what the loop's final model did:

1. Ranking, no oracle call. On the loop's own test split (the hash split the
   loop used, its three starts left out), the test Spearman, with a 95%
   bootstrap interval over the test labels, of the final model and of two models of
   the one-hot choice vector (one input per e-node chosen in some label,
   over the classes an extraction reaches), fitted on the same training
   labels: ridge regression, a per-node linear cost, and a Gaussian process
   with an exponential Hamming kernel, the selection-gp acquisition's
   kernel. Their hyperparameters come from the closed-form leave-one-out
   error on the training labels. The final model's figure is recomputed
   from `smoothe predict` and checked against its `loop.rounds.json`.
2. Frozen. Area = c + a * (e-graph DAG cost) + per-node weights, fitted on
   all the loop's labels (ridge, leave-one-out strength), is linear in the
   choices, so it can be written into the e-graph as node costs and
   optimised exactly as linear SmoothE optimises the e-graph's own costs.
   A node no label chose pays one label spread (a trust region: stay on
   choices the labels saw). Two slopes: `a` fitted by least squares
   (`fitted`), and `a` = mean area / mean DAG cost (`scaled`: the e-graph's
   costs rescaled, corrected per node by the labels). Each is optimised by
   `extract --method smoothe` (30 s, one thread, the loop's seed) and
   measured with the oracle.

Needs numpy. Writes experiments/NAME.csv and NAME.md.

  python3 experiments/selection_models.py
  python3 experiments/selection_models.py --report    # redraw the table only
"""
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from abc_common import (BIN, HERE, ROOT, SHARED, below, fmt, in_test_split, main_over_loops, mean, oracle, oracle_label,
                        pct, predict, read_label, read_rows, run, spearman)

NAME = os.environ.get("NAME", "selection_models")
RUNS = ROOT / "experiments" / "out" / os.environ.get("RUNS", "frozen_decoupled")
CHOICE = os.environ.get("CHOICE", "frozen_choice")
PAR = int(os.environ.get("PAR", "2"))
# Ridge strengths, relative to the mean diagonal of the rows' Gram matrix.
RIDGE = [10.0 ** k for k in range(-5, 3)]
# GP kernel lengths, relative to the median Hamming distance between rows,
# and noise variances relative to the kernel's unit variance.
# Bootstrap resamples of a test split.
RESAMPLES = 1000
LENGTHS = [0.25, 0.5, 1, 2, 4, 8, 16, 32]
NOISES = [0.01, 0.03, 0.1, 0.3, 1.0]


def chosen_nodes(graph, choices):
    """The e-nodes an extraction (class -> node) chooses in the classes its roots reach."""
    nodes = graph["nodes"]
    stack, seen, out = [str(r) for r in graph["root_eclasses"]], set(), []
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        n = choices[c]
        out.append(n)
        for k in nodes[n]["children"]:
            k = str(k)  # a node id (esyn) or a class id (boole)
            stack.append(str(nodes[k]["eclass"]) if k in nodes else k)
    return out


def labels(graph, d):
    """(keys, areas, one-hot matrix, node ids, choice maps) of a loop's labels, failed calls left out."""
    keys, areas, chosen, maps = [], [], [], []
    for line in open(d / "loop.labels.jsonl"):
        label = read_label(line)
        if label.get("cost") is not None:
            keys.append(label["extraction"])
            areas.append(label["cost"])
            chosen.append(chosen_nodes(graph, label["choices"]))
            maps.append(label["choices"])
    ids = sorted({n for c in chosen for n in c})
    column = {n: i for i, n in enumerate(ids)}
    x = np.zeros((len(chosen), len(ids)))
    for i, c in enumerate(chosen):
        x[i, [column[n] for n in c]] = 1.0
    return keys, np.array(areas), x, ids, maps


def final_model_means(d, path, maps):
    """The loop's final model's mean prediction for each extraction (a class -> node map) of the e-graph at `path`."""
    with tempfile.TemporaryDirectory() as t:
        files = [Path(t) / f"{i}.json" for i in range(len(maps))]
        for f, m in zip(files, maps):
            f.write_text(json.dumps({"choices": m}))
        return [p["mean"] for p in predict(d / "loop.safetensors", path, *files)]


def spearman_interval(predicted, truth, seed):
    """Spearman of `predicted` against `truth`, and the 2.5% and 97.5% quantiles of it over bootstrap resamples."""
    rng = np.random.default_rng(seed)
    predicted, truth = list(predicted), list(truth)
    values = []
    for _ in range(RESAMPLES):
        pick = rng.integers(0, len(truth), len(truth))
        v = spearman([predicted[i] for i in pick], [truth[i] for i in pick])
        if v == v:
            values.append(v)
    lo, hi = np.quantile(values, [0.025, 0.975])
    return round(spearman(predicted, truth), 3), round(float(lo), 3), round(float(hi), 3)


def loo_solve(k, y, strengths):
    """Dual weights of kernel ridge regression on Gram matrix `k` and targets
    `y`, with the strength of `strengths` whose closed-form leave-one-out
    error is least; that strength and that error."""
    best = None
    for s in strengths:
        inverse = np.linalg.inv(k + s * np.eye(len(y)))
        alpha = inverse @ y
        error = np.mean((alpha / np.diag(inverse)) ** 2)
        if best is None or error < best[0]:
            best = (error, s, alpha)
    return best[2], best[1], best[0]


def ridge(x, y, train):
    """Per-node weights and intercept of ridge regression of y on x over the rows `train`, and its strength."""
    xm, ym = x[train].mean(0), y[train].mean()
    xc = x[train] - xm
    gram = xc @ xc.T
    scale = np.trace(gram) / len(gram)
    alpha, s, _ = loo_solve(gram, y[train] - ym, [r * scale for r in RIDGE])
    w = xc.T @ alpha
    return w, ym - xm @ w, float(f"{s / scale:.3g}")


def hamming(a, b):
    """Hamming distances between the one-hot rows of a and of b."""
    return a.sum(1)[:, None] + b.sum(1)[None, :] - 2 * a @ b.T


def gp(x, y, train, test):
    """Predictions at `test` of a GP with kernel exp(-hamming / length)
    fitted on `train` (targets standardised); and the length chosen, relative to the median distance."""
    ym, ys = y[train].mean(), y[train].std()
    t = (y[train] - ym) / ys
    dist = hamming(x[train], x[train])
    median = np.median(dist[np.triu_indices(len(t), 1)])
    best = None
    for m in LENGTHS:
        k = np.exp(-dist / (m * median))
        alpha, _, error = loo_solve(k, t, NOISES)
        if best is None or error < best[0]:
            best = (error, m, alpha)
    _, m, alpha = best
    return ym + ys * np.exp(-hamming(x[test], x[train]) / (m * median)) @ alpha, m


def node_cost_graph(graph, ids, w, slope, unseen):
    """The e-graph with node costs slope * cost + w (per node chosen in some label) + `unseen` for the rest."""
    weight = dict(zip(ids, w))
    out = json.loads(json.dumps(graph))
    for n, node in out["nodes"].items():
        node["cost"] = slope * float(node["cost"]) + weight.get(n, unseen)
    return out


def one(task):
    circuit, seed, d = task
    path = SHARED / f"{circuit}.json"
    graph = json.load(open(path))
    keys, y, x, ids, maps = labels(graph, d)
    rounds = json.load(open(d / "loop.rounds.json"))
    test = np.array([in_test_split(k) for k in keys])
    test[:3] = False  # the loop labels its three starts first and keeps them out of the test split
    train = ~test
    report = rounds[-1]["report"]
    row = dict(circuit=circuit, seed=seed, labels=len(y), nodes=len(ids), test=int(test.sum()),
               test_reported=report["test"], ensemble_reported=round(report["test_spearman"], 3))
    w, b, strength = ridge(x, y, train)
    gp_predicted, length = gp(x, y, train, test)
    predicted = {"ensemble": final_model_means(d, path, [m for m, t in zip(maps, test) if t]),
                 "ridge": x[test] @ w + b, "gp": gp_predicted}
    for tag, p in predicted.items():
        row[f"{tag}_spearman"], row[f"{tag}_lo"], row[f"{tag}_hi"] = spearman_interval(p, y[test], seed)
    row["ridge_strength"] = strength
    row["gp_length"] = length
    # Frozen: the per-node linear model on every label.
    cost = np.array([float(graph["nodes"][n]["cost"]) for n in ids])
    dag = x @ cost
    yc, dc = y - y.mean(), dag - dag.mean()
    every = np.ones(len(y), dtype=bool)
    for tag, slope in [("fitted", float(dc @ yc / (dc @ dc))), ("scaled", float(y.mean() / dag.mean()))]:
        w, _, strength = ridge(x, y - slope * dag, every)
        g = node_cost_graph(graph, ids, w, slope, float(y.std()))
        modified, out = d / f"nodecost.{tag}.graph.json", d / f"nodecost.{tag}.json"
        if not out.exists():
            modified.write_text(json.dumps(g))
            run([BIN, "extract", "--method", "smoothe", "--seed", seed, "--threads", 1, "-q", "--time-limit", 30,
                 "-o", out, modified])
            modified.unlink()
        row[f"{tag}_slope"] = round(slope, 4)
        row[f"{tag}_strength"] = strength
        row[f"{tag}_real"] = oracle(path, out)
    print(row, file=sys.stderr)
    return row


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    choice = {(r["circuit"], r["seed"]): r for r in read_rows(HERE / f"{CHOICE}.csv")}
    lines = ["# Models of the choice vector: ranking, and frozen as node costs", "",
             f"Made by `experiments/selection_models.py`: oracle {oracle_label()}; the labels and final models of"
             f" the 300-call loops under `experiments/out/{RUNS.name}` (`train-cost` at its defaults). Models of"
             " the one-hot choice vector (one input per e-node some label chose): `ridge` (a per-node linear"
             " cost) and `gp` (exponential Hamming kernel, as the selection-gp acquisition), hyperparameters by"
             " closed-form leave-one-out error.", "",
             "## Test-split Spearman on the loop's own split", "",
             "Fitted on the loop's training labels, scored on its test split (the same hash split; `test`"
             " labels). `ensemble`: the loop's final model (`smoothe predict`). In brackets: the 2.5% and 97.5%"
             f" quantiles over {RESAMPLES} bootstrap resamples of the test labels.", "",
             "| circuit | seed | nodes | test | ensemble | ridge | gp |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r[f'{t}_spearman']:.3f} [{r[f'{t}_lo']:.3f}, {r[f'{t}_hi']:.3f}]"
                 for t in ("ensemble", "ridge", "gp")]
        lines.append(f"| {r['circuit']} | {r['seed']} | {r['nodes']} | {r['test']} | " + " | ".join(cells) + " |")
    lines.append("")
    for tag in ("ensemble", "ridge", "gp"):
        values = [r[f"{tag}_spearman"] for r in rows]
        lines.append(f"- `{tag}`: mean {mean(values):.3f}, lowest {min(values):.3f}, at least 0.8 on"
                     f" {sum(v >= 0.8 for v in values)} of {len(values)} runs.")
    mismatch = [f"{r['circuit']} seed {r['seed']}" for r in rows
                if r["test"] != r["test_reported"] or abs(r["ensemble_spearman"] - r["ensemble_reported"]) > 0.0015]
    lines.append("- The final model's test split and Spearman as its `rounds.json` reports them: "
                 + (f"not matched on {', '.join(mismatch)}." if mismatch else f"matched on all {len(rows)} runs."))
    under = [f"{r['circuit']} seed {r['seed']}" for r in rows if r["ensemble_hi"] < 0.8]
    lines.append(f"- The final model's interval lies wholly under 0.8 on {len(under)} of {len(rows)} runs"
                 + (f" ({', '.join(under)})" if under else "") + ".")
    best = [(max(r[f"{t}_spearman"] for t in ("ensemble", "ridge", "gp")), r) for r in rows]
    short = [f"{r['circuit']} seed {r['seed']} ({v:.3f})" for v, r in best if v < 0.8]
    lines.append(f"- The best of the three per run reaches 0.8 on {len(best) - len(short)} of {len(best)} runs"
                 + (f"; not on {', '.join(short)}" if short else "") + ".")
    lines += ["", "## Frozen as node costs", "",
              "Area = c + a * DAG cost + per-node weights, fitted on all the loop's labels, written as node costs"
              " (a node no label chose pays one label spread) and optimised by linear SmoothE (30 s), measured."
              " `fitted`: a by least squares; `scaled`: a = mean area / mean DAG cost. `frozen`: `extract --model`"
              f" with the loop's final model (`{CHOICE}.csv`, after). % below the better greedy (positive:"
              " smaller).", "",
              "| circuit | seed | better greedy | linear SmoothE | best label | frozen | % | fitted | % | scaled | % |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = {"frozen": [], "fitted": [], "scaled": []}
    worse = {k: [0, 0] for k in summary}
    for r in rows:
        c = choice.get((r["circuit"], r["seed"]))
        if c is None:
            continue
        bg = c["better_greedy"]
        real = {"frozen": c["after_real"], "fitted": r["fitted_real"], "scaled": r["scaled_real"]}
        cells = [r["circuit"], r["seed"], fmt(bg, 0), fmt(c["linear_smoothe"], 0), fmt(c["best_label"], 0)]
        for k, v in real.items():
            cells += [fmt(v, 0), fmt(pct(v, bg), 2)]
            summary[k].append(pct(v, bg))
            worse[k][0] += v is not None and v > bg
            worse[k][1] += v is not None and v > c["linear_smoothe"]
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    lines.append("")
    for k, values in summary.items():
        lines.append(f"- `{k}`: {below(mean(values))} the better greedy on average; worse than the better greedy on"
                     f" {worse[k][0]} of {len(values)} runs, than linear SmoothE on {worse[k][1]}.")
    least = sum(r[f"{k}_strength"] <= min(RIDGE) * 1.001 for r in rows for k in ("fitted", "scaled"))
    lines.append(f"- Leave-one-out chose the least ridge strength tried ({min(RIDGE):g}, near interpolation of the"
                 f" labels) in {least} of {2 * len(rows)} fits.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main_over_loops(RUNS, one, NAME, PAR, report)
