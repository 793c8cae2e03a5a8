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

from ._plots import pyplot
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
    os.makedirs(args.out, exist_ok=True)
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
    _plot(results, args.out)
    return results


def _markdown(results: dict) -> str:
    head = f"Scenario `{results['scenario']['name']}`, {results['steps']} steps after warmup, {results['seeds']} seeds (mean ± std)\n\n"
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


def _plot(results: dict, out: str) -> None:
    plt = pyplot()
    if plt is None:
        return
    figures = {
        "mae.png": ("mae", "step", "MAE, predicted vs empirical success"),
        "informative_share.png": ("informative_share", "step", "share of groups with 0 < s < k"),
        "success_vs_rollouts.png": ("success", "rollouts", "mean success rate"),
    }
    for filename, (metric, x_axis, label) in figures.items():
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for method, curves in results["curves"].items():
            y = np.asarray(curves[metric])
            x = np.asarray(curves["rollouts"]) if x_axis == "rollouts" else np.arange(1, y.size + 1)
            ax.plot(x, y, label=method)
        ax.set_xlabel(x_axis)
        ax.set_ylabel(label)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=80)
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train"]:  # TRL's parser owns every flag of `train`
        from .train import main as train

        train(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="trl-kgps", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("train", help="GRPO with KGPS out of the box; `trl-kgps train --help` lists its flags")
    sim = commands.add_parser("simulate", help="compare prompt selectors on a simulated drifting RL run")
    sim.add_argument("--scenario", choices=sorted(SCENARIOS), default="base")
    sim.add_argument(
        "--selectors", default="kgps,mopps,greso,uniform,ds", help=f"comma-separated, among {','.join(METHODS)}"
    )
    sim.add_argument("--seeds", type=int, default=3)
    sim.add_argument("--steps", type=int, default=200)
    sim.add_argument("--out", default="simulation")
    args = parser.parse_args(argv)
    if args.command == "simulate":
        simulate_command(args)


if __name__ == "__main__":
    main()
