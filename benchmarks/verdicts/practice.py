"""
Does the one line, `KGPSCallback()`, beat what practitioners do, on sums and on Countdown? Final held-out accuracy
paired by seed, mean ± standard error (SE = std / sqrt(n - 1), numpy's std), from runs made on one machine in one
environment.

Its runs (`benchmarks/results/INDEX.json`, `verdicts.practice`), a table each:

- `sums`: `practice_0_4_same_machine/`, `uniform` and the one line on seeds 0-4, with `gaussian`, `insight` and
  `offline_filter` in the five sums regimes merged from `practice_0_4/` (run on the same machine; the suite's
  committed `uniform` ran on another CPU, whose kernels move a run at these learning rates by up to 0.006 at its
  end), and `practice_5_9/`, all five on seeds 5-9 on a machine of the same kind;
- `sums_held_back`: the same on the seeds held back from every choice (5-9);
- `countdown`: every method in the Countdown regimes, every seed run (0-9);
- `countdown_held_back`: the same on the seeds held back from every choice (5-9, as many as have run);
- `profiled`: `one_line_profiled` (the one line starting from the offline filter's profile, as
  `KGPSConfig(prior_column="pass_rate")`) beside uniform, the one line and the filter on the same seeds, in the
  regimes of both families it ran in, on every seed run and on the held-back seeds;
- `filtered`: `one_line_filtered` (the one line on the rows the offline filter keeps, its profiling counted) beside
  the filter, the one line and uniform on the same seeds, in every regime of both families it ran in, on every seed run
  and on the held-back seeds;
- `filter_budget`: `one_line_filter_budget` (the one line trained the rollouts the offline filter spends, its
  profiling included) beside the filter, the one line and uniform on the same seeds, in every regime of both families,
  on every seed run and on the held-back seeds;
- `oracle_rates`: the oracle at multiples of the tuned rate (by multiple; at 1x, the runs of `countdown`), its rate
  chosen by its mean final on the seeds every multiple ran, there paired with uniform and the one line at the tuned
  rate: a ceiling at the oracle's own best rate;
- `countdown_learning_rate`: uniform, the one line and the offline filter in the Countdown regimes at half, one and
  twice the tuned rate, by multiple, on seeds no choice was made on (10-14).

The offline filter's profiling (8 samples of every prompt before training) is counted in its rollouts.
"""

import numpy as np

from benchmarks.realcpu.report import paired
from benchmarks.verdicts.one_line import mean_se


# What it reads (INDEX.json lists each role's files): a table each where its runs are committed.
ROLES = {
    "sums": "the five sums regimes, every seed run, one kind of machine",
    "sums_held_back": "the five sums regimes, the seeds held back (5-9)",
    "countdown": "the Countdown regimes, every seed run",
    "countdown_held_back": "the Countdown regimes, the seeds held back (5-9)",
    "profiled": "the one line from the profile, with the runs it is paired with",
    "filtered": "the one line on the rows the filter keeps, with the runs it is paired with",
    "countdown_learning_rate": "the Countdown regimes at multiples of the tuned rate, by multiple, unseen seeds",
    "filter_budget": "the one line at the filter's rollouts, with the runs it is paired with",
    "oracle_rates": "the oracle at multiples of the tuned rate, by multiple, beside uniform and the one line at 1x",
}
OPTIONAL = tuple(role for role in ROLES if role != "sums")
PROFILED = "one_line_profiled"
FILTERED = "one_line_filtered"
AT_FILTER_BUDGET = "one_line_filter_budget"
HELD_BACK = 5
SUMS_METHODS = ("uniform", "one_line", "gaussian", "insight", "offline_filter")
# Each table: its title (`{seeds}`: the seeds uniform ran), and the methods it pairs (`None`: all).
TABLES = {
    "sums": ("Sums, every seed run (one kind of machine)", SUMS_METHODS),
    "sums_held_back": ("Sums, held-back seeds {seeds}", SUMS_METHODS),
    "countdown": ("Countdown, every seed run", None),
    "countdown_held_back": ("Countdown, held-back seeds {seeds}", None),
}
PEERS = ("uniform", "gaussian", "insight", "offline_filter", "mopps", "greso", "dps", "arcus", "kgps_per_prompt")


