"""
Does the one line, `KGPSCallback()` with no arguments, beat its peers? The real-CPU suite's runs over seeds 0-9,
judged by goals set before seeds 5-9 were run: each comparison is the mean over seeds of the difference in final
held-out accuracy paired by seed, with its standard error (SE = std / sqrt(n - 1), numpy's std).

Its runs, every regime at uniform's tuned learning rate (`benchmarks/results/INDEX.json`, `verdicts.one_line`, lists
them in order of precedence: a run of the first file that holds it counts): `one_line_learnt_gamma/` (the one line as
it is, gamma learnt, in every regime on seeds 0-9), `real_cpu.json` (the suite on seeds 0-4), `held_back/` (the same
on seeds 5-9, run once after every choice was made) and `wrong_column/` (the one line with a wrong `level` column,
seeds 0-9); the one line's runs in the last three kept gamma fixed, the default before it learnt gamma. Beside them,
the suite at half and twice the tuned rate (`learning_rate`) and the one line's defaults re-tuned (`tuning`).
"""

import numpy as np

from benchmarks.realcpu.report import paired


# What it reads (INDEX.json lists each role's files in order of precedence).
ROLES = {
    "runs": "the one line and its peers in every regime, seeds 0-9",
    "learning_rate": "the suite at multiples of the tuned rate, by multiple (1: the suite itself)",
    "tuning": "the one line's defaults re-tuned at the tuned rates, seeds 0-2, with the runs they are paired with",
}
TRUE_COLUMN = ("base", "groups_of_4", "out_of_reach", "other_policy", "mostly_solved")
WRONG_COLUMN = ("wrong_labels", "wrong_labels_out_of_reach", "merged_levels", "unrelated_column")
# A wrong-column regime holds its twin's prompts, warm start and rollout budget, with another `level` column: a method
# that reads no column trains exactly as it does there (identical runs, compared in `one_line_tuning`), so a seed it
# was not run on in the wrong-column regime is taken from the twin.
TWIN = {"wrong_labels": "base", "wrong_labels_out_of_reach": "out_of_reach", "merged_levels": "base",
        "unrelated_column": "base"}  # fmt: skip
READS_THE_COLUMN = ("one_line",)
PEERS = ("uniform", "mopps", "greso", "dps", "kgps_per_prompt")
HELD_BACK = 5  # seeds 5-9 were run once, after every choice
# Where the oracle's edge over uniform is at least this, the one line must beat each peer by more than 2 SE.
LARGE_EDGE = 0.03
# The one line reaches uniform's final accuracy with at most this share of uniform's rollouts.
ROLLOUTS_GOAL = 0.50


def with_twins(runs: dict) -> dict:
    """`runs[regime][method][seed]` with each wrong-column regime's missing runs of a method that reads no column
    taken from its twin (`TWIN`), in place; returns `runs`."""
    for regime, twin in TWIN.items():
        for method, seeds in runs.get(twin, {}).items():
            if method not in READS_THE_COLUMN:
                for seed, run in seeds.items():
                    runs.setdefault(regime, {}).setdefault(method, {}).setdefault(seed, run)
    return runs


def difference(runs: dict, method: str, baseline: str, first_seed: int = 0) -> np.ndarray:
    """`method`'s final held-out accuracy minus `baseline`'s, on each seed from `first_seed` on that both ran."""
    pair = paired(runs, baseline).get(method)
    if pair is None:
        return np.empty(0)
    return np.asarray([d for s, d in zip(pair["seeds"], pair["difference"]) if int(s) >= first_seed], float)


def mean_se(d: np.ndarray) -> tuple[float, float]:
    return float(d.mean()), float(d.std() / np.sqrt(max(d.size - 1, 1)))


