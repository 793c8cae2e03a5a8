"""
How well each selector knows the success rates it chooses by, against the exact truth, at the suite's tuned learning
rate; ARCUS (`trl_kgps.selectors.ArcusSelector`) against the one line; and whether a larger or learnt drift makes the
one line's beliefs honest. Accuracy comparisons are paired by seed (mean over seeds of the difference, with its
standard error, SE = std / sqrt(n - 1)); calibration is each run's mean over its snapshots after the first
(`benchmarks/realcpu/calibration.py`), averaged over seeds.

Its runs (`benchmarks/results/INDEX.json`, `verdicts.calibration`, in order of precedence): `learnt_gamma`, the
default as it is, gamma learnt (`process_noise_adaptation=0.05`), in every main regime and the four wrong-column
ones, seeds 0-9 (`one_line_learnt_gamma/`); and `gamma_fixed`, every file whose `one_line` ran before, with gamma
fixed, which this verdict calls `one_line_fixed_gamma` (the suite's method of that name): the held-back seeds 5-9 of
every selector (`calibration_5_9_peers/`, which holds `calibration_5_9/`'s runs merged, then that), the paper's rule with and
without its clipped logit observation (`boundary_0_4/`: `paper+binomial`, the exact binomial update instead), the
drift candidates beside the one line (`drift_0_4/`), and every selector on seeds 0-4, one regime a file
(`calibration_0_4/<regime>/`).

The 0-4 runs before the predicted success became the belief's mean (`KGPSSelector.predicted_success`) report
\\(\\sigma(m)\\), its median; their coverage is the same either way, and the held-back runs and `drift_0_4` report the
mean.
"""

import numpy as np

from benchmarks.realcpu import calibration
from benchmarks.realcpu.report import paired
from benchmarks.verdicts.one_line import TRUE_COLUMN as REGIMES
from benchmarks.verdicts.one_line import short_cell


# What it reads (INDEX.json lists each role's files in order of precedence).
ROLES = {
    "learnt_gamma": "the default as it is, gamma learnt, every regime, seeds 0-9",
    "gamma_fixed": "every selector's runs from before, whose `one_line` is `one_line_fixed_gamma` here",
}
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


def combined(learnt_gamma: dict, gamma_fixed: dict) -> dict:
    """
    `runs[regime][method][seed]`: the default's runs (`learnt_gamma`) as `one_line`, and the runs of `gamma_fixed`,
    whose `one_line` ran with gamma fixed, as `one_line_fixed_gamma` (renamed in place); a run of `learnt_gamma` first.
    """
    runs = learnt_gamma
    for regime, methods in gamma_fixed.items():
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
    """`one_line.short_cell` and the number of seeds; — for none."""
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


def render(runs: dict, command: str) -> tuple[str, dict]:
    """The verdict's markdown from `runs[role]` (`learnt_gamma`, `gamma_fixed`: `runs[regime][method][seed]`), and its
    figure, `reliability` (`diagram`)."""
    runs = combined(runs["learnt_gamma"], runs["gamma_fixed"])
    return report(runs), {"reliability": lambda path: diagram(runs, path)}
