#!/usr/bin/env python3
"""Compares two runs of equivalence.sh: every result file in A/raw against
B/raw, with what varies between identical runs removed (times, paths,
dates; the trajectory keeps its costs, not its seconds).

Usage: equivalence.py A B   -> prints each differing file; exit 1 if any
"""
import json
import os
import re
import sys

VARIES = re.compile(r"second|time|elapsed|path|date|_ms|per_s|memory|host|started|finished|^out$|labels$|model$|egraph$|log")


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not VARIES.search(k)}
    if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 for x in v):
        return [strip(x[1]) for x in v]  # (seconds, cost) pairs
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def load(path):
    text = open(path).read()
    try:
        return [strip(json.loads(text))]
    except json.JSONDecodeError:
        return [strip(json.loads(line)) for line in text.splitlines() if line.strip()]


def main():
    a, b = (os.path.join(d, "raw") for d in sys.argv[1:3])
    names = sorted(n for n in os.listdir(a) if n.endswith(".json") and not n.endswith(".job.json"))
    differ = 0
    for name in names:
        other = os.path.join(b, name)
        if not os.path.exists(other):
            print(f"{name}: only in {a}")
            differ += 1
        elif load(os.path.join(a, name)) != load(other):
            print(f"{name}: differs")
            differ += 1
    print(f"{len(names) - differ} of {len(names)} result files equal")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
