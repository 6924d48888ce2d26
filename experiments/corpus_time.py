#!/usr/bin/env python3
"""How long does training the corpus model take? (see corpus_time.sh)

Times `smoothe train-cost --budget BUDGET` over every esyn circuit at once,
with the ABC area oracle (or ORACLE=...) and a fresh label log each time, so
every oracle call is included: once per thread count in THREADS (default
"1 2": the reproducible setting of transfer.sh, and the default on a 2-core
machine, one worker per core). Before each, it measures SmoothE's
milliseconds per step on esyn/mul3 at that thread count, as linear.sh does:
this machine's speed varies from day to day, and the same training takes
longer on a slow day.

Writes corpus_time.csv and corpus_time.md (NAME.* with NAME=...); runs live
in out/NAME. `--report` redraws the table from the CSV.
"""
import csv
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone

from abc_common import BIN, HERE, ORACLE, SHARED, fmt, oracle_label, run

BUDGET = int(os.environ.get("BUDGET", "100"))
SEED = int(os.environ.get("SEED", "0"))
THREADS = [int(t) for t in os.environ.get("THREADS", "1 2").split()]
NAME = os.environ.get("NAME", "corpus_time")
OUT = HERE / "out" / NAME
ESYN = sorted((SHARED / "esyn").glob("*.json"))
TARGET_MINUTES = 15


def ms_per_step(threads):
    """SmoothE's milliseconds per step on esyn/mul3 (30 s, the extract defaults)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run([BIN, "extract", "--method", "smoothe", "--seed", SEED, "--threads", threads, "-q", "-o", out.name,
             SHARED / "esyn" / "mul3.json"])
        return json.load(open(out.name))["ms_per_step"]


def corpus(threads):
    d = OUT / f"threads-{threads}"
    d.mkdir(parents=True, exist_ok=True)
    labels = d / "labels.jsonl"
    labels.unlink(missing_ok=True)
    speed = ms_per_step(threads)
    start = time.time()
    run([BIN, "train-cost", "--oracle", ORACLE, "--budget", BUDGET, "--jobs", 2, "--seed", SEED, "--threads",
         threads, "-q", "--force", "--labels", labels, "--out", d / "esyn.safetensors", *ESYN])
    seconds = time.time() - start
    rows = [json.loads(line) for line in open(labels)]
    rounds = json.load(open(d / "esyn.rounds.json"))
    best = {os.path.basename(g).removesuffix(".json"): r[-1]["best_real_cost"]
            for g, r in rounds["designs"].items()}
    return dict(threads=threads, budget=BUDGET, designs=len(ESYN), seconds=round(seconds, 1),
                oracle_calls=len(rows), oracle_seconds=round(sum(r["seconds"] for r in rows), 1),
                mul3_ms_per_step=round(speed, 2), corpus_test_spearman=round(rounds["corpus_report"]["test_spearman"], 3),
                date=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                **{f"best_{k}": v for k, v in sorted(best.items())})


def report(rows):
    lines = [
        "# Training the corpus model: wall-clock time",
        "",
        f"Made by `experiments/corpus_time.sh`: `smoothe train-cost --budget {rows[0]['budget']}` over the "
        f"{rows[0]['designs']} esyn circuits with {oracle_label()}, seed {SEED}, a fresh label log each run (every "
        "oracle call included, two at a time), on this 2-core machine. `ms/step` is SmoothE on esyn/mul3 at the "
        "same thread count just before, the machine's speed that day (10.1 ms when `linear.csv` was made). "
        "Different thread counts give different (equally valid) runs: the float sums split differently.",
        "",
        "| threads | minutes | under 15 min | oracle calls | oracle seconds (summed) | ms/step | corpus test Spearman | "
        "best label per design | date |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        best = ", ".join(f"{k.removeprefix('best_')} {fmt(float(v), 0)}" for k, v in r.items() if k.startswith("best_"))
        minutes = float(r["seconds"]) / 60
        lines.append(f"| {r['threads']} | {minutes:.1f} | {'yes' if minutes < TARGET_MINUTES else 'no'} | "
                     f"{r['oracle_calls']} | {r['oracle_seconds']} | {r['mul3_ms_per_step']} | "
                     f"{r['corpus_test_spearman']} | {best} | {r['date']} |")
    lines += ["", "`--threads 1` is what `experiments/transfer.sh` runs (a result that does not depend on the "
              "machine's core count); `--threads 0`, the default, is one worker per core, here 2."]
    (HERE / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def main():
    path = HERE / f"{NAME}.csv"
    if "--report" in sys.argv:
        rows = list(csv.DictReader(open(path)))
    else:
        rows = [corpus(t) for t in THREADS]
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
    report(rows)
    print((HERE / f"{NAME}.md").read_text())


if __name__ == "__main__":
    main()
