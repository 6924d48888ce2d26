"""The loop's final models frozen under several trust-region charges
(`extract --model --trust T`), measured, against greedy, dag-greedy and linear
SmoothE, on the run directories `frozen_start.py` left (RUNS=its NAME): how
much the charge that keeps a frozen search on labelled rows costs or saves
once the search no longer redraws the loop's own samples. See
frozen_trust.sh."""
import json
import os
import sys

from abc_common import (BIN, CIRCUITS, HERE, METRIC, ROOT, SHARED, below, fmt, mean, oracle, oracle_label,
                        pct, read_rows, run, run_all, run_dir, write_rows)

NAME = os.environ.get("NAME", "frozen_trust")
RUNS = ROOT / "experiments" / "out" / os.environ.get("RUNS", "frozen_decoupled")
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0").split()]
TRUSTS = [float(t) for t in os.environ.get("TRUSTS", "1 0.3 0.1 0").split()]
PAR = int(os.environ.get("PAR", "2"))


def one(task):
    circuit, seed, trust = task
    graph = SHARED / f"{circuit}.json"
    d = run_dir(RUNS, circuit, seed)
    out = d / f"frozen.trust{trust:g}.json"
    if not out.exists():
        run([BIN, "extract", "--model", d / "loop.safetensors", "--trust", trust, "--seed", seed, "--threads", 1,
             "-q", "-o", out, graph])
    rounds = json.load(open(d / "loop.rounds.json"))
    frozen = json.load(open(out))
    linear = d / "linear.json"
    if not linear.exists():
        run([BIN, "extract", "--method", "smoothe", "--seed", seed, "--threads", 1, "-q", "-o", linear, graph])
    row = dict(circuit=circuit, seed=seed, trust=trust, greedy=rounds[0]["greedy_real_cost"],
               dag_greedy=rounds[0]["dag_greedy_real_cost"], linear_smoothe=oracle(graph, linear),
               frozen=oracle(graph, out), pick=frozen["pick"],
               measured=int(frozen["prediction"].get("measured") is not None),
               predicted=frozen["prediction"]["mean"], best_label=rounds[-1]["best_real_cost"])
    print(row, file=sys.stderr)
    return row


def report():
    rows = read_rows(HERE / f"{NAME}.csv")
    trusts = sorted({r["trust"] for r in rows}, reverse=True)
    lines = ["# The frozen model under several trust charges, its search on a stream of its own", "",
             f"Made by `experiments/frozen_trust.sh`: oracle {oracle_label()}, seeds {sorted({r['seed'] for r in rows})},"
             f" the loop's final models of `out/{RUNS.name}` (300 calls, defaults) frozen with"
             " `extract --model --trust T` (defaults otherwise), measured. `vs better greedy`: the frozen real"
             f" {METRIC} against the better of greedy and dag-greedy (negative: below). `measured`: the pick is an"
             " extraction the loop labelled. The prediction error (below the table) is the model's mean against the"
             " measured value.", "",
             "| circuit | seed | better greedy | linear SmoothE | best label | "
             + " | ".join(f"trust {t:g}: frozen (pick) | vs better greedy %" for t in trusts) + " |",
             "|---|---|---|---|---|" + "---|---|" * len(trusts)]
    by = {(r["circuit"], r["seed"], r["trust"]): r for r in rows}
    keys = list(dict.fromkeys((r["circuit"], r["seed"]) for r in rows))  # in the order they ran
    for c, s in keys:
        first = next(by[(c, s, t)] for t in trusts if (c, s, t) in by)
        g = min(first["greedy"], first["dag_greedy"])
        cells = []
        for t in trusts:
            r = by.get((c, s, t))
            cells += ([f"{fmt(r['frozen'])} ({r['pick']}{', measured' if r['measured'] else ''})",
                       fmt(pct(r["frozen"], g), 2)] if r else ["-", "-"])
        lines.append(f"| {c} | {s} | {fmt(g)} | {fmt(first['linear_smoothe'])} | {fmt(first['best_label'])} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    for t in trusts:
        rs = [by[(c, s, t)] for c, s in keys if (c, s, t) in by]
        g = [pct(r["frozen"], min(r["greedy"], r["dag_greedy"])) for r in rs]
        err = [abs(pct(r["predicted"], r["frozen"])) for r in rs]
        lines.append(f"- trust {t:g}: mean real {METRIC} {below(mean(g))} the better greedy; worse than linear"
                     f" SmoothE on **{sum(r['frozen'] > r['linear_smoothe'] for r in rs)} of {len(rs)}**; a labelled"
                     f" extraction on {sum(r['measured'] for r in rs)}; mean prediction error {fmt(mean(err), 2)}%"
                     f" (worst {fmt(max(err), 2)}%).")
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def main():
    if "--report" not in sys.argv:
        tasks = [(c, s, t) for s in SEEDS for c in CIRCUITS for t in TRUSTS
                 if (run_dir(RUNS, c, s) / "loop.safetensors").exists()]
        rows = run_all(one, tasks, PAR)
        write_rows(HERE / f"{NAME}.csv", rows)
    report()


if __name__ == "__main__":
    main()
