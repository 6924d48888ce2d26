#!/usr/bin/env python3
"""Does one model per cell library transfer to new designs? (see transfer.sh)

With the ABC area oracle (or ORACLE=...) and seed SEED:

1. corpus: `train-cost --budget BUDGET` over every esyn circuit at once,
   timed (the library model, `models/esyn-abc-area.safetensors` when
   SHIP=1). Each design's labels come from its own loop, so the label log
   serves every leave-one-out corpus below at no further oracle call.
2. leave one out: for each circuit, a corpus model over the others (labels
   from the log), then `extract --model` on the circuit left out, with zero
   oracle calls, measured by the oracle against greedy, dag-greedy and
   linear SmoothE (`extract --method smoothe`). boole/mul16 is left out of
   every esyn corpus; its operators differ, which the model refuses.
   The corpus log starts empty (KEEP_LABELS=1 reuses it), so the corpus
   time includes every oracle call.
3. fine-tuning: `train-cost --init-model LOO --budget FT` on the circuit
   left out against `train-cost --budget FT` from scratch (separate logs),
   each then frozen and extracted; and the best label each found.

Writes transfer.csv, transfer.md and transfer.svg (NAME.* with NAME=..., for
another ORACLE=..., whose runs then live in out/NAME). `--report` redraws the
table and plot from the CSV; `--refreeze` redoes only the extractions by a
model (zero-call and frozen) of the finished runs with the binary under test;
`--retune` redoes only the fine-tuning runs (new oracle calls, fresh logs)
and their frozen extractions; `--reseed` extracts the scratch and fine-tuned
models again with `extract --seed RESEED` (default SEED + 1), so the frozen
search does not draw the loops' own broad samples again (it does at equal
seeds: the same sampler, starts and seed).
"""
import csv
import json
import os
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from abc_common import (BIN, HERE, METRIC, ORACLE, ROOT, SHARED, cell, fmt, oracle, oracle_label, pct, predict,
                        read_label, run, spearman)

BUDGET = int(os.environ.get("BUDGET", "100"))
FT = int(os.environ.get("FT", "30"))
SEED = int(os.environ.get("SEED", "0"))
PAR = int(os.environ.get("PAR", "2"))
STEPS = os.environ.get("STEPS", "1000")
ESYN = [f"esyn/{p.stem}" for p in sorted((SHARED / "esyn").glob("*.json"))]
OTHER = ["boole/mul16"]
NAME = os.environ.get("NAME", "transfer")
OUT = ROOT / "experiments" / "out" / NAME
# ACQUISITION=selection-gp: every loop of the experiment (the corpus's, the
# fine-tuned and the from-scratch ones) ranks its pool so (default: the
# loop's own default).
ACQUISITION = os.environ.get("ACQUISITION")
RESEED = int(os.environ.get("RESEED", SEED + 1))
QUIET = ["--threads", 1, "-q"]
COMMON = ["--seed", SEED, *QUIET]
LOOP = ["--acquisition", ACQUISITION] if ACQUISITION else []


def graph(c):
    return SHARED / f"{c}.json"


def extract(c, out, *args, seed=SEED):
    """A step-bounded extraction (deterministic for the seed), measured."""
    run([BIN, "extract", *args, "--seed", seed, *QUIET, "--time-limit", 0, "--steps", STEPS, "-o", out, graph(c)])
    return oracle(graph(c), out)


def corpus():
    OUT.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("KEEP_LABELS"):
        # A fresh log, so the time below includes every oracle call.
        (OUT / "labels.jsonl").unlink(missing_ok=True)
    start = time.time()
    run([BIN, "train-cost", "--oracle", ORACLE, "--budget", BUDGET, "--jobs", 2, *COMMON, *LOOP, "--force",
         "--labels", OUT / "labels.jsonl", "--out", OUT / "esyn.safetensors", *map(graph, ESYN)])
    seconds = time.time() - start
    rounds = json.load(open(OUT / "esyn.rounds.json"))
    return seconds, rounds


