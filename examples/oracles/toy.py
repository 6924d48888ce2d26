#!/usr/bin/env python3
"""A dependency-free demo oracle with a non-linear cost, for tests and the
README's first command. NOT a real measurement: it stands in for synthesis.

Usage: toy.py EGRAPH.json EXTRACTION.json   -> prints the cost

cost = (sum of node costs) ** 1.15 + 2 * (depth of the extracted term)
       + 3 * (number of distinct operators used)
so sharing, depth and operator variety all matter, unlike the linear cost.
Set TOY_FAIL_EVERY=N to make every N-th distinct extraction fail (tests).
"""
import json
import os
import sys


def main():
    extraction = json.load(open(sys.argv[2]))
    nodes = extraction["nodes"]  # children-first, children as indices
    depth = []
    for n in nodes:
        depth.append(1 + max((depth[c] for c in n["children"]), default=0))
    total = sum(n["cost"] for n in nodes)
    ops = len({n["op"] for n in nodes})
    every = int(os.environ.get("TOY_FAIL_EVERY", "0"))
    if every and sum(ord(ch) for ch in json.dumps(extraction["choices"], sort_keys=True)) % every == 0:
        print("toy oracle: simulated synthesis failure", file=sys.stderr)
        sys.exit(3)
    cost = max(total, 0.0) ** 1.15 + 2 * max(depth, default=0) + 3 * ops
    print(json.dumps({"cost": cost, "nodes": len(nodes)}) if os.environ.get("TOY_JSON") else f"{cost:.6f}")


if __name__ == "__main__":
    main()
