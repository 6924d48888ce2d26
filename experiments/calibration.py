"""Whether a model's error bar holds: the loops' final models refitted on
their own label logs (no oracle call) by `train-cost --initial 0 --rounds 0`,
their test-split coverage by two ensemble spreads against two expected errors
(the spread with the members' out-of-fold error added), and the same bars on
the frozen picks of those loops' models (`extract --model`, trust 1 and 0),
measured with the oracle here. Uses the run directories under
out/RUNS (frozen_start.py's and frozen_trust.py's layout) and makes what a
run lacks: the 300-call loop at its defaults, and the two frozen picks.
See calibration.sh."""
import json
import os
import shutil
import sys

from abc_common import (BIN, CIRCUITS, HERE, METRIC, ORACLE, ROOT, SHARED, ensure_loop, fmt, mean, oracle,
                        oracle_label, predict, read_rows, run, run_all, run_dir, write_rows)

NAME = os.environ.get("NAME", "calibration")
RUNS = ROOT / "experiments" / "out" / os.environ.get("RUNS", "frozen_decoupled")
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0 1").split()]
PAR = int(os.environ.get("PAR", "2"))
PICKS = [(1.0, "frozen.json"), (0.0, "frozen.trust0.json")]


def one(task):
    circuit, seed = task
    graph = SHARED / f"{circuit}.json"
    d = run_dir(RUNS, circuit, seed)
    quiet = ["--seed", seed, "--threads", 1, "-q"]
    ensure_loop(d, graph, seed)
    for trust, file in PICKS:
        if not (d / file).exists():
            run([BIN, "extract", "--model", d / "loop.safetensors", "--trust", trust, *quiet, "-o", d / file, graph])
    model, labels = d / "calib.safetensors", d / "calib.labels.jsonl"
    if not model.exists():
        shutil.copy(d / "loop.labels.jsonl", labels)
        run([BIN, "train-cost", "--oracle", ORACLE, "--initial", 0, "--rounds", 0, "--labels", labels,
             "--out", model, "--seed", seed, "--threads", 1, "-q", "--force", graph])
    report = json.load(open(d / "calib.rounds.json"))[-1]["report"]
    # The refit reads the loop's labels only where its oracle is the same
    # (the identity covers the command as given): with another it would
    # label the three baselines anew and fit on those alone.
    loop_labels = json.load(open(d / "loop.rounds.json"))[-1]["labels"]
    if report["train"] + report["test"] < loop_labels:
        raise RuntimeError(f"{d}: the refit read {report['train'] + report['test']} of the loop's {loop_labels} labels;"
                           " was the loop run with another oracle command?")
    row = dict(circuit=circuit, seed=seed, test=report["test"], test_mae=report["test_mae"],
               spread_coverage=report["test_coverage"], error_coverage=report["test_error_coverage"])
    for trust, file in PICKS:
        key = f"t{trust:g}"
        p = predict(model, graph, d / file)[0]
        row |= {f"{key}_mean": p["mean"], f"{key}_std": p["std"], f"{key}_error": p["error"],
                f"{key}_distance": p["distance"], f"{key}_measured": int(p.get("measured") is not None),
                f"{key}_real": oracle(graph, d / file)}
    print(row, file=sys.stderr)
    return row


def within(r, key):
    """Whether the frozen pick's real cost lies within two expected errors of its prediction (None: not run)."""
    if r[f"{key}_real"] is None or r[f"{key}_mean"] is None:
        return None
    return abs(r[f"{key}_real"] - r[f"{key}_mean"]) <= 2 * r[f"{key}_error"]


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    lines = ["# Does the model's error bar hold?", "",
             f"Made by `experiments/calibration.sh`: oracle {oracle_label()}, the loops' label logs of"
             f" `out/{RUNS.name}` (300 calls each, seeds {sorted({r['seed'] for r in rows})}), each refitted by"
             " `train-cost --initial 0 --rounds 0` (the same labels and test split, no oracle call). `coverage`: the"
             " share of test labels (used neither for fitting nor for early stopping) within two ensemble spreads"
             " of the mean, and within two expected errors (the spread with the members' root-mean-square"
             " out-of-fold error added, what `extract` and `predict` now print after `+-`). Then the frozen picks"
             " of those loops' own models (`extract --model`, trust 1, the default, and trust 0), predicted by the"
             f" refitted model, against their real {METRIC}, measured: `pred +- error (spread)`, the distance to"
             " the nearest training row in"
             " typical spacings, and whether the real cost lies within two errors. A measured pick is one the loop"
             " labelled.", "",
             "| circuit | seed | test labels | test MAE | coverage, 2 spreads | coverage, 2 errors | trust 1 pick:"
             " pred +- error (spread) | real | distance | within | trust 0 pick: pred +- error (spread) | real |"
             " distance | within |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def pick(r, key):
        if r[f"{key}_mean"] is None:
            return ["-"] * 4
        measured = ", measured" if r[f"{key}_measured"] else ""
        w = within(r, key)
        return [f"{fmt(r[f'{key}_mean'])} +- {fmt(r[f'{key}_error'])} ({fmt(r[f'{key}_std'])}){measured}",
                fmt(r[f"{key}_real"]), fmt(r[f"{key}_distance"], 2), "-" if w is None else ("yes" if w else "no")]

    for r in rows:
        lines.append(f"| {r['circuit']} | {r['seed']} | {r['test']} | {fmt(r['test_mae'], 2)} |"
                     f" {fmt(100 * r['spread_coverage'])}% | {fmt(100 * r['error_coverage'])}% | "
                     + " | ".join(pick(r, "t1") + pick(r, "t0")) + " |")
    lines.append("")
    n = sum(r["test"] for r in rows)
    pooled = lambda k: sum(r[k] * r["test"] for r in rows) / n
    lines.append(f"- Over {n} test labels of {len(rows)} runs, two spreads hold **{fmt(100 * pooled('spread_coverage'))}%**"
                 f" and two expected errors **{fmt(100 * pooled('error_coverage'))}%** (a Gaussian error would put"
                 " 95% there); per run, from"
                 f" {fmt(100 * min(r['spread_coverage'] for r in rows))}-{fmt(100 * max(r['spread_coverage'] for r in rows))}%"
                 f" to {fmt(100 * min(r['error_coverage'] for r in rows))}-{fmt(100 * max(r['error_coverage'] for r in rows))}%.")
    for key, label in [("t1", "trust 1"), ("t0", "trust 0")]:
        for kind, keep in [("measured", 1), ("unmeasured", 0)]:
            rs = [r for r in rows if r[f"{key}_measured"] == keep and within(r, key) is not None]
            if rs:
                lines.append(f"- Frozen picks at {label}, {kind}: the real {METRIC} within two errors on"
                             f" **{sum(within(r, key) for r in rs)} of {len(rs)}**; mean distance"
                             f" {fmt(mean([r[f'{key}_distance'] for r in rs]), 2)} spacings.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def main():
    if "--report" not in sys.argv:
        rows = run_all(one, [(c, s) for s in SEEDS for c in CIRCUITS], PAR)
        write_rows(HERE / f"{NAME}.csv", rows)
    report()


if __name__ == "__main__":
    main()
