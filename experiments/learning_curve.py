#!/usr/bin/env python3
"""Would more labels lift the test-split Spearman to 0.8? A learning curve
on the finished 300-call loops under `experiments/out/RUNS` (circuit/seed
folders as `frozen_start.sh` and `calibration.sh` leave them), no oracle
call.

Each loop's labels are split as the loop split them: its three starts, its
test split (the hash split of `selection_models.py`, the same labels the
loop scored its final model on) and the rest, its training labels. For
each share of the training labels (FRACTIONS; REPEATS random subsets below
the whole), a label log of the starts, the whole test split and that
subset is refitted by `train-cost --initial 0 --rounds 0` (every label
already in the log, so no call), and its `rounds.json` gives the test
Spearman on the same test labels every time. The Gaussian process over the
choice vector of `selection_models.py` is fitted on the same subsets, as a
second model family. A curve still rising at the whole set says labels are
what the target lacks; a flat one says the labels the loop collects carry
no more ranking, whatever their number.

Needs numpy. Writes experiments/NAME.csv and NAME.md.

  python3 experiments/learning_curve.py
  python3 experiments/learning_curve.py --report    # redraw the table only
"""
import json
import math
import os
import sys

import numpy as np

from abc_common import HERE, ROOT, SHARED, main_over_loops, mean, oracle_label, read_label, read_rows, refit, spearman
from selection_models import gp, in_test_split, labels

NAME = os.environ.get("NAME", "learning_curve")
RUNS = ROOT / "experiments" / "out" / os.environ.get("RUNS", "frozen_decoupled")
PAR = int(os.environ.get("PAR", "2"))
FRACTIONS = [0.25, 0.5, 0.75, 1.0]
REPEATS = int(os.environ.get("REPEATS", "2"))
TARGET = 0.8


def one(task):
    circuit, seed, d = task
    graph_path = SHARED / f"{circuit}.json"
    graph = json.load(open(graph_path))
    keys, y, x, _, _ = labels(graph, d)
    lines = [line for line in open(d / "loop.labels.jsonl") if read_label(line).get("cost") is not None]
    assert len(lines) == len(y)
    test = np.array([in_test_split(k) for k in keys])
    test[:3] = False  # the loop labels its three starts first and keeps them out of the test split
    pool = [i for i in range(3, len(y)) if not test[i]]
    row = dict(circuit=circuit, seed=seed, labels=len(y), train=len(pool), test=int(test.sum()),
               final=round(json.load(open(d / "loop.rounds.json"))[-1]["report"]["test_spearman"], 3))
    for fraction in FRACTIONS:
        repeats = 1 if fraction == 1.0 else REPEATS
        ensemble, process = [], []
        for r in range(repeats):
            rng = np.random.default_rng([seed, int(fraction * 100), r])
            subset = set(rng.choice(pool, round(fraction * len(pool)), replace=False).tolist())
            keep = [i for i in range(len(y)) if i < 3 or test[i] or i in subset]
            # The loop's own seed: the refit recomputes the loop's starts (the
            # linear-SmoothE one depends on the seed) to keep them out of its test split.
            report = refit(d, graph_path, [lines[i] for i in keep], f"curve.{int(fraction * 100)}.{r}", seed)
            n_test, rho = report["test"], report["test_spearman"]
            if n_test != int(test.sum()):
                raise RuntimeError(f"{d}: the refit's test split has {n_test} labels, the loop's {int(test.sum())}")
            ensemble.append(rho)
            train = np.zeros(len(y), dtype=bool)
            train[[i for i in keep if not test[i]]] = True
            predicted, _ = gp(x, y, train, test)
            process.append(spearman(list(predicted), list(y[test])))
        row[f"ensemble_{int(fraction * 100)}"] = round(float(np.mean(ensemble)), 3)
        row[f"gp_{int(fraction * 100)}"] = round(float(np.mean(process)), 3)
    print(row, file=sys.stderr)
    return row


