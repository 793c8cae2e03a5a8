"""
Does the one line, `KGPSCallback()`, beat what practitioners do, on sums and on Countdown? Final held-out accuracy
paired by seed, mean ± standard error (SE = std / sqrt(n - 1), numpy's std), from runs made on one machine in one
environment: every run a table pairs is read from the files below, whose commands they record.

```bash
python benchmarks/practice_verdict.py   # writes benchmarks/results/practice_verdict.md
```

- `practice_0_4/`: `gaussian`, `insight`, `offline_filter` in the five sums regimes, seeds 0-4;
- `practice_0_4_same_machine/`: `uniform` and the one line on the same seeds and machine (the suite's committed
  `uniform` ran on another CPU, whose kernels move a run at these learning rates by up to 0.006 at its end);
- `countdown_0_4/`: every method in the three Countdown regimes, seeds 0-4.

The offline filter's profiling (8 samples of every prompt before training) is counted in its rollouts.
"""

import argparse
import json
import os
import sys

import numpy as np


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.realcpu.report import paired  # noqa: E402


RESULTS = "benchmarks/results"
# Each table: the file, and the methods it pairs (`None`: all), those run on the one machine.
SUMS = ("practice_0_4_same_machine/real_cpu.json", ("uniform", "one_line", "gaussian", "insight", "offline_filter"))
COUNTDOWN = ("countdown_0_4/real_cpu.json", None)
PEERS = ("uniform", "gaussian", "insight", "offline_filter", "mopps", "greso", "dps", "arcus", "kgps_per_prompt")


def load(path: str, methods: tuple[str, ...] | None) -> dict:
    """`{regime: {method: {seed: curves}}}` of `methods` in the results file `path`, in the regimes uniform ran."""
    with open(os.path.join(RESULTS, path)) as f:
        regimes = json.load(f)["regimes"]
    return {
        regime: {m: seeds for m, seeds in record["runs"].items() if methods is None or m in methods}
        for regime, record in regimes.items()
        if "uniform" in record["runs"]
    }


def cell(values: list[float]) -> str:
    values = np.asarray(values)
    se = values.std() / np.sqrt(max(len(values) - 1, 1))
    return f"{values.mean():+.3f} ± {se:.3f}"


def table(runs: dict, title: str) -> list[str]:
    """The one line minus each peer, and each method minus uniform, per regime."""
    regimes = list(runs)
    lines = [f"## {title}", "", "| the one line minus | " + " | ".join(f"`{r}`" for r in regimes) + " |"]
    lines.append("|---" * (len(regimes) + 1) + "|")
    for peer in PEERS:
        if all(peer in runs[r] for r in regimes):
            row = [cell(paired(runs[r], baseline=peer)["one_line"]["difference"]) for r in regimes]
            lines.append(f"| {peer} | " + " | ".join(row) + " |")
    lines += ["", "| minus uniform | " + " | ".join(f"`{r}`" for r in regimes) + " |", "|---" * (len(regimes) + 1) + "|"]
    methods = [m for m in runs[regimes[0]] if m != "uniform"]
    for method in methods:
        row = [cell(paired(runs[r])[method]["difference"]) if method in runs[r] else "–" for r in regimes]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    rollouts = [
        f"`{r}` {np.mean([s['rollouts'][-1] for s in runs[r]['offline_filter'].values()]):,.0f}"
        for r in regimes
        if "offline_filter" in runs[r]
    ]
    if rollouts:
        lines += ["", "The offline filter's rollouts, its profiling included (the others': 12,800): " + ", ".join(rollouts)]
    return lines + [""]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(RESULTS, "practice_verdict.md"))
    args = parser.parse_args(argv)
    lines = ["# The one line against what practitioners do", "", "`python benchmarks/practice_verdict.py`, seeds 0-4.", ""]
    lines += table(load(*SUMS), "Sums, seeds 0-4 (one machine)")
    if os.path.exists(os.path.join(RESULTS, COUNTDOWN[0])):
        lines += table(load(*COUNTDOWN), "Countdown, seeds 0-4")
    text = "\n".join(lines)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