def short_cell(d: np.ndarray, digits: int = 3) -> str:
    """`mean ± SE` to `digits` decimals with a typographic minus, as the docs' tables print it."""
    mean, se = mean_se(d)
    return f"{round(mean, digits) + 0.0:+.{digits}f} ± {se:.{digits}f}".replace("-", "−")  # + 0.0: no "−0.000"


def cell(d: np.ndarray) -> str:
    mean, se = mean_se(d)
    return f"{mean:+.4f} ± {se:.4f} ({d.size})"


# The headline table's rows (README, docs/benchmarks.md): each method minus uniform on the same seed.
HEADLINE = {
    "one_line": "**the one line**, `KGPSCallback()` (finds `level`)",
    "one_line_no_metadata": "the one line, no metadata column",
    "kgps_per_prompt": "per-prompt filter, `KGPSConfig.per_prompt()`",
    "mopps": "MoPPS (authors' MATH recipe)",
    "greso": "GRESO (authors' rules)",
    "dps": "DPS (authors' MATH recipe)",
    "oracle": "oracle",
}


def headline(runs: dict, regimes=TRUE_COLUMN) -> str:
    """The headline table: final held-out accuracy minus uniform's on the same seed, mean ± SE over the seeds."""
    lines = ["| minus uniform, same seed | " + " | ".join(f"`{r}`" for r in regimes) + " |"]
    lines.append("|---" * (len(regimes) + 1) + "|")
    for method, label in HEADLINE.items():
        lines.append(
            f"| {label} | " + " | ".join(short_cell(difference(runs[r], method, "uniform")) for r in regimes) + " |"
        )
    return "\n".join(lines)


def power(runs: dict) -> tuple[list[str], list[str]]:
    """
    The testbed's power in each regime with the true column, as a table row each, and each check not met: the
    oracle above uniform by more than 2 SE, and at least 40 % of uniform's groups unanimous.
    """
    edges, unanimous, shortfalls = [], [], []
    for regime in TRUE_COLUMN:
        mean, se = mean_se(difference(runs[regime], "oracle", "uniform"))
        share = float(np.mean([run["summary"]["unanimous_share"] for run in runs[regime]["uniform"].values()]))
        edges.append(f"{mean:+.4f} ± {se:.4f}")
        unanimous.append(f"{100 * share:.0f} %")
        if not mean > 2 * se:
            shortfalls.append(f"the oracle not 2 SE above uniform in `{regime}`: {mean:+.4f} ± {se:.4f}")
        if share < 0.40:
            shortfalls.append(f"uniform's groups {100 * share:.0f} % unanimous in `{regime}` (power needs 40 %)")
    rows = [
        "| the testbed's power | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |",
        "|---" * (len(TRUE_COLUMN) + 1) + "|",
        "| oracle minus uniform | " + " | ".join(edges) + " |",
        "| uniform's unanimous groups | " + " | ".join(unanimous) + " |",
    ]
    return rows, shortfalls


