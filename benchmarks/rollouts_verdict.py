"""
Rollouts against dynamic sampling, and what deciding how many rollouts each prompt gets could be worth: the real-CPU
suite's runs over seeds 0-9, judged by goals set before seeds 5-9 were run. Each comparison is the mean over seeds of
a difference paired by seed, with its standard error (SE = std / sqrt(n - 1), numpy's std).

```bash
python benchmarks/rollouts_verdict.py     # the committed runs below; writes rollouts_verdict.md and
                                          # rollouts_accuracy_vs_rollouts.png into benchmarks/results/lr_1e-4
```

- **Per optimizer step**: every method trains the regime's 400 steps; `uniform_ds` and `one_line_ds` (DAPO's dynamic
  sampling in the trainer, `benchmarks/realcpu/dynamic_sampling.py`) generate more rollouts for them.
- **Per rollout**: the rollouts a method needs to reach `uniform_ds`'s final held-out accuracy, as a share of
  `uniform_ds`'s rollouts (the KGPS paper's headline), read on `one_line_long`'s curve for the one line (the one
  line trained three times the regime's steps), and the held-out accuracy at equal rollouts.
- **The allocation ceiling**: oracles that know every prompt's true success and also decide how many rollouts each
  prompt gets (`oracle_duplicates`, `oracle_wide`), against the oracle's selection alone, in rollouts to uniform's
  final accuracy.

The runs were made at the suite's earlier learning rate, 1e-4 with linear decay, which no one tuned
(`benchmarks/results/lr_1e-4/`): `dynamic_sampling_0_4` and `dynamic_sampling_5_9` (`uniform_ds`, `one_line_ds`,
`one_line_long`), `allocation_0_4` (the allocation oracles), and the one line's, uniform's and the oracle's runs of
that rate (`ONE_LINE_FILES`).
"""

import argparse
import os
import sys

import numpy as np


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.one_line_verdict import TRUE_COLUMN, cell, difference, load, mean_se  # noqa: E402
from benchmarks.realcpu.report import paired, plot  # noqa: E402


RESULTS = "benchmarks/results/lr_1e-4"
ONE_LINE_FILES = (
    "one_line_0_4", "one_line_no_metadata_0_4", "held_back_b", "held_back_c", "held_back_oracle", "one_line_tuning",
)  # fmt: skip
FILES = ("dynamic_sampling_0_4", "dynamic_sampling_5_9", "allocation_0_4", *ONE_LINE_FILES)
DS = "uniform_ds"
HELD_BACK = 5
LARGE_EDGE = 0.03  # where the oracle's edge over uniform is at least this, the one line must beat DS by 2 SE
ALLOCATION = ("oracle_duplicates", "oracle_wide")
PLOTTED = ("uniform", "uniform_ds", "one_line", "one_line_long", "one_line_ds")


def accuracy_at(run: dict, rollouts: float) -> float:
    """A run's held-out accuracy after `rollouts` rollouts, linear between snapshots (NaN past its last)."""
    x, y = np.asarray(run["rollouts"], float), np.asarray(run["heldout_accuracy"], float)
    return float(np.interp(rollouts, x, y)) if rollouts <= x[-1] else float("nan")


def shares(runs: dict, method: str, target: str, first_seed: int = 0) -> np.ndarray:
    """
    In seed order, per seed both ran from `first_seed` on: the rollouts `method`'s curve needs to reach `target`'s
    final held-out accuracy, as a share of `target`'s rollouts (`inf` where it never does; `report.paired`'s
    `rollouts_to_baseline_final`).
    """
    pair = paired({method: runs.get(method, {}), target: runs.get(target, {})}, target).get(method)
    if pair is None:
        return np.empty(0)
    by_seed = dict(zip(pair["seeds"], pair["rollouts_to_baseline_final"]))
    return np.asarray([by_seed[s] for s in sorted(by_seed, key=int) if int(s) >= first_seed], float)


def at_equal_rollouts(runs: dict, method: str, other: str, first_seed: int = 0) -> np.ndarray:
    """Per seed: `method`'s final held-out accuracy minus `other`'s at the same rollouts."""
    seeds = [s for s in runs.get(method, {}) if s in runs.get(other, {}) and int(s) >= first_seed]
    return np.asarray(
        [
            runs[method][s]["heldout_accuracy"][-1] - accuracy_at(runs[other][s], runs[method][s]["rollouts"][-1])
            for s in sorted(seeds, key=int)
        ],
        float,
    )


