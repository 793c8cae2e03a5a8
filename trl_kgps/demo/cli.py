"""
The `trl-kgps` command: `trl-kgps train` runs GRPO with KGPS out of the box (TRL's and KGPS's flags; see
`trl-kgps train --help`), `trl-kgps simulate` compares prompt selectors on a simulated, drifting RL run.
"""

import argparse
import json
import os
import sys
from collections.abc import Sequence

import numpy as np

from ..plots import pyplot
from .plots import compact_number, moving_average
from .simulator import METHODS, SCENARIOS, simulate, summarize


COLUMNS = (
    "mae", "spearman", "mae_true", "informative_share", "coverage", "repeats", "rollouts", "final_success",
    "final_heldout",
)  # fmt: skip


def simulate_command(args: argparse.Namespace) -> dict:
    methods = args.selectors.split(",")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"--selectors: unknown {unknown}; choose among {list(METHODS)}.")
    scenario = SCENARIOS[args.scenario]
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as error:
        raise SystemExit(
            f"--out {args.out}: cannot create this folder ({error.strerror}); name a folder to write to."
        ) from None
    traces = {m: [simulate(m, scenario, args.steps, seed) for seed in range(args.seeds)] for m in methods}
    results = {
        "scenario": vars(scenario),
        "steps": args.steps,
        "seeds": args.seeds,
        "selectors": {m: summarize(t) for m, t in traces.items()},
        "curves": {
            m: {
                name: np.mean([getattr(t, name) for t in ts], axis=0).tolist()
                for name in ("mae", "informative_share", "success", "rollouts")
            }
            for m, ts in traces.items()
        },
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = _markdown(results)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table)
    print(table)
    written = ["results.json", "results.md"] + _plot(results, args.out)
    print(f"wrote {', '.join(written)} to {os.path.abspath(args.out)}")
    return results


def _markdown(results: dict) -> str:
    head = (
        f"Scenario `{results['scenario']['name']}`, {results['steps']} steps after warmup, {results['seeds']} seeds "
        "(mean ± std)\n\n"
    )
    columns = [c for c in COLUMNS if c in next(iter(results["selectors"].values()))]  # held-out: with levels only
    lines = ["| selector | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for method, summary in results["selectors"].items():
        cells = []
        for column in columns:
            value = summary[column]
            digits = 0 if column == "rollouts" else 3
            cells.append(f"{value['mean']:.{digits}f} ± {value['std']:.{digits}f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def _plot(results: dict, out: str) -> list[str]:
    """The three figures, each with a title, compact tick labels and the legend outside the axes; the per-step
    metrics are smoothed over a tenth of the run, with the raw curve faint behind; returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    scenario, seeds = results["scenario"]["name"], results["seeds"]
    figures = {
        "mae.png": ("mae", "step after warmup", "MAE", "Predicted vs observed success of each batch"),
        "informative_share.png": (
            "informative_share",
            "step after warmup",
            "share of groups with 0 < s < k",
            "Informative groups per batch",
        ),
        "success_vs_rollouts.png": ("success", "rollouts", "mean success rate", "Success against rollouts spent"),
    }
    for filename, (metric, x_label, y_label, title) in figures.items():
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for method, curves in results["curves"].items():
            y = np.asarray(curves[metric], dtype=float)
            x = np.asarray(curves["rollouts"]) if x_label == "rollouts" else np.arange(1, y.size + 1)
            if x_label == "rollouts":  # a smooth curve already: the pool's mean success
                ax.plot(x, y, label=method, linewidth=1.6)
                continue
            (line,) = ax.plot(x, moving_average(y, max(1, y.size // 10)), label=method, linewidth=1.6)
            ax.plot(x, y, color=line.get_color(), alpha=0.2, linewidth=0.8)
        ax.xaxis.set_major_formatter(compact_number)
        ax.set(
            xlabel=x_label,
            ylabel=y_label,
            title=f"{title}\n(scenario {scenario}, mean of {seeds} seed{'s' * (seeds != 1)})",
        )
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=100)
        plt.close(fig)
    return list(figures)


def _at_least_1(text: str) -> int:
    """A count of 1 or more, for argparse: anything else is refused with the value named."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1: give at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train"]:  # TRL's parser owns every flag of `train`
        from .train import main as train

        train(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="trl-kgps", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("train", help="GRPO with KGPS out of the box; `trl-kgps train --help` lists its flags")
    sim = commands.add_parser(
        "simulate",
        help="compare prompt selectors on a simulated drifting RL run",
        description="Runs each selector on the same simulated RL run (trl_kgps.demo.simulator) and writes "
        "results.json, results.md and three figures to --out. No model and no GPU: seconds to a minute on a CPU.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sim.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="base",
        help="which simulated run (docs/benchmarks.md describes each; 'cpu' has the CPU testbed's shape, and ranks "
        "the oracle below uniform: it does not judge selectors)",
    )
    sim.add_argument(
        "--selectors",
        default="kgps,kgps_paper,mopps,greso,dps,uniform,ds",
        help=f"comma-separated selectors, among: {', '.join(METHODS)}",
    )
    sim.add_argument(
        "--seeds", type=_at_least_1, default=3, help="runs per selector, seeds 0 .. n-1, paired across selectors"
    )
    sim.add_argument("--steps", type=_at_least_1, default=200, help="steps after the warmup epoch")
    sim.add_argument("--out", default="simulation", help="folder for the results and figures (created if missing)")
    args = parser.parse_args(argv)
    if args.command == "simulate":
        simulate_command(args)


if __name__ == "__main__":
    main()
