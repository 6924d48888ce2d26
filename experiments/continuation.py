#!/usr/bin/env python3
"""A frozen model's search under a weaker trust charge first (see continuation.sh).

For every final model of an ablation run (ABLATION=ablation-twinfree: per
circuit and seed, the loop's model and the models fitted at the end of the
sampler and random-pick runs), `extract --model M --continuation ARM` for each
arm (`none`: the search under the full objective alone), step-bounded so that
a run is the same on any machine, and the oracle's cost of each extraction.
Writes continuation.csv and continuation.md. Finished extractions are kept.
"""
import json
import os

from abc_common import HERE, ROOT, SHARED, BIN, fmt, mean, oracle, oracle_label, pct, run, run_all, write_rows

ABLATION = os.environ.get("ABLATION", "ablation-twinfree")
SRC = ROOT / "experiments" / "out" / ABLATION
OUT = ROOT / "experiments" / "out" / "continuation"
ARMS = os.environ.get("ARMS", "none 0.1,0.3 0.03,0.1,0.3").split()
MODELS = os.environ.get("MODELS", "loop sampler random").split()
PAR = int(os.environ.get("PAR", "2"))
STEPS = int(os.environ.get("STEPS", "1000"))
CIRCUITS = os.environ.get("CIRCUITS", "").split() or \
    [f"esyn/{p.stem}" for p in sorted((SHARED / "esyn").glob("*.json"))] + ["boole/mul16"]


def runs():
    """(circuit, seed, model name) of every model the ablation run left."""
    out = []
    for c in CIRCUITS:
        d = SRC / c.replace("/", "_")
        for seed in sorted(int(p.name) for p in d.glob("*") if p.name.isdigit()) if d.exists() else []:
            out += [(c, seed, m) for m in MODELS if (d / str(seed) / f"{m}.safetensors").exists()]
    return out


def one(task):
    c, seed, model, arm = task
    graph = SHARED / f"{c}.json"
    out = OUT / c.replace("/", "_") / str(seed) / f"{model}.{arm}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        extra = [] if arm == "none" else ["--continuation", arm]
        run([BIN, "extract", "--model", SRC / c.replace("/", "_") / str(seed) / f"{model}.safetensors",
             "--seed", seed, "--threads", 1, "-q", "--time-limit", 0, "--steps", STEPS, *extra, "-o", out, graph])
    result = json.load(open(out))
    return dict(circuit=c, seed=seed, model=model, arm=arm, pick=result["pick"],
                predicted=result["prediction"]["mean"], score=result["model_cost"], real=oracle(graph, out))


def baselines(c, seed):
    """The ablation run's greedy, dag-greedy and linear-SmoothE real costs."""
    rounds = json.load(open(SRC / c.replace("/", "_") / str(seed) / "loop.rounds.json"))[0]
    better = min(rounds["greedy_real_cost"], rounds["dag_greedy_real_cost"])
    linear = oracle(SHARED / f"{c}.json", SRC / c.replace("/", "_") / str(seed) / "linear.json")
    return better, linear


def report(rows):
    by = {(r["circuit"], r["seed"], r["model"], r["arm"]): r for r in rows}
    keys = sorted({(r["circuit"], r["seed"], r["model"]) for r in rows})
    base = {(c, s): baselines(c, s) for c, s, _ in keys}
    lines = [
        "# A frozen model's search under a weaker trust charge first",
        "",
        f"Made by `experiments/continuation.sh`: oracle {oracle_label()}, the final models of `{ABLATION}`"
        f" (the loop's, and those fitted to the labels of its sampler and random-pick runs), `extract --model"
        f" --continuation ARM`, {STEPS} SmoothE steps and no time limit. `none` is `extract --model` as"
        " shipped: the model-guided search under the full objective alone; an arm such as `0.1,0.3` first"
        " searches under a tenth, then three tenths of the trust charge, each from the model-free starts and"
        " the last stage's survivors, then under the full objective. Each cell: real area (the model's"
        " prediction).",
        "",
        "| circuit | seed | model | better greedy | linear SmoothE | " + " | ".join(ARMS) + " |",
        "|---|---|---|---|---|" + "---|" * len(ARMS),
    ]
    for c, s, m in keys:
        better, linear = base[(c, s)]
        cells = []
        for a in ARMS:
            r = by.get((c, s, m, a))
            cells.append("-" if r is None else f"{fmt(r['real'], 0)} ({fmt(r['predicted'])})")
        lines.append(f"| {c} | {s} | {m} | {fmt(better, 0)} | {fmt(linear, 0)} | " + " | ".join(cells) + " |")
    lines += ["", "`score below none`: how much lower the model's own objective (`model_cost`, what the search"
              " minimises) lies at the arm's pick than at the plain search's: how much further the search got by"
              " the model.", "",
              "| arm | mean score below none % | mean area below none % | lower / higher than none |"
              " mean below the better greedy %"
              " | worse than linear SmoothE | mean prediction error % | worst prediction error % |",
              "|---|---|---|---|---|---|---|---|"]
    for a in ARMS:
        rs = [by[k + (a,)] for k in keys if k + (a,) in by and by[k + (a,)]["real"] is not None]
        vs_none = [pct(r["real"], by[(r["circuit"], r["seed"], r["model"], "none")]["real"]) for r in rs
                   if (r["circuit"], r["seed"], r["model"], "none") in by]
        scores = [pct(r["score"], by[(r["circuit"], r["seed"], r["model"], "none")]["score"]) for r in rs
                  if (r["circuit"], r["seed"], r["model"], "none") in by]
        lower = sum(1 for v in vs_none if v is not None and v > 1e-9)
        higher = sum(1 for v in vs_none if v is not None and v < -1e-9)
        vs_greedy = [pct(r["real"], base[(r["circuit"], r["seed"])][0]) for r in rs]
        worse_linear = sum(1 for r in rs if r["real"] > base[(r["circuit"], r["seed"])][1])
        errors = [100 * abs(r["predicted"] - r["real"]) / r["real"] for r in rs]
        lines.append(f"| {a} | {fmt(mean(scores), 2)} | {fmt(mean(vs_none), 2)} | {lower} / {higher} | {fmt(mean(vs_greedy), 2)} |"
                     f" {worse_linear} of {len(rs)} | {fmt(mean(errors), 2)} | {fmt(max(errors, default=None), 2)} |")
    lines.append("")
    (HERE / "continuation.md").write_text("\n".join(lines))


def main():
    tasks = [t + (a,) for t in runs() for a in ARMS]
    rows = run_all(one, tasks, PAR)
    write_rows(HERE / "continuation.csv", rows)
    report(rows)


if __name__ == "__main__":
    main()
