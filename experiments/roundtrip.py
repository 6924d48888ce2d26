#!/usr/bin/env python3
"""The roundtrip.sh study: see that script. Writes roundtrip.csv and
roundtrip.md; scratch goes to experiments/out/roundtrip/."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time

from abc_common import BIN, ORACLE, ROOT, SHARED, oracle

ABC = os.environ.get("ABC", "berkeley-abc")
# The flow the default oracle (abc_area.sh) maps with, applied to the input
# circuit alone.
FLOW = "strash; dch; map -a"
LIBRARY = ROOT / "examples" / "oracles" / "cells.genlib"
NODE_LIMIT = os.environ.get("NODE_LIMIT", "20000")
BUDGET = os.environ.get("BUDGET", "40")
SECONDS = os.environ.get("SECONDS_SMOOTHE", "20")
SEED = os.environ.get("SEED", "0")
CIRCUITS = os.environ.get("CIRCUITS", "mul16 C432 b12 c2670 c7552 i7 mul3").split()
NAME = os.environ.get("NAME", "roundtrip")
OUT = ROOT / "experiments" / "out" / NAME
FIELDS = ["circuit", "input_nodes", "classes", "nodes", "stop", "method", "dag_cost", "cec", "area", "input_area",
          "seconds"]


def run(cmd, stderr=False):
    """Runs cmd (logged), failing loudly; returns stdout (and stderr)."""
    print(" ".join(map(str, cmd)), file=sys.stderr)
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{p.stderr[-3000:]}")
    return (p.stdout, p.stderr) if stderr else p.stdout


def abc(script):
    return run([ABC, "-c", script])


def input_blif(name, out):
    """The circuit to start from: mul16 from ABC's generator, structurally
    hashed; an esyn circuit as its dag-greedy extraction exported to BLIF."""
    blif = out / f"{name}.blif"
    if name == "mul16":
        raw = out / "mul16.raw.blif"
        abc(f"gen -N 16 -m {raw}; read {raw}; strash; write_blif {blif}")
    else:
        graph = SHARED / "esyn" / f"{name}.json"
        extraction = out / f"{name}.input.json"
        run([BIN, "extract", "--method", "dag-greedy", graph, "-o", extraction, "-q"])
        run([BIN, "export", graph, extraction, "-o", blif])
    return blif


def area_alone(blif):
    """The input mapped alone with the oracle's own flow and library."""
    text = abc(f"read_library {LIBRARY}; read_blif {blif}; {FLOW}; print_stats")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return float(re.findall(r"area *= *([0-9.eE+-]+)", text)[-1])


def equivalent(a, b):
    return "Networks are equivalent" in abc(f"cec {a} {b}")


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    rows = []
    for name in CIRCUITS:
        out = OUT / name
        out.mkdir()
        blif = input_blif(name, out)
        input_nodes = sum(1 for line in blif.read_text().splitlines() if line.startswith(".names"))
        graph = out / f"{name}.egraph.json"
        start = time.perf_counter()
        _, summary = run([BIN, "saturate", blif, "-o", graph, "--node-limit", NODE_LIMIT, "-q"], stderr=True)
        saturate_s = time.perf_counter() - start
        data = json.load(open(graph))
        nodes, classes = len(data["nodes"]), len({n["eclass"] for n in data["nodes"].values()})
        stop = (re.findall(r"\(([a-z -]+), [0-9.]+ s\)", summary) or [""])[-1]
        input_area = area_alone(blif)
        base = dict(circuit=name, input_nodes=input_nodes, classes=classes, nodes=nodes, stop=stop,
                    input_area=input_area)
        rows.append(dict(base, method="saturate", dag_cost="", cec="", area="", seconds=round(saturate_s, 1)))
        # The input as recorded by saturate, the loop's first label.
        recorded = out / "input-recorded.json"
        recorded.write_text(json.dumps({"choices": data["circuit_choices"]}))
        extractions = {"input (recorded)": (recorded, 0.0)}
        for method in ["dag-greedy", "smoothe"]:
            extraction = out / f"{method}.json"
            start = time.perf_counter()
            run([BIN, "extract", "--method", method, "--time-limit", SECONDS, "--seed", SEED, graph, "-o",
                 extraction, "-q"])
            extractions[method] = (extraction, time.perf_counter() - start)
        model = out / "model.safetensors"
        start = time.perf_counter()
        run([BIN, "train-cost", "--oracle", ORACLE, "--budget", BUDGET, "--seed", SEED, "--out", model, graph,
                 "-q"])
        extractions["train-cost best"] = (model.with_suffix(".best.json"), time.perf_counter() - start)
        for method, (extraction, seconds) in extractions.items():
            back = out / f"{method.replace(' ', '-')}.blif"
            run([BIN, "export", graph, extraction, "-o", back])
            area = oracle(graph, extraction)
            if area is None:
                raise SystemExit(f"the oracle failed on {extraction}")
            dag_cost = json.load(open(extraction)).get("dag_cost", "")
            if dag_cost == "":
                check = run([BIN, "check", graph, extraction])
                dag_cost = float(re.findall(r"dag cost ([0-9.eE+-]+)", check)[0])
            rows.append(dict(base, method=method, dag_cost=dag_cost, cec=equivalent(blif, back), area=area,
                             seconds=round(seconds, 1)))
        write(rows)
    write(rows)