def kept(runs: dict, methods: tuple[str, ...] | None) -> dict:
    """`runs[regime][method][seed]` of `methods`, in the regimes uniform ran."""
    return {
        regime: {m: seeds for m, seeds in by_method.items() if methods is None or m in methods}
        for regime, by_method in runs.items()
        if "uniform" in by_method
    }


def cell(values: list[float]) -> str:
    """`mean ± SE` of `values` (`mean_se`) to 3 decimals, signed."""
    mean, se = mean_se(np.asarray(values))
    return f"{mean:+.3f} ± {se:.3f}"


def oracle_share(runs: dict) -> str:
    """The one line's mean edge over uniform as a share of the oracle's, where the oracle's is at least 2 SE above
    zero (elsewhere there is no edge to share)."""
    pairs = paired(runs)
    mean, se = mean_se(np.asarray(pairs["oracle"]["difference"]))
    if mean < 2 * se or mean <= 0:
        return f"none to share (the oracle's {mean:+.3f} ± {se:.3f})"
    line = np.mean(pairs["one_line"]["difference"])
    return f"{100 * line / mean:.0f} % (the oracle's {mean:+.3f} ± {se:.3f})"


def table(runs: dict, title: str) -> list[str]:
    """The one line minus each peer, and each method minus uniform, per regime (with its seeds, where the regimes
    ran different ones)."""
    regimes = list(runs)
    seeds = {r: sorted(runs[r]["uniform"], key=int) for r in regimes}
    names = {r: f"`{r}`" for r in regimes}
    if len({tuple(s) for s in seeds.values()}) > 1:
        names = {r: f"`{r}` (seeds {seeds[r][0]}-{seeds[r][-1]})" for r in regimes}
    lines = [f"## {title}", "", "| the one line minus | " + " | ".join(names.values()) + " |"]
    lines.append("|---" * (len(regimes) + 1) + "|")
    for peer in PEERS:
        if all(peer in runs[r] for r in regimes):
            row = [cell(paired(runs[r], baseline=peer)["one_line"]["difference"]) for r in regimes]
            lines.append(f"| {peer} | " + " | ".join(row) + " |")
    lines += [
        "",
        "| minus uniform | " + " | ".join(names.values()) + " |",
        "|---" * (len(regimes) + 1) + "|",
    ]
    methods = [m for m in runs[regimes[0]] if m != "uniform"]
    for method in methods:
        row = [cell(paired(runs[r])[method]["difference"]) if method in runs[r] else "–" for r in regimes]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    if all("oracle" in runs[r] for r in regimes):
        lines += ["", "The one line's edge over uniform as a share of the oracle's: " + ", ".join(
            f"`{r}` {oracle_share(runs[r])}" for r in regimes
        )]  # fmt: skip
    rollouts = [
        f"`{r}` {np.mean([s['rollouts'][-1] for s in runs[r]['offline_filter'].values()]):,.0f}"
        for r in regimes
        if "offline_filter" in runs[r]
    ]
    if rollouts:
        lines += [
            "",
            "The offline filter's rollouts, its profiling included (the others': 12,800): " + ", ".join(rollouts),
        ]
    return lines + [""]


def held_back(runs: dict) -> dict:
    """`runs[regime][method][seed]` on the seeds held back from every choice (`HELD_BACK` and after) alone."""
    return {
        regime: {m: {s: run for s, run in seeds.items() if int(s) >= HELD_BACK} for m, seeds in by_method.items()}
        for regime, by_method in runs.items()
    }


