#!/usr/bin/env python3
"""Does a frozen model choose better when it judges the candidates it has
measured by their measurements? (see measured.sh)

For each circuit and seed, with the ABC area oracle (or ORACLE=..., with
METRIC=... naming what it measures):

1. the loop, `train-cost` at its defaults with BUDGET calls (as in
   ablation.py), whose final model keeps the real cost of every extraction
   it labelled;
2. the frozen extraction, `extract --model`, with that model and with a
   copy whose measurements are removed (the model as it chose before it
   kept them), step-bounded (STEPS SmoothE steps, no time limit) so that
   both runs optimise alike; each measured by the oracle;
3. greedy and dag-greedy (their labels from the loop) and linear SmoothE
   (step-bounded, measured), to compare against.

Writes measured.csv and measured.md (NAME.* with NAME=...); the loops live
in out/NAME and are reused when their model is there. `--report` redraws
the table from the CSV.
"""
import csv
import json
import os
import struct
import sys

from abc_common import (BIN, CIRCUITS, HERE, METRIC, ORACLE, ROOT, SHARED, fmt, num, oracle, oracle_label, pct, run,
                        run_all, write_rows)

BUDGET = int(os.environ.get("BUDGET", "300"))
STEPS = os.environ.get("STEPS", "1000")
PAR = int(os.environ.get("PAR", "2"))
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0").split()]
NAME = os.environ.get("NAME", "measured")
OUT = ROOT / "experiments" / "out" / NAME


def without_measurements(src, dst):
    """A copy of the model file `src` whose metadata record lists no
    measurements (the tensors, and so the checksum, are untouched)."""
    data = open(src, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = json.loads(header["__metadata__"]["smoothe"])
    meta.pop("measured", None)
    header["__metadata__"]["smoothe"] = json.dumps(meta)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])


def extract(graph, out, seed, *args):
    """A step-bounded extraction, its result file and its real cost."""
    run([BIN, "extract", *args, "--seed", seed, "--threads", 1, "-q", "--time-limit", 0, "--steps", STEPS,
         "-o", out, graph])
    return json.load(open(out)), oracle(graph, out)


def one(task):
    circuit, seed = task
    graph = SHARED / f"{circuit}.json"
    d = OUT / circuit.replace("/", "_") / str(seed)
    d.mkdir(parents=True, exist_ok=True)
    model = d / "loop.safetensors"
    if not model.exists():
        log = d / "loop.labels.jsonl"
        log.unlink(missing_ok=True)
        run([BIN, "train-cost", "--oracle", ORACLE, "--jobs", 1, "--seed", seed, "--threads", 1, "-q",
             "--budget", BUDGET, "--labels", log, "--out", model, graph])
    bare = d / "bare.safetensors"
    without_measurements(model, bare)
    rounds = json.load(open(d / "loop.rounds.json"))
    row = dict(circuit=circuit, seed=seed, greedy=rounds[0]["greedy_real_cost"],
               dag_greedy=rounds[0]["dag_greedy_real_cost"], best_label=rounds[-1]["best_real_cost"])
    _, row["linear_smoothe"] = extract(graph, d / "linear.json", seed, "--method", "smoothe")
    for kind, path in [("bare", bare), ("measured", model)]:
        result, real = extract(graph, d / f"{kind}.json", seed, "--model", path)
        p = result["prediction"]
        row.update({kind: real, f"{kind}_pick": result["pick"], f"{kind}_predicted": p["mean"],
                    f"{kind}_label": p.get("measured")})
    print(row, file=sys.stderr)
    return row


def report():
    with open(HERE / f"{NAME}.csv") as f:
        rows = [{k: (v if k in ("circuit", "bare_pick", "measured_pick") else num(v)) for k, v in r.items()}
                for r in csv.DictReader(f)]
    lines = ["# A frozen model that judges what it measured by the measurement", "",
             f"Made by `experiments/measured.sh`: oracle {oracle_label()} ({METRIC}), seeds "
             f"{sorted({int(r['seed']) for r in rows})}, the loop's final model after {BUDGET} oracle calls, frozen"
             f" (`extract --model`, {STEPS} SmoothE steps, no time limit). `without` is the same model with its"
             " measurements removed (as models chose before they kept them), `with` the model as saved: a"
             " candidate the oracle measured on this design is judged by that measurement."
             " `picked`: which of the model's optimum and the greedy, dag-greedy and linear-SmoothE extractions"
             f" each chose. Positive % = smaller {METRIC}.", "",
             "| circuit | seed | greedy | dag-greedy | linear SmoothE | loop's best label | without | picked |"
             " with | picked | with vs without % | with vs better greedy % | with vs linear % |"
             " with: predicted | with: measured in training |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    gains, vs_greedy_bare, vs_greedy, worse_lin_bare, worse_lin = [], [], [], 0, 0
    for r in rows:
        better = min(x for x in (r["greedy"], r["dag_greedy"]) if x is not None)
        gains.append(pct(r["measured"], r["bare"]))
        vs_greedy_bare.append(pct(r["bare"], better))
        vs_greedy.append(pct(r["measured"], better))
        worse_lin_bare += r["bare"] > r["linear_smoothe"]
        worse_lin += r["measured"] > r["linear_smoothe"]
        lines.append(f"| {r['circuit']} | {int(r['seed'])} | {fmt(r['greedy'])} | {fmt(r['dag_greedy'])} |"
                     f" {fmt(r['linear_smoothe'])} | {fmt(r['best_label'])} | {fmt(r['bare'])} | {r['bare_pick']} |"
                     f" {fmt(r['measured'])} | {r['measured_pick']} | {fmt(pct(r['measured'], r['bare']), 2)} |"
                     f" {fmt(pct(r['measured'], better), 2)} | {fmt(pct(r['measured'], r['linear_smoothe']), 2)} |"
                     f" {fmt(r['measured_predicted'], 2)} | {fmt(r['measured_label'], 2)} |")
    mean = lambda xs: sum(xs) / len(xs)
    lines += ["",
              f"- With measurements against without: mean **{mean(gains):.2f}%** smaller {METRIC}; better in"
              f" {sum(g > 0 for g in gains)}, worse in {sum(g < 0 for g in gains)} of {len(gains)} runs.",
              f"- Mean {METRIC} below the better greedy: **{mean(vs_greedy):.2f}%** with,"
              f" {mean(vs_greedy_bare):.2f}% without.",
              f"- Worse than linear SmoothE: {worse_lin} runs with, {worse_lin_bare} without."]
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def main():
    rows = run_all(one, [(c, s) for s in SEEDS for c in CIRCUITS], PAR)
    write_rows(HERE / f"{NAME}.csv", rows)
    report()


if __name__ == "__main__":
    report() if "--report" in sys.argv else main()
