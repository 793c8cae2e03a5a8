"""
Uniform's learning rate, tuned per regime: the real CPU testbed's baseline (TRL's order, `uniform`) trained at every
peak learning rate of a grid, on the tuning seeds only, with the suite's schedule. The rate that gives uniform its
best mean final held-out accuracy is the rate every method of that regime is then compared at.

```bash
python benchmarks/lr_sweep.py                 # the suite's schedule: 5 regimes x 7 rates x seeds 0-2, ~13 min on 2 cores
python benchmarks/lr_sweep.py --schedule constant_with_warmup   # the schedule the suite does not use
python benchmarks/lr_sweep.py --report_only   # the table and plot again, from lr_sweep.json
python benchmarks/lr_sweep.py --family countdown --jobs 1   # Countdown's 5 regimes x 7 rates x seeds 0-2, one core
python benchmarks/lr_sweep.py --regimes countdown_sharpened --rates 2.8e-4,4e-4,5.6e-4,8e-4,1.1e-3,1.6e-3,2.3e-3 \
    --out benchmarks/results/lr_sweep_countdown_sharpened/linear   # the grid its committed sweep ran
python benchmarks/lr_sweep.py --regimes countdown_sharpened_out_of_reach --rates 2.8e-4,4e-4,5.6e-4,8e-4,1.1e-3,1.6e-3 \
    --out benchmarks/results/lr_sweep_countdown_sharpened_out_of_reach/linear   # and its own
```

Writes `lr_sweep.json` (every run's curves), `lr_sweep.md` (the table and the rule's choice) and `lr_sweep.png` into
`--out` (`benchmarks/results/lr_sweep/<schedule>`, Countdown's `benchmarks/results/lr_sweep_countdown/<schedule>`).

The rule: the grid's rate with the highest mean final held-out accuracy over the tuning seeds, with the schedule
under which uniform's best is highest. Both schedules start with a linear warmup over the regime's `lr_warmup_steps`;
then `linear` decays to zero at the last step and `constant_with_warmup` (verl's default) holds the rate.
"""

import argparse
import dataclasses
import os
import shlex
import sys
import time

import numpy as np


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.realcpu import results_file, runner, setting  # noqa: E402
from benchmarks.realcpu.environment import environment  # noqa: E402


RATES = (1e-4, 1.4e-4, 2e-4, 2.8e-4, 4e-4, 5.6e-4, 8e-4)  # a factor of sqrt(2) apart
SCHEDULE = "linear"
TUNING_SEEDS = (0, 1, 2)
AFTER_WARMUP = {"linear": "then linear decay to zero at the last step", "constant_with_warmup": "then constant"}


def best_rate(runs: dict) -> float:
    """The rate (a key of `runs[rate][seed]` = curves) with the highest mean final held-out accuracy."""
    return max(runs, key=lambda rate: np.mean([c["heldout_accuracy"][-1] for c in runs[rate].values()]))


