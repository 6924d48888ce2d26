#!/usr/bin/env python3
"""The scale study behind scale.sh: see that script for what it runs.

Circuits (CIRCUITS, names below): ABC `gen` multipliers and adders,
structurally hashed, and mul3 exported from its esyn e-graph. Each is
saturated at every node limit in SIZES (egg counts e-nodes; it may stop
below a limit when an iteration would overshoot it, or at its iteration
limit). E-graphs are cached in $SCALE_CACHE (default ~/.cache/smoothe-scale),
each beside a .cmd file with the commands that made it."""
import csv
import json
import math
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("SMOOTHE_BIN", ROOT / "target" / "release" / "smoothe"))
CACHE = Path(os.environ.get("SCALE_CACHE", Path.home() / ".cache" / "smoothe-scale"))
ABC = os.environ.get("ABC", "berkeley-abc")
SIZES = [int(s) for s in os.environ.get("SIZES", "10000 100000 300000").split()]
LIMITS = [float(s) for s in os.environ.get("LIMITS", "30").split()]
GEN = {"mul8": "gen -N 8 -m", "mul16": "gen -N 16 -m", "mul32": "gen -N 32 -m", "mul64": "gen -N 64 -m",
       "add64": "gen -N 64 -a"}
CIRCUITS = os.environ.get("CIRCUITS", "mul8 mul16 add64 mul3 mul64").split()
FIELDS = ["circuit", "node_limit", "classes", "nodes", "saturate_s", "saturate_peak_mb", "stop", "edges",
          "info_s", "info_peak_mb", "greedy_cost", "greedy_s", "greedy_peak_mb",
          "dag_greedy_cost", "dag_greedy_s", "dag_greedy_peak_mb", "limit_s", "smoothe_cost",
          "smoothe_steps", "ms_per_step", "edge_passes", "smoothe_peak_mb", "lp_lower_bound", "machine"]
SMOOTHE_FIELDS = ["limit_s", "smoothe_cost", "smoothe_steps", "ms_per_step", "edge_passes", "smoothe_peak_mb",
                  "lp_lower_bound", "machine"]


def default_max_sweeps():
    """The default fixed-point cap, as configs/smoothe.toml (the built-in
    defaults) states it."""
    with open(ROOT / "configs" / "smoothe.toml", "rb") as f:
        return tomllib.load(f)["smoothe"]["max_sweeps"]