def share_cell(values: np.ndarray) -> str:
    """`mean ± SE %` over the seeds that reached it, with those that never did."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return f"never (0/{values.size})"
    mean, se = mean_se(finite)
    text = f"{100 * mean:.0f} ± {100 * se:.0f} %"
    return text + ("" if finite.size == values.size else f", never on {values.size - finite.size}/{values.size}")


def mean_of(runs: dict, method: str, key: str) -> float:
    return float(np.mean([run["summary"][key] for run in runs[method].values()]))


def dynamic_sampling(runs: dict) -> tuple[list[str], list[str]]:
    """The dynamic-sampling tables and the goals not met."""
    lines, shortfalls = [], []
    header = "| | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"
    rule = "|---" * (len(TRUE_COLUMN) + 1) + "|"

    lines += ["## Per optimizer step: final held-out accuracy after the regime's 400 steps", "", header, rule]
    finals = [np.asarray([r["summary"]["final_heldout_accuracy"] for r in runs[g][DS].values()]) for g in TRUE_COLUMN]
    lines.append(
        f"| {DS} | " + " | ".join(f"{mean_se(f)[0]:.4f} ± {mean_se(f)[1]:.4f} ({f.size})" for f in finals) + " |"
    )
    for method in ("uniform", "one_line", "one_line_ds", "oracle"):
        lines.append(
            f"| {method} minus {DS} | " + " | ".join(cell(difference(runs[g], method, DS)) for g in TRUE_COLUMN) + " |"
        )
    row = [cell(difference(runs[g], "one_line_ds", "one_line")) for g in TRUE_COLUMN]
    lines.append("| one_line_ds minus one_line (what the filter adds per step) | " + " | ".join(row) + " |")
    lines += ["", "## Rollouts generated in the 400 steps", "", header, rule]
    for method in ("uniform", DS, "one_line", "one_line_ds"):
        row = []
        for g in TRUE_COLUMN:
            text = f"{mean_of(runs[g], method, 'rollouts'):,.0f}"
            dropped = [r["summary"].get("dropped_share") for r in runs[g][method].values()]
            if dropped[0] is not None:
                text += f" ({100 * np.mean(dropped):.0f} % of groups dropped)"
            row.append(text)
        lines.append(f"| {method} | " + " | ".join(row) + " |")

    lines += [
        "",
        f"## Per rollout: rollouts to {DS}'s final held-out accuracy, as a share of {DS}'s rollouts",
        "",
        header,
        rule,
    ]
    for method, label in (("one_line_long", "one line (trained 3x the steps)"), ("one_line_ds", "one_line_ds"),
                          ("one_line", "one line (400 steps)")):  # fmt: skip
        row = []
        for g in TRUE_COLUMN:
            values = shares(runs[g], method, DS)
            row.append(share_cell(values))
            finite = values[np.isfinite(values)]
            if method == "one_line_long" and (finite.size < values.size or finite.mean() > 0.30):
                shortfalls.append(
                    f"the one line needs {row[-1]} of {DS}'s rollouts to reach its final accuracy in `{g}` (goal at "
                    "most 30 % on average, reached on every seed)"
                )
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    for g in TRUE_COLUMN:
        d = difference(runs[g], "one_line_ds", DS)
        mean, se = mean_se(d)
        reached = shares(runs[g], "one_line_ds", DS)
        if mean + se < 0:
            shortfalls.append(f"one_line_ds below {DS}'s final accuracy in `{g}`: {mean:+.4f} ± {se:.4f} (SE)")
        spent = np.asarray(
            [
                runs[g]["one_line_ds"][s]["rollouts"][-1] / runs[g][DS][s]["rollouts"][-1]
                for s in runs[g]["one_line_ds"]
            ]
        )
        if spent.mean() > 0.5:
            shortfalls.append(
                f"one_line_ds spends {100 * spent.mean():.0f} % of {DS}'s rollouts in `{g}` (goal at most 50 %; it "
                f"reaches {DS}'s final accuracy with {share_cell(reached)})"
            )

    lines += [
        "",
        f"## At equal rollouts: the one line's final held-out accuracy minus {DS}'s at the same rollouts",
        "",
        header,
        rule,
    ]
    row, edges = [], []
    for g in TRUE_COLUMN:
        d = at_equal_rollouts(runs[g], "one_line", DS)
        row.append(cell(d))
        edge = difference(runs[g], "oracle", "uniform").mean()
        edges.append(f"{edge:+.3f}")
        mean, se = mean_se(d)
        if edge >= LARGE_EDGE and not mean > 2 * se:
            shortfalls.append(f"the one line not 2 SE above {DS} at equal rollouts in `{g}`: {mean:+.4f} ± {se:.4f}")
    lines.append("| one line (400 steps) | " + " | ".join(row) + " |")
    lines.append("| oracle minus uniform (per step) | " + " | ".join(edges) + " |")
    row = [cell(at_equal_rollouts(runs[g], "one_line_ds", "one_line_long")) for g in TRUE_COLUMN]
    lines.append("| one_line_ds minus the one line at one_line_ds's rollouts | " + " | ".join(row) + " |")

    lines += ["", f"Seeds {HELD_BACK}-9 alone, run once after every choice:", "", header, rule]
    for method in ("one_line_ds", "one_line"):
        row = [cell(difference(runs[g], method, DS, HELD_BACK)) for g in TRUE_COLUMN]
        lines.append(f"| {method} minus {DS} (per step) | " + " | ".join(row) + " |")
    row = [share_cell(shares(runs[g], "one_line_long", DS, HELD_BACK)) for g in TRUE_COLUMN]
    lines.append(f"| one line's rollouts to {DS}'s final | " + " | ".join(row) + " |")
    return lines, shortfalls


def allocation(runs: dict) -> tuple[list[str], bool]:
    """
    The allocation ceiling's table over the seeds the allocation oracles ran, and whether it is worth building: at
    least 10 % fewer rollouts to uniform's final accuracy than the oracle's selection alone (the mean over seeds of
    `1 - share / oracle's share`, paired by seed) in two or more regimes.
    """
    header = "| | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"
    seeds = {g: set.intersection(*(set(runs[g].get(m, {})) for m in ALLOCATION)) for g in TRUE_COLUMN}
    ran = {
        g: {m: {s: r for s, r in runs[g].get(m, {}).items() if s in seeds[g]} for m in runs[g]} for g in TRUE_COLUMN
    }
    lines = [
        "## The allocation ceiling: rollouts to uniform's final held-out accuracy, as a share of uniform's",
        "",
        "What an allocation oracle saves: the mean over seeds of `1 - its share / the oracle's share`, over the seeds "
        "both allocation oracles ran: "
        + ", ".join(f"`{g}` {','.join(sorted(seeds[g], key=int)) or 'none'}" for g in TRUE_COLUMN)
        + ".",
        "",
        header,
        "|---" * (len(TRUE_COLUMN) + 1) + "|",
    ]
    oracle = {g: shares(ran[g], "oracle", "uniform") for g in TRUE_COLUMN}
    lines.append("| oracle (selection alone) | " + " | ".join(share_cell(oracle[g]) for g in TRUE_COLUMN) + " |")
    worth = {}
    for method in ALLOCATION:
        row, saving = [], []
        for g in TRUE_COLUMN:
            if not seeds[g]:
                row.append("–")
                continue
            mine = shares(ran[g], method, "uniform")  # the same seeds as the oracle's, in the same order
            fewer = 1 - mine / oracle[g]
            mean, se = mean_se(fewer[np.isfinite(fewer)]) if np.isfinite(fewer).any() else (float("nan"), 0.0)
            saving.append(mean)
            row.append(f"{share_cell(mine)}; saves {100 * mean:+.0f} ± {100 * se:.0f} %")
        worth[method] = sum(s >= 0.10 for s in saving)
        lines.append(f"| {method} | " + " | ".join(row) + " |")
        row = [cell(difference(ran[g], method, "oracle")) if seeds[g] else "–" for g in TRUE_COLUMN]
        lines.append(f"| {method} minus oracle, final accuracy | " + " | ".join(row) + " |")
    lines.append("")
    verdict = any(count >= 2 for count in worth.values())
    lines.append(
        "Worth building (at least 10 % fewer rollouts than the oracle's selection alone in two or more regimes): "
        + ("yes" if verdict else "no")
        + " ("
        + ", ".join(f"{m}: {c} regime{'s' * (c != 1)}" for m, c in worth.items())
        + ")."
    )
    return lines, verdict


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="+", default=[os.path.join(RESULTS, f, "real_cpu.json") for f in FILES])
    parser.add_argument("--out", default=os.path.join(RESULTS, "rollouts_verdict.md"))
    parser.add_argument(
        "--plot",
        default=os.path.join(RESULTS, "rollouts_accuracy_vs_rollouts.png"),
        help="held-out accuracy against rollouts, mean over seeds, of the methods in PLOTTED",
    )
    args = parser.parse_args(argv)
    runs = load([path for path in args.results if os.path.exists(path)])
    tables, shortfalls = dynamic_sampling(runs)
    ceiling, _ = allocation(runs)
    text = "\n".join(
        [
            "# Rollouts: dynamic sampling and the allocation ceiling, seeds 0-9",
            "",
            "Mean over seeds of the paired difference ± its standard error (number of seeds), "
            "`python benchmarks/rollouts_verdict.py`.",
            "",
            *tables,
            "",
            *ceiling,
            "",
            "## Goals not met",
            "",
            *([f"- {s}" for s in shortfalls] or ["None."]),
            "",
        ]
    )
    with open(args.out, "w") as f:
        f.write(text)
    curves = {g: {"runs": {m: runs[g][m] for m in PLOTTED if m in runs[g]}} for g in TRUE_COLUMN}
    plot({"regimes": curves}, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
