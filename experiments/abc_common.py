"""What the ABC-oracle experiments (ablation.py, transfer.py, landscape.py,
measured.py, polish.py) share: paths, the smoothe binary under test, running
a command or a pool of tasks, measuring an extraction with the oracle (ABC
area by default), refitting a label log with no call, rank correlation, and
table and CSV helpers."""
import csv
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "experiments"
SHARED = ROOT.parent / "shared" / "datasets"
BIN = Path(os.environ.get("SMOOTHE_BIN", ROOT / "target" / "release" / "smoothe"))
# The oracle exports BLIF with this same binary, not whatever the checkout
# holds at the moment (a rebuild during a run would fail its calls).
os.environ.setdefault("SMOOTHE", str(BIN))
# ORACLE=... measures with another script printing one number, such as
# experiments/oracles/abc_area_lib2.sh (a cell library held out from
# development); its label logs and outputs should then be kept apart (NAME=).
ORACLE = Path(os.environ.get("ORACLE", ROOT / "examples" / "oracles" / "abc_area.sh")).resolve()
# The circuits the learned-cost experiments run on (CIRCUITS="esyn/mul3 ..."
# for fewer): every shipped esyn circuit and boole/mul16.
CIRCUITS = os.environ.get("CIRCUITS", "").split() or \
    [f"esyn/{p.stem}" for p in sorted((SHARED / "esyn").glob("*.json"))] + ["boole/mul16"]
# What that oracle measures, as the reports name it (METRIC=delay with
# experiments/oracles/abc_delay.sh).
METRIC = os.environ.get("METRIC", "area")


def oracle_label():
    """How reports name the oracle: its path in the repository."""
    return f"`{ORACLE.relative_to(ROOT)}`" if ORACLE.is_relative_to(ROOT) else f"`{ORACLE}`"


def run(cmd, check=True):
    """Runs `cmd` (logged to stderr); with `check`, a failure raises with its stderr."""
    print(" ".join(map(str, cmd)), file=sys.stderr)
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd}: {p.stderr}")
    return p