def trend(row, tag):
    """Least-squares line of the test Spearman against log2(share of the
    training labels) over the shares: its value at the whole set and its
    change per doubling."""
    x = np.log2(FRACTIONS)
    y = np.array([row[f"{tag}_{int(f * 100)}"] for f in FRACTIONS])
    slope, at_whole = np.polyfit(x, y, 1)
    return float(at_whole), float(slope)


def labels_needed(row, tag):
    """How many times its training labels a run under TARGET would need for
    its trend to reach TARGET (inf when the trend does not rise)."""
    at_whole, slope = trend(row, tag)
    return 2 ** ((TARGET - at_whole) / slope) if slope > 0 else math.inf


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    shares = [int(f * 100) for f in FRACTIONS]
    lines = ["# Would more labels lift the test-split Spearman? A learning curve", "",
             f"Made by `experiments/learning_curve.py`: oracle {oracle_label()}; the labels of the 300-call loops"
             f" under `experiments/out/{RUNS.name}` (`train-cost` at its defaults), refitted with no oracle call on"
             f" {', '.join(f'{s}%' for s in shares)} of each loop's training labels (mean over {REPEATS} random"
             " subsets below 100%), always scored on the loop's own test split (`test` labels, the same every"
             " time; issue 8 asks for a test Spearman of at least 0.8 on every circuit). `ensemble`: `train-cost"
             " --initial 0 --rounds 0` on a log of those labels (the loop's model, refitted); `gp`: the Gaussian"
             " process over the choice vector of `selection_models.py`. `final`: the loop's own final model, as its"
             " `rounds.json` reports it.", "",
             "| circuit | seed | train | test | final | " + " | ".join(f"ensemble {s}%" for s in shares) + " | "
             + " | ".join(f"gp {s}%" for s in shares) + " |",
             "|---|---|---|---|---|" + "---|" * (2 * len(shares))]
    for r in rows:
        cells = [r["circuit"], r["seed"], r["train"], r["test"], f"{r['final']:.3f}"]
        cells += [f"{r[f'{t}_{s}']:.3f}" for t in ("ensemble", "gp") for s in shares]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "Mean over the runs, by share of the training labels:", "",
              "| model | " + " | ".join(f"{s}%" for s in shares) + " |", "|---|" + "---|" * len(shares)]
    for t in ("ensemble", "gp"):
        lines.append(f"| {t} | " + " | ".join(f"{mean([r[f'{t}_{s}'] for r in rows]):.3f}" for s in shares) + " |")
    lines.append("")
    for t in ("ensemble", "gp"):
        slopes = [trend(r, t)[1] for r in rows]
        short = [r for r in rows if r[f"{t}_100"] < TARGET]
        lines.append(f"- `{t}`: {mean(slopes):+.3f} per doubling of the training labels on average (least squares in"
                     f" log(labels) over the four shares, per run, then the mean); under {TARGET} with every label on"
                     f" {len(short)} of {len(rows)} runs.")
        if short:
            need = sorted(((labels_needed(r, t), r) for r in short), key=lambda kr: kr[0])
            lines.append(f"  Those runs' trends reach {TARGET} at "
                         + ", ".join(f"{r['circuit']} seed {r['seed']}: "
                                     + ("never (flat or falling)" if k == math.inf else
                                        "more than 100x" if k > 100 else f"{k:.1f}x")
                                     for k, r in need) + " their training labels.")
    lines.append(f"- Each point is one test split of {min(r['test'] for r in rows)}-{max(r['test'] for r in rows)}"
                 " labels,"
                 " so a run's curve is noisy (`selection_models.md` puts 95% intervals 0.15-0.55 wide); the mean"
                 " curve and the trends over four points are the steadier reading. At 100% the refit is the loop's"
                 " final model refitted from scratch on the same labels, so it can differ a little from `final`.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main_over_loops(RUNS, one, NAME, PAR, report)