def one(task):
    c, baselines = task
    d = OUT / c.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    row = dict(circuit=c, seed=SEED, budget=BUDGET, fine_tune_budget=FT, acquisition=ACQUISITION or "")
    others = [x for x in ESYN if x != c]
    loo = d / "loo.safetensors"
    # A copy of the corpus log (a log is locked by the run using it); every
    # label it needs is in it, so this costs no oracle call.
    (d / "corpus.labels.jsonl").write_bytes((OUT / "labels.jsonl").read_bytes())
    run([BIN, "train-cost", "--oracle", ORACLE, "--budget", BUDGET, "--jobs", 2, *COMMON, *LOOP, "--force",
         "--labels", d / "corpus.labels.jsonl", "--out", loo, *map(graph, others)])
    row["loo_new_calls"] = sum(1 for _ in open(d / "corpus.labels.jsonl")) - sum(1 for _ in open(OUT / "labels.jsonl"))
    row["corpus_test_spearman"] = json.load(open(d / "loo.rounds.json"))["corpus_report"]["test_spearman"]
    row.update(greedy=baselines.get("greedy"), dag_greedy=baselines.get("dag_greedy"))
    row["linear_smoothe"] = extract(c, d / "linear.json", "--method", "smoothe")
    if baselines.get("greedy") is None:
        for m in ["greedy", "dag-greedy"]:
            run([BIN, "extract", "--method", m, "-q", "-o", d / f"{m}.json", graph(c)])
            row[m.replace("-", "_")] = oracle(graph(c), d / f"{m}.json")
    zero_call(c, d, row)
    # Fine-tuning against a model from scratch, FT calls each, own logs.
    tune(c, d, row, ["scratch", "fine_tuned"])
    print(row, file=sys.stderr)
    return row