def predict(model, graph, *extractions):
    """`smoothe predict --json`: the model's verdicts (mean, std, score, distance, ...) on extraction files."""
    p = subprocess.run([str(BIN), "predict", "--json", "--model", str(model), str(graph), *map(str, extractions)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"predict {model}: {p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines()]


def oracle(graph, extraction):
    """The oracle's cost of an extraction file of the e-graph at `graph`, or None."""
    p = subprocess.run([str(ORACLE), str(graph), str(extraction)], capture_output=True, text=True)
    return float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None


def ranks(xs):
    """Ranks from 0, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    """Spearman rank correlation (nan when either side is constant)."""
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def num(v):
    """A CSV cell as a number, or None where it holds none."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def mean(xs):
    """The mean of the numbers in xs, None skipped; nan when none is left."""
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def read_label(line):
    """One line of a label log as a dict, its `cost` filled in from its
    `metrics` where the log keeps it there (today's logs): the `cost` of an
    oracle printing one number, or METRIC."""
    label = json.loads(line)
    metrics = label.get("metrics") or {}
    label.setdefault("cost", metrics.get("cost", metrics.get(METRIC)))
    return label


def refit(d, graph_path, lines, stem, seed, binary=BIN):
    """The last round's test report of `train-cost --initial 0 --rounds 0`
    by `binary` on a label log of `lines` (written to `d`/STEM.labels.jsonl;
    kept, so a rerun reads it back): a fresh fit with no oracle call, which
    is checked (every label must already be in the log)."""
    log, rounds = d / f"{stem}.labels.jsonl", d / f"{stem}.rounds.json"
    if not rounds.exists():
        log.write_text("".join(lines))
        run([binary, "train-cost", "--oracle", ORACLE, "--budget", len(lines), "--initial", 0, "--rounds", 0,
             "--seed", seed, "--threads", 1, "-q", "--labels", log, "--out", d / f"{stem}.safetensors", graph_path])
    last = json.load(open(rounds))[-1]
    if last["labels"] != len(lines) or len(log.read_text().splitlines()) != len(lines):
        raise RuntimeError(f"{log}: the refit called the oracle (stale labels?)")
    return last["report"]


def label_costs(log):
    """The real costs of a label log, in its order (None for a failed call; [] if there is no log)."""
    return [read_label(line)["cost"] for line in open(log)] if log.exists() else []


def curve(log):
    """Best real cost after each oracle call, in a label log's order."""
    best, out = float("inf"), []
    for c in label_costs(log):
        if c is not None:
            best = min(best, c)
        out.append(best)
    return out


def least(costs):
    """The least of the real costs, None skipped; None when none is left."""
    costs = [c for c in costs if c is not None]
    return min(costs) if costs else None


def pct(a, b):
    """How far a lies below b, in % of b (positive: a is smaller); None if either is missing."""
    return None if a is None or b is None else 100 * (b - a) / b


def below(p):
    """A percentage from `pct` in words: "0.12% below" or "0.12% above"."""
    return f"{abs(p):.2f}% {'below' if p >= 0 else 'above'}"


def fmt(v, digits=1):
    """A table cell: the number with `digits` decimals, or "-"."""
    return "-" if v is None else f"{v:.{digits}f}"


def run_dir(out, circuit, seed):
    """The folder, created, where an experiment keeps the files of its run of `circuit` with `seed` under `out`."""
    d = out / circuit.replace("/", "_") / str(seed)
    d.mkdir(parents=True, exist_ok=True)
    return d


def ensure_loop(d, graph, seed, jobs=1):
    """The loop at its defaults (300 calls) on `graph` with `seed`, one
    thread and `jobs` oracle calls at a time, into `d`/loop.* (model, label
    log, rounds), unless its model is already there."""
    if not (d / "loop.safetensors").exists():
        run([BIN, "train-cost", "--oracle", ORACLE, "--jobs", jobs, "--seed", seed, "--threads", 1, "-q",
             "--labels", d / "loop.labels.jsonl", "--out", d / "loop.safetensors", graph])


def finished_loops(runs):
    """(circuit, seed, folder) of every finished 300-call loop under `runs`
    (circuit/seed folders with `loop.safetensors`, `loop.best.json` and
    `loop.rounds.json`, as `ensure_loop` leaves them); a loop still running
    is skipped."""
    out = []
    for model in sorted(runs.glob("*/*/loop.safetensors")):
        d = model.parent
        rounds = d / "loop.rounds.json"
        if not (d / "loop.best.json").exists() or json.load(open(rounds))[-1]["oracle_calls"] < 300:
            continue
        suite, name = d.parent.name.split("_", 1)
        out.append((f"{suite}/{name}", int(d.name), d))
    return out


def main_over_loops(runs, one, name, par, report):
    """A script over the finished loops: unless `--report` is on the command
    line, `one` over every loop under `runs` (see `finished_loops`), `par`
    at a time, its rows written to experiments/NAME.csv (exits with a
    message when there is no loop); then `report()` redraws the table."""
    if "--report" not in sys.argv:
        tasks = finished_loops(runs)
        if not tasks:
            sys.exit(f"no finished loop under {runs}: run frozen_start.sh or calibration.sh first")
        write_rows(HERE / f"{name}.csv", run_all(one, tasks, par))
    report()


def run_all(one, tasks, par):
    """`one` over `tasks`, `par` at a time, results in task order."""
    with ThreadPoolExecutor(par) as pool:
        return list(pool.map(one, tasks))


def write_rows(path, rows):
    """Rows (dicts sharing the last row's keys) as a CSV file with a header."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[-1].keys()))
        w.writeheader()
        w.writerows(rows)


def with_kept_rows(path, rows):
    """With KEEP=1 in the environment, the rows of the CSV at `path`, those
    of each (circuit, seed) that `rows` has replaced in place by its rows in
    `rows`, then the rest of `rows`: another seed adds to the last results
    instead of replacing them. Without KEEP, `rows` alone."""
    if not os.environ.get("KEEP") or not path.exists():
        return rows
    new = {}
    for r in rows:
        new.setdefault((r["circuit"], int(r["seed"])), []).append(r)
    merged, replaced = [], set()
    for r in read_rows(path):
        key = (r["circuit"], r["seed"])
        if key in new:
            merged += new.pop(key)
            replaced.add(key)
        elif key not in replaced:
            merged.append(r)
    return merged + [r for rs in new.values() for r in rs]


def read_rows(path):
    """The rows of the CSV file at `path`, each cell read back by `cell`."""
    with open(path) as f:
        return [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(f)]


def cell(v):
    """A CSV cell read back as what was written: a whole number as int,
    another number as float, an empty cell as None, text as text."""
    if v == "":
        return None
    if v.lstrip("-").isdigit():
        return int(v)
    n = num(v)
    return v if n is None else n

MASK64 = (1 << 64) - 1


def in_test_split(key, fraction=0.15):
    """The loop's test split (src/learn/model/metrics.rs `in_test_split`): FNV-1a
    of the extraction's key, mixed by the splitmix64 finaliser."""
    h = 0xcbf29ce484222325
    for b in key.encode():
        h = ((h ^ b) * 0x100000001b3) & MASK64
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & MASK64
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & MASK64
    h ^= h >> 31
    return (h >> 11) / float(1 << 53) < fraction


def model_meta(path):
    """The metadata record of a smoothe model file (safetensors header)."""
    raw = Path(path).read_bytes()
    size = int.from_bytes(raw[:8], "little")
    return json.loads(json.loads(raw[8:8 + size])["__metadata__"]["smoothe"])
