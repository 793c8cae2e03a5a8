"""
The one line against DAPO's dynamic sampling (DS), under the KGPS paper's protocol: every method trains the regime's
400 optimizer steps at the regime's tuned learning rate, and the comparison is the final held-out accuracy after
them, with the rollouts each generated. Each comparison is the mean over seeds of a difference paired by seed, with
its standard error (SE = std / sqrt(n - 1), numpy's std).

- `uniform_ds` and `one_line_ds`: DS in the trainer (`benchmarks/realcpu/dynamic_sampling.py`), rounds of `B`
  prompts drawn uniformly or by `KGPSCallback()`, until the step holds `B` mixed groups or 10 rounds were generated
  (a capped step; each run counts them).
- The goal, the paper's claim: the one line's final accuracy at or above DS's after the same steps, with at most 30 %
  of DS's rollouts.

Its runs (`benchmarks/results/INDEX.json`, `verdicts.rollouts`, in order of precedence): `dynamic_sampling_0_4/` and
`dynamic_sampling_5_9/` (`uniform_ds`, `one_line_ds`), and the one line's and uniform's runs of the one-line verdict
from before the one line learnt gamma (its `one_line_ds` and per-rollout runs kept gamma fixed too). Beside them, each
from runs of their own (`benchmarks/RECORD.md`, "Dynamic sampling made fair"): DS at 0.71 to 4 times the tuned
rate (`ds_learning_rate`); DS with rounds of `3B` prompts (`rounds_of_3B`); the view per rollout, each run read at its
end (`per_rollout`: the one line at 2 and 3 times the steps, DS at half; `countdown_per_rollout`: the same in the
Countdown regimes, beside their suite's runs); and an allocation oracle (`allocation`; not a ceiling).
The same comparison at the suite's earlier, untuned learning rate, with a per-rollout view read part-way through a
stretched schedule, is kept as it was measured in `benchmarks/results/lr_1e-4/rollouts_verdict.md` (written by this
verdict's script of commit f92f09e).
"""

from collections.abc import Sequence

import numpy as np

from benchmarks.realcpu.report import paired, plot, rollouts_to_reach
from benchmarks.verdicts.one_line import TRUE_COLUMN, cell, difference, mean_se, short_cell


# What it reads (INDEX.json lists each role's files in order of precedence).
ROLES = {
    "runs": "DS and the one line's and uniform's runs at the regime's steps, seeds 0-9",
    "ds_learning_rate": "DS at multiples of the tuned rate, by multiple, seeds 0-2",
    "one_line_learning_rate": "the one line at multiples of the tuned rate, by multiple",
    "rounds_of_3B": "DS with rounds of 3B prompts, with the runs they are paired with",
    "per_rollout": "runs of their own length, with the runs they are paired with",
    "allocation": "the allocation oracle, with the runs it is paired with",
    "countdown_per_rollout": "the same runs of their own length in the Countdown regimes, with DS and the one line",
}
OPTIONAL = ("countdown_per_rollout",)
DS = "uniform_ds"
HELD_BACK = 5
# The paper's claim: at or above DS after the same steps, with at most this share of DS's rollouts.
ROLLOUT_SHARE = 0.30
PLOTTED = ("uniform", "uniform_ds", "one_line", "one_line_ds")

# DS's best rate is found apart from uniform's (`ds_learning_rate`, seeds 0-2): its effective step is larger. The one
# line's at half and twice the rate are the sensitivity runs.
TUNING_SEEDS = ("0", "1", "2")
# Runs of their own length (warmup, then the schedule over all of their steps), read at their ends: the one line at
# 1, 2 and 3 times the regime's steps, DS at a half and at 1 times.
OWN_LENGTH = {"one_line": ("one_line", "one_line_x2", "one_line_long"), DS: ("uniform_ds_half", DS)}
LONG = OWN_LENGTH["one_line"][-1]
# The allocation oracle (`oracle_sizes`) against the oracle's selection alone, where informative prompts are scarce.
ALLOCATION_REGIMES = ("groups_of_4", "out_of_reach", "mostly_solved")
# Allocation enters the library only if its oracle reaches uniform's final with this share of the oracle's rollouts
# or less, in at least `ALLOCATION_REGIMES_NEEDED` regimes.
ALLOCATION_SHARE = 0.90
ALLOCATION_REGIMES_NEEDED = 2