def machine():
    """This machine in a few words: CPU model, cores and memory."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "unknown CPU")
    kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return f"{os.cpu_count()}-core {model}, {round(kib / 2**20)} GiB"


def timed(cmd):
    """Runs cmd under /usr/bin/time -v: (stdout, stderr, wall seconds, peak MiB)."""
    print(" ".join(map(str, cmd)), file=sys.stderr)
    p = subprocess.run(["/usr/bin/time", "-v", *map(str, cmd)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{p.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", p.stderr)
    seconds = (int(wall.group(1) or 0) * 60 + int(wall.group(2))) * 60 + float(wall.group(3))
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
    return p.stdout, p.stderr, seconds, peak


def circuit_blif(name):
    """The circuit as structurally hashed BLIF in the cache, made once."""
    path = CACHE / f"{name}.blif"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    if name in GEN:
        raw = CACHE / f"{name}.raw.blif"
        script = f"{GEN[name]} {raw}; read {raw}; strash; write_blif {path}"
        subprocess.run([ABC, "-c", script], check=True, capture_output=True)
        (CACHE / f"{name}.blif.cmd").write_text(f"{ABC} -c '{script}'\n")
    elif name == "mul3":
        graph = ROOT / "datasets" / "esyn" / "mul3.json"
        extraction = CACHE / "mul3.dag-greedy.json"
        subprocess.run([BIN, "extract", graph, "-o", extraction, "-q"], check=True)
        subprocess.run([BIN, "export", graph, extraction, "-o", path], check=True)
        (CACHE / f"{name}.blif.cmd").write_text(
            f"smoothe extract {graph} -o {extraction}\nsmoothe export {graph} {extraction} -o {path}\n")
    else:
        raise SystemExit(f"unknown circuit {name}")
    return path


def main():
    if os.environ.get("REPORT"):
        with open(ROOT / "experiments" / "scale.csv") as f:
            write(list(csv.DictReader(f)))
        return
    rows = []
    if os.environ.get("KEEP") and (ROOT / "experiments" / "scale.csv").exists():
        with open(ROOT / "experiments" / "scale.csv") as f:
            rows = list(csv.DictReader(f))
    for name in CIRCUITS:
        blif = circuit_blif(name)
        for limit in SIZES:
            graph = CACHE / f"{name}-{limit}.json"
            earlier = [r for r in rows if r["circuit"] == name and int(r["node_limit"]) == limit]
            if earlier and graph.exists():
                # KEEP: the cached e-graph and its measurements stand; only
                # SmoothE runs at limits not yet measured (with REDO=1, at
                # every limit in LIMITS, replacing the earlier rows).
                row = {k: earlier[0][k] for k in FIELDS if k not in SMOOTHE_FIELDS}
                for t in LIMITS:
                    same = [r for r in earlier if float(r["limit_s"]) == t]
                    if same and not os.environ.get("REDO"):
                        continue
                    new = {**row, **run_smoothe(name, limit, graph, t)}
                    if same:
                        rows[next(i for i, r in enumerate(rows) if r is same[0])] = new
                        rows = [r for r in rows if not any(r is x for x in same[1:])]
                    else:
                        rows.append(new)
                    write(rows)
                continue
            cmd = [BIN, "saturate", blif, "-o", graph, "--node-limit", limit, "--iter-limit", 1000,
                   "--time-limit", 600, "-q"]
            _, err, sat_s, sat_mb = timed(cmd)
            (CACHE / f"{name}-{limit}.json.cmd").write_text(" ".join(map(str, cmd)) + "\n")
            m = re.search(r"(\d+) e-classes, (\d+) e-nodes after \d+ iteration\(s\) \(([\w-]+)", err)
            row = {"circuit": name, "node_limit": limit, "classes": int(m.group(1)), "nodes": int(m.group(2)),
                   "saturate_s": round(sat_s, 2), "saturate_peak_mb": round(sat_mb), "stop": m.group(3)}
            info, _, info_s, info_mb = timed([BIN, "info", graph])
            # The class edges SmoothE's relaxation sweeps: after preprocessing.
            reduced = re.search(r"after preprocessing: \d+ nodes, \d+ classes, (\d+) edges", info)
            row.update(info_s=round(info_s, 2), info_peak_mb=round(info_mb), edges=int(reduced.group(1)))
            for method in ["greedy", "dag-greedy"]:
                out = CACHE / f"{name}-{limit}.{method}.json"
                _, _, s, mb = timed([BIN, "extract", "--method", method, graph, "-o", out, "-q"])
                key = method.replace("-", "_")
                row.update({f"{key}_cost": json.load(open(out))["dag_cost"], f"{key}_s": round(s, 2),
                            f"{key}_peak_mb": round(mb)})
            for t in LIMITS:
                rows.append({**row, **run_smoothe(name, limit, graph, t)})
            write(rows)


def run_smoothe(name, limit, graph, t):
    """SmoothE at batch 8 for t seconds on graph: its SMOOTHE_FIELDS."""
    out = CACHE / f"{name}-{limit}.smoothe{int(t)}.json"
    _, _, _, mb = timed([BIN, "extract", "--method", "smoothe", "--batch", 8, "--time-limit", t, graph, "-o", out,
                         "-q"])
    r = json.load(open(out))
    return {"limit_s": t, "smoothe_cost": r["dag_cost"], "smoothe_steps": r["steps"],
            "ms_per_step": round(r["ms_per_step"], 1), "edge_passes": round(r.get("edge_passes_per_step", 0), 2) or "",
            "smoothe_peak_mb": round(mb),
            "lp_lower_bound": r.get("lower_bound", ""), "machine": machine()}


def write(rows):
    with open(ROOT / "experiments" / "scale.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    machines = list(dict.fromkeys(r.get("machine") or "an earlier machine" for r in rows))
    lines = ["# Time and memory against e-graph size", "",
             f"Made by `experiments/scale.sh` on {' and '.join('a ' + m for m in machines)} (no GPU)."
             " E-graphs from `smoothe saturate` at each node limit; "
             "times are wall seconds of the whole command, memory its peak resident set (MiB). "
             "SmoothE: `--batch 8`, its time limit includes its dag-greedy start; its MiB include the linear"
             " relaxation that bounds its answer (`LP bound`, blank where the LP did not solve within 10 s)."
             " `passes`: how many times a forward pass visited each class edge on average"
             " (`edge_passes_per_step` of the result: 1 without cycles; inside a cyclic component once per"
             f" fixed-point sweep, at most `--max-sweeps` ({default_max_sweeps()}), and once more for the"
             " derivatives).", "",
             "| circuit | limit | classes | nodes | saturate s | MiB | edges swept | load+preprocess s | MiB |"
             " greedy cost | s | dag-greedy cost | s | MiB | SmoothE limit s | cost | steps | ms/step | passes | MiB |"
             " LP bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in [
            "circuit", "node_limit", "classes", "nodes", "saturate_s", "saturate_peak_mb", "edges", "info_s",
            "info_peak_mb",
            "greedy_cost", "greedy_s", "dag_greedy_cost", "dag_greedy_s", "dag_greedy_peak_mb", "limit_s",
            "smoothe_cost", "smoothe_steps", "ms_per_step", "edge_passes", "smoothe_peak_mb",
            "lp_lower_bound"]) + " |")
    lines += growth(rows)
    lines += ["", NOTES.strip()]
    (ROOT / "experiments" / "scale.md").write_text("\n".join(lines) + "\n")


# What was tried on the step's growth, with what it measured (not made by
# this script: the commands are given).
NOTES = """
## The cyclic fixed point at size

