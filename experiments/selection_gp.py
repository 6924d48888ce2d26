#!/usr/bin/env python3
"""The loop with its screened pool ranked by a Gaussian process over the
extractions (see selection_gp.sh), against the loop with `lcb` (its
default until selection-gp replaced it) and the best model-free method of
novelty.csv, at the same seeds and 300 calls. `gp acq` and `gp explore`: the mean real cost of the run's
acquisition picks (ranked first by the process) and of its explore picks
(drawn at random from the same pool), over its rounds. `frozen`: the run's
final model (the ensemble, trained on the labels this loop chose), frozen
as `measured.sh` does (`extract --model`, STEPS SmoothE steps, no time
limit), measured by the oracle, against the better greedy and linear
SmoothE of ablation.csv at the same seed, and against the `lcb` loop's
final model of the NOVELTY run frozen alike, where novelty.sh's output
for it is still in experiments/out.
"""
import csv
import json
import os

from abc_common import (BIN, CIRCUITS, HERE, ORACLE, ROOT, SHARED, below, fmt, label_costs, least, mean, num, oracle,
                        oracle_label, pct, run, run_all, with_kept_rows, write_rows)

BUDGET = 300
STEPS = 1000
PAR = int(os.environ.get("PAR", "2"))
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0 1 2").split()]
NAME = os.environ.get("NAME", "selection_gp")
# What it is compared with (for another oracle: NOVELTY=novelty-lib2.csv ABLATION=ablation-lib2.csv).
NOVELTY = os.environ.get("NOVELTY", "novelty.csv")
ABLATION = os.environ.get("ABLATION", "ablation.csv")
OUT = ROOT / "experiments" / "out" / NAME
# Where novelty.sh left the runs of NOVELTY (their loop models are frozen too).
NOVELTY_OUT = ROOT / "experiments" / "out" / NOVELTY.removesuffix(".csv")
# The model-free methods of novelty.csv (its columns).
MODEL_FREE = ["random", "earlier_sampler", "earlier_random", "earlier_anneal"]


def one(task):
    circuit, seed = task
    d = OUT / circuit.replace("/", "_") / str(seed)
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "gp.rounds.json").exists():
        (d / "gp.labels.jsonl").unlink(missing_ok=True)
        run([BIN, "train-cost", "--oracle", ORACLE, "--jobs", 1, "--seed", seed, "--threads", 1, "-q",
             "--budget", BUDGET, "--acquisition", "selection-gp", "--labels", d / "gp.labels.jsonl",
             "--out", d / "gp.safetensors", SHARED / f"{circuit}.json"])
    freeze(d / "gp.safetensors", circuit, seed, d / "frozen.json", d / "frozen.cost")
    # The `lcb` loop's run of NOVELTY, where it is still on disk, frozen alike.
    loop = novelty_run(circuit, seed)
    if (loop / "loop.safetensors").exists():
        freeze(loop / "loop.safetensors", circuit, seed, loop / "loop.frozen.json", loop / "loop.frozen.cost")
    return d


def novelty_run(circuit, seed):
    """Where novelty.sh left its run of `circuit` and `seed` for NOVELTY."""
    return NOVELTY_OUT / circuit.replace("/", "_") / str(seed)


def freeze(model, circuit, seed, extraction, cost):
    """`model` frozen (`extract --model`, STEPS steps, no time limit) into `extraction`, its real cost into `cost`."""
    if not extraction.exists():
        run([BIN, "extract", "--model", model, "--seed", seed, "--threads", 1, "-q", "--time-limit", 0,
             "--steps", STEPS, "-o", extraction, SHARED / f"{circuit}.json"])
    if not cost.exists():
        cost.write_text(str(oracle(SHARED / f"{circuit}.json", extraction)))


def picks(rounds_path):
    """Mean real cost of the acquisition picks and of the explore picks over a run's rounds."""
    by = {"acquisition": [], "explore": []}
    for rnd in json.load(open(rounds_path))[1:]:
        for p in rnd["picks"]:
            if p["source"] in by and p["real"] is not None:
                by[p["source"]].append(p["real"])
    return mean(by["acquisition"]), mean(by["explore"])


def main():
    tasks = [(c, s) for s in SEEDS for c in CIRCUITS]
    dirs = run_all(one, tasks, PAR)
    novelty = {(r["circuit"], int(r["seed"])): r for r in csv.DictReader(open(HERE / NOVELTY))}
    ablation = {(r["circuit"], int(r["seed"])): r for r in csv.DictReader(open(HERE / ABLATION))}
    rows = []
    for (circuit, seed), d in zip(tasks, dirs):
        n = novelty.get((circuit, seed), {})
        acq, explore = picks(d / "gp.rounds.json")
        a = ablation.get((circuit, seed), {})
        result = json.load(open(d / "frozen.json"))
        loop_cost = novelty_run(circuit, seed) / "loop.frozen.cost"
        rows.append({"circuit": circuit, "seed": seed, "gp": least(label_costs(d / "gp.labels.jsonl")[:BUDGET]),
                     "loop": num(n.get("loop")), "best_model_free": num(n.get("best_model_free")),
                     **{m: num(n.get(m)) for m in MODEL_FREE},
                     "gp_acquisition_mean": acq, "gp_explore_mean": explore,
                     "frozen": num((d / "frozen.cost").read_text()), "frozen_predicted": result["prediction"]["mean"],
                     "better_greedy": least([num(a.get("greedy")), num(a.get("dag_greedy"))]),
                     "linear_smoothe": num(a.get("linear_smoothe")),
                     "loop_frozen": num(loop_cost.read_text()) if loop_cost.exists() else None})
    rows = with_kept_rows(HERE / f"{NAME}.csv", rows)
    write_rows(HERE / f"{NAME}.csv", rows)
    report(rows)


