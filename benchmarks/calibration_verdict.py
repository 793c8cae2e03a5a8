"""
How well each selector knows the success rates it chooses by, against the exact truth, at the suite's tuned learning
rate; ARCUS (`trl_kgps.selectors.ArcusSelector`) against the one line; and whether a larger or learnt drift makes the
one line's beliefs honest. Accuracy comparisons are paired by seed (mean over seeds of the difference, with its
standard error, SE = std / sqrt(n - 1)); calibration is each run's mean over its snapshots after the first
(`benchmarks/realcpu/calibration.py`), averaged over seeds.

```bash
python benchmarks/calibration_verdict.py   # the committed runs; writes benchmarks/results/calibration_verdict.md
                                           # and the reliability diagram, benchmarks/results/calibration_reliability.png
```

The runs (`benchmarks/results/`), `R` = `base,groups_of_4,out_of_reach,other_policy,mostly_solved`:

- `one_line_learnt_gamma/`: the default as it is, gamma learnt (`process_noise_adaptation=0.05`), in every main
  regime and the four wrong-column ones, seeds 0-9: `python benchmarks/real_cpu.py --regimes
  $R,wrong_labels,wrong_labels_out_of_reach,merged_levels,unrelated_column --methods one_line --seeds
  0,1,2,3,4,5,6,7,8,9 --held_back 5 --out benchmarks/results/one_line_learnt_gamma`. Every other file's `one_line`
  ran before, with gamma fixed: this verdict calls it `one_line_fixed_gamma` (the suite's method of that name);
- `calibration_0_4/<regime>/`: every selector, seeds 0-4, one regime a file:
  `python benchmarks/real_cpu.py --regimes <regime> --methods
  uniform,one_line,one_line_no_metadata,kgps_per_prompt,kgps_paper,mopps,greso,dps,arcus,oracle --seeds 0,1,2,3,4
  --out benchmarks/results/calibration_0_4/<regime>`;
- `drift_0_4/`: the drift candidates beside the one line, seeds 0-4: `python benchmarks/real_cpu.py --regimes $R
  --methods uniform,one_line,one_line_adaptive_q,one_line_gamma_1 --seeds 0,1,2,3,4 --out
  benchmarks/results/drift_0_4`;
- `calibration_5_9/`, then `calibration_5_9_peers/`: seeds 5-9, held back from every choice and run once: `python
  benchmarks/real_cpu.py --regimes $R --methods
  uniform,one_line,one_line_adaptive_q,arcus,kgps_per_prompt,one_line_no_metadata --seeds 5,6,7,8,9 --held_back 5
  --out benchmarks/results/calibration_5_9`, then `--methods kgps_paper,mopps,greso,dps --merge
  benchmarks/results/calibration_5_9/real_cpu.json --out benchmarks/results/calibration_5_9_peers` with the same
  regimes and seeds;
- `boundary_0_4/`: the paper's rule with and without its clipped logit observation (`paper+binomial`: the exact
  binomial update instead), seeds 0-4: `python benchmarks/real_cpu.py --regimes $R --methods
  uniform,kgps_paper,paper+binomial --seeds 0,1,2,3,4 --out benchmarks/results/boundary_0_4`.

The 0-4 runs before the predicted success became the belief's mean (`KGPSSelector.predicted_success`) report
\\(\\sigma(m)\\), its median; their coverage is the same either way, and the held-back runs and `drift_0_4` report the
mean.
"""

import argparse
import os
import sys

import numpy as np


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import one_line_verdict  # noqa: E402
from benchmarks.one_line_verdict import TRUE_COLUMN as REGIMES  # noqa: E402
from benchmarks.one_line_verdict import short_cell  # noqa: E402
from benchmarks.realcpu import calibration  # noqa: E402
from benchmarks.realcpu.report import paired  # noqa: E402


RESULTS = "benchmarks/results"
# The default as it is, gamma learnt (`process_noise_adaptation=0.05`), every main regime on seeds 0-9.
LEARNT_GAMMA = "one_line_learnt_gamma/real_cpu.json"
# Runs from before the default learnt gamma, whose `one_line` is `one_line_fixed_gamma` here. Held-back runs first:
# `one_line_verdict.load` keeps the first file's run of a seed.
FILES = (
    "calibration_5_9_peers/real_cpu.json",
    "calibration_5_9/real_cpu.json",
    "boundary_0_4/real_cpu.json",
    "drift_0_4/real_cpu.json",
    *(f"calibration_0_4/{regime}/real_cpu.json" for regime in REGIMES),
)
# Every selector, as the docs' table names it.
LABELS = {
    "one_line": "**the one line**",
    "one_line_no_metadata": "the one line, no column",
    "kgps_per_prompt": "per-prompt filter",
    "kgps_paper": "the paper's logit Kalman filter",
    "mopps": "MoPPS (Beta posterior)",
    "arcus": "ARCUS (arcsine coordinate)",
    "greso": "GRESO (last rate seen)",
    "dps": "DPS",
    "uniform": "uniform (last rate seen)",
}
CANDIDATES = (("one_line_adaptive_q", "one_line_fixed_gamma"), ("one_line_gamma_1", "one_line_fixed_gamma"))
# The boundary layer in the logit: the paper's rule with the exact binomial update instead of its clipped observation.
BOUNDARY = (("paper+binomial", "kgps_paper"),)
# In the reliability diagram: the default, the paper's rule, and the peers that hold a posterior.
DIAGRAM = ("one_line", "kgps_per_prompt", "kgps_paper", "mopps", "arcus")
HELD_BACK = 5
GOALS = dict(ece=0.05, coverage_90=0.85)