On mul8 at 100k and 300k nodes, most classes form one cyclic component
(12,052 of 15,008 and 27,542 of 31,937 classes after preprocessing).
Inside it the forward pass iterates to a fixed point from zero, and the
backward pass solves its adjoint the same way, each stopping at
`--max-sweeps`. At the earlier cap of 10, every step of a 10-s run at
`--batch 8` took all 10 sweeps in both passes, and the largest change of a
class probability in the tenth forward sweep was still 0.04 to 0.06
(tolerance 1e-4): a step there cost about eleven acyclic passes, and
`passes` grew with size as saturation closed more cycles (mul8 3.3 at 10k
to 10.0 at 300k, mul3 4.3 to 10.6), bounded by the cap.

The cap is now 4 (`sweeps.md`, `sweeps.sh`): on the saturated graphs at
30 s a step takes 0.73 to 0.84 times as long where the cap of 10 was
reached, and the answers are the same or better (mul8 at 100k 1283
against 1291, at 300k 1178 against 1185); a cap of 2 is much worse there
(1408 and 1437). `linear.sh` on all 98 shared e-graphs moved within the
spread of seeds.

On this machine the cap hardly moves the pooled slope: the same 30-s runs
at `--max-sweeps 10` (`extract --method smoothe --batch 8 --time-limit 30
--max-sweeps 10` on each of the 16 graphs) fit 1.06 against edges, against
1.05 at 4; mul8 alone 1.29 against 1.22, add64 1.21 against 1.08. The 1.12
measured at the cap of 10 on the first machine, an Intel Xeon, came from
that machine as much as from the sweeps: a step's time varies by up to a
quarter between runs here (mul8 at 100k, cap 10: 57.6 and 73.6 ms), so a
slope differs by a few hundredths from run to run.

Fitted against edge visits (edges times `passes`) instead of edges, the
step's pooled slope is below 1 (the table above): one visit costs no more
on a large graph than on a small one, and the step is at most a constant
(`--max-sweeps` + 1) times linear in edges.

