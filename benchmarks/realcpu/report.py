"""
From runs to conclusions: each run's curves and summary, the comparison paired by seed with the baseline, the
suite's checks of its own power, the tables and the plots.

A results file holds `environment` (`environment.environment()`), `command`, `held_back` (the first seed no choice
was tuned on), `wall_s`, and per regime its definition, the fingerprint of its data and warm start, and
`runs[method][seed]` = `curves(...)`.
"""

import os

import numpy as np

from benchmarks.realcpu import calibration, results_file
from benchmarks.realcpu.environment import describe
from benchmarks.realcpu.methods import BASELINE


def curves(outcome: dict) -> dict:
    """
    A run's snapshots as JSON-ready curves (per level too: each level's mean true success, and how many times its
    prompts were trained; the selector's calibration, `calibration.snapshot_calibration`), and its summary.
    """
    records = outcome["records"]
    calibrated = calibration.snapshot_calibration(records, outcome["group_size"])
    steps = [r["step"] for r in records]
    mae = [None if r["predicted"] is None else float(np.abs(r["predicted"] - r["true"]).mean()) for r in records]
    estimated = [m for m in mae if m is not None]
    accuracy = [r["heldout"] for r in records]
    counts = np.asarray(outcome["times_selected"])
    levels = np.asarray(outcome["levels"])
    return dict(
        steps=steps,
        rollouts=[r["rollouts"] for r in records],
        heldout_accuracy=accuracy,
        train_true_success=[float(r["true"].mean()) for r in records],
        level_true_success={
            str(level): [float(r["true"][levels == level].mean()) for r in records] for level in np.unique(levels)
        },
        level_times_selected={str(level): int(counts[levels == level].sum()) for level in np.unique(levels)},
        mae_vs_true=mae,
        calibration=calibrated,
        summary=dict(
            final_heldout_accuracy=accuracy[-1],
            heldout_gain=accuracy[-1] - accuracy[0],
            final_train_success=float(records[-1]["true"].mean()),
            rollouts=records[-1]["rollouts"],
            unanimous_share=1.0 - outcome["informative"],
            mae_vs_true=float(np.mean(estimated)) if estimated else None,
            batch_mae=float(np.mean([v for _, v in outcome["batch_mae"]])) if outcome["batch_mae"] else None,
            distinct_prompts=outcome["distinct_prompts"],
            max_times_selected=int(counts.max()),
            dropped_share=outcome.get("dropped_share"),
            capped_steps=outcome.get("capped_steps"),
            wall_s=outcome["wall_s"],
            **calibration.run_calibration(calibrated),
        ),
    )


def rollouts_to_reach(rollouts, accuracy, target: float) -> float:
    """
    The rollouts at which the accuracy-vs-rollouts curve first reaches `target`, linearly interpolated between
    snapshots; `inf` if it never does.
    """
    rollouts, accuracy = np.asarray(rollouts, float), np.asarray(accuracy, float)
    reached = np.flatnonzero(accuracy >= target)
    if not reached.size:
        return float("inf")
    i = int(reached[0])
    if i == 0:
        return float(rollouts[0])
    fraction = (target - accuracy[i - 1]) / (accuracy[i] - accuracy[i - 1])
    return float(rollouts[i - 1] + fraction * (rollouts[i] - rollouts[i - 1]))


def paired(runs: dict, baseline: str = BASELINE) -> dict:
    """
    Per method, over the seeds it shares with `baseline` (`runs[method][seed]` = curves): the final held-out accuracy
    minus the baseline's in the run with the same seed, and the rollouts it needed to reach the baseline's final
    held-out accuracy (the paper's headline metric), as a share of the baseline's budget; and the held-out accuracy
    minus the baseline's at the snapshot nearest a quarter of the run (`early_step`), which shows whether a selector
    helps in a run shorter than one epoch.
    """
    out = {}
    for method, seeds in runs.items():
        shared = [seed for seed in seeds if seed in runs.get(baseline, {})]
        if not shared:
            continue
        differences, shares, early = [], [], []
        for seed in shared:
            mine, theirs = seeds[seed], runs[baseline][seed]
            target = theirs["heldout_accuracy"][-1]
            differences.append(mine["heldout_accuracy"][-1] - target)
            snapshot = int(np.argmin(np.abs(np.asarray(mine["steps"]) - mine["steps"][-1] / 4)))
            early.append(mine["heldout_accuracy"][snapshot] - theirs["heldout_accuracy"][snapshot])
            shares.append(
                rollouts_to_reach(mine["rollouts"], mine["heldout_accuracy"], target) / theirs["rollouts"][-1]
            )
        out[method] = dict(
            seeds=shared,
            difference=differences,
            rollouts_to_baseline_final=shares,
            early_step=seeds[shared[0]]["steps"][snapshot],
            early_difference=early,
        )
    return out