def beside(runs: dict, title: str, method: str, baselines: tuple[str, ...], footnote: str) -> list[str]:
    """`method` minus each of `baselines`, in each regime it ran in, paired by seed (none where it ran on none of
    `runs`' seeds), and `footnote` after the seeds."""
    regimes = [r for r in runs if runs[r].get(method)]
    if not regimes:
        return []
    lines = [f"## {title}", ""]
    lines += [f"| {method} minus | " + " | ".join(f"`{r}`" for r in regimes) + " |"]
    lines.append("|---" * (len(regimes) + 1) + "|")
    for baseline in baselines:
        row = [cell(paired(runs[r], baseline=baseline)[method]["difference"]) for r in regimes]
        lines.append(f"| {baseline} | " + " | ".join(row) + " |")
    seeds = sorted({int(s) for r in regimes for s in runs[r][method]})
    return lines + ["", f"Seeds {', '.join(map(str, seeds))}; {footnote}", ""]


def profiled(runs: dict, title: str = "The profile as the prior, not a filter") -> list[str]:
    """`PROFILED` minus uniform, the one line and the offline filter (the same profile, filtered)."""
    baselines = ("uniform", "one_line", "offline_filter")
    return beside(runs, title, PROFILED, baselines, "its profiling counted as the filter's.")


def filtered(runs: dict, title: str) -> list[str]:
    """`FILTERED` (the one line on the rows the offline filter keeps) minus the filter, the one line and uniform."""
    baselines = ("offline_filter", "one_line", "uniform")
    return beside(runs, title, FILTERED, baselines, "its profiling counted, as the filter's (the same rollouts).")


def at_filter_budget(runs: dict, title: str) -> list[str]:
    """`AT_FILTER_BUDGET` (the one line trained the rollouts the offline filter spends, its profiling included)
    minus the filter, the one line and uniform, with the rollouts each of the first two spent."""
    lines = beside(runs, title, AT_FILTER_BUDGET, ("offline_filter", "one_line", "uniform"), "rollouts at the end:")
    if not lines:
        return []
    regimes = [r for r in runs if runs[r].get(AT_FILTER_BUDGET)]
    for method in (AT_FILTER_BUDGET, "offline_filter"):
        spent = {r: np.mean([s["rollouts"][-1] for s in runs[r][method].values()]) for r in regimes}
        lines.insert(-1, f"- {method}: " + ", ".join(f"`{r}` {x:,.0f}" for r, x in spent.items()))
    return lines


def learning_rate(by_scale: dict) -> list[str]:
    """At each multiple of the tuned rate (`by_scale[multiple][regime][method][seed]`): uniform's final held-out
    accuracy (mean ± SE over seeds), and the one line minus uniform and minus each other method run beside them,
    paired by seed."""
    scales = sorted(by_scale, key=float)
    regimes = list(by_scale[scales[0]])
    seeds = sorted({int(s) for runs in by_scale.values() for r in runs.values() for s in r["uniform"]})
    lines = [
        f"## Countdown at {', '.join(f'{float(x):g}' for x in scales)} times the tuned rate, seeds "
        f"{', '.join(map(str, seeds))} (run after every choice)",
        "",
        "| | " + " | ".join(f"`{r}`" for r in regimes) + " |",
        "|---" * (len(regimes) + 1) + "|",
    ]
    for scale in scales:
        runs = by_scale[scale]
        finals = [
            mean_se(np.asarray([run["heldout_accuracy"][-1] for run in runs[r]["uniform"].values()])) for r in regimes
        ]
        lines.append(
            f"| {float(scale):g}x: uniform's final | " + " | ".join(f"{m:.3f} ± {se:.3f}" for m, se in finals) + " |"
        )
        for peer in [m for m in runs[regimes[0]] if m != "one_line"]:
            row = [cell(paired(runs[r], baseline=peer)["one_line"]["difference"]) for r in regimes]
            lines.append(f"| {float(scale):g}x: the one line minus {peer} | " + " | ".join(row) + " |")
    return lines + [""]