Tried and not adopted: sweeping the component in the reverse post-order of
a depth-first search from its entries instead of breadth-first. The tenth
sweep's largest change fell to 0.004-0.015, but the answers at 200 steps
(`extract --method smoothe --batch 8 --steps 200 --threads 1`, seeds 0
and 1) were the same or one unit apart (mul8-100k: 1291 and 1275 both
ways; mul8-300k: 1185 against 1184, 1184 both ways), and the step was no
faster. Updating, in each sweep, only the classes a parent's change
beyond the tolerance had reached did not make it faster either (mul8-300k,
two 10-s runs each on a loaded machine: 270 and 305 ms per step against
260 and 293 without): in one strongly connected component nearly every
class stays reached.
"""


# What the growth section fits: (column, label, unit, against what).
GROWTH = [("info_s", "load+preprocess", "s", "nodes"), ("greedy_s", "greedy", "s", "nodes"),
          ("dag_greedy_s", "dag-greedy", "s", "nodes"), ("ms_per_step", "SmoothE step", "ms", "nodes"),
          ("ms_per_step", "SmoothE step, against edges", "ms", "edges"),
          ("ms_per_step", "SmoothE step, against edge visits", "ms", "edge_visits"),
          ("info_peak_mb", "load+preprocess", "MiB", "nodes"), ("dag_greedy_peak_mb", "dag-greedy", "MiB", "nodes"),
          ("smoothe_peak_mb", "SmoothE", "MiB", "nodes")]
COLOURS = ["#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d5a97", "#30343f"]


def fit(points):
    """Least-squares slope and intercept of log10(y) on log10(x)."""
    xs = [math.log10(x) for x, _ in points]
    ys = [math.log10(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def growth(rows):
    """The fitted growth exponents (a table) and their log-log plot (scale.svg):
    one point per e-graph, from its row at its shortest SmoothE limit."""
    shortest = {}
    for r in rows:
        key = (r["circuit"], r["node_limit"])
        if key not in shortest or float(r["limit_s"]) < float(shortest[key]["limit_s"]):
            shortest[key] = r
    # With the class edges a step's forward pass visited (see `passes`), on
    # copies: the rows themselves are written to the CSV again.
    rows = [{**r, "edge_visits": float(r["edges"]) * float(r["edge_passes"]) if r.get("edge_passes") else ""}
            for r in shortest.values()]
    def points_of(rows, column, unit, x):
        # Times under 0.05 s are start-up noise, not growth.
        return [(float(r[x]), float(r[column])) for r in rows
                if r.get(column) not in ("", None) and r.get(x) not in ("", None)
                and float(r[column]) >= (0.05 if unit == "s" else 1e-9)]
    fits = []
    for column, label, unit, x in GROWTH:
        points = points_of(rows, column, unit, x)
        if len(points) >= 3:
            fits.append((column, label, unit, x, points, *fit(points)))
    circuits = list(dict.fromkeys(r["circuit"] for r in rows))

    def within(column, unit, x, circuit):
        points = points_of([r for r in rows if r["circuit"] == circuit], column, unit, x)
        return f"{fit(points)[0]:.2f}" if len(points) >= 2 else ""
    lines = ["", "## Growth against e-nodes", "",
             "Least-squares slope of log(value) on log(e-nodes) (times under 0.05 s left out): 1 is linear"
             " growth. `against edges` fits SmoothE's step on the class edges its relaxation sweeps (after"
             " preprocessing, as `smoothe info` counts them) instead, and `against edge visits` on those edges"
             " times `passes`: the work of a step's sweeps, so its slope is the cost of one edge visit's growth. `all` pools every e-graph above; the other columns fit one circuit's sizes alone (two or"
             " three points each, so rough). `scale.svg` plots the points and the pooled lines.", "",
             "| quantity | unit | points | slope, all | " + " | ".join(circuits) + " |",
             "|---|---|---|---|" + "---|" * len(circuits)]
    lines += [f"| {label} | {unit} | {len(points)} | {slope:.2f} | "
              + " | ".join(within(column, unit, x, c) for c in circuits) + " |"
              for column, label, unit, x, points, slope, _ in fits]
    svg([(column, label, unit, points, slope, b) for column, label, unit, x, points, slope, b in fits if x == "nodes"])
    return lines


def svg(fits):
    """Two log-log panels, time and memory against e-nodes, with the fitted lines."""
    width, height, pad = 900, 380, 55
    panels = [[f for f in fits if f[2] != "MiB"], [f for f in fits if f[2] == "MiB"]]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif"'
           ' font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    panel_w = (width - 3 * pad) / 2
    for i, panel in enumerate(panels):
        if not panel:
            continue
        x0 = pad + i * (panel_w + pad)
        xs = [math.log10(x) for f in panel for x, _ in f[3]]
        ys = [math.log10(y) for f in panel for _, y in f[3]]
        lo_x, hi_x, lo_y, hi_y = min(xs) - 0.1, max(xs) + 0.1, min(ys) - 0.2, max(ys) + 0.2
        px = lambda v: x0 + (v - lo_x) / (hi_x - lo_x) * panel_w
        py = lambda v: height - pad - (v - lo_y) / (hi_y - lo_y) * (height - 2 * pad)
        out.append(f'<rect x="{x0}" y="{pad}" width="{panel_w}" height="{height - 2 * pad}" fill="none"'
                   ' stroke="#999"/>')
        title = "time (s; SmoothE ms/step)" if i == 0 else "peak memory (MiB)"
        out.append(f'<text x="{x0}" y="{pad - 8}">{title} against e-nodes, log-log</text>')
        for e in range(math.ceil(lo_x), math.floor(hi_x) + 1):
            out.append(f'<text x="{px(e) - 12}" y="{height - pad + 15}">1e{e}</text>')
        for e in range(math.ceil(lo_y), math.floor(hi_y) + 1):
            out.append(f'<text x="{x0 - 40}" y="{py(e) + 4}">1e{e}</text>')
        for k, (column, label, unit, points, slope, intercept) in enumerate(panel):
            colour = COLOURS[(k + 4 * i) % len(COLOURS)]
            for x, y in points:
                out.append(f'<circle cx="{px(math.log10(x)):.1f}" cy="{py(math.log10(y)):.1f}" r="3"'
                           f' fill="{colour}"/>')
            a, b = min(math.log10(x) for x, _ in points), max(math.log10(x) for x, _ in points)
            out.append(f'<line x1="{px(a):.1f}" y1="{py(intercept + slope * a):.1f}" x2="{px(b):.1f}"'
                       f' y2="{py(intercept + slope * b):.1f}" stroke="{colour}"/>')
            out.append(f'<text x="{x0 + 8}" y="{pad + 16 + 14 * k}" fill="{colour}">{label} ({unit}): slope'
                       f' {slope:.2f}</text>')
    out.append("</svg>")
    (ROOT / "experiments" / "scale.svg").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