def tune(c, d, row, kinds):
    """The FT-call runs of `kinds` (scratch, fine_tuned) on circuit c, each
    with a fresh log of its own, frozen and measured."""
    for kind in kinds:
        extra = ["--init-model", d / "loo.safetensors"] if kind == "fine_tuned" else []
        log = d / f"{kind}.labels.jsonl"
        log.unlink(missing_ok=True)
        model = d / f"{kind}.safetensors"
        p = run([BIN, "train-cost", "--oracle", ORACLE, "--budget", FT, "--jobs", 1, *COMMON, *LOOP, "--force", *extra,
                 "--labels", log, "--out", model, graph(c)], check=False)
        if p.returncode != 0:
            row[kind] = row[f"{kind}_best_label"] = None
            row["note"] += f" {kind}: " + (p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
            continue
        row[f"{kind}_best_label"] = json.load(open(d / f"{kind}.best.json"))["real_cost"]
        row[kind] = extract(c, d / f"{kind}.frozen.json", "--model", model)


def model_designs(path):
    """Fingerprints of a model's training e-graphs (its safetensors metadata)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["smoothe"])["egraphs"]


def held_out_spearman(c, d):
    """How well the leave-one-out model ranks the left-out circuit's own
    extractions: Spearman of its mean against the real cost over that
    circuit's labels in the corpus log (which the model never saw). None for
    a circuit outside the corpus."""
    left_out = set(model_designs(OUT / "esyn.safetensors")) - set(model_designs(d / "loo.safetensors"))
    if len(left_out) != 1:
        return None
    fingerprint = left_out.pop()
    labels = [read_label(line) for line in open(OUT / "labels.jsonl")]
    labels = [x for x in labels if x["egraph"] == fingerprint and x.get("cost") is not None]
    files = []
    (d / "held_out").mkdir(exist_ok=True)
    for i, x in enumerate(labels):
        files.append(d / "held_out" / f"{i}.json")
        files[-1].write_text(json.dumps({"choices": x["choices"]}))
    verdicts = predict(d / "loo.safetensors", graph(c), *files)
    return spearman([x["cost"] for x in labels], [v["mean"] for v in verdicts])


def zero_call(c, d, row):
    """The leave-one-out model on the circuit left out, zero oracle calls to
    choose; and how well it ranks that circuit's labelled extractions."""
    row["held_out_spearman"] = held_out_spearman(c, d)
    p = run([BIN, "extract", "--model", d / "loo.safetensors", *COMMON, "--time-limit", 0, "--steps", STEPS,
             "-o", d / "zero.json", graph(c)], check=False)
    if p.returncode != 0:
        row["zero_call"] = None
        row["note"] = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    else:
        row["zero_call"] = oracle(graph(c), d / "zero.json")
        result = json.load(open(d / "zero.json"))
        row["zero_call_predicted"] = result["prediction"]["mean"]
        row["zero_call_pick"] = result.get("pick", "")
        # The optimum's transfer margin, as % of the estimated reference cost.
        charge, reference = result.get("optimum_charge"), result.get("reference") or {}
        row["zero_call_margin"] = 100 * charge / reference["cost"] if charge is not None and reference.get("cost") else None
        row["note"] = ""


def refreeze_one(row):
    """Redoes a finished circuit's extractions by a model (zero-call, and the
    scratch and fine-tuned models frozen) with the binary under test."""
    c = row["circuit"]
    d = OUT / c.replace("/", "_")
    note = row.get("note") or ""
    zero_call(c, d, row)
    if row["zero_call"] is None:
        row["note"] = note  # the same refusal, with the fine-tuning's
    for kind in ["scratch", "fine_tuned"]:
        if (d / f"{kind}.safetensors").exists() and row.get(kind) not in (None, ""):
            row[kind] = extract(c, d / f"{kind}.frozen.json", "--model", d / f"{kind}.safetensors")
    print(row, file=sys.stderr)
    return row


def retune_one(row):
    """Redoes a finished circuit's fine-tuning run (new calls, a fresh log)
    and its frozen extraction with the binary under test; the corpus, the
    leave-one-out model and the from-scratch run stay as they are."""
    c = row["circuit"]
    d = OUT / c.replace("/", "_")
    if row.get("fine_tuned") not in (None, ""):
        tune(c, d, row, ["fine_tuned"])
    print(row, file=sys.stderr)
    return row


def reseed_one(row):
    """Extracts a finished circuit's scratch and fine-tuned models again
    with extract's seed RESEED, measured."""
    c = row["circuit"]
    d = OUT / c.replace("/", "_")
    row["reseed"] = RESEED
    for kind in ["scratch", "fine_tuned"]:
        if row.get(kind) not in (None, ""):
            row[f"{kind}_reseed"] = extract(c, d / f"{kind}.reseed.json", "--model", d / f"{kind}.safetensors",
                                            seed=RESEED)
    print(row, file=sys.stderr)
    return row


def redo(one_row):
    """Applies `one_row` to every row of the finished run's CSV, rewrites
    it and the report."""
    with open(HERE / f"{NAME}.csv") as f:
        rows = list(csv.DictReader(f))
    # The extractions are redone with SEED; a run made with another seed
    # would be refrozen as a different run.
    seeds = {int(r["seed"]) for r in rows}
    if seeds != {SEED}:
        raise SystemExit(f"{NAME}.csv was made with seed(s) {sorted(seeds)}; rerun with SEED={min(seeds)}")
    with ThreadPoolExecutor(PAR) as pool:
        rows = list(pool.map(one_row, rows))
    with open(HERE / f"{NAME}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    report()


def main():
    seconds, rounds = corpus()
    base = {}
    for path, rs in rounds["designs"].items():
        c = "esyn/" + Path(path).stem
        base[c] = dict(greedy=rs[0]["greedy_real_cost"], dag_greedy=rs[0]["dag_greedy_real_cost"])
    if os.environ.get("SHIP") and NAME != "transfer":
        raise SystemExit("SHIP=1 ships the default oracle's models only")
    if os.environ.get("SHIP"):
        for ext in ["safetensors", "rounds.json"]:
            (ROOT / "models" / f"esyn-abc-area.{ext}").write_bytes((OUT / f"esyn.{ext}").read_bytes())
    tasks = [(c, base.get(c, {})) for c in ESYN + OTHER]
    with ThreadPoolExecutor(PAR) as pool:
        rows = list(pool.map(one, tasks))
    if os.environ.get("SHIP"):
        # The model trained without mul3, for the README's demo on a design
        # the model has not seen.
        loo = OUT / "esyn_mul3" / "loo.safetensors"
        (ROOT / "models" / "esyn-abc-area-without-mul3.safetensors").write_bytes(loo.read_bytes())
    for r in rows:
        r["corpus_seconds"] = round(seconds, 1)
        r["corpus_designs"] = len(ESYN)
    with open(HERE / f"{NAME}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    report()


def short(note):
    """A refusal for unseen operators, in a few words."""
    marker = "never seen the operator(s) "
    if note and marker in note:
        ops = note.split(marker, 1)[1].split(" of this e-graph", 1)[0]
        return f"refused, zero-call and fine-tuning: operators {ops} unseen"
    return note or ""


def report():
    with open(HERE / f"{NAME}.csv") as f:
        rows = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)]
    for r in rows:
        r["note"] = short(r.get("note"))
    seconds = rows[0]["corpus_seconds"]
    lines = ["# One model per cell library: transfer to designs it was not trained on", "",
             f"Made by `experiments/transfer.sh`: oracle {oracle_label()}, seed "
             f"{int(rows[0]['seed'])}, {int(rows[0]['budget'])} oracle calls per training design"
             f"{f' (every loop with `--acquisition {acq}`)' if (acq := rows[0].get('acquisition')) else ''}; extractions "
             f"step-bounded ({STEPS} SmoothE steps). Positive % = better (smaller {METRIC}).", "",
             f"Training the corpus model over {int(rows[0]['corpus_designs'])} esyn circuits at `--budget "
             f"{int(rows[0]['budget'])}` took **{seconds / 60:.1f} min** on this 2-core machine, oracle calls "
             "included (target: under 15 min).", "",
             "## Leave one out, zero oracle calls", "",
             "The zero-call extraction is the cheapest, by the model's mean plus one ensemble spread, of its "
             "conservative optimum and the greedy, dag-greedy and linear-SmoothE extractions (`picked`); the "
             "optimum also pays the model's transfer margin (`margin`, % of the design's estimated dag-greedy "
             "cost: how far the model's predicted differences were off on training designs left out in turn).", "",
             "`corpus test Spearman` is the leave-one-out model's, over its training designs' test split (so it "
             "includes the differences between designs); `held-out Spearman` is over the left-out circuit's own "
             "labelled extractions, which the model never saw: how well it ranks a new design's extractions.", "",
             "| circuit | greedy | dag-greedy | linear SmoothE | zero-call model | picked | margin % | vs better greedy % |"
             " vs linear % | predicted | corpus test Spearman | held-out Spearman | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    vs_lin, never_worse = [], True
    for r in rows:
        better = min(x for x in [r["greedy"], r["dag_greedy"]] if x is not None) \
            if r["greedy"] is not None or r["dag_greedy"] is not None else None
        z = r["zero_call"]
        if z is not None:
            vs_lin.append(pct(z, r["linear_smoothe"]))
            never_worse &= z <= better
        lines.append(f"| {r['circuit']} | {fmt(r['greedy'])} | {fmt(r['dag_greedy'])} | {fmt(r['linear_smoothe'])} |"
                     f" {fmt(z)} | {r.get('zero_call_pick') or '-'} | {fmt(r.get('zero_call_margin'), 1)} | {fmt(pct(z, better), 2)} | {fmt(pct(z, r['linear_smoothe']), 2)} |"
                     f" {fmt(r.get('zero_call_predicted'))} | {fmt(r['corpus_test_spearman'], 3)} |"
                     f" {fmt(r.get('held_out_spearman'), 3)} |"
                     f" {r.get('note') or ''} |")
    mean_lin = sum(vs_lin) / len(vs_lin) if vs_lin else float("nan")
    held = [r["held_out_spearman"] for r in rows if r.get("held_out_spearman") is not None]
    lines += ["", f"- Never worse than the better of greedy and dag-greedy (where the model applies): **{never_worse}**.",
              f"- Mean {METRIC} below linear SmoothE: **{mean_lin:.2f}%** (target: at least 2%).",
              f"- Held-out Spearman: {min(held):.3f} to {max(held):.3f}, mean {sum(held) / len(held):.3f}." if held
              else "- Held-out Spearman: not measured.", "",
              f"## Fine-tuning with {int(rows[0]['fine_tune_budget'])} calls against a model from scratch", "",
              "Each trained with its own label log on the circuit left out; `frozen` is `extract --model` with that "
              f"model (zero further calls), `best label` the least {METRIC} the run measured.", "",
              "| circuit | scratch frozen | fine-tuned frozen | frozen gain % | scratch best label |"
              " fine-tuned best label | best-label gain % |",
              "|---|---|---|---|---|---|---|"]
    wins, label_wins = [], []
    for r in rows:
        s, t = r.get("scratch"), r.get("fine_tuned")
        if s is not None and t is not None:
            wins.append(t < s)
            label_wins.append(r["fine_tuned_best_label"] < r["scratch_best_label"])
        lines.append(f"| {r['circuit']} | {fmt(s)} | {fmt(t)} | {fmt(pct(t, s), 2)} | {fmt(r.get('scratch_best_label'))}"
                     f" | {fmt(r.get('fine_tuned_best_label'))} |"
                     f" {fmt(pct(r.get('fine_tuned_best_label'), r.get('scratch_best_label')), 2)} |")
    lines += ["", f"- Fine-tuned frozen model better than the from-scratch one: **{sum(wins)} of {len(wins)}** "
              "circuits where both exist (target: every circuit).",
              f"- Fine-tuned run's best label better than the from-scratch run's: **{sum(label_wins)} of "
              f"{len(label_wins)}**.", ""]
    reseeded = [r for r in rows if r.get("fine_tuned_reseed") is not None and r.get("scratch_reseed") is not None]
    if reseeded:
        lines += [f"### Frozen with another extract seed ({int(reseeded[0]['reseed'])})", "",
                  "At equal seeds `extract --model`'s guided search draws the loop's own broad samples again "
                  "(the same sampler, starts and seed), so a model frozen at the loop's seed finds those labels "
                  "measured. Here the same models are extracted with another seed (which also changes the "
                  "linear-SmoothE start, then unmeasured).", "",
                  "| circuit | scratch frozen | scratch, reseeded | fine-tuned frozen | fine-tuned, reseeded |"
                  " reseeded gain % |", "|---|---|---|---|---|---|"]
        for r in reseeded:
            s, t = r["scratch_reseed"], r["fine_tuned_reseed"]
            lines.append(f"| {r['circuit']} | {fmt(r.get('scratch'))} | {fmt(s)} | {fmt(r.get('fine_tuned'))} | "
                         f"{fmt(t)} | {fmt(pct(t, s), 2)} |")
        better = sum(r["fine_tuned_reseed"] < r["scratch_reseed"] for r in reseeded)
        worse = sum(r["fine_tuned_reseed"] > r["scratch_reseed"] for r in reseeded)
        lines += ["", f"- Reseeded, fine-tuned better than from scratch: **{better} of {len(reseeded)}**, worse on "
                  f"{worse}.", ""]
    lines += [f"Zero-call {METRIC} relative to the better greedy, per circuit: `{NAME}.svg`."]
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    svg(rows)


def svg(rows):
    """Bars: zero-call model, linear SmoothE and fine-tuned frozen, % below the better greedy."""
    series = [("zero_call", "#1f77b4"), ("linear_smoothe", "#aaaaaa"), ("fine_tuned", "#2ca02c")]
    w, h, pad = 720, 320, 50
    vals = []
    for r in rows:
        better = min(x for x in [r["greedy"], r["dag_greedy"]] if x is not None)
        vals.append([pct(r.get(k), better) for k, _ in series])
    flat = [v for vs in vals for v in vs if v is not None] + [0.0]
    lo, hi = min(flat) - 1, max(flat) + 1
    y = lambda v: pad + (hi - v) / (hi - lo) * (h - 2 * pad)
    bw = (w - 2 * pad) / len(rows) / (len(series) + 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<line x1="{pad}" x2="{w - pad}" y1="{y(0)}" y2="{y(0)}" stroke="black"/>',
           f'<text x="{pad}" y="{pad - 20}">% {METRIC} below the better of greedy and dag-greedy (higher is better)</text>']
    for i, (r, vs) in enumerate(zip(rows, vals)):
        x0 = pad + i * (len(series) + 1) * bw
        for j, (v, (k, colour)) in enumerate(zip(vs, series)):
            if v is None:
                continue
            top, bottom = sorted([y(v), y(0)])
            out.append(f'<rect x="{x0 + j * bw:.1f}" y="{top:.1f}" width="{bw:.1f}" height="{bottom - top:.1f}" '
                       f'fill="{colour}"><title>{r["circuit"]} {k}: {v:.2f}%</title></rect>')
        out.append(f'<text x="{x0:.1f}" y="{h - pad + 15}">{r["circuit"].split("/")[1]}</text>')
    for j, (k, colour) in enumerate(series):
        out.append(f'<rect x="{w - 170}" y="{pad + 14 * j}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{w - 155}" y="{pad + 9 + 14 * j}">{k.replace("_", " ")}</text>')
    out.append(f'<text x="{pad - 40}" y="{y(hi) + 4}">{hi:.0f}%</text><text x="{pad - 40}" y="{y(lo)}">{lo:.0f}%</text>')
    out.append("</svg>")
    (HERE / f"{NAME}.svg").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    if "--report" in sys.argv:
        report()
    elif "--refreeze" in sys.argv:
        redo(refreeze_one)
    elif "--retune" in sys.argv:
        redo(retune_one)
    elif "--reseed" in sys.argv:
        redo(reseed_one)
    else:
        main()
