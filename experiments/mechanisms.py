"""Which mechanisms of the learned loop earn their place (issue 52, item 3).

Reads the committed ablations (no oracle call) and, for each mechanism with
a with/without pair of runs at equal seeds, computes the paired relative
difference of the loop's best label: its mean, its standard error over the
runs, and t = mean / standard error. A mechanism helps beyond the spread
between seeds when t >= 2 (the mean gain is at least twice its own
standard error, which the seed-to-seed spread of the runs sets).

    python3 experiments/mechanisms.py    # writes experiments/mechanisms.csv and .md
"""
import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (mechanism, result file stem, with column, without column, what the pair
# compares): each is read from STEM.csv (the shipped cell library) and, where
# that ablation was also run with the held-out library, from STEM-lib2.csv.
PAIRS = [
    ("model ranks the screened pool (selection-gp)", "selection_gp", "gp", "random",
     "the loop against random picks from the same screened pool"),
    ("selection-gp instead of the ensemble's lcb", "selection_gp", "gp", "loop",
     "the loop ranking by a GP over choices against ranking by the ensemble"),
    ("novelty filter (one label per feature row)", "novelty", "loop", "loop_before",
     "the loop against itself before the filter"),
    ("polish: screened search for the last 100 calls", "polish", "polished", "loop",
     "200 loop calls + 100 of `search --screen 32` against 300 loop calls"),
]


# What stays and what went, mechanism by mechanism, from the table above
# and from the ablations with no paired CSV (their reports are named).
VERDICTS = """
## Verdicts

| mechanism | evidence | verdict |
|---|---|---|
| the model ranks the screened pool (default `selection-gp`) | above: t 2.2 and 2.5 against random picks from the same pool | stays |
| `selection-gp` rather than the ensemble's `lcb` | above: t 2.0 with the shipped library, 0.4 with the held-out one | stays the default, at the edge; `--acquisition lcb` stays as its comparison arm |
| the ensemble's `ei` and `mean` rules, `linear_weight` (a multiple of the node costs added to a model) | never measured in an ablation; all off by default; `mean` is `lcb` with `beta = 0`, which `loop_beta0.md` put 1.03% above the default loop (higher on 6 of 7 runs) | removed (the loop's defaults are unchanged by it) |
| `beta = 1` | `loop_beta0.md`, `loop_beta3.md`: `beta` 0 and 3 end 1.03% and 0.47% above the default (higher on 6 of 7 runs each, one seed) | stays |
| rounds of 25 + 5 | `round_size.md`: 16 rounds of 12 + 3 end 0.35% above (higher on 5 of 7, one seed) | stays |
| novelty filter (one label per feature row) | above: t 0.6 and 1.5 in its first ablations; at the current loop, the code without it (`loop_nonovelty.md`, three seeds) against the loop with it (`frozen_start.csv`, which the build just before the removal reproduces on the two runs checked, `loop_repro.md`): t 0.1, 0.03% | removed (the loop's results change by less than the spread between seeds) |
| polish (the last 100 calls to `search --screen 32`) | above: t 0.2 | never adopted by the loop |
| trust-region charges on the frozen model | `frozen_trust.md` (trust 1 against 0, one seed): area within the spread (1.36% against 1.08% below the better greedy), but the frozen answer is a measured extraction on 6 of 7 against 3, and the prediction error at the answer 0.69% against 5.79% (worst 2.62% against 23.68%) | stays: without it the frozen model reports predictions eight times further off |
| residual term (a Gaussian process on the ensemble's residuals) | the model: `residual_accuracy.md` (the 21 current loops' label logs refitted with and without it, same labels and test split): test MAE 6.4% lower with it (t 6.2, never higher), test Spearman +0.024 (t 3.7). The loop: above, the loop ends 0.35% lower with it (t 1.4, lower on 9 of 21, higher on 6), within the spread | stays: the model it gives `extract --model` and the loop's picks predicts held-out labels better, beyond the spread, and the loop does no worse with it |
| guided-search picks (6 a round) | the ablation rerun with them: 0.26% below the best model-free method on average against 0.04% without (three seeds), within the spread; at the current loop (above: `loop_nonovelty.csv` with them against `loop_nosearch.csv` without, three seeds): the loop ends 0.10% lower without them, t -0.3, higher with them on 12 of 21 runs | removed (they help less than the spread between seeds). The code without them labels the same 300 extractions in the same order as `search_picks = 0` did (`loop_removal_check.md`, i7 at seed 1), so `loop_nosearch.csv` is the loop after the removal |
| the loop exploring the area-delay front | above (`tradeoff-withfront` against `tradeoff-nofront`, seven circuits, seeds 0, 1 and 2, every answer from the measured front): the frozen model's mean gain at the targets is 1.12 points higher with it (8.75% against 7.62%; t 2.4, higher on 14 of 21 runs, lower on 4; 83 against 82 of 84 targets met), and the loop takes 1.9 times as long (550 s against 289 s on one thread). Earlier, on the optimiser's answers alone: `tradeoff-front.md` against `tradeoff-loop.md`, 6 against 4 of 20 targets met (one seed) | stays: the frozen model answers delay targets with less area, beyond the spread between seeds, for the loop's time |
| answers to constrained queries from the measured front | `tradeoff-archive.md`: 28 of 28 targets met against 6 of 28 by the optimiser | stays |
| a guard on the learned delay | `tradeoff-guard.md`: 4 of 20 met against 6 of 20 without | removed |
"""


# Pairs across two files, joined on (circuit, seed): (mechanism, file with
# it, its column, file without it, its column, what the pair compares). A
# pair whose files are not there yet is left out of the table. The file
# with it may be several joined by `+`: the first holding a circuit and
# seed gives its row.
JOINED = [
    ("novelty filter (one label per feature row)", "frozen_start.csv", "best_label", "loop_nonovelty.csv", "best",
     "the loop at its defaults with the filter against the code without it (`NAME=loop_nonovelty ROUNDS=8 "
     "PER_ROUND=25 EXPLORE=5 SEARCH=6 SEEDS=\"0 1 2\" round_size.py` with the build before the search picks' removal)"),
    ("guided-search picks (6 a round)", "loop_nonovelty.csv", "best", "loop_nosearch.csv", "best",
     "the loop at its defaults against `search_picks = 0` (`NAME=loop_nosearch ROUNDS=8 PER_ROUND=25 "
     "EXPLORE=5 SEARCH=0 SEEDS=\"0 1 2\" round_size.py` with the build before their removal)"),
    ("residual term (a Gaussian process on the ensemble's residuals)", "loop_current.csv+loop_nosearch.csv", "best",
     "loop_noresidual.csv", "best",
     "the loop at its defaults (`loop_nosearch.csv`; c7552 rerun on the current build as `loop_current.csv`, since "
     "the baselines' fix changed its loop) against the code without the residual term's fit (`NAME=loop_noresidual "
     "ROUNDS=8 PER_ROUND=25 EXPLORE=5 SEEDS=\"0 1 2\" round_size.py`)"),
]


# Pairs of tradeoff.py runs, joined on (circuit, seed): (mechanism, run
# with it, run without it, what the pair compares). The difference per run
# is the frozen model's mean gain over the four delay targets (an unmet
# target counts 0), with it less without it, in percentage points.
TRADEOFF = [
    ("the loop exploring the area-delay front", "tradeoff-withfront.csv", "tradeoff-nofront.csv",
     "the frozen model's mean gain at four delay targets, in points (`tradeoff.py` with `THREADS=1`, the "
     "baselines of `tradeoff-seeds`, on the current build and on the build whose `Front::of` returns `None`)"),
]


def target_gains(path):
    """Per (circuit, seed) of a tradeoff.py CSV: the model's gains at its delay targets."""
    gains = {}
    for r in csv.DictReader(open(HERE / path)):
        if r["kind"].startswith("target"):
            gains.setdefault((r["circuit"], r["seed"]), []).append(float(r["gain"]))
    return gains


def tradeoff_paired(path_a, path_b):
    """Per run, the mean gain at the targets with the mechanism (`path_a`)
    less without it (`path_b`), in percentage points."""
    a, b = target_gains(path_a), target_gains(path_b)
    return [100 * (sum(a[k]) / len(a[k]) - sum(b[k]) / len(b[k])) for k in b if k in a]


def paired(path, a, b):
    """Per run, (b - a) / b in percent: positive when `a` (with the
    mechanism) measured less."""
    rows = list(csv.DictReader(open(HERE / path)))
    return [(float(r[b]) - float(r[a])) / float(r[b]) * 100 for r in rows if r.get(a) and r.get(b)]


def joined(path_a, a, path_b, b):
    """`paired` across two files, runs matched by circuit and seed."""
    with_it = {}
    for path in path_a.split("+"):
        for r in csv.DictReader(open(HERE / path)):
            if r.get(a):
                with_it.setdefault((r["circuit"], r["seed"]), r[a])
    return [(float(r[b]) - float(with_it[k])) / float(r[b]) * 100 for r in csv.DictReader(open(HERE / path_b))
            if r.get(b) and (k := (r["circuit"], r["seed"])) in with_it]


def stats(d):
    n = len(d)
    m = sum(d) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n)
    return n, m, se, m / se if se > 0 else float("nan"), sum(x > 0 for x in d), sum(x < 0 for x in d)