def rollout_share(runs: dict, method: str, target: str = DS) -> np.ndarray:
    """Per seed both ran, in seed order: `method`'s rollouts in its run as a share of `target`'s in the same seed's."""
    seeds = sorted((s for s in runs.get(method, {}) if s in runs.get(target, {})), key=int)
    return np.asarray([runs[method][s]["rollouts"][-1] / runs[target][s]["rollouts"][-1] for s in seeds], float)


def summary(runs: dict, method: str, key: str) -> np.ndarray:
    """A summary value of every run of `method`, in seed order."""
    return np.asarray([runs[method][s]["summary"][key] for s in sorted(runs[method], key=int)], float)


def headline(runs: dict) -> str:
    """The README's table: per optimizer step against DS, the rollouts each spent and DS's capped steps."""

    def thousands(method, g):
        return f"{summary(runs[g], method, 'rollouts').mean() / 1000:.1f}k"

    lines = [
        "| seeds 0-9 | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |",
        "|---" * (len(TRUE_COLUMN) + 1) + "|",
    ]
    finals = [summary(runs[g], DS, "final_heldout_accuracy").mean() for g in TRUE_COLUMN]
    lines.append("| DS's held-out accuracy after 400 steps | " + " | ".join(f"{f:.3f}" for f in finals) + " |")
    for method, label in (
        ("one_line", "the one line minus DS"),
        ("one_line_ds", "DS on the one line's prompts minus DS"),
    ):
        lines.append(
            f"| {label} | " + " | ".join(short_cell(difference(runs[g], method, DS)) for g in TRUE_COLUMN) + " |"
        )
    row = [" / ".join(thousands(m, g) for m in (DS, "one_line_ds", "one_line")) for g in TRUE_COLUMN]
    lines.append("| rollouts: DS / DS on the one line's prompts / the one line | " + " | ".join(row) + " |")
    row = [f"{summary(runs[g], DS, 'capped_steps').mean():.1f}" for g in TRUE_COLUMN]
    lines.append("| DS's steps capped at 10 rounds, per run | " + " | ".join(row) + " |")
    return "\n".join(lines)


def dynamic_sampling(runs: dict) -> tuple[list[str], list[str]]:
    """The tables and the goals not met."""
    lines, shortfalls = [], []
    header = "| | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"
    rule = "|---" * (len(TRUE_COLUMN) + 1) + "|"

    lines += ["## Per optimizer step: final held-out accuracy after the regime's 400 steps", "", header, rule]
    finals = [summary(runs[g], DS, "final_heldout_accuracy") for g in TRUE_COLUMN]
    lines.append(f"| {DS} | " + " | ".join(f"{f.mean():.4f} ({f.size})" for f in finals) + " |")
    for method in ("uniform", "one_line", "one_line_ds", "oracle"):
        row = [cell(difference(runs[g], method, DS)) for g in TRUE_COLUMN]
        lines.append(f"| {method} minus {DS} | " + " | ".join(row) + " |")
    row = []
    for g in TRUE_COLUMN:
        d = difference(runs[g], "one_line", DS)
        row.append(f"{int((d >= 0).sum())} of {d.size}")
    lines.append(f"| seeds where the one line is at or above {DS} | " + " | ".join(row) + " |")
    row = [cell(difference(runs[g], "one_line_ds", "one_line")) for g in TRUE_COLUMN]
    lines.append("| one_line_ds minus one_line (what the filter adds per step) | " + " | ".join(row) + " |")

    lines += ["", "## Rollouts generated in the 400 steps", "", header, rule]
    for method in ("uniform", DS, "one_line", "one_line_ds"):
        row = []
        for g in TRUE_COLUMN:
            text = f"{summary(runs[g], method, 'rollouts').mean():,.0f}"
            if runs[g][method][next(iter(runs[g][method]))]["summary"].get("dropped_share") is not None:
                dropped, capped = summary(runs[g], method, "dropped_share"), summary(runs[g], method, "capped_steps")
                text += f" ({100 * dropped.mean():.0f} % of groups dropped; capped steps {capped.mean():.1f}, "
                text += f"at most {capped.max():.0f})"
            row.append(text)
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    row = [f"{100 * rollout_share(runs[g], 'one_line').mean():.0f} %" for g in TRUE_COLUMN]
    lines.append(f"| the one line's rollouts, share of {DS}'s | " + " | ".join(row) + " |")
    row = [f"{100 * rollout_share(runs[g], 'one_line_ds').mean():.0f} %" for g in TRUE_COLUMN]
    lines.append(f"| one_line_ds's rollouts, share of {DS}'s | " + " | ".join(row) + " |")

    for g in TRUE_COLUMN:
        mean, se = mean_se(difference(runs[g], "one_line", DS))
        share = rollout_share(runs[g], "one_line").mean()
        if mean + se < 0 or share > ROLLOUT_SHARE:
            shortfalls.append(
                f"the paper's claim in `{g}`: the one line minus {DS} after the same steps {mean:+.4f} ± {se:.4f} with "
                f"{100 * share:.0f} % of its rollouts (goal: at or above, with at most {100 * ROLLOUT_SHARE:.0f} %)"
            )

    lines += ["", f"Seeds {HELD_BACK}-9 alone, run once after every choice:", "", header, rule]
    for method in ("one_line", "one_line_ds"):
        row = [cell(difference(runs[g], method, DS, HELD_BACK)) for g in TRUE_COLUMN]
        lines.append(f"| {method} minus {DS} (per step) | " + " | ".join(row) + " |")
    return lines, shortfalls


