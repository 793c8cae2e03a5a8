"""
Every KGPS variant (`trl_kgps.demo.variants.VARIANTS`) and every baseline in every `trl-kgps simulate` scenario, paired
by seed with uniform, MoPPS and GRESO.

The score of a run is its final held-out accuracy in the `cpu` scenario (the one with held-out prompts) and its
final mean success over the pool elsewhere; each cell is the mean ± std over seeds of the method's score minus the
baseline's on the same seed (same initial policy, same rollout noise stream).

Run: `python benchmarks/ablation_simulator.py` (about 4 min on one core); writes
`benchmarks/results/ablation_simulator.{json,md}`.
"""

import argparse
import json
import os
import time

import numpy as np
from realcpu.environment import environment

from trl_kgps.demo.simulator import LEVEL, SCENARIOS, simulate
from trl_kgps.demo.variants import VARIANTS


BASELINES = ("uniform", "mopps", "greso")
STEPS = {"cpu": 400}  # the cpu scenario has the CPU testbed's 400 steps; the others run 300


def score(trace) -> float:
    return trace.heldout[-1] if trace.heldout else trace.success[-1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. n-1 (default %(default)s)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    methods = (*BASELINES, "ds", "oracle", *VARIANTS)
    start = time.perf_counter()
    scores = {
        scenario: {
            method: [
                score(simulate(method, SCENARIOS[scenario], STEPS.get(scenario, 300), seed))
                for seed in range(args.seeds)
            ]
            # The default sharing by level, where the scenario has levels (as trl-kgps train does with its data's).
            for method in methods + (("kgps" + LEVEL,) if SCENARIOS[scenario].level_means else ())
        }
        for scenario in SCENARIOS
    }
    results = {
        "environment": environment(),
        "seeds": args.seeds,
        "scores": scores,
        "wall_s": time.perf_counter() - start,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ablation_simulator.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = markdown(results)
    with open(os.path.join(args.out, "ablation_simulator.md"), "w") as f:
        f.write(table)
    print(table)


def markdown(results: dict) -> str:
    scores = results["scores"]
    lines = [
        f"Final score minus the baseline's on the same seed, mean ± std over {results['seeds']} seeds "
        f"(`python benchmarks/ablation_simulator.py`, {results['wall_s'] / 60:.1f} min). A method *loses* to a "
        "baseline in a scenario when its mean difference is below zero by more than twice its spread.",
        "",
    ]
    for scenario, by_method in scores.items():
        lines += [f"**{scenario}** (uniform scores {np.mean(by_method['uniform']):.4f})", ""]
        lines += ["| method | " + " | ".join(f"minus {b}" for b in BASELINES) + " | loses to |", "|---" * 5 + "|"]
        for method, values in by_method.items():
            if method == "uniform":
                continue
            cells, losses = [], []
            for baseline in BASELINES:
                if method == baseline:
                    cells.append("—")
                    continue
                difference = np.asarray(values) - np.asarray(by_method[baseline])
                cells.append(f"{difference.mean():+.4f} ± {difference.std():.4f}")
                if difference.mean() < -2 * difference.std():
                    losses.append(baseline)
            lines.append(f"| {method} | " + " | ".join(cells) + f" | {', '.join(losses) or '–'} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
