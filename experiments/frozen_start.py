"""The loop's final model frozen against linear SmoothE, both at their
defaults, once the loop labels `extract --model`'s own linear-SmoothE start
(a third of the default steps on the plainly preprocessed graph, bounded by
steps): whether the frozen pick is still worse than `extract --method
smoothe` where it was, against the frozen and linear results of an earlier
ablation (BEFORE=...csv) at the same circuits and seeds. See frozen_start.sh."""
import csv
import json
import os
import sys

from abc_common import (BIN, CIRCUITS, HERE, METRIC, ROOT, SHARED, below, cell, ensure_loop, fmt, mean, oracle,
                        oracle_label, pct, read_rows, run, run_all, run_dir, with_kept_rows, write_rows)

NAME = os.environ.get("NAME", "frozen_start")
TITLE = os.environ.get("TITLE", "The frozen model against linear SmoothE, with the loop labelling extract --model's start")
BEFORE = HERE / os.environ.get("BEFORE", "selection_gp.csv")
# What differed when BEFORE was made, for the report.
BEFORE_NOTE = os.environ.get("BEFORE_NOTE", "when the loop labelled a 600-step start on the graph preprocessed"
                             " for the oracle (`selection_gp.csv` froze with `--steps 1000 --time-limit 0`)")
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0").split()]
PAR = int(os.environ.get("PAR", "2"))
JOBS = max(1, int(os.environ.get("JOBS", "2")) // PAR)
OUT = ROOT / "experiments" / "out" / NAME


def one(task):
    circuit, seed = task
    graph = SHARED / f"{circuit}.json"
    d = run_dir(OUT, circuit, seed)
    quiet = ["--seed", seed, "--threads", 1, "-q"]
    ensure_loop(d, graph, seed, JOBS)
    run([BIN, "extract", "--model", d / "loop.safetensors", *quiet, "-o", d / "frozen.json", graph])
    run([BIN, "extract", "--method", "smoothe", *quiet, "-o", d / "linear.json", graph])
    rounds = json.load(open(d / "loop.rounds.json"))
    frozen = json.load(open(d / "frozen.json"))
    row = dict(circuit=circuit, seed=seed, greedy=rounds[0]["greedy_real_cost"],
               dag_greedy=rounds[0]["dag_greedy_real_cost"], start=rounds[0]["linear_smoothe_real_cost"],
               linear_smoothe=oracle(graph, d / "linear.json"), frozen=oracle(graph, d / "frozen.json"),
               frozen_pick=frozen["pick"], frozen_measured=int(frozen["prediction"].get("measured") is not None),
               best_label=rounds[-1]["best_real_cost"], frozen_seconds=frozen["seconds"])
    print(row, file=sys.stderr)
    return row


def better_greedy(r):
    """The better greedy real cost of a row (ablation rows hold both, selection_gp rows the better)."""
    return r["better_greedy"] if "better_greedy" in r else min(r["greedy"], r["dag_greedy"])


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    before = {}
    if BEFORE.exists():
        with open(BEFORE) as f:
            before = {(r["circuit"], int(r["seed"])): {k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)}
    lines = [f"# {TITLE}", "",
             f"Made by `experiments/frozen_start.sh`: oracle {oracle_label()}, seeds {sorted({r['seed'] for r in rows})}."
             " The loop at its defaults (300 calls); its final model frozen (`extract --model`, defaults) and"
             " `extract --method smoothe` (defaults, 30 s), both measured. `start`: the linear-SmoothE extraction"
             " the loop labelled, which is `extract --model`'s own start (a third of the default steps on the"
             " plainly preprocessed graph, bounded by steps). `before`: the frozen and linear results of"
             f" `{BEFORE.name}` at the same circuit and seed, {BEFORE_NOTE}.", "",
             "| circuit | seed | better greedy | start | linear SmoothE | frozen | pick | frozen vs linear % |"
             " frozen vs better greedy % | best label | before: linear | before: frozen | before: frozen vs linear % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    worse, worse_before, gains, gains_before, n_before = 0, 0, [], [], 0
    measured_before = []  # None where BEFORE does not record it
    for r in rows:
        g = better_greedy(r)
        b = before.get((r["circuit"], r["seed"]))
        vs_lin = pct(r["frozen"], r["linear_smoothe"])
        worse += r["frozen"] > r["linear_smoothe"]
        gains.append(pct(r["frozen"], g))
        b_cells = ["-", "-", "-"]
        if b:
            n_before += 1
            worse_before += b["frozen"] > b["linear_smoothe"]
            gains_before.append(pct(b["frozen"], better_greedy(b)))
            measured_before.append(b.get("frozen_measured"))
            b_cells = [fmt(b["linear_smoothe"]), fmt(b["frozen"]), fmt(pct(b["frozen"], b["linear_smoothe"]), 2)]
        lines.append(f"| {r['circuit']} | {r['seed']} | {fmt(g)} | {fmt(r['start'])} | {fmt(r['linear_smoothe'])} |"
                     f" {fmt(r['frozen'])} | {r['frozen_pick']} | {fmt(vs_lin, 2)} | {fmt(gains[-1], 2)} |"
                     f" {fmt(r['best_label'])} | {' | '.join(b_cells)} |")
    lines += ["",
              f"- Frozen worse than linear SmoothE on **{worse} of {len(rows)}** runs"
              f" (before: {worse_before} of {n_before}).",
              f"- Frozen mean real {METRIC} {below(mean(gains))} the better greedy"
              f" (before: {below(mean(gains_before)) if gains_before else '-'}).",
              f"- The start is linear SmoothE's own extraction (equal real {METRIC}) on"
              f" **{sum(r['start'] == r['linear_smoothe'] for r in rows)} of {len(rows)}** runs;"
              f" the frozen pick is the start on {sum(r['frozen_pick'] == 'linear' for r in rows)}.",
              f"- The frozen pick is an extraction the loop labelled (judged by its measurement) on"
              f" **{sum(int(r['frozen_measured']) for r in rows)} of {len(rows)}** runs"
              + (f" (before: {sum(measured_before)} of {n_before})."
                 if measured_before and None not in measured_before else ".")]
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def main():
    if "--report" not in sys.argv:
        tasks = [(c, s) for s in SEEDS for c in CIRCUITS]
        rows = run_all(one, tasks, PAR)
        write_rows(HERE / f"{NAME}.csv", with_kept_rows(HERE / f"{NAME}.csv", rows))
    report()


if __name__ == "__main__":
    main()