def finals(runs: dict, method: str, seeds=TUNING_SEEDS) -> np.ndarray:
    """The final held-out accuracy of `method`'s runs on `seeds`, in that order (every seed must have run)."""
    return np.asarray([runs[method][s]["summary"]["final_heldout_accuracy"] for s in seeds], float)


def best_rates(by_scale: dict, method: str, regime: str) -> tuple[float, np.ndarray]:
    """The multiple of the tuned rate at which `method` ends best on the tuning seeds, and its finals there."""
    scored = {
        scale: finals(runs[regime], method) for scale, runs in by_scale.items() if method in runs.get(regime, {})
    }
    best = max(scored, key=lambda scale: scored[scale].mean())
    return best, scored[best]


def ds_learning_rate(ds_by_scale: dict, line_by_scale: dict) -> list[str]:
    """DS's final accuracy at each multiple of the tuned rate (seeds 0-2), and the one line against DS at its best."""
    header = "| seeds 0-2 | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"
    lines = [header, "|---" * (len(TRUE_COLUMN) + 1) + "|"]
    best = {regime: best_rates(ds_by_scale, DS, regime) for regime in TRUE_COLUMN}
    for scale, runs in ds_by_scale.items():
        row = []
        for regime in TRUE_COLUMN:
            if DS not in runs.get(regime, {}):
                row.append("–")
                continue
            text = f"{finals(runs[regime], DS).mean():.4f}"
            row.append(f"**{text}**" if best[regime][0] == scale else text)
        lines.append(f"| {DS} at {scale:g}x the tuned rate | " + " | ".join(row) + " |")
    row = [cell(finals(line_by_scale[1.0][r], "one_line") - best[r][1]) for r in TRUE_COLUMN]
    lines.append(f"| the one line at the tuned rate minus {DS} at its best | " + " | ".join(row) + " |")
    row = []
    for regime in TRUE_COLUMN:
        scale, line = best_rates(line_by_scale, "one_line", regime)
        row.append(f"{cell(line - best[regime][1])} at {scale:g}x")
    lines.append(f"| the one line at its best (0.5, 1, 2x) minus {DS} at its best | " + " | ".join(row) + " |")
    return lines


def final_point(run: dict) -> tuple[float, float]:
    """A run's rollouts and final held-out accuracy."""
    return float(run["rollouts"][-1]), float(run["heldout_accuracy"][-1])


def own_length_curve(runs: dict, method: str, seed: str) -> tuple[np.ndarray, np.ndarray]:
    """`method`'s runs of their own length on `seed` (`OWN_LENGTH`), as final accuracy against rollouts, sorted."""
    points = sorted(final_point(runs[m][seed]) for m in OWN_LENGTH[method] if seed in runs.get(m, {}))
    return np.array([p[0] for p in points]), np.array([p[1] for p in points])


def beside_the_one_line(runs: dict, method: str, curves: dict) -> np.ndarray:
    """Per seed of `curves` that `method` ran: its final accuracy minus the one line's at the same rollouts, read off
    the one line's runs of their own length (`curves[seed]`, `own_length_curve`)."""
    ran = {s: final_point(runs[method][s]) for s in curves if s in runs.get(method, {})}
    return np.asarray([final - np.interp(spent, *curves[s]) for s, (spent, final) in ran.items()])


