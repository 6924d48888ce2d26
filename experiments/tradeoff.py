"""The area-delay trade-off with a learned static-timing model.

Per circuit and seed, with ABC mapping through examples/oracles/abc_metrics.sh
(FLOW, default `strash; map`: the structure as extracted):

1. the baselines greedy, dag-greedy, depth-greedy and linear SmoothE, each
   measured once (area, delay);
2. the model, by MODEL:
   - `train-cost` (default): `smoothe train-cost --metric area,delay` at
     BUDGET oracle calls (default 300): an ensemble learns area and a
     static-timing head learns delay from the same calls;
   - `fit-delays`: `smoothe fit-delays` on the oracle's delay (SAMPLES
     calls, default 100); the area objective is then the e-graph's DAG
     cost (node costs, an area proxy);
3. four delay targets T, evenly spaced from the least to the greatest
   baseline delay; for each, `extract --constraint delay<=T` with the model
   (no oracle call), measured. The reference area of a target is the least
   baseline area with delay <= T; a target is met when the measured delay
   is <= T and the area <= that reference; the gain is
   (reference - area) / reference when met, 0 otherwise;
4. `extract --objective delay` with the model, against depth-greedy;
5. model-free annealing with the oracle in the loop at ANNEAL calls per
   target (default 75: four targets cost the same 300 calls as the loop),
   `smoothe search --objective area --constraint delay<=T`, scored the
   same way. MODEL=none skips the model (for the ceiling run,
   NAME=ceiling MODEL=none ANNEAL=750: ten times the budget); ANNEAL=0
   skips it. With ANNEAL_CSV=earlier.csv, that run's annealing answers at
   the same targets are scored instead of annealing again.

For a paired ablation (two builds, SMOOTHE_BIN): THREADS=1 gives the loop
and the extractions one worker thread (the loop is then deterministic);
TRAIN_ONLY=1 stops after training, so that both arms train side by side;
the arms' timed extractions then run side by side too, each on one core;
BASELINES_FROM=NAME copies the baselines' extractions from
experiments/out/NAME/, so that both arms score against the same points and
targets. KEEP=1 keeps the CSV's rows of the circuits and seeds not run this
time, so that another seed adds to an arm's results.

METRIC=power puts power (which abc_metrics.sh prints too) in place of area
throughout: learned, minimised under the targets and scored.

    experiments/tradeoff.sh                      # every circuit, seed 0
    SEEDS="0 1 2" CIRCUITS="esyn/C432" experiments/tradeoff.sh
    NAME=tradeoff-dch FLOW="strash; dch; map" experiments/tradeoff.sh
    NAME=tradeoff-power METRIC=power experiments/tradeoff.sh
    THREADS=1 TRAIN_ONLY=1 BASELINES_FROM=tradeoff-seeds ANNEAL=0 \
      SMOOTHE_BIN=<variant> NAME=tradeoff-nofront python3 experiments/tradeoff.py
    python3 experiments/tradeoff.py --report     # redraw from the CSV

Writes experiments/NAME.csv, NAME.md and NAME.svg; scratch output (label
logs, extractions) goes to experiments/out/NAME/.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from abc_common import (BIN, CIRCUITS, HERE, ROOT, SHARED, mean, model_meta, read_rows, run, run_all, with_kept_rows,
                        write_rows)

NAME = os.environ.get("NAME", "tradeoff")
FLOW = os.environ.get("FLOW", "strash; map")
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0").split()]
LIMIT = os.environ.get("LIMIT", "20")
SAMPLES = os.environ.get("SAMPLES", "100")
MODEL = os.environ.get("MODEL", "train-cost")
BUDGET = os.environ.get("BUDGET", "300")
ANNEAL = os.environ.get("ANNEAL", "75")
# Runs at a time (default 1: the 20-s extractions are timed, and two runs
# share this 2-core machine's cores).
PAR = int(os.environ.get("PAR", "1"))
THREADS = os.environ.get("THREADS", "0")
TRAIN_ONLY = os.environ.get("TRAIN_ONLY") == "1"
BASELINES_FROM = os.environ.get("BASELINES_FROM")
# The metric minimised under the delay target (the oracle prints area, delay and power).
M = os.environ.get("METRIC", "area")
ORACLE = f"ABC_SCRIPT='{FLOW}' {ROOT / 'examples' / 'oracles' / 'abc_metrics.sh'}"
OUT = HERE / "out" / NAME
# A CSV of an earlier run whose annealing answers, at the same targets, are
# scored against this run's references instead of annealing again.
EARLIER = read_rows(HERE / os.environ["ANNEAL_CSV"]) if os.environ.get("ANNEAL_CSV") else []
BASELINES = ["greedy", "dag-greedy", "depth-greedy", "smoothe"]
EPS = 1e-9


def measure(graph, extraction):
    """The oracle's {area, delay, power} of an extraction file."""
    p = subprocess.run(["sh", "-c", f'{ORACLE} "$0" "$1"', str(graph), str(extraction)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise RuntimeError(f"oracle on {extraction}: {p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def newer(out, than):
    """Whether the file `out` exists and was written after `than`: an answer
    newer than the model (or fitted delays) it used is reused."""
    return out.exists() and out.stat().st_mtime > Path(than).stat().st_mtime


def extract(graph, out, seed, *args):
    """`smoothe extract` into `out`; its result file."""
    run([BIN, "extract", "-q", "--seed", seed, "--threads", THREADS, "--time-limit", LIMIT, "-o", out, *args, graph])
    return json.loads(out.read_text())


def one(task):
    circuit, seed = task
    d = OUT / f"{circuit.replace('/', '-')}-s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    graph = SHARED / f"{circuit}.json"
    base = {"circuit": circuit, "seed": seed, "flow": FLOW, "answer": None}
    points = {}
    for m in BASELINES:
        out = d / f"{m}.json"
        shared = BASELINES_FROM and HERE / "out" / BASELINES_FROM / d.name / f"{m}.json"
        if shared and not out.exists() and shared.exists():
            shutil.copyfile(shared, out)
        # Baselines and annealing results already in the run folder are
        # reused, so a rerun changes only the model's answers.
        if not out.exists():
            extract(graph, out, seed, "--method", m)
        points[m] = measure(graph, out)
    if MODEL == "none":
        fit, use, objective = None, None, None
    elif MODEL == "train-cost":
        model = d / "model.safetensors"
        # A model already in the run folder is reused: delete the folder to retrain.
        if not model.exists():
            run([BIN, "train-cost", "-q", "--oracle", ORACLE, "--metric", f"{M},delay", "--budget", BUDGET, "--seed", seed,
                 "--threads", THREADS, "--force", "--out", model, graph])
        fit = model_meta(model)["timing"]
        use = ["--model", model]
        objective = ["--objective", M]
    else:
        p = subprocess.run([str(BIN), "fit-delays", "-q", "--oracle", ORACLE, "--metric", "delay", "--samples",
                            SAMPLES, "--seed", str(seed), "--labels", str(d / "labels.jsonl"), "-o",
                            str(d / "delays.json"), str(graph)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"fit-delays {circuit}: {p.stderr}")
        fit = json.loads(p.stdout)
        use = ["--op-delays", d / "delays.json"]
        objective = []
    if TRAIN_ONLY:
        return []
    fit_cols = {"fit_relative_mae": fit and fit["test_relative_mae"], "fit_spearman": fit and fit["test_spearman"],
                "unit_depth_spearman": fit and fit["test_spearman_unit_depth"]}
    # The loop's own time (its rounds' seconds), where train-cost ran.
    rounds = d / "model.rounds.json"
    fit_cols["loop_seconds"] = round(sum(r["seconds"] for r in json.loads(rounds.read_text())), 1) \
        if MODEL == "train-cost" and rounds.exists() else None
    rows = [{**base, "kind": m, "target": None, M: v[M], "delay": v["delay"], "predicted_delay": None,
             f"reference_{M}": None, "met": None, "gain": None, **fit_cols} for m, v in points.items()]
    delays = [v["delay"] for v in points.values()]
    lo, hi = min(delays), max(delays)
    for k in range(4):
        t = round(lo + k * (hi - lo) / 3, 6)
        ref = min(v[M] for v in points.values() if v["delay"] <= t + EPS)

        def scored(kind, got, predicted):
            met = got["delay"] <= t + EPS and got[M] <= ref + EPS
            return {**base, "kind": kind, "target": t, M: got[M], "delay": got["delay"],
                    "predicted_delay": predicted, f"reference_{M}": ref, "met": int(met),
                    "gain": (ref - got[M]) / ref if met else 0.0, **fit_cols}

        if use is not None:
            out = d / f"target{k}.json"
            # An answer newer than the model, to the same target, is reused.
            fresh = newer(out, use[1]) and \
                json.loads(out.read_text())["constraints"][0]["bound"] == t
            result = json.loads(out.read_text()) if fresh else \
                extract(graph, out, seed, "--constraint", f"delay<={t}", *use, *objective)
            row = scored(f"target{k}", measure(graph, out), result["delay"])
            # Whether the answer is a measured extraction (the model's measured front) or the optimiser's.
            row["answer"] = "measured" if "measured" in result else "optimised"
            rows.append(row)
        # An earlier run's annealing at the same target is rescored here
        # rather than run again.
        earlier = [r for r in EARLIER if r["circuit"] == circuit and int(r["seed"]) == seed
                   and r["kind"] == f"anneal{k}" and abs(float(r["target"]) - t) < EPS]
        if earlier:
            got = {M: float(earlier[0][M]), "delay": float(earlier[0]["delay"])}
            rows.append(scored(f"anneal{k}", got, None))
            continue
        if ANNEAL == "0":
            continue
        # Annealing with the oracle at ANNEAL calls, its own log per target.
        out, log = d / f"anneal{k}-{ANNEAL}.json", d / f"anneal{k}-{ANNEAL}.labels.jsonl"
        done = out.exists() and json.loads(out.read_text())["constraints"][0]["bound"] == t
        if not done:
            log.unlink(missing_ok=True)
            run([BIN, "search", "-q", "--oracle", ORACLE, "--objective", M, "--constraint", f"delay<={t}",
                 "--budget", ANNEAL, "--seed", seed, "--labels", log, "-o", out, graph])
        rows.append(scored(f"anneal{k}", json.loads(out.read_text())["measured"], None))
    if use is None:
        return rows
    out = d / "fastest.json"
    result = json.loads(out.read_text()) if newer(out, use[1]) else \
        extract(graph, out, seed, "--objective", "delay", *use)
    got = measure(graph, out)
    rows.append({**base, "kind": "objective-delay", "target": None, M: got[M], "delay": got["delay"],
                 "predicted_delay": result["delay"], f"reference_{M}": None,
                 "met": int(got["delay"] <= points["depth-greedy"]["delay"] + EPS), "gain": None, **fit_cols})
    return rows


def fmt(v, digits=2):
    return "" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def svg(rows, path):
    """Small multiples of the area-delay plane: baselines as grey dots
    (named), the model's constrained answers as dots (blue: met, red: not),
    annealing's as open squares (green: met, red: not), targets as dashed
    lines."""
    first = min(r["seed"] for r in rows)
    circuits = sorted({r["circuit"] for r in rows if r["seed"] == first})
    w, h, pad, cols = 300, 220, 40, 3
    rows_n = (len(circuits) + cols - 1) // cols
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * w}" height="{rows_n * h}" '
             'font-family="sans-serif" font-size="10">']
    for i, c in enumerate(circuits):
        ox, oy = (i % cols) * w, (i // cols) * h
        mine = [r for r in rows if r["circuit"] == c and r["seed"] == first]
        xs = [r["delay"] for r in mine] + [r["target"] for r in mine if r["target"] is not None]
        ys = [r[M] for r in mine]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        sx = lambda x: ox + pad + (x - x0) / ((x1 - x0) or 1) * (w - 2 * pad)
        sy = lambda y: oy + h - pad + (y0 - y) / ((y1 - y0) or 1) * (h - 2 * pad)
        parts.append(f'<text x="{ox + pad}" y="{oy + 15}" font-weight="bold">{c} ({FLOW})</text>')
        parts.append(f'<text x="{ox + w / 2}" y="{oy + h - 8}">delay</text>')
        parts.append(f'<text x="{ox + 4}" y="{oy + h / 2}">{M}</text>')
        for r in mine:
            x, y = sx(r["delay"]), sy(r[M])
            if r["kind"] in BASELINES:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="grey"/>')
                parts.append(f'<text x="{x + 5:.1f}" y="{y - 4:.1f}" fill="grey">{r["kind"]}</text>')
            elif r["target"] is not None:
                tx = sx(r["target"])
                parts.append(f'<line x1="{tx:.1f}" y1="{oy + pad}" x2="{tx:.1f}" y2="{oy + h - pad}" '
                             'stroke="lightblue" stroke-dasharray="3,3"/>')
                if r["kind"].startswith("anneal"):
                    colour = "green" if r["met"] else "red"
                    parts.append(f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="none" '
                                 f'stroke="{colour}"/>')
                else:
                    colour = "blue" if r["met"] else "red"
                    parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def summary(targets, what):
    """The two summary lines of one arm's answers to the targets."""
    if not targets:
        return []
    seeds = sorted({r["seed"] for r in targets})
    by_seed = "" if len(seeds) < 2 else "; by seed: " + ", ".join(
        f"{s}: {sum(r['met'] for r in targets if r['seed'] == s)} of {sum(r['seed'] == s for r in targets)} "
        f"met, {100 * mean([r['gain'] for r in targets if r['seed'] == s]):.2f}%" for s in seeds)
    return [f"- {what}: targets met (delay <= T and {M} <= the least baseline {M} meeting T) "
            f"{sum(r['met'] for r in targets)} of {len(targets)}; mean gain over the reference {M}, an unmet "
            f"target counting 0: {100 * mean([r['gain'] for r in targets]):.2f}%{by_seed}"]


def annealing_arm():
    """How the report names the annealing arm: run here at ANNEAL calls per
    target, rescored from ANNEAL_CSV, or both."""
    earlier = os.environ.get("ANNEAL_CSV")
    if ANNEAL == "0":
        return f"annealing with the oracle, from {earlier} at the same targets"
    return f"annealing with the oracle, {ANNEAL} calls per target" + \
        (f" (where measured there, from {earlier} at the same targets)" if earlier else "")


def report(rows):
    targets = [r for r in rows if r["kind"].startswith("target")]
    annealed = [r for r in rows if r["kind"].startswith("anneal")]
    fastest = [r for r in rows if r["kind"] == "objective-delay"]
    circuits = sorted({r["circuit"] for r in rows})
    title = ": annealing with the oracle" if MODEL == "none" else " with learned delays"
    lines = [f"# {M.capitalize()} under a delay target{title} ({FLOW})", "",
             f"Written by `experiments/tradeoff.py` (NAME={NAME}, MODEL={MODEL}, seeds "
             f"{' '.join(map(str, sorted({r['seed'] for r in rows})))}, " + (f"{ANNEAL} annealing calls per target" if MODEL == "none" else
                                                 f"{BUDGET if MODEL == 'train-cost' else SAMPLES} oracle calls per "
                                                 "circuit") + f", {LIMIT} s per extraction). ABC with `examples/oracles/cells.genlib` measures "
             f"({M}, delay). " + ("No model: oracle-in-the-loop annealing alone, the ceiling of what search with the oracle reaches "
                                 "at this budget." if MODEL == "none" else
                                 f"`train-cost --metric {M},delay` learns {M} (the ensemble) and delay "
                                 "(per-operator delays, arrival time over the chosen DAG) from the same calls; "
                                 f"`extract --model M --objective {M} --constraint delay<=T` answers each "
                                 "target with no oracle call." if MODEL == "train-cost" else
                                 "The model is per-operator delays fitted to the oracle's delay; the extraction "
                                 "minimises the e-graph's DAG cost under the predicted delay bound, with no "
                                 "oracle call."), "",
             *summary(targets, "the model, zero calls per target"),
             *summary(annealed, annealing_arm()), ""]
    measured = [r for r in targets if r.get("answer") == "measured"]
    if measured:
        lines[-1:-1] = [f"- answered from the model's measured front (the best label meeting T): {len(measured)} of "
                        f"{len(targets)}, {sum(r['met'] for r in measured)} of them met; the optimiser's answers: "
                        f"{sum(r['met'] for r in targets) - sum(r['met'] for r in measured)} of "
                        f"{len(targets) - len(measured)} met"]
    if fastest:
        lines[-1:-1] = [
            f"- `--objective delay` measured no slower than depth-greedy: {sum(r['met'] for r in fastest)} of "
            f"{len(fastest)}",
            f"- held-out fit (mean over runs): relative error "
            f"{100 * mean([r['fit_relative_mae'] for r in fastest]):.2f}%, Spearman "
            f"{mean([r['fit_spearman'] for r in fastest]):.3f} (unit depth: "
            f"{mean([r['unit_depth_spearman'] for r in fastest]):.3f})"]
        timed = [float(r["loop_seconds"]) for r in fastest if r.get("loop_seconds") not in (None, "")]
        if timed:
            threads = {"0": "a thread per core", "1": "one thread"}.get(THREADS, f"{THREADS} threads")
            lines[-1:-1] = [f"- the loop's time (its rounds' seconds, {threads}): mean {mean(timed):.0f} s over "
                            f"{len(timed)} runs"]
    has_model = bool(targets)
    header = ["circuit", "seed", "greedy", "dag-greedy", "depth-greedy", "SmoothE"] + \
        (["fit Spearman (unit)"] if has_model else []) + ["T", f"reference {M}"] + \
        ([f"model ({M}, delay)", "predicted delay", "met", "gain"] if has_model else []) + \
        [f"annealing ({M}, delay)", "met", "gain"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for c in circuits:
        for s in sorted({r["seed"] for r in rows if r["circuit"] == c}):
            mine = {r["kind"]: r for r in rows if r["circuit"] == c and r["seed"] == s}
            pts = [f"{fmt(mine[m][M], 1)}, {fmt(mine[m]['delay'], 2)}" for m in BASELINES]
            fit = f"{fmt(mine['greedy']['fit_spearman'], 3)} ({fmt(mine['greedy']['unit_depth_spearman'], 3)})"
            for k in range(4):
                a = mine.get(f"anneal{k}")
                r = mine.get(f"target{k}") or a
                head = [c, str(s), *pts] + ([fit] if has_model else []) if k == 0 else \
                    [""] * (7 if has_model else 6)
                model = ([f"{fmt(r[M], 1)}, {fmt(r['delay'])}", fmt(r["predicted_delay"]),
                          "yes" if r["met"] else "no", f"{100 * r['gain']:.1f}%"]
                         if f"target{k}" in mine else ["", "", "", ""]) if has_model else []
                anneal = ([f"{fmt(a[M], 1)}, {fmt(a['delay'])}", "yes" if a["met"] else "no",
                           f"{100 * a['gain']:.1f}%"] if a else ["", "", ""])
                lines.append("| " + " | ".join(head + [fmt(r["target"]), fmt(r[f"reference_{M}"], 1), *model,
                                                         *anneal]) + " |")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    svg(rows, HERE / f"{NAME}.svg")


def main():
    csv_path = HERE / f"{NAME}.csv"
    if "--report" not in sys.argv:
        tasks = [(c, s) for c in CIRCUITS for s in SEEDS]
        rows = [r for rs in run_all(one, tasks, PAR) for r in rs]
        if TRAIN_ONLY:
            return
        write_rows(csv_path, with_kept_rows(csv_path, rows))
    report(read_rows(csv_path))


if __name__ == "__main__":
    main()