def load(results: str = RESULTS) -> dict:
    """
    `runs[regime][method][seed]`: the default's runs (`LEARNT_GAMMA`) as `one_line`, and the union of the files of
    `FILES` that exist (`one_line_verdict.load`), whose `one_line` ran with gamma fixed (`one_line_fixed_gamma`).
    """
    existing = [path for name in FILES if os.path.exists(path := os.path.join(results, name))]
    runs = one_line_verdict.load([path] if os.path.exists(path := os.path.join(results, LEARNT_GAMMA)) else [])
    for regime, methods in one_line_verdict.load(existing).items():
        if "one_line" in methods:
            methods["one_line_fixed_gamma"] = methods.pop("one_line")
        for method, seeds in methods.items():
            for seed, run in seeds.items():
                runs.setdefault(regime, {}).setdefault(method, {}).setdefault(seed, run)
    return runs


def seeds_of(runs: dict, method: str, low: int = 0, high: int = 10) -> list[str]:
    return sorted((s for s in runs.get(method, {}) if low <= int(s) < high), key=int)


def measure(runs: dict, method: str, key: str, low: int = 0, high: int = 10) -> np.ndarray:
    """`key` of `method`'s summary (e.g. `ece`) on each of its seeds in `[low, high)` that has it."""
    values = [runs[method][s]["summary"].get(key) for s in seeds_of(runs, method, low, high)]
    return np.asarray([v for v in values if v is not None], float)


def value(d: np.ndarray, digits: int = 3) -> str:
    return "—" if not d.size else f"{d.mean():.{digits}f} ({d.size})"


def difference(
    runs: dict, method: str, other: str, key: str | None = None, low: int = 0, high: int = 10
) -> np.ndarray:
    """Per seed in `[low, high)` that both ran: `method`'s final held-out accuracy (or summary `key`) minus `other`'s."""
    seeds = [s for s in seeds_of(runs, method, low, high) if s in runs.get(other, {})]
    if key is None:
        return np.asarray(
            [runs[method][s]["heldout_accuracy"][-1] - runs[other][s]["heldout_accuracy"][-1] for s in seeds]
        )
    pairs = [(runs[method][s]["summary"].get(key), runs[other][s]["summary"].get(key)) for s in seeds]
    return np.asarray([a - b for a, b in pairs if a is not None and b is not None], float)


def signed(d: np.ndarray, digits: int = 3) -> str:
    """`one_line_verdict.short_cell` and the number of seeds; — for none."""
    return f"{short_cell(d, digits)} ({d.size})" if d.size else "—"


def rollouts(runs: dict, method: str) -> str:
    """The rollouts `method` needed to reach uniform's final held-out accuracy, as a share of uniform's budget: the
    median over seeds (a seed that never reached counts as more than any), and on how many seeds it reached."""
    shares = np.asarray(paired(runs).get(method, {}).get("rollouts_to_baseline_final", []), float)
    if not shares.size:
        return "—"
    reached = np.isfinite(shares)
    median = np.median(shares)
    return f"{'never' if not np.isfinite(median) else f'{median:.0%}'} ({reached.sum()}/{shares.size} reached)"