def report(rows):
    vs_loop = [pct(r["gp"], r["loop"]) for r in rows]
    vs_free = [pct(r["gp"], r["best_model_free"]) for r in rows]
    loop_free = [pct(r["loop"], r["best_model_free"]) for r in rows]
    ranked = [pct(r["gp_acquisition_mean"], r["gp_explore_mean"]) for r in rows]
    lines = [
        "# The loop's pool ranked by a Gaussian process over the extractions",
        "",
        f"Made by `experiments/selection_gp.sh`{'' if NAME == 'selection_gp' else f' (NAME={NAME})'}: oracle {oracle_label()}, {BUDGET} oracle calls, seeds "
        f"{sorted({r['seed'] for r in rows})}. `gp`: `train-cost --acquisition selection-gp`, whose screened pool "
        "is ranked by the lower confidence bound of a Gaussian process over this design's labelled extractions "
        "(kernel `exp(-d / l)`, `d` the classes whose choice differs; `src/learn/active/selection_gp.rs`) instead of the "
        f"ensemble; everything else as the loop. `loop` and `best model-free`: `{NOVELTY}` at the same seeds. "
        "`acq` and `explore`: mean real cost of the gp run's acquisition picks and of its random picks from the "
        "same pool. Positive % = the first is lower (better).",
        "",
        "| circuit | seed | gp | loop | best model-free | gp vs loop % | gp vs best model-free % "
        "| loop vs best model-free % | acq | explore | acq vs explore % | frozen | predicted | better greedy "
        "| linear SmoothE | loop frozen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, a, b, c, k in zip(rows, vs_loop, vs_free, loop_free, ranked):
        lines.append(f"| {r['circuit']} | {r['seed']} | {fmt(r['gp'], 0)} | {fmt(r['loop'], 0)} "
                     f"| {fmt(r['best_model_free'], 0)} | {fmt(a, 2)} | {fmt(b, 2)} | {fmt(c, 2)} "
                     f"| {fmt(r['gp_acquisition_mean'])} | {fmt(r['gp_explore_mean'])} | {fmt(k, 2)} "
                     f"| {fmt(r['frozen'], 0)} | {fmt(r['frozen_predicted'])} | {fmt(r['better_greedy'], 0)} "
                     f"| {fmt(r['linear_smoothe'], 0)} | {fmt(r.get('loop_frozen'), 0)} |")
    def by_circuit(key):
        """As ablation.md measures: `key`'s mean over seeds below the best model-free mean, averaged over circuits."""
        out = []
        for c in dict.fromkeys(r["circuit"] for r in rows):
            mine = [r for r in rows if r["circuit"] == c]
            out.append(pct(mean([r[key] for r in mine]), min(mean([r[m] for r in mine]) for m in MODEL_FREE)))
        return mean(out)

    lower = sum(1 for v in vs_loop if v is not None and v > 0)
    frozen_greedy = [pct(r["frozen"], r["better_greedy"]) for r in rows]
    frozen_error = [abs(r["frozen_predicted"] - r["frozen"]) / r["frozen"] * 100 for r in rows if r["frozen"]]
    worse_linear = [r for r in rows if r["frozen"] is not None and r["frozen"] > r["linear_smoothe"]]
    worse_names = ", ".join(f"{r['circuit']} seed {r['seed']}" for r in worse_linear)
    higher = sum(1 for v in vs_loop if v is not None and v < 0)
    lines += [
        "",
        f"- Against the loop: **{below(mean(vs_loop))}** it on average; lower on {lower}, higher on {higher}, "
        f"equal on {len(rows) - lower - higher} of {len(rows)} runs.",
        f"- Against the best model-free method of each run: **{below(mean(vs_free))}** it on average (the loop: "
        f"{below(mean(loop_free))}; target: at least 1% below), above it on "
        f"{sum(1 for v in vs_free if v is not None and v < 0)} of {len(rows)} runs.",
        f"- By circuit, as `ablation.md` measures (each method's mean over the seeds, against the best of the "
        f"model-free means): **{below(by_circuit('gp'))}** (the loop: {below(by_circuit('loop'))}).",
        f"- The process's first-ranked picks measure {below(mean(ranked))} the random picks from the same pool on "
        "average.",
        f"- Frozen (the run's final model, {STEPS} steps): **{below(mean(frozen_greedy))}** the better greedy on "
        f"average (target: 5% below), worse than linear SmoothE on {len(worse_linear)} of {len(rows)} runs "
        f"({worse_names or 'none'}; target: none), "
        f"prediction off by {fmt(mean(frozen_error), 2)}% on average, {fmt(max(frozen_error), 2)}% at worst "
        "(target: 5%).",
    ]
    pairs = [(r["frozen"], r["loop_frozen"]) for r in rows if r.get("loop_frozen") is not None]
    if pairs:
        gains = [pct(g, lp) for g, lp in pairs]
        lines.append(
            f"- Against the `lcb` loop's final models frozen alike (`loop frozen`, where `{NOVELTY}`'s runs "
            f"are still on disk, {len(pairs)} runs): **{below(mean(gains))}** them on average, lower on "
            f"{sum(1 for g in gains if g > 0)}, higher on {sum(1 for g in gains if g < 0)}.")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
