#!/usr/bin/env python3
"""The frozen choice between a measured and an unmeasured candidate, by two
builds: each 300-call loop's final model under `experiments/out/RUNS`
(circuit/seed folders with `loop.safetensors`, as `frozen_start.sh` and
`calibration.sh` leave them) frozen with `extract --model` at its defaults
by this build and by the build at BEFORE_BIN, both measured with the oracle.
Made for the change that charges an unmeasured candidate its expected error
instead of the ensemble's spread. Writes experiments/NAME.csv and NAME.md.

  BEFORE_BIN=/path/to/old/smoothe python3 experiments/frozen_choice.py
  python3 experiments/frozen_choice.py --report    # redraw the table only
"""
import json
import os
import sys

from abc_common import (BIN, HERE, ROOT, SHARED, below, mean, oracle, oracle_label, pct, read_rows, run,
                        main_over_loops)

NAME = os.environ.get("NAME", "frozen_choice")
RUNS = ROOT / "experiments" / "out" / os.environ.get("RUNS", "frozen_decoupled")
BEFORE_BIN = os.environ.get("BEFORE_BIN")
PAR = int(os.environ.get("PAR", "2"))


def frozen(binary, graph, d, seed, file):
    """`extract --model` by `binary` into d/file (unless there), and its result."""
    path = d / file
    if not path.exists():
        run([binary, "extract", "--model", d / "loop.safetensors", "--seed", seed, "--threads", 1, "-q",
             "-o", path, graph])
    return json.load(open(path))


def one(task):
    circuit, seed, d = task
    graph = SHARED / f"{circuit}.json"
    rounds = json.load(open(d / "loop.rounds.json"))
    row = dict(circuit=circuit, seed=seed, better_greedy=min(rounds[0]["greedy_real_cost"],
                                                             rounds[0]["dag_greedy_real_cost"]),
               start=rounds[0]["linear_smoothe_real_cost"], best_label=rounds[-1]["best_real_cost"])
    linear = d / "linear.json"
    if not linear.exists():
        run([BIN, "extract", "--method", "smoothe", "--seed", seed, "--threads", 1, "-q", "-o", linear, graph])
    row["linear_smoothe"] = oracle(graph, linear)
    for tag, binary, file in [("before", BEFORE_BIN, "frozen.before.json"), ("after", BIN, "frozen.after.json")]:
        result = frozen(binary, graph, d, seed, file)
        row[f"{tag}_pick"] = result["pick"]
        row[f"{tag}_measured"] = int(result["prediction"].get("measured") is not None)
        row[f"{tag}_predicted"] = round(result["prediction"]["mean"], 2)
        row[f"{tag}_error"] = round(result["prediction"].get("error", result["prediction"]["std"]), 2)
        row[f"{tag}_real"] = oracle(graph, d / file)
    print(row, file=sys.stderr)
    return row


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    lines = ["# The frozen choice charging an unmeasured candidate its expected error, not its spread", "",
             f"Made by `experiments/frozen_choice.py`: oracle {oracle_label()}; the final models of the 300-call"
             f" loops under `experiments/out/{RUNS.name}` (`train-cost` at its defaults, one thread, as"
             " `frozen_start.sh` and `calibration.sh` run it), frozen with"
             " `extract --model` at its defaults, same seed and one thread, by the build before the change"
             " (`before`: an unmeasured candidate pays `kappa` spreads) and after it (`after`: `kappa` expected"
             " errors, the spread and the members' out-of-fold error in quadrature), and `extract --method smoothe`"
             " (linear SmoothE, defaults, 30 s, same seed and thread), all measured. `pick` is marked"
             " `*` when it is an extraction the loop measured. % is below the better greedy (positive: smaller).",
             "",
             "| circuit | seed | better greedy | linear SmoothE | start | best label | before: pick | real"
             " | predicted +- error"
             " | % | after: pick | real | predicted +- error | % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["circuit"], r["seed"], r["better_greedy"], r["linear_smoothe"], r["start"], r["best_label"]]
        for tag in ("before", "after"):
            mark = "*" if r[f"{tag}_measured"] else ""
            cells += [f"{r[f'{tag}_pick']}{mark}", r[f"{tag}_real"],
                      f"{r[f'{tag}_predicted']} +- {r[f'{tag}_error']}",
                      f"{pct(r[f'{tag}_real'], r['better_greedy']):.2f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    for tag in ("before", "after"):
        gain = mean(pct(r[f"{tag}_real"], r["better_greedy"]) for r in rows)
        measured = sum(r[f"{tag}_measured"] for r in rows)
        worse = sum(r[f"{tag}_real"] > r["better_greedy"] for r in rows)
        worse_linear = sum(r[f"{tag}_real"] > r["linear_smoothe"] for r in rows)
        lines.append(f"- {tag}: mean {below(gain)} the better greedy; a measured pick on {measured} of"
                     f" {len(rows)}; worse than the better greedy on {worse}, than linear SmoothE on {worse_linear}.")
    changed = [r for r in rows if r["before_pick"] != r["after_pick"] or r["before_real"] != r["after_real"]]
    lines.append(f"- The pick changed on {len(changed)} of {len(rows)} runs"
                 + (": " + ", ".join(f"{r['circuit']} seed {r['seed']} ({r['before_real']} to {r['after_real']})"
                                     for r in changed) if changed else "") + ".")
    best = mean(pct(r["best_label"], r["better_greedy"]) for r in rows)
    at_best = sum(r["after_real"] <= r["best_label"] for r in rows)
    lines.append(f"- The loops' best labels lie {below(best)} the better greedy on average; the frozen pick"
                 f" (after) measures as low on {at_best} of {len(rows)} runs.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    if "--report" not in sys.argv and not BEFORE_BIN:
        sys.exit("set BEFORE_BIN to the smoothe binary built before the change")
    main_over_loops(RUNS, one, NAME, PAR, report)


if __name__ == "__main__":
    main()
