#!/usr/bin/env python3
"""Where a frozen model's trust region is centred (see centres.sh).

`extract --model` charges every row spacing an extraction lies from the
labelled rows. Measured to the nearest of *all* of them, the charge pins a
search to whichever labelled row it starts next to (greedy's, dag-greedy's);
measured to the N rows the model scores cheapest (`--centres N`), it pulls
the search towards the best of what the model has seen, as a trust region
centred on the incumbent does.

For every final model that the ablation (ABLATION=ablation-twinfree: its
loop, sampler and random runs) and the polish experiment (POLISH=polish:
its 200-call loop) left in experiments/out, and for each N in CENTRES
("0 1 8"; 0: every row), `extract --model M --centres N` on the model's own
design, measured by the oracle (ABC area by default), against greedy,
dag-greedy and linear SmoothE measured by the same oracle. Writes
centres.csv (one row per model and N) and centres.md. Finished extractions
are kept (a stopped run resumes; delete experiments/out/NAME to redo).
"""
import json
import os

from abc_common import (BIN, HERE, METRIC, ORACLE, ROOT, SHARED, fmt, mean, oracle, oracle_label, pct, run, run_all,
                        write_rows)

CENTRES = [int(n) for n in os.environ.get("CENTRES", "0 1 8").split()]
PAR = int(os.environ.get("PAR", "2"))
ABLATION = os.environ.get("ABLATION", "ablation-twinfree")
POLISH = os.environ.get("POLISH", "polish")
NAME = os.environ.get("NAME", "centres")
OUT = ROOT / "experiments" / "out" / NAME


def models():
    """(circuit, seed, source, model path, loop directory) of every final model found."""
    found = []
    for name, sources in [(ABLATION, ["loop", "sampler", "random"]), (POLISH, ["loop"])]:
        for d in sorted((ROOT / "experiments" / "out" / name).glob("*/*")):
            for s in sources:
                m = d / f"{s}.safetensors"
                if m.exists() and (d / f"{s}.rounds.json").exists():
                    circuit = d.parent.name.replace("_", "/", 1)
                    found.append((circuit, int(d.name), f"{name}/{s}", m, d / f"{s}.rounds.json"))
    return found


def baselines(circuit, seed):
    """Greedy, dag-greedy and linear SmoothE's real costs on a circuit (linear at `seed`)."""
    d = OUT / circuit.replace("/", "_") / str(seed)
    d.mkdir(parents=True, exist_ok=True)
    graph = SHARED / f"{circuit}.json"
    out = {}
    for method in ["greedy", "dag-greedy", "smoothe"]:
        f = d / f"{method}.json"
        if not f.exists():
            run([BIN, "extract", "--method", method, "--seed", seed, "--threads", 1, "-q", "-o", f, graph])
        out[method] = oracle(graph, f)
    return out


def one(task):
    circuit, seed, source, model, _, centres = task
    graph = SHARED / f"{circuit}.json"
    f = OUT / circuit.replace("/", "_") / str(seed) / f"{source.replace('/', '.')}.{centres}.json"
    if not f.exists():
        run([BIN, "extract", "--model", model, "--centres", centres, "--seed", seed, "--threads", 1, "-q", "-o", f,
             graph])
    result = json.load(open(f))
    p = result["prediction"]
    return dict(circuit=circuit, seed=seed, model=source, centres=centres, real=oracle(graph, f),
                predicted=p["mean"], std=p["std"], distance=p["distance"], measured=p.get("measured"),
                pick=result["pick"])


def main():
    found = models()
    if not found:
        raise SystemExit(f"no final models in experiments/out/{ABLATION} or experiments/out/{POLISH}; "
                         "run ablation.sh and polish.sh first")
    base = {(c, s): baselines(c, s) for c, s in sorted({(c, s) for c, s, *_ in found})}
    rows = run_all(one, [(*m, n) for m in found for n in CENTRES], PAR)
    for r in rows:
        b = base[(r["circuit"], r["seed"])]
        r.update(greedy=b["greedy"], dag_greedy=b["dag-greedy"], linear_smoothe=b["smoothe"])
    write_rows(HERE / f"{NAME}.csv", rows)
    report(rows, len(found))


def report(rows, n_models):
    lines = [f"# Where a frozen model's trust region is centred", "",
             f"Made by `experiments/centres.sh`: oracle {oracle_label()}, the {n_models} final models that"
             f" `experiments/out/{ABLATION}` and `experiments/out/{POLISH}` hold (loop, sampler and random runs of"
             " the ablation; the polish experiment's 200-call loop), each frozen on its own design:"
             " `extract --model M --centres N`, no oracle call. N = 0 measures the trust distance to every"
             " labelled row; N > 0 to the N the model scores cheapest. Real "
             f"{METRIC} measured by the oracle.", "",
             "| centres | mean vs better greedy % | worse than better greedy | worse than linear SmoothE |"
             " mean prediction error % | worst prediction error % | picked its own optimum |", "|---|---|---|---|---|---|---|"]
    for n in CENTRES:
        rs = [r for r in rows if r["centres"] == n]
        gain = [pct(r["real"], min(r["greedy"], r["dag_greedy"])) for r in rs]
        err = [100 * abs(r["predicted"] - r["real"]) / r["real"] for r in rs]
        lines.append(f"| {n} | {mean(gain):.2f} | {sum(g < 0 for g in gain)} of {len(rs)} |"
                     f" {sum(r['real'] > r['linear_smoothe'] for r in rs)} of {len(rs)} | {mean(err):.2f} |"
                     f" {max(err):.2f} | {sum(r['pick'] == 'smoothe' for r in rs)} of {len(rs)} |")
    lines += ["", "Per model (real area; prediction in brackets):", "",
              "| circuit | model | greedy | dag-greedy | linear | " + " | ".join(f"N={n}" for n in CENTRES) + " |",
              "|---|---|---|---|---|" + "---|" * len(CENTRES)]
    keys = sorted({(r["circuit"], r["seed"], r["model"]) for r in rows})
    for k in keys:
        by_n = {r["centres"]: r for r in rows if (r["circuit"], r["seed"], r["model"]) == k}
        any_r = next(iter(by_n.values()))
        cells = [f"{fmt(by_n[n]['real'], 0)} ({fmt(by_n[n]['predicted'])})" if n in by_n else "-" for n in CENTRES]
        lines.append(f"| {k[0]} | {k[2]} (seed {k[1]}) | {fmt(any_r['greedy'], 0)} | {fmt(any_r['dag_greedy'], 0)} |"
                     f" {fmt(any_r['linear_smoothe'], 0)} | " + " | ".join(cells) + " |")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