def goals(runs_by_regime: dict) -> list[str]:
    lines = [
        "| regime | final held-out: one line − arcus | rollouts to uniform's final: one line | arcus | one line's "
        "ECE | its 90 % coverage | resolvable | per-prompt filter's ECE − arcus's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for regime in REGIMES:
        runs = runs_by_regime.get(regime, {})
        lines.append(
            f"| `{regime}` | {signed(difference(runs, 'one_line', 'arcus'))} | {rollouts(runs, 'one_line')} | "
            f"{rollouts(runs, 'arcus')} | {value(measure(runs, 'one_line', 'ece'))} | "
            f"{value(measure(runs, 'one_line', 'coverage_90'), 2)} | "
            f"{value(measure(runs, 'one_line', 'coverage_resolvable_90'), 2)} | "
            f"{signed(difference(runs, 'kgps_per_prompt', 'arcus', 'ece'))} |"
        )
    return lines


def every_selector(runs_by_regime: dict, low: int, high: int, coverages=("coverage_90", "coverage_resolvable_90")):
    """ECE and the 90 % `coverages` (over every prompt, where the truth is resolvable), each selector (rows) in each
    regime (columns), seeds `[low, high)`; with the resolvable coverage alone, the table `docs/benchmarks.md` quotes."""
    names = {"coverage_90": "90 % coverage", "coverage_resolvable_90": "90 % coverage where resolvable"}
    header = f"| ECE · {' · '.join(names[c] for c in coverages)} | " + " | ".join(f"`{r}`" for r in REGIMES) + " |"
    lines = [header, "|---" * (len(REGIMES) + 1) + "|"]
    for method, label in LABELS.items():
        cells = []
        for regime in REGIMES:
            runs = runs_by_regime.get(regime, {})
            ece = measure(runs, method, "ece", low, high)
            cover = [measure(runs, method, key, low, high) for key in coverages]
            cells.append(
                "—"
                if not ece.size
                else " · ".join([f"{ece.mean():.3f}", *(f"{c.mean():.2f}" for c in cover if c.size)])
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


DOCS_TABLE = dict(low=HELD_BACK, high=10, coverages=("coverage_resolvable_90",))


def versus(runs_by_regime: dict, pairs: tuple[tuple[str, str], ...], low: int = 0, high: int = 10) -> list[str]:
    """Per regime and `(method, other)` pair, seeds `[low, high)`: final held-out accuracy, ECE and 90 % coverage,
    `method` − `other`."""
    lines = [
        "| regime | method − other | final held-out | ECE | 90 % coverage | resolvable |",
        "|---|---|---|---|---|---|",
    ]
    for regime in REGIMES:
        runs = runs_by_regime.get(regime, {})
        for method, other in pairs:
            cells = [
                signed(difference(runs, method, other, None, low, high)),
                signed(difference(runs, method, other, "ece", low, high)),
                signed(difference(runs, method, other, "coverage_90", low, high), 2),
                signed(difference(runs, method, other, "coverage_resolvable_90", low, high), 2),
            ]
            lines.append(f"| `{regime}` | `{method}` − `{other}` | " + " | ".join(cells) + " |")
    return lines


def diagram(runs_by_regime: dict, path: str) -> bool:
    """The reliability diagram of `DIAGRAM`'s selectors, one panel a regime, pooled over the held-back seeds 5-9
    (`calibration.pooled_reliability`); `False` (nothing drawn) where no run kept its sums."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(REGIMES), figsize=(3.2 * len(REGIMES), 3.4), sharey=True)
    drawn = False
    for ax, regime in zip(axes, REGIMES):
        ax.plot([0, 1], [0, 1], color="0.7", lw=1)
        for method in DIAGRAM:
            seeds = runs_by_regime.get(regime, {}).get(method, {})
            held_back = [run for seed, run in seeds.items() if int(seed) >= HELD_BACK]
            sums = [calibration.pooled_reliability(run.get("calibration", {})) for run in held_back]
            sums = [s for s in sums if s is not None]
            if not sums:
                continue
            counts, predicted, true = np.sum(sums, axis=0)
            kept = counts > 0
            ax.plot(predicted[kept] / counts[kept], true[kept] / counts[kept], marker="o", ms=3, label=method)
            drawn = True
        ax.set_title(regime, fontsize=9)
        ax.set_xlabel("predicted success")
    axes[0].set_ylabel("true success")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    if drawn:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def report(runs: dict) -> str:
    """The verdict's markdown: the goals, every selector's calibration, the drift candidates, the boundary."""
    return "\n".join(
        [
            "# Calibration, and ARCUS as a peer",
            "",
            f"Goals, seeds 0-9 where run (the one line's ECE at most {GOALS['ece']}, its 90 % interval holding the "
            f"true logit at least {GOALS['coverage_90']:.0%} of the time; resolvable: where the true success lies in "
            "[0.001, 0.999]); value (seeds):",
            "",
            *goals(runs),
            "",
            "Every selector, seeds 0-4:",
            "",
            *every_selector(runs, 0, HELD_BACK),
            "",
            "Every selector, seeds 5-9 (held back):",
            "",
            *every_selector(runs, HELD_BACK, 10),
            "",
            "The table docs/benchmarks.md quotes:",
            "",
            *every_selector(runs, **DOCS_TABLE),
            "",
            "The drift for the one line, seeds 0-4:",
            "",
            *versus(runs, CANDIDATES, 0, HELD_BACK),
            "",
            "The same on the held-back seeds 5-9:",
            "",
            *versus(runs, CANDIDATES[:1], HELD_BACK, 10),
            "",
            "The unanimous groups' likelihood in the logit: the paper's rule with the exact binomial update, seeds 0-4:",
            "",
            *versus(runs, BOUNDARY),
            "",
        ]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    runs = load(args.results)
    text = report(runs)
    with open(os.path.join(args.results, "calibration_verdict.md"), "w") as f:
        f.write(text)
    diagram(runs, os.path.join(args.results, "calibration_reliability.png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