def verdict(runs: dict) -> tuple[str, list[str]]:
    """The markdown tables, and each goal not met, in words with its numbers."""
    lines, shortfalls = ["## Minus uniform", "", headline(runs), ""], []
    rows, short = power(runs)
    lines += [*rows, ""]
    shortfalls += short

    def at_least(d, who, regime, what):  # mean + 1 SE >= 0
        mean, se = mean_se(d)
        if mean + se < 0:
            shortfalls.append(f"{who} below {what} in `{regime}`: {mean:+.4f} ± {se:.4f} (SE)")

    lines += [
        "## With the true `level` column",
        "",
        "| one line minus | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |",
    ]
    lines.append("|---" * (len(TRUE_COLUMN) + 1) + "|")
    for peer in (*PEERS, "oracle"):
        row = []
        for regime in TRUE_COLUMN:
            d = difference(runs[regime], "one_line", peer)
            row.append(cell(d))
            if peer == "oracle":
                continue
            at_least(d, "the one line", regime, peer)
            edge = difference(runs[regime], "oracle", "uniform").mean()
            mean, se = mean_se(d)
            if edge >= LARGE_EDGE and not mean > 2 * se:
                shortfalls.append(
                    f"the one line not 2 SE above {peer} in `{regime}` (oracle's edge {edge:+.3f}): {mean:+.4f} ± {se:.4f}"
                )
        lines.append(f"| {peer} | " + " | ".join(row) + " |")
    shares, reach = [], []
    for regime in TRUE_COLUMN:
        edge = difference(runs[regime], "oracle", "uniform").mean()
        share = difference(runs[regime], "one_line", "uniform").mean() / edge
        shares.append(f"{100 * share:.0f} %")
        if share < 0.75:
            shortfalls.append(
                f"the one line reaches {100 * share:.0f} % of the oracle's edge in `{regime}` (goal 75 %)"
            )
        rollouts = np.asarray(paired(runs[regime])["one_line"]["rollouts_to_baseline_final"], float)
        finite = rollouts[np.isfinite(rollouts)]
        reach.append(
            f"{100 * finite.mean():.0f} %"
            + ("" if finite.size == rollouts.size else f", never on {rollouts.size - finite.size}")
        )
        if finite.size < rollouts.size or finite.mean() > ROLLOUTS_GOAL:
            shortfalls.append(
                f"the one line needs {reach[-1]} of uniform's rollouts in `{regime}` "
                f"(goal at most {100 * ROLLOUTS_GOAL:.0f} %, on every seed)"
            )
    lines += ["| share of the oracle's edge | " + " | ".join(shares) + " |"]
    lines += ["| rollouts to uniform's final accuracy | " + " | ".join(reach) + " |", ""]
    lines += [f"Seeds {HELD_BACK}-9 alone, run once after every choice:", ""]
    lines += ["| one line minus | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"]
    lines.append("|---" * (len(TRUE_COLUMN) + 1) + "|")
    for peer in (*PEERS, "oracle"):
        row = [cell(difference(runs[regime], "one_line", peer, HELD_BACK)) for regime in TRUE_COLUMN]
        lines.append(f"| {peer} | " + " | ".join(row) + " |")
    lines.append("")

    lines += ["## With no metadata column (`prompt` and `answer` alone)", ""]
    lines += ["| no-metadata one line minus | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"]
    lines.append("|---" * (len(TRUE_COLUMN) + 1) + "|")
    for peer in PEERS:
        row = []
        for regime in TRUE_COLUMN:
            d = difference(runs[regime], "one_line_no_metadata", peer)
            row.append(cell(d))
            if peer in ("kgps_per_prompt", "mopps"):
                at_least(d, "the no-metadata one line", regime, peer)
        lines.append(f"| {peer} | " + " | ".join(row) + " |")
    lines.append("")

    lines += ["## With a wrong `level` column", ""]
    lines += ["| one line minus | " + " | ".join(f"`{r}`" for r in WRONG_COLUMN) + " |"]
    lines.append("|---" * (len(WRONG_COLUMN) + 1) + "|")
    for peer in ("uniform", "kgps_per_prompt"):
        row = []
        for regime in WRONG_COLUMN:
            d = difference(runs[regime], "one_line", peer)
            row.append(cell(d))
            mean, se = mean_se(d)
            if peer == "uniform" and not mean > se:
                shortfalls.append(f"the one line not 1 SE above uniform in `{regime}`: {mean:+.4f} ± {se:.4f}")
            if peer == "kgps_per_prompt":
                at_least(d, "the one line", regime, peer)
        lines.append(f"| {peer} | " + " | ".join(row) + " |")
    lines.append("")
    return "\n".join(lines), shortfalls