def main():
    out = []
    pairs = [(mech, path, what if path == f"{stem}.csv" else "the same, held-out cell library", paired(path, a, b))
             for mech, stem, a, b, what in PAIRS for path in (f"{stem}.csv", f"{stem}-lib2.csv")
             if (HERE / path).exists()]
    pairs += [(mech, f"{pa}, {pb}", what, joined(pa, a, pb, b)) for mech, pa, a, pb, b, what in JOINED
              if all((HERE / p).exists() for p in pa.split("+")) and (HERE / pb).exists()]
    pairs += [(mech, f"{pa}, {pb}", what, tradeoff_paired(pa, pb)) for mech, pa, pb, what in TRADEOFF
              if (HERE / pa).exists() and (HERE / pb).exists()]
    for mech, path, what, d in pairs:
        n, m, se, t, lower, higher = stats(d)
        out.append(dict(mechanism=mech, source=path, compares=what, runs=n, mean_gain_pct=round(m, 3),
                        standard_error_pct=round(se, 3), t=round(t, 2), lower=lower, higher=higher,
                        beyond_spread=int(t >= 2)))
    with open(HERE / "mechanisms.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
        w.writeheader()
        w.writerows(out)
    lines = ["# The learned loop's mechanisms against the spread between seeds", "",
             "Made by `experiments/mechanisms.py` from the committed ablations (no oracle call). "
             "Per pair of runs at the same circuit and seed: the loop's best label without the mechanism, "
             "less with it, relative (positive: the mechanism helps); for the front, the frozen model's mean "
             "gain at the delay targets with it, less without it, in points. `t` = mean / standard error over the "
             "runs; a mechanism helps beyond the spread between seeds when t >= 2.", "",
             "| mechanism | compares | source | runs | mean gain | standard error | t | lower / higher | beyond the spread |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in out:
        lines.append(f"| {r['mechanism']} | {r['compares']} | `{r['source']}` | {r['runs']} | "
                     f"{r['mean_gain_pct']:.2f}% | {r['standard_error_pct']:.2f}% | {r['t']:.1f} | "
                     f"{r['lower']} / {r['higher']} | {'yes' if r['beyond_spread'] else 'no'} |")
    lines += ["", VERDICTS.strip()]
    (HERE / "mechanisms.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