def share_to_reach(curves: dict, ds_runs: dict) -> tuple[str, float, int]:
    """
    Per seed of `curves` (`own_length_curve`): the rollouts the one line needs to reach the final accuracy of that
    seed's DS run (`ds_runs[seed]`), as a share of the DS run's rollouts. Returns the table's text, the mean share
    over the seeds that reach it (NaN if none does) and how many seeds never reach it within the one line's runs.
    """
    needed, beyond = [], 0
    for seed, curve in curves.items():
        spent, target = final_point(ds_runs[seed])
        reach = rollouts_to_reach(*curve, target)
        if np.isfinite(reach):
            needed.append(reach / spent)
        else:
            beyond += 1
    share = np.asarray(needed)
    mean = float(share.mean()) if share.size else float("nan")
    if beyond:
        reached = f"{100 * mean:.0f} % on {share.size}" if share.size else "never"
        return f"{reached}; beyond its 3x run on {beyond} of {len(curves)} seeds", mean, beyond
    return f"{100 * mean:.0f} ± {100 * mean_se(share)[1]:.0f} % ({share.size})", mean, beyond


def per_rollout(
    runs: dict, regimes: tuple[str, ...] = TRUE_COLUMN, also: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """
    Per rollout, from runs of their own length: the rollouts the one line needs to reach DS's final accuracy (the
    one line's final accuracy against its rollouts, over its runs of 1, 2 and 3 times the steps, linearly
    interpolated), as a share of DS's, followed by the rows `also` (the same share against other DS runs); the one
    line at the rollouts of DS's half-length run, minus that run; where `one_line_ds` ran, it minus the one line at
    its rollouts; and where `uniform_long` ran, the one line minus uniform both trained 3 times the steps.
    """
    header = "| | " + " | ".join(f"`{r}`" for r in regimes) + " |"
    lines, shortfalls = [header, "|---" * (len(regimes) + 1) + "|"], []
    for method, multiples in (("one_line", "1, 2, 3"), (DS, "1/2, 1")):
        row = []
        for regime in regimes:
            cells = []
            for m in OWN_LENGTH[method]:
                seeds = sorted(runs[regime].get(m, {}), key=int)
                points = np.array([final_point(runs[regime][m][s]) for s in seeds])
                cells.append(f"{points[:, 1].mean():.3f} at {points[:, 0].mean() / 1000:.1f}k")
            row.append(", ".join(cells))
        lines.append(f"| {method}, runs of {multiples} x the steps: final at rollouts | " + " | ".join(row) + " |")
    shares, halves, kept, long = [], [], [], []
    for regime in regimes:
        seeds = sorted(
            (s for s in runs[regime][DS] if all(s in runs[regime].get(m, {}) for m in OWN_LENGTH["one_line"])), key=int
        )
        curves = {seed: own_length_curve(runs[regime], "one_line", seed) for seed in seeds}
        text, share, beyond = share_to_reach(curves, runs[regime][DS])
        shares.append(text)
        if beyond or share > ROLLOUT_SHARE:
            shortfalls.append(
                f"per rollout in `{regime}`: the one line reaches DS's final with {shares[-1]} of DS's rollouts "
                f"(goal at most {100 * ROLLOUT_SHARE:.0f} %)"
            )
        halves.append(cell(-beside_the_one_line(runs[regime], "uniform_ds_half", curves)))
        if "one_line_ds" in runs[regime]:
            kept.append(cell(beside_the_one_line(runs[regime], "one_line_ds", curves)))
        long.append(cell(difference(runs[regime], LONG, "uniform_long")) if "uniform_long" in runs[regime] else "–")
    lines.append(
        f"| rollouts the one line needs to reach {DS}'s final, share of {DS}'s | " + " | ".join(shares) + " |"
    )
    lines += also
    lines.append(
        "| the one line at the rollouts of DS's half-length run, minus that run | " + " | ".join(halves) + " |"
    )
    if kept:
        lines.append(
            "| one_line_ds minus the one line at one_line_ds's rollouts (the filter per rollout) | "
            + " | ".join(kept)
            + " |"
        )
    if set(long) != {"–"}:
        lines.append("| the one line minus uniform, both trained 3 x the steps | " + " | ".join(long) + " |")
    return lines, shortfalls


def share_at_ds_best(runs: dict, ds_by_scale: dict) -> list[str]:
    """
    Per rollout against DS at its own best rate (seeds 0-2): the rollouts the one line needs to reach the final of DS
    at the multiple of the tuned rate where DS ends best (`best_rates`), read off the one line's runs of their own
    length at the tuned rate, as a share of that DS run's rollouts.
    """
    row = []
    for regime in TRUE_COLUMN:
        scale = best_rates(ds_by_scale, DS, regime)[0]
        curves = {seed: own_length_curve(runs[regime], "one_line", seed) for seed in TUNING_SEEDS}
        row.append(f"{share_to_reach(curves, ds_by_scale[scale][regime][DS])[0]}, DS at {scale:g}x")
    return [f"| the same against {DS} at its own best rate, seeds 0-2 | " + " | ".join(row) + " |"]


def plot_own_length(runs: dict, path: str) -> None:
    """
    Per regime, each method's final held-out accuracy against the rollouts it spent, from runs of their own length
    (mean over the seeds all of them ran, ± SE): uniform, the one line at 1, 2 and 3 times the steps, DS at 1/2 and 1.
    """
    from trl_kgps.plots import pyplot

    plt = pyplot()
    if plt is None:
        return
    families = {
        "uniform": (("uniform",), "black"),
        "the one line": (OWN_LENGTH["one_line"], "red"),
        "DS (uniform prompts)": (OWN_LENGTH[DS], "tab:blue"),
        "DS on the one line's prompts": (("one_line_ds",), "tab:orange"),
    }
    fig, axes = plt.subplots(1, len(TRUE_COLUMN), figsize=(4.2 * len(TRUE_COLUMN), 3.6), layout="constrained")
    for ax, regime in zip(axes, TRUE_COLUMN):
        for label, (methods, color) in families.items():
            methods = [m for m in methods if m in runs[regime]]
            seeds = [s for s in runs[regime][methods[0]] if all(s in runs[regime][m] for m in methods)]
            points = np.array([[final_point(runs[regime][m][s]) for s in seeds] for m in methods])  # (runs, seeds, 2)
            se = points[:, :, 1].std(axis=1) / np.sqrt(max(len(seeds) - 1, 1))
            ax.errorbar(points[:, :, 0].mean(axis=1), points[:, :, 1].mean(axis=1), yerr=se, color=color,
                        marker="o", label=label, capsize=2)  # fmt: skip
        ax.set_title(regime, fontsize=9)
        ax.set_xlabel("rollouts")
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    axes[0].set_ylabel("final held-out accuracy")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=len(families), frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rounds_of_3b(runs: dict) -> list[str]:
    """DS with rounds of 3B prompts (DAPO's recipe) beside DS with rounds of B, per optimizer step."""
    header = "| | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"
    lines = [header, "|---" * (len(TRUE_COLUMN) + 1) + "|"]
    for method, baseline in (
        ("uniform_ds3", DS),
        ("one_line", "uniform_ds3"),
        ("one_line_ds3", "uniform_ds3"),
        ("one_line_ds3", "one_line_ds"),
    ):
        row = [cell(difference(runs[g], method, baseline)) for g in TRUE_COLUMN]
        lines.append(f"| {method} minus {baseline} | " + " | ".join(row) + " |")
    for method in (DS, "uniform_ds3", "one_line_ds3"):
        row = []
        for g in TRUE_COLUMN:
            capped = summary(runs[g], method, "capped_steps")
            row.append(f"{summary(runs[g], method, 'rollouts').mean():,.0f} (capped {capped.mean():.1f})")
        lines.append(f"| {method}: rollouts (capped steps a run) | " + " | ".join(row) + " |")
    return lines


def allocation(runs: dict) -> tuple[list[str], str]:
    """
    The allocation oracle against the oracle's selection alone in `ALLOCATION_REGIMES`: the rollouts each needs to
    reach uniform's final accuracy (as a share of uniform's), their ratio paired by seed, and the final accuracies;
    and the decision it gives.
    """
    header = "| seeds 0-9 | " + " | ".join(f"`{r}`" for r in ALLOCATION_REGIMES) + " |"
    lines = [header, "|---" * (len(ALLOCATION_REGIMES) + 1) + "|"]
    to_final = {}
    for method in ("oracle", "oracle_sizes"):
        row = []
        for regime in ALLOCATION_REGIMES:
            pair = paired(runs[regime])[method]
            to_final[regime, method] = dict(zip(pair["seeds"], pair["rollouts_to_baseline_final"]))
            share = np.asarray(pair["rollouts_to_baseline_final"], float)
            row.append(f"{100 * share.mean():.0f} ± {100 * mean_se(share)[1]:.0f} % ({share.size})")
        lines.append(f"| {method}: rollouts to uniform's final, share of uniform's | " + " | ".join(row) + " |")
    ratios, met = [], 0
    for regime in ALLOCATION_REGIMES:
        seeds = [s for s in to_final[regime, "oracle_sizes"] if s in to_final[regime, "oracle"]]
        ratio = np.asarray([to_final[regime, "oracle_sizes"][s] / to_final[regime, "oracle"][s] for s in seeds])
        ratios.append(f"{ratio.mean():.3f} ± {mean_se(ratio)[1]:.3f} ({ratio.size})")
        met += ratio.mean() <= ALLOCATION_SHARE
    lines.append("| oracle_sizes / oracle, rollouts to uniform's final, same seed | " + " | ".join(ratios) + " |")
    row = [cell(difference(runs[r], "oracle_sizes", "oracle")) for r in ALLOCATION_REGIMES]
    lines.append("| oracle_sizes minus oracle, final held-out accuracy | " + " | ".join(row) + " |")
    decision = (
        f"oracle_sizes needs at most {100 * ALLOCATION_SHARE:.0f} % of the oracle's rollouts in {met} of "
        f"{len(ALLOCATION_REGIMES)} regimes (needed: {ALLOCATION_REGIMES_NEEDED}): allocation "
        + ("enters the library" if met >= ALLOCATION_REGIMES_NEEDED else "stays out of the library")
    )
    return lines, decision


def render(runs: dict, command: str) -> tuple[str, dict]:
    """
    The verdict's markdown from `runs[role]` (`runs[regime][method][seed]` for `runs`, `rounds_of_3B`,
    `per_rollout` and `allocation`; those by multiple of the tuned rate for `ds_learning_rate` and
    `one_line_learning_rate`), and its figures: `accuracy_vs_rollouts` (held-out accuracy against rollouts, mean over
    seeds, of the methods in `PLOTTED`) and `own_length` (`plot_own_length`).
    """
    main = runs["runs"]
    tables, shortfalls = dynamic_sampling(main)
    ds_by_scale = {float(scale): r for scale, r in runs["ds_learning_rate"].items()}
    line_by_scale = {float(scale): r for scale, r in runs["one_line_learning_rate"].items()}
    sections = ["", "## DS at its own best learning rate", "", *ds_learning_rate(ds_by_scale, line_by_scale)]
    sections += ["", "## DS with rounds of 3B prompts (DAPO's recipe), per optimizer step", ""]
    sections += rounds_of_3b(runs["rounds_of_3B"])
    rows, short = per_rollout(runs["per_rollout"], also=share_at_ds_best(runs["per_rollout"], ds_by_scale))
    sections += ["", "## Per rollout, from runs of their own length", "", *rows]
    shortfalls += short
    if "countdown_per_rollout" in runs:
        countdown = tuple(runs["countdown_per_rollout"])
        rows, short = per_rollout(runs["countdown_per_rollout"], countdown)
        seeds = sorted({s for r in countdown for s in runs["countdown_per_rollout"][r][LONG]}, key=int)
        sections += ["", f"## Countdown, per rollout, from runs of their own length, seeds {', '.join(seeds)}", ""]
        sections += rows
        shortfalls += short
    rows, decision = allocation(runs["allocation"])
    sections += [
        "",
        "## An allocation oracle (not a ceiling: it moved 1-7 % of rollouts)",
        "",
        *rows,
        "",
        f"Decision: {decision}.",
    ]
    text = "\n".join(
        [
            "# The one line against dynamic sampling, seeds 0-9, at each regime's tuned learning rate",
            "",
            f"Mean over seeds of the paired difference ± its standard error (number of seeds), `{command}`.",
            "",
            *tables,
            *sections,
            "",
            "## Goals not met",
            "",
            *([f"- {s}" for s in shortfalls] or ["None."]),
            "",
        ]
    )
    curves = {g: {"runs": {m: main[g][m] for m in PLOTTED if m in main[g]}} for g in TRUE_COLUMN}
    figures = {
        "accuracy_vs_rollouts": lambda path: plot({"regimes": curves}, path),
        "own_length": lambda path: plot_own_length(runs["per_rollout"], path),
    }
    return text, figures
