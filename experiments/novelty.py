#!/usr/bin/env python3
"""One label per feature row: the loop with and without it (see novelty.sh).

Since this change, a round of `train-cost` skips picks and screened
candidates whose operator-level feature row equals a labelled extraction's
or another pick's (the model cannot rank such twins apart, and most measure
alike). This reruns, with the ABC area oracle (or ORACLE=...), for each
circuit and seed:
- loop:   `train-cost` at its defaults;
- random: `train-cost --acquisition random`, random picks from the loop's
  own (now twin-free) candidate pool, a model-free method;
and compares the least real cost at 300 calls with the loop before the
change (`polish.csv`, column `loop`: the same seeds, made by the code just
before it) and with the model-free methods of `ablation.csv` (sampler,
random picks from the pool as it was then, and oracle-in-the-loop
annealing, at the same seeds). The best model-free area of a run is the
least of those and the new random arm: the strongest baseline measured.
Writes novelty.csv and novelty.md. Finished runs in experiments/out/NAME
are kept (a stopped run resumes).
"""
import csv
import json
import os

from abc_common import (BIN, CIRCUITS, HERE, ORACLE, ROOT, SHARED, below, fmt, label_costs, least, mean, num,
                        oracle_label, pct, run, run_all, with_kept_rows, write_rows)

BUDGET = int(os.environ.get("BUDGET", "300"))
PAR = int(os.environ.get("PAR", "2"))
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0 1 2").split()]
NAME = os.environ.get("NAME", "novelty")
OUT = ROOT / "experiments" / "out" / NAME
# The loop as it was when these results were made: `lcb` was the default
# acquisition rule until selection-gp replaced it.
ARMS = {"loop": ["--acquisition", "lcb"], "random": ["--acquisition", "random"]}
EARLIER = ["sampler", "random", "anneal"]
# Where the loop before the change and the earlier model-free runs come
# from (for another oracle: BEFORE=ablation-lib2.csv EARLIER_CSV=ablation-lib2.csv,
# whose loop predates the earlier twin change too).
BEFORE = os.environ.get("BEFORE", "polish.csv")
EARLIER_CSV = os.environ.get("EARLIER_CSV", "ablation.csv")


def calls_to_reach(costs, target):
    """How many calls the log took to reach `target` or less (None: never)."""
    for i, c in enumerate(costs):
        if c is not None and c <= target:
            return i + 1
    return None


def one(task):
    circuit, seed = task
    d = OUT / circuit.replace("/", "_") / str(seed)
    d.mkdir(parents=True, exist_ok=True)
    for arm, extra in ARMS.items():
        if (d / f"{arm}.rounds.json").exists():
            continue
        (d / f"{arm}.labels.jsonl").unlink(missing_ok=True)
        run([BIN, "train-cost", "--oracle", ORACLE, "--jobs", 1, "--seed", seed, "--threads", 1, "-q",
             "--budget", BUDGET, *extra, "--labels", d / f"{arm}.labels.jsonl", "--out", d / f"{arm}.safetensors",
             SHARED / f"{circuit}.json"])
    return d


def table(path, key_cols):
    """Rows of a CSV by (circuit, seed)."""
    if not path.exists():
        return {}
    return {(r["circuit"], int(r["seed"])): r for r in csv.DictReader(open(path)) if all(r.get(k) for k in key_cols)}


def main():
    tasks = [(c, s) for s in SEEDS for c in CIRCUITS]
    dirs = run_all(one, tasks, PAR)
    before = table(HERE / BEFORE, ["loop"])
    earlier = table(HERE / EARLIER_CSV, EARLIER)
    rows = []
    for (circuit, seed), d in zip(tasks, dirs):
        loop = label_costs(d / "loop.labels.jsonl")[:BUDGET]
        rand = label_costs(d / "random.labels.jsonl")[:BUDGET]
        e = earlier.get((circuit, seed), {})
        model_free = [least(rand)] + [num(e.get(m)) for m in EARLIER]
        best_free = least(model_free)
        report = json.load(open(d / "loop.rounds.json"))[-1]["report"]
        rows.append({
            "circuit": circuit, "seed": seed,
            "loop": least(loop), "loop_before": num(before.get((circuit, seed), {}).get("loop")),
            "random": least(rand), **{f"earlier_{m}": num(e.get(m)) for m in EARLIER},
            "best_model_free": best_free,
            "loop_calls_to_best_model_free": calls_to_reach(loop, best_free) if best_free is not None else None,
            "test_spearman": report["test_spearman"],
        })
    rows = with_kept_rows(HERE / f"{NAME}.csv", rows)
    write_rows(HERE / f"{NAME}.csv", rows)
    report_md(rows)


