#!/usr/bin/env python3
"""The fixed-point cap inside cyclic components (`--max-sweeps`), see sweeps.sh.

Each instance runs once per cap in CAPS, same seed, same time limit:
shared e-graphs whose cyclic components take many sweeps (LIMIT seconds,
default batch), then the saturated scale e-graphs that scale.sh caches
(SCALE_LIMIT seconds, --batch 8, as scale.sh runs them; skipped where the
cache lacks them). Writes experiments/sweeps.csv and sweeps.md.
"""
import csv
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "experiments"))
from linear import extract_checked  # noqa: E402

SHARED = ROOT.parent / "shared" / "datasets"
CACHE = Path(os.environ.get("SCALE_CACHE", Path.home() / ".cache" / "smoothe-scale"))
CAPS = [int(c) for c in os.environ.get("CAPS", "10 4 2").split()]
LIMIT = float(os.environ.get("LIMIT", "15"))
SCALE_LIMIT = float(os.environ.get("SCALE_LIMIT", "30"))
# Shared instances with the most sweeps per step at the old cap (10), one
# or two per suite that has cyclic components.
SHARED_INSTANCES = ["esyn/mul3", "esyn/C432", "esyn/c2670", "tensat/resnet50",
                    "flexc/67addae9-f7db-4ebb-a02e-e1e045f87fc4", "eggcc-bril/loop_if.bril", "egg/lambda_fib",
                    "rover/mcm_3_7_21_original_8iteration_egraph", "herbie/4225", "boole/mul16"]
SCALE_INSTANCES = ["mul8-100000", "mul8-300000", "mul3-100000", "mul3-300000", "add64-300000",
                   "mul64-1000000"]
FIELDS = ["instance", "max_sweeps", "limit_s", "batch", "dag_cost", "steps", "ms_per_step", "edge_passes",
          "valid"]


def run(graph, cap, limit, batch):
    """One `extract --method smoothe` at `cap`: its row, checked by `smoothe check`."""
    args = ["--method", "smoothe", "--max-sweeps", str(cap), "--time-limit", f"{limit:g}"]
    done = extract_checked(graph, args + (["--batch", str(batch)] if batch else []))
    if done is None:
        sys.exit(f"{graph}: extract failed at --max-sweeps {cap}")
    r, _, valid = done
    return {"max_sweeps": cap, "limit_s": limit, "batch": r["batch"], "dag_cost": r["dag_cost"],
            "steps": r["steps"], "ms_per_step": round(r["ms_per_step"], 1),
            "edge_passes": round(r["edge_passes_per_step"], 2), "valid": valid}


def main():
    if not os.environ.get("REPORT"):
        rows = []
        tasks = [(name, SHARED / f"{name}.json", LIMIT, 0) for name in SHARED_INSTANCES]
        tasks += [(name, CACHE / f"{name}.json", SCALE_LIMIT, 8) for name in SCALE_INSTANCES
                  if (CACHE / f"{name}.json").exists()]
        for name, graph, limit, batch in tasks:
            for cap in CAPS:
                rows.append({"instance": name, **run(graph, cap, limit, batch)})
                print(f"{name} max_sweeps {cap}: {rows[-1]['dag_cost']} ({rows[-1]['ms_per_step']} ms/step)",
                      file=sys.stderr)
        with open(ROOT / "experiments" / "sweeps.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    with open(ROOT / "experiments" / "sweeps.csv") as f:
        rows = list(csv.DictReader(f))
    report(rows)


def report(rows):
    caps = list(dict.fromkeys(int(r["max_sweeps"]) for r in rows))
    by = {(r["instance"], int(r["max_sweeps"])): r for r in rows}
    instances = list(dict.fromkeys(r["instance"] for r in rows))
    lines = ["# The fixed-point cap inside cyclic components", "",
             "Made by `experiments/sweeps.sh`: `extract --method smoothe --max-sweeps N` at each cap, seed 0,"
             " the same time limit per instance (shared e-graphs at their default batch; the saturated scale"
             " e-graphs of `scale.sh` at `--batch 8`), this 2-core machine. `passes`: edge visits of a forward"
             " pass per class edge (`edge_passes_per_step`). Lower cost is better; every result passed"
             " `smoothe check` unless the last column says otherwise.", "",
             "| instance | limit s | " + " | ".join(f"cost at {c}" for c in caps) + " | "
             + " | ".join(f"ms/step at {c}" for c in caps) + " | " + " | ".join(f"passes at {c}" for c in caps)
             + " | invalid |",
             "|---|---|" + "---|" * (3 * len(caps) + 1)]
    for inst in instances:
        rs = [by.get((inst, c)) for c in caps]
        cell = lambda k: " | ".join(f"{float(r[k]):.6g}" if r else "" for r in rs)
        invalid = sum(1 for r in rs if r and r["valid"] != "True")
        limit = next(r["limit_s"] for r in rs if r)
        lines.append(f"| {inst} | {float(limit):g} | {cell('dag_cost')} | {cell('ms_per_step')} | "
                     f"{cell('edge_passes')} | {invalid} |")
    base = caps[0]
    lines += ["", f"Against the cap of {base}:", ""]
    for c in caps[1:]:
        pairs = [(by[(i, base)], by[(i, c)]) for i in instances if (i, base) in by and (i, c) in by]
        lower = sum(1 for a, b in pairs if float(b["dag_cost"]) < float(a["dag_cost"]))
        higher = sum(1 for a, b in pairs if float(b["dag_cost"]) > float(a["dag_cost"]))
        ratios = [float(b["ms_per_step"]) / float(a["ms_per_step"]) for a, b in pairs]
        lines.append(f"- cap {c}: cost lower on {lower}, higher on {higher}, equal on {len(pairs) - lower - higher}"
                     f" of {len(pairs)}; a step takes {min(ratios):.2f}-{max(ratios):.2f} times as long"
                     f" (median {sorted(ratios)[len(ratios) // 2]:.2f}).")
    (ROOT / "experiments" / "sweeps.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
