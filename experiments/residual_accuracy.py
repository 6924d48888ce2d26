#!/usr/bin/env python3
"""Does the residual term make the loop's model more accurate on labels it
did not train on? A paired refit, no oracle call (issue 52, item 3).

For each finished 300-call loop under `experiments/out/RUNS` (space-separated
run names, the first holding a circuit and seed wins; circuit/seed folders
as `round_size.py` leaves them), its whole
label log is refitted twice by `train-cost --initial 0 --rounds 0` (every
label already in the log, so no call): once by the build under test
(SMOOTHE_BIN, with the residual term) and once by WITHOUT_BIN, the same code
with `residual::fit` skipped. Both fits see the same labels and score the
same test split (the loop's hash split), so the pair differs by the residual
term alone. Both are fresh fits, so neither is the loop's own final model
(which the loop fitted warm from the round before); the loop's own test
Spearman is listed beside them. Writes experiments/NAME.csv and NAME.md.

  WITHOUT_BIN=/tmp/smoothe-noresidual RUNS="loop_current loop_nosearch" python3 experiments/residual_accuracy.py
  python3 experiments/residual_accuracy.py --report    # redraw the table only
"""
import json
import os
import sys

from abc_common import HERE, ROOT, SHARED, finished_loops, read_label, read_rows, refit, run_all, write_rows
from mechanisms import stats

NAME = os.environ.get("NAME", "residual_accuracy")
RUNS = os.environ.get("RUNS", "loop_current loop_nosearch").split()
WITHOUT_BIN = os.environ.get("WITHOUT_BIN", "")
PAR = int(os.environ.get("PAR", "2"))


def one(task):
    circuit, seed, d = task
    graph_path = SHARED / f"{circuit}.json"
    lines = [line for line in open(d / "loop.labels.jsonl") if read_label(line).get("cost") is not None]
    with_it = refit(d, graph_path, lines, "refit.with", seed)
    without = refit(d, graph_path, lines, "refit.without", seed, binary=WITHOUT_BIN)
    if with_it["test"] != without["test"]:
        raise RuntimeError(f"{d}: test splits differ ({with_it['test']} and {without['test']} labels)")
    loop = json.load(open(d / "loop.rounds.json"))[-1]["report"]
    row = dict(run=d.parents[1].name, circuit=circuit, seed=seed, test=with_it["test"],
               loop_spearman=round(loop["test_spearman"], 4), spearman_with=round(with_it["test_spearman"], 4),
               spearman_without=round(without["test_spearman"], 4), mae_with=round(with_it["test_mae"], 3),
               mae_without=round(without["test_mae"], 3))
    print(row, file=sys.stderr)
    return row


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    lines = ["# The residual term against held-out labels: a paired refit", "",
             "Made by `experiments/residual_accuracy.py`, no oracle call: each finished 300-call loop's label log"
             " refitted by `train-cost --initial 0 --rounds 0` with the residual term (`with`) and by the same code"
             " with its fit skipped (`without`), scored on the loop's own test split (`test` labels, the same for"
             " both). Both are fresh fits; `loop` is the loop's own final model's test Spearman (fitted warm from"
             " the round before, so not the same fit). MAE in the oracle's units.", "",
             "| run | circuit | seed | test | loop Spearman | Spearman with | without | MAE with | without |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['circuit']} | {r['seed']} | {r['test']} | {r['loop_spearman']:.3f} | "
                     f"{r['spearman_with']:.3f} | {r['spearman_without']:.3f} | {r['mae_with']:.2f} | "
                     f"{r['mae_without']:.2f} |")
    n, m, se, t, up, down = stats([r["spearman_with"] - r["spearman_without"] for r in rows])
    lines += ["", f"- Test Spearman, with less without: mean {m:+.3f}, standard error {se:.3f}, t {t:.1f};"
                  f" higher with it on {up} of {n}, lower on {down}."]
    n, m, se, t, lower, higher = stats([(r["mae_without"] - r["mae_with"]) / r["mae_without"] * 100 for r in rows
                                   if r["mae_without"] > 0])
    lines.append(f"- Test MAE, relative reduction with it: mean {m:+.1f}%, standard error {se:.1f}%, t {t:.1f};"
                 f" lower with it on {lower} of {n}, higher on {higher}.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if "--report" not in sys.argv:
        if not WITHOUT_BIN:
            sys.exit("set WITHOUT_BIN to the build without the residual term")
        # A circuit and seed in several runs: the first run named wins.
        tasks, seen = [], set()
        for name in RUNS:
            for t in finished_loops(ROOT / "experiments" / "out" / name):
                if t[:2] not in seen:
                    seen.add(t[:2])
                    tasks.append(t)
        if not tasks:
            sys.exit(f"no finished loop under experiments/out/{{{','.join(RUNS)}}}")
        write_rows(HERE / f"{NAME}.csv", run_all(one, tasks, PAR))
    report()