def summarize(runs: dict) -> dict:
    """Per method and summary key: mean, std (numpy's, over seeds) and count."""
    summary = {}
    for method, seeds in runs.items():
        summary[method] = {}
        for key in next(iter(seeds.values()))["summary"]:
            values = [s["summary"][key] for s in seeds.values() if s["summary"].get(key) is not None]
            if values:
                summary[method][key] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values)}
    return summary


def power(runs: dict, pairs: dict) -> dict:
    """
    The suite's checks of a regime: uniform gains at least 0.08 of held-out accuracy on average, and the oracle
    beats uniform by more than twice the standard deviation of their paired differences.
    """
    checks = {}
    if BASELINE in runs:
        gain = float(np.mean([s["summary"]["heldout_gain"] for s in runs[BASELINE].values()]))
        checks["uniform_gain"] = dict(value=gain, required=0.08, passed=gain >= 0.08)
    if "oracle" in pairs:
        d = np.asarray(pairs["oracle"]["difference"])
        checks["oracle_margin"] = dict(
            value=float(d.mean()), spread=float(d.std()), passed=bool(d.mean() > 2 * d.std())
        )
    return checks


def spread(values, digits: int, percent: bool = False, sign: bool = False) -> str:
    """`mean ± std` of `values`, `never` where a share is infinite (the curve never reached the target)."""
    values = np.asarray(values, float)
    scale, unit = (100, " %") if percent else (1, "")
    form = f"{'+' if sign else ''}.{digits}f"
    reached = np.isfinite(values)
    if not reached.any():
        return f"never (0/{values.size})"
    text = f"{scale * values[reached].mean():{form}} ± {scale * values[reached].std():.{digits}f}{unit}"
    return text if reached.all() else f"{text} on {reached.sum()}/{values.size}; never on the others"


def _split(pair: dict, held_back: int) -> tuple[list, list]:
    tuned = [d for s, d in zip(pair["seeds"], pair["difference"]) if int(s) < held_back]
    kept = [d for s, d in zip(pair["seeds"], pair["difference"]) if int(s) >= held_back]
    return tuned, kept