def report_md(rows):
    def by_circuit(key):
        """How far `key`'s mean over seeds lies below the best model-free mean, averaged over circuits."""
        out = []
        for c in dict.fromkeys(r["circuit"] for r in rows):
            mine = [r for r in rows if r["circuit"] == c]
            free = [mean([r[m] for r in mine]) for m in ["random", *[f"earlier_{e}" for e in EARLIER]]]
            out.append(pct(mean([r[key] for r in mine]), min(free)))
        return mean(out)

    gain_before = [pct(r["loop"], r["loop_before"]) for r in rows]
    gain_free = [pct(r["loop"], r["best_model_free"]) for r in rows]
    before_free = [pct(r["loop_before"], r["best_model_free"]) for r in rows]
    calls = [r["loop_calls_to_best_model_free"] for r in rows]
    n = len([g for g in gain_before if g is not None])
    lines = [
        "# One label per feature row: the loop with and without it",
        "",
        f"Made by `experiments/novelty.sh`: oracle {oracle_label()}, {BUDGET} oracle calls, seeds "
        f"{sorted({r['seed'] for r in rows})}. A round of `train-cost` now skips picks and screened candidates whose "
        "operator-level feature row equals a labelled extraction's or another pick's. `loop before`: the loop of "
        f"`{BEFORE}` at the same seeds (`polish.csv` is the code just before the change); "
        "`random`: `--acquisition random` on the new pool; "
        f"`sampler`, `random then`, `anneal`: the model-free methods of `{EARLIER_CSV}` at the same seeds; "
        "`best model-free`: the least of the four. Positive % = the loop is lower (better).",
        "",
        "| circuit | seed | loop | loop before | random | sampler | random then | anneal | best model-free "
        "| loop vs before % | loop vs best model-free % | calls to reach it | test Spearman |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, g, f in zip(rows, gain_before, gain_free):
        lines.append(
            f"| {r['circuit']} | {r['seed']} | {fmt(r['loop'], 0)} | {fmt(r['loop_before'], 0)} "
            f"| {fmt(r['random'], 0)} "
            f"| {fmt(r['earlier_sampler'], 0)} | {fmt(r['earlier_random'], 0)} | {fmt(r['earlier_anneal'], 0)} "
            f"| {fmt(r['best_model_free'], 0)} | {fmt(g, 2)} | {fmt(f, 2)} "
            f"| {r['loop_calls_to_best_model_free'] or 'never'} | {r['test_spearman']:.3f} |")
    lower = sum(1 for g in gain_before if g is not None and g > 0)
    higher = sum(1 for g in gain_before if g is not None and g < 0)
    worse = sum(1 for f in gain_free if f is not None and f < 0)
    reached = [c for c in calls if c is not None]
    lines += [
        "",
        f"- The loop against itself before the change: **{below(mean(gain_before))}** it on average; lower on "
        f"{lower}, higher on {higher}, equal on {n - lower - higher} of {n} runs.",
        f"- Against the best model-free method of each run: the loop lies **{below(mean(gain_free))}** it on "
        f"average (before the change: {below(mean(before_free))}; target: at least 1% below) and above it on "
        f"{worse} of {n} runs (target: none).",
        f"- By circuit, as `ablation.md` measures (each method's mean over the seeds, against the best of the "
        f"model-free means): the loop lies **{below(by_circuit('loop'))}** it (before the change: "
        f"{below(by_circuit('loop_before'))}).",
        f"- Random picks from the new pool: the loop lies {below(mean([pct(r['loop'], r['random']) for r in rows]))} "
        f"them on average; they lie {below(mean([pct(r['random'], r['earlier_random']) for r in rows]))} random "
        f"picks from the pool as `{EARLIER_CSV}` ran it, before this change and the earlier one that skips "
        "commutative twins (skipping twins needs no model).",
        f"- Calls for the loop to reach the best model-free {BUDGET}-call area: reached in {len(reached)} of {n} "
        f"runs (median of those {sorted(reached)[len(reached) // 2] if reached else '-'}; target: at most "
        f"{BUDGET // 2} on average).",
        f"- Test-split Spearman of the final models: {min(r['test_spearman'] for r in rows):.3f} to "
        f"{max(r['test_spearman'] for r in rows):.3f}, at least 0.8 on "
        f"{sum(r['test_spearman'] >= 0.8 for r in rows)} of {n} (target: every circuit).",
    ]
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