def oracle_rates(by_scale: dict) -> list[str]:
    """
    The oracle at multiples of the tuned rate (`by_scale[multiple][regime][method][seed]`, the tuned rate `"1"`
    holding uniform and the one line), in the regimes it ran at 1x and another multiple: its mean final at each
    multiple on the seeds every multiple of that regime ran (where its rate is chosen), its rate the best of those
    means, and there its edge over uniform at the tuned rate on every seed it ran, paired by seed, with the one line's
    edge as a share of it (`oracle_share`).
    """
    scales = sorted(by_scale, key=float)
    ran = {r: [x for x in scales if r in by_scale[x]] for r in by_scale["1"]}
    regimes = [r for r in by_scale["1"] if len(ran[r]) > 1]

    def final(x: str, r: str, s: str) -> float:
        return by_scale[x][r]["oracle"][s]["heldout_accuracy"][-1]

    swept = {r: sorted(set.intersection(*(set(by_scale[x][r]["oracle"]) for x in ran[r])), key=int) for r in regimes}
    means = {r: {x: np.mean([final(x, r, s) for s in swept[r]]) for x in ran[r]} for r in regimes}
    best = {r: max(means[r], key=means[r].get) for r in regimes}
    lines = ["## The oracle at its own rate", "", "| | " + " | ".join(f"`{r}`" for r in regimes) + " |"]
    lines.append("|---" * (len(regimes) + 1) + "|")
    for x in scales:
        cells = [
            "–" if x not in means[r] else f"**{means[r][x]:.3f}**" if best[r] == x else f"{means[r][x]:.3f}"
            for r in regimes
        ]
        lines.append(f"| the oracle at {float(x):.2g}x, its mean final | " + " | ".join(cells) + " |")
    edges, shares = [], []
    for r in regimes:
        oracle = by_scale[best[r]][r]["oracle"]
        runs = {m: {s: by_scale["1"][r][m][s] for s in oracle} for m in ("uniform", "one_line")} | {"oracle": oracle}
        edges.append(f"{cell(paired(runs)['oracle']['difference'])} ({len(oracle)})")
        shares.append(oracle_share(runs))
    lines.append("| the oracle at its best rate minus uniform at 1x (seeds) | " + " | ".join(edges) + " |")
    lines.append("| the one line's edge over uniform, a share of it | " + " | ".join(shares) + " |")
    chosen = "; ".join(f"`{r}` {', '.join(swept[r])}" for r in regimes)
    return lines + [
        "",
        f"Each rate's mean over the seeds every rate of its regime ran ({chosen}); bold: the best.",
        "",
    ]


def render(runs: dict, command: str) -> tuple[str, dict]:
    """The verdict's markdown, a table for each role of `TABLES` in `runs` (`runs[regime][method][seed]`), in the
    order `TABLES` names them, and its figures (none)."""
    lines = ["# The one line against what practitioners do", "", f"`{command}`", ""]
    for role, (title, methods) in TABLES.items():
        if role in runs:
            seeds = sorted({int(s) for by_method in runs[role].values() for s in by_method.get("uniform", {})})
            lines += table(kept(runs[role], methods), title.format(seeds=", ".join(map(str, seeds))))
    if "profiled" in runs:
        lines += profiled(runs["profiled"], "The profile as the prior, not a filter: every seed run")
        lines += profiled(held_back(runs["profiled"]), "The profile as the prior, on the held-back seeds")
    if "filtered" in runs:
        lines += filtered(runs["filtered"], "Filter once, then the one line: every seed run")
        lines += filtered(held_back(runs["filtered"]), "Filter once, then the one line, on the held-back seeds")
    if "filter_budget" in runs:
        lines += at_filter_budget(runs["filter_budget"], "At the filter's rollouts: every seed run")
        lines += at_filter_budget(held_back(runs["filter_budget"]), "At the filter's rollouts, on the held-back seeds")
    if "countdown_learning_rate" in runs:
        lines += learning_rate(runs["countdown_learning_rate"])
    if "oracle_rates" in runs:
        lines += oracle_rates(runs["oracle_rates"])
    return "\n".join(lines), {}