def regime_table(name: str, entry: dict, held_back: int) -> str:
    """The markdown table of one regime: every method, paired with uniform on the same seed."""
    runs = entry["runs"]
    pairs, summary = paired(runs), summarize(runs)
    regime = entry["regime"]
    seeds = sorted(int(s) for s in runs[BASELINE]) if BASELINE in runs else []
    start = next(iter(next(iter(runs.values())).values()))["heldout_accuracy"][0]
    lines = [
        f"### `{name}`: {regime['description']}",
        "",
        f"{regime['steps']} steps, learning rate {regime['learning_rate']:g} "
        f"({regime.get('lr_scheduler_type', 'linear')} after {regime['lr_warmup_steps']} warmup steps), seeds {seeds} "
        f"(seeds >= {held_back} "
        f"held back from every choice); held-out accuracy before RL {start:.3f}.",
        "",
        f"| method | held-out gain | minus uniform's, same seed | seeds < {held_back} | seeds >= {held_back} | rollouts to uniform's final "
        "| unanimous groups | prompts trained | most times one prompt was trained |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, s in summary.items():
        pair = pairs.get(method)
        if method == BASELINE or pair is None:
            differences = tuned = kept = "—"
        else:
            differences = spread(pair["difference"], 3, sign=True)
            t, k = _split(pair, held_back)
            tuned, kept = (spread(t, 3, sign=True) if t else "–"), (spread(k, 3, sign=True) if k else "–")
        share = spread(pair["rollouts_to_baseline_final"], 0, percent=True) if pair else "–"
        lines.append(
            f"| {method} | {s['heldout_gain']['mean']:+.3f} ± {s['heldout_gain']['std']:.3f} | {differences} | "
            f"{tuned} | {kept} | {share} | {s['unanimous_share']['mean']:.2f} | "
            f"{s['distinct_prompts']['mean']:.0f} | {s['max_times_selected']['mean']:.0f} |"
        )
    checks = power(runs, pairs)
    if checks:
        lines += ["", "Power: " + "; ".join(_check_line(k, v) for k, v in checks.items()) + "."]
    lines += ["", "Per seed, final held-out accuracy minus uniform's (same seed):", ""]
    for method, pair in pairs.items():
        if method != BASELINE:
            lines.append(f"- {method}: " + ", ".join(f"{d:+.3f}" for d in pair["difference"]))
    return "\n".join(lines + calibration_table(runs, summary)) + "\n"


# The calibration table's columns: (header, summary key, digits).
CALIBRATION_COLUMNS = (
    ("ECE", "ece", 3),
    ("ECE, drawn", "ece_drawn", 3),
    ("50 %", "coverage_50", 2),
    ("90 %", "coverage_90", 2),
    ("50 %, drawn", "coverage_drawn_50", 2),
    ("90 %, drawn", "coverage_drawn_90", 2),
    ("50 %, boundary", "coverage_boundary_50", 2),
    ("90 %, boundary", "coverage_boundary_90", 2),
    ("90 %, resolvable", "coverage_resolvable_90", 2),
)


def calibration_table(runs: dict, summary: dict) -> list[str]:
    """
    The markdown lines of a regime's calibration table (`calibration`): per method, mean ± std over seeds of each
    measure averaged over a run's snapshots after the first. Methods whose runs predate the measures are named apart.
    """
    recorded = [method for method, seeds in runs.items() if all("calibration" in s for s in seeds.values())]
    if not recorded:
        return []
    shares = [summary[m]["boundary_share"]["mean"] for m in recorded if "boundary_share" in summary[m]]
    resolvable = [summary[m]["resolvable_share"]["mean"] for m in recorded if "resolvable_share" in summary[m]]
    resolvable = (
        f" and where the true success lies in [0.001, 0.999], {np.mean(resolvable):.0%} of the pool, the rest being "
        "too near 0 or 1 for any run's rollouts to tell apart"
        if resolvable
        else ""
    )
    lines = [
        "",
        "Calibration against the exact truth, mean ± std over seeds of each run's mean over its snapshots after the "
        "first: the expected calibration error of the predicted success (10 bins; over every prompt, and over the "
        "prompts drawn until the next snapshot, by their draws), and how often the true logit lies in the belief's "
        "central 50 % and 90 % intervals (over every prompt, the prompts drawn, the boundary: prompts whose "
        f"group is more likely unanimous than mixed, {np.mean(shares):.0%} of the pool on average{resolvable}). A "
        "calibrated belief's intervals hold the truth 50 % and 90 % of the time; — where a selector holds no "
        "posterior over the success rate, or its runs predate the measure.",
        "",
        "| method | " + " | ".join(header for header, _, _ in CALIBRATION_COLUMNS) + " |",
        "|---" * (len(CALIBRATION_COLUMNS) + 1) + "|",
    ]
    for method in recorded:
        cells = []
        for _, key, digits in CALIBRATION_COLUMNS:
            value = summary[method].get(key)
            cells.append("—" if value is None else f"{value['mean']:.{digits}f} ± {value['std']:.{digits}f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    older = [method for method in runs if method not in recorded]
    if older:
        lines += ["", f"Not measured (runs from a results file before these measures): {', '.join(older)}."]
    return lines


def _check_line(key: str, check: dict) -> str:
    verdict = "passes" if check["passed"] else "FAILS"
    if key == "uniform_gain":
        return f"uniform gains {check['value']:+.3f} (needs >= {check['required']}: {verdict})"
    return (
        f"the oracle beats uniform by {check['value']:+.3f} ± {check['spread']:.3f} (needs > 2x the spread: {verdict})"
    )


def overview(results: dict, names: list[str]) -> str:
    """Methods by regime `names`: the final held-out accuracy minus uniform's on the same seed, mean ± std over seeds."""
    methods = list(dict.fromkeys(m for n in names for m in results["regimes"][n]["runs"]))
    lines = ["| method | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    pairs = {n: paired(results["regimes"][n]["runs"]) for n in names}
    for method in methods:
        if method == BASELINE:
            continue
        cells = [spread(pairs[n][method]["difference"], 3, sign=True) if method in pairs[n] else "–" for n in names]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PEERS = ("uniform", "mopps", "greso", "dps", "kgps_per_prompt", "oracle")


def default_versus_baselines(results: dict, names: list[str], method: str = "kgps", baselines=PEERS) -> str:
    """`method`'s final held-out accuracy minus each baseline's on the same seed, by regime (mean ± std over seeds)."""
    names = [n for n in names if method in results["regimes"][n]["runs"]]
    lines = [f"| {method} minus | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    for baseline in baselines:
        cells = []
        for name in names:
            runs = results["regimes"][name]["runs"]
            pair = paired(runs, baseline).get(method) if baseline in runs else None
            cells.append(spread(pair["difference"], 3, sign=True) if pair else "–")
        lines.append(f"| {baseline} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def merged_runs(results: dict) -> list[dict]:
    """The results files whose runs `results` reports beside its own (an older file names one, as a dict)."""
    merged = results.get("merged", [])
    return [merged] if isinstance(merged, dict) else merged


def markdown(results: dict) -> str:
    held_back = results["held_back"]
    regimes = results["regimes"]
    suite = [n for n in regimes if regimes[n]["regime"].get("column", "level") == "level"]
    wrong = [n for n in regimes if n not in suite]
    parts = [
        "# The real CPU testbed's suite",
        "",
        f"`{results['command']}`" + (f", {results['wall_s'] / 60:.1f} min" if results.get("wall_s") else "") + ".",
        "",
        f"Environment: {describe(results['environment'])}.",
        "",
    ]
    for merged in merged_runs(results):
        command = f"`{merged['command']}`" if "command" in merged else f"`{merged['path']}`"
        parts += [f"With the runs of {command} ({describe(merged['environment'])}).", ""]
    for names, title in ((suite, ""), (wrong, " where the `level` column is partly or wholly wrong")):
        if not names:
            continue
        parts += [f"Final held-out accuracy minus uniform's on the same seed{title}, mean ± std over seeds:", ""]
        parts.append(overview(results, names))
        if any("kgps" in regimes[n]["runs"] for n in names):
            parts += ["The default against each peer, on the same seed:", ""]
            parts.append(default_versus_baselines(results, names))
    for name, entry in regimes.items():
        parts.append(regime_table(name, entry, held_back))
    return "\n".join(parts)


def plot(results: dict, path: str) -> None:
    """Held-out accuracy against rollouts, mean over seeds, one panel per regime."""
    from trl_kgps.plots import pyplot

    plt = pyplot()
    if plt is None:
        return
    names = list(results["regimes"])
    every = list(dict.fromkeys(method for regime in results["regimes"].values() for method in regime["runs"]))
    # One colour per method in every panel; the baseline, the default and the oracle in colours of their own.
    colors = {BASELINE: "black", "kgps": "red", "oracle": "navy"}
    others = [method for method in every if method not in colors]
    colors |= {method: plt.get_cmap("tab20")(i % 20) for i, method in enumerate(others)}
    methods = len(every)
    across = min(len(names), 5)  # panels in a row
    down = -(-len(names) // across)
    columns = min(methods, 6, 2 * across)  # the legend's columns: as many as the panels' width holds
    rows = -(-methods // columns)  # the legend's rows, under the panels
    fig, grid = plt.subplots(
        down, across, figsize=(4.2 * across, 3.4 * down + 0.2 * rows), squeeze=False, layout="constrained"
    )
    axes = grid.reshape(1, -1)
    for ax in axes[0][len(names) :]:
        ax.set_visible(False)
    for ax, name in zip(axes[0], names):
        for method, seeds in results["regimes"][name]["runs"].items():
            curves = list(seeds.values())
            x = np.mean([c["rollouts"] for c in curves], axis=0)
            y = np.mean([c["heldout_accuracy"] for c in curves], axis=0)
            ax.plot(
                x, y, label=method, color=colors[method], linewidth=2 if method in (BASELINE, "kgps", "oracle") else 1
            )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("rollouts")
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    for row in grid:
        row[0].set_ylabel("held-out accuracy (mean over seeds)")
    legend = {}  # every method once, from whichever panel ran it
    for ax in axes[0]:
        legend |= {label: handle for handle, label in zip(*ax.get_legend_handles_labels()) if label not in legend}
    fig.legend(legend.values(), legend.keys(), fontsize=7, loc="outside lower center", ncol=columns, frameon=False)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write(results: dict, out: str, plots: bool = True, save: bool = True) -> str:
    """
    `real_cpu.json` (with `save`; `results_file.save`), `real_cpu.md` and (with `plots`)
    `real_cpu_accuracy_vs_rollouts.png` into `out`.
    """
    os.makedirs(out, exist_ok=True)
    if save:
        results_file.save(results, os.path.join(out, "real_cpu.json"))
    table = markdown(results)
    with open(os.path.join(out, "real_cpu.md"), "w") as f:
        f.write(table)
    if plots:
        plot(results, os.path.join(out, "real_cpu_accuracy_vs_rollouts.png"))
    return table