def table(results: dict) -> str:
    """Per regime and rate: uniform's mean final held-out accuracy ± std over the seeds, and its unanimous groups."""
    rates = sorted({float(r) for entry in results["regimes"].values() for r in entry["runs"]})
    lines = [
        "| regime | " + " | ".join(f"{r:g}" for r in rates) + " | best |",
        "|---" * (len(rates) + 2) + "|",
    ]
    for name, entry in results["regimes"].items():
        runs, cells = entry["runs"], []
        best = best_rate(runs)
        for rate in rates:
            seeds = runs.get(f"{rate:g}")
            if not seeds:
                cells.append("–")
                continue
            final = [c["heldout_accuracy"][-1] for c in seeds.values()]
            text = f"{np.mean(final):.3f} ± {np.std(final):.3f}"
            cells.append(f"**{text}**" if f"{rate:g}" == best else text)
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {float(best):g} |")
    lines += ["", "Share of uniform's groups that were unanimous (all right or all wrong), mean over the seeds:", ""]
    lines += ["| regime | " + " | ".join(f"{r:g}" for r in rates) + " |", "|---" * (len(rates) + 1) + "|"]
    for name, entry in results["regimes"].items():
        cells = []
        for rate in rates:
            seeds = entry["runs"].get(f"{rate:g}")
            cells.append(f"{np.mean([c['summary']['unanimous_share'] for c in seeds.values()]):.2f}" if seeds else "–")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: str) -> None:
    """Final held-out accuracy against the peak rate, one panel per regime, each seed and their mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["regimes"])
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.0), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], names):
        runs = results["regimes"][name]["runs"]
        rates = sorted(runs, key=float)
        x = [float(r) for r in rates]
        finals = np.asarray([[runs[r][s]["heldout_accuracy"][-1] for s in sorted(runs[r])] for r in rates])
        ax.plot(x, finals, color="0.75", lw=0.8)
        ax.plot(x, finals.mean(axis=1), "o-", color="C0", label="mean over seeds")
        best = float(best_rate(runs))
        ax.axvline(best, color="C3", ls=":", label=f"best {best:g}")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(x[::2], [f"{rate:.1e}".replace("e-0", "e-") for rate in x[::2]], fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("peak learning rate")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("uniform: final held-out accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(results: dict, out: str, save: bool = True) -> str:
    """`lr_sweep.json` (with `save`), `lr_sweep.md` and `lr_sweep.png` into `out`; the table's text."""
    os.makedirs(out, exist_ok=True)
    if save:
        results_file.save(results, os.path.join(out, "lr_sweep.json"))
    text = (
        "# Uniform's learning rate, per regime\n\n"
        f"`{results['command']}`, {results['wall_s'] / 60:.0f} min. Schedule `{results['schedule']}` (linear warmup "
        f"over each regime's warmup steps, {AFTER_WARMUP.get(results['schedule'], 'then as transformers defines it')}), "
        f"{results['steps']} steps, seeds {results['seeds']}. Final "
        "held-out accuracy of uniform, mean ± std over the seeds; in bold the rule's choice (the highest mean).\n\n"
        + table(results)
    )
    with open(os.path.join(out, "lr_sweep.md"), "w") as f:
        f.write(text)
    plot(results, os.path.join(out, "lr_sweep.png"))
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="sums", choices=setting.FAMILIES, help="whose regimes, when not named")
    parser.add_argument("--regimes", help="comma-separated (default: every regime of --family)")
    parser.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES))
    parser.add_argument("--seeds", default=",".join(map(str, TUNING_SEEDS)))
    parser.add_argument("--schedule", default=SCHEDULE, help="transformers' lr_scheduler_type (default %(default)s)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--out", help="default benchmarks/results/lr_sweep/<schedule> (Countdown: lr_sweep_countdown/)"
    )
    parser.add_argument("--report_only", action="store_true", help="rewrite the table and plot from lr_sweep.json")
    args = parser.parse_args(argv)
    folder = "lr_sweep" if args.family == "sums" else f"lr_sweep_{args.family}"
    args.out = args.out or os.path.join("benchmarks", "results", folder, args.schedule)
    args.regimes = args.regimes or ",".join(n for n, r in setting.REGIMES.items() if r.family == args.family)
    if args.report_only:
        print(report(results_file.load(os.path.join(args.out, "lr_sweep.json")), args.out, save=False))
        return 0
    names, rates = args.regimes.split(","), [float(r) for r in args.rates.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    regimes = {
        (name, rate): dataclasses.replace(setting.REGIMES[name], learning_rate=rate, lr_scheduler_type=args.schedule)
        for name in names
        for rate in rates
    }
    results = dict(
        environment=environment(1),
        command=shlex.join(["python", "benchmarks/lr_sweep.py", *(sys.argv[1:] if argv is None else argv)]),
        schedule=args.schedule,
        seeds=seeds,
        steps=setting.REGIMES[names[0]].steps,
        regimes={name: dict(regime=setting.describe(setting.REGIMES[name]), runs={}) for name in names},
    )
    tasks = [(regime, "uniform", seed) for regime in regimes.values() for seed in seeds]
    start = time.perf_counter()
    for (regime, _, seed), curves in runner.sweep(tasks, args.jobs, 1):
        rate = f"{regime.learning_rate:g}"
        results["regimes"][regime.name]["runs"].setdefault(rate, {})[str(seed)] = curves
        print(f"{regime.name} lr {rate} seed {seed}: held-out {curves['heldout_accuracy'][-1]:.4f}", flush=True)
    results["wall_s"] = time.perf_counter() - start
    print(report(results, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