def write(rows):
    with open(ROOT / "experiments" / f"{NAME}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    done = [r for r in rows if r["method"] != "saturate"]
    proven = sum(1 for r in done if r["cec"])
    best = [r for r in done if r["method"] == "train-cost best"]
    recorded = {r["circuit"]: r["area"] for r in done if r["method"] == "input (recorded)"}
    no_worse = sum(1 for r in best if r["area"] <= r["input_area"] + 1e-9)
    lines = ["# From a circuit to a better circuit: the round trip", "",
             f"Made by `{'' if NAME == 'roundtrip' else f'NAME={NAME} '}experiments/roundtrip.sh` on a 2-core machine."
             " Each circuit is saturated"
             f" (`smoothe saturate --node-limit {NODE_LIMIT}`), extracted (dag-greedy; SmoothE for"
             f" {SECONDS} s; the best extraction of `train-cost --oracle examples/oracles/abc_area.sh"
             f" --budget {BUDGET}`), exported to BLIF and compared with the input by ABC `cec`. Area is"
             f" the oracle's (`{FLOW}` with `cells.genlib`); input area is the input circuit mapped alone"
             " with the same flow and library. Inputs: mul16 from `gen -N 16 -m; strash`; the six esyn"
             " circuits as their dag-greedy extraction exported to BLIF. Seed"
             f" {SEED}.", "",
             f"- ABC `cec` proved {proven} of {len(done)} extractions equivalent to their input.",
             f"- The best extraction `train-cost` found mapped to no more area than the input on {no_worse} of"
             f" {len(best)} circuits.",
             "- `input (recorded)` is the input circuit as `saturate` records it in the e-graph"
             " (`circuit_choices`), exported and mapped like any extraction; `train-cost` labels it with its"
             f" baselines. It mapped to the input's own area on"
             f" {sum(1 for r in best if abs(recorded.get(r['circuit'], -1) - r['input_area']) < 1e-9)} of {len(best)}.",
             "",
             "| circuit | input .names | classes | nodes | saturation stop | method | DAG cost | cec | area |"
             " input area | change | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["method"] == "saturate":
            lines.append(f"| {r['circuit']} | {r['input_nodes']} | {r['classes']} | {r['nodes']} | {r['stop']} |"
                         f" saturate | | | | {r['input_area']:g} | | {r['seconds']} |")
            continue
        change = 100 * (r["area"] - r["input_area"]) / r["input_area"]
        lines.append(f"| {r['circuit']} | | | | | {r['method']} | {r['dag_cost']} |"
                     f" {'equivalent' if r['cec'] else 'NOT EQUIVALENT'} | {r['area']:g} | {r['input_area']:g} |"
                     f" {change:+.1f}% | {r['seconds']} |")
    (ROOT / "experiments" / f"{NAME}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