def sensitivity(by_scale: dict, seeds: int = 5) -> tuple[str, list[str]]:
    """
    The learning-rate sensitivity table: per multiple of the tuned rate (`by_scale[scale]` = runs of every regime at
    that multiple), the one line and the oracle minus uniform over seeds `0..seeds-1`; and each regime where the one
    line is below uniform on average (mean + SE < 0).
    """
    lines = ["| minus uniform, seeds 0-4 | " + " | ".join(f"`{r}`" for r in TRUE_COLUMN) + " |"]
    lines.append("|---" * (len(TRUE_COLUMN) + 1) + "|")
    shortfalls = []
    for scale, runs in by_scale.items():
        for method in ("one_line", "oracle"):
            if not all(method in runs.get(r, {}) for r in TRUE_COLUMN):
                continue
            row = []
            for regime in TRUE_COLUMN:
                first = {m: {s: run for s, run in v.items() if int(s) < seeds} for m, v in runs[regime].items()}
                d = difference(first, method, "uniform")
                row.append(cell(d))
                mean, se = mean_se(d)
                if method == "one_line" and mean + se < 0:
                    shortfalls.append(
                        f"the one line below uniform at {scale:g}x the tuned rate in `{regime}`: {mean:+.4f} ± {se:.4f}"
                    )
            lines.append(f"| {method}, {scale:g}x the tuned rate | " + " | ".join(row) + " |")
    return "\n".join(lines), shortfalls


# The one line's defaults re-tuned at the tuned rates, on the tuning seeds: the default reading `level` (`kgps:level`,
# the one line's configuration) and one field changed each (`one_line_tuning/`).
TUNING_SEEDS = 3


def tuning(runs: dict) -> list[str]:
    """
    Each configuration of the tuning runs minus the default it was tuned against, `kgps:level` there (the one line as it
    then was, gamma fixed; the same seed, seeds 0-2), in every main regime, and the share of the oracle's edge over
    uniform it keeps.
    """
    first = {r: {m: {s: v for s, v in seeds.items() if int(s) < TUNING_SEEDS} for m, seeds in runs[r].items()}
             for r in TRUE_COLUMN}  # fmt: skip
    configurations = sorted(m for m in first[TRUE_COLUMN[0]] if m.startswith("kgps+") and ":" in m)
    lines = [
        "| seeds 0-2, minus `kgps:level` (gamma fixed) | "
        + " | ".join(f"`{r}`" for r in TRUE_COLUMN)
        + " | share of the oracle's edge |"
    ]
    lines.append("|---" * (len(TRUE_COLUMN) + 2) + "|")
    for method in configurations:
        row = [cell(difference(first[r], method, "kgps:level")) for r in TRUE_COLUMN]
        shares = [
            difference(first[r], method, "uniform").mean() / difference(first[r], "oracle", "uniform").mean()
            for r in TRUE_COLUMN
        ]
        lines.append(
            f"| `{method}` | " + " | ".join(row) + " | " + " / ".join(f"{100 * x:.0f}" for x in shares) + " % |"
        )
    return lines


def render(runs: dict, command: str) -> tuple[str, dict]:
    """
    The verdict's markdown from `runs[role]` (`runs`, `tuning`: `runs[regime][method][seed]`; `learning_rate`: those
    by multiple of the tuned rate), and its figures (none).
    """
    tables, shortfalls = verdict(with_twins(runs["runs"]))
    robust, fragile = sensitivity({float(scale): with_twins(r) for scale, r in runs["learning_rate"].items()})
    tuned = "\n## Re-tuning the one line at the tuned rates\n\n" + "\n".join(tuning(with_twins(runs["tuning"]))) + "\n"
    text = (
        "# The one line against its goals, seeds 0-9\n\n"
        "Mean over seeds of the paired difference in final held-out accuracy ± its standard error (number of seeds), "
        f"`{command}`.\n\n"
        + tables
        + "\n## Learning-rate sensitivity\n\n"
        + robust
        + "\n"
        + tuned
        + "\n\n## Goals not met\n\n"
        + ("\n".join(f"- {s}" for s in shortfalls + fragile) if shortfalls + fragile else "None.")
        + "\n"
    )
    return text, {}
