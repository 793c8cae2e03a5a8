"""
Where a selector's beliefs go, level by level, in one run of the real CPU suite (`benchmarks/real_cpu.py`).

Every `snapshot_every` steps (20), for each difficulty level: its prompts' mean true success, the selector's mean
predicted success and logit variance, and the chance that the next draw lands in the level (its share of the summed
scores, which is what the default's proportional draw gives the first prompt of a batch); then the learnt residual
prior, the last batch's normalized innovation squared and the process noise `Q` added since the start.

```bash
python benchmarks/trace_levels.py --regime base --method kgps --seed 0                     # the default, 40 s
python benchmarks/trace_levels.py --regime base --method kgps+wider_shared:level --seed 0  # a prior of 16: collapse
```

benchmarks/RECORD.md (collapse) quotes these two. Works for the KGPS methods (`kgps`, `kgps_global`, any
`trl_kgps.demo.variants.VARIANTS` name with `:level`); other selectors have no scores to trace.
"""

import argparse
import os
import sys

import numpy as np
from transformers import TrainerCallback


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from realcpu import runner, setting  # noqa: E402


class LevelTrace(TrainerCallback):
    """Prints one line per snapshot step: each level's truth, prediction, variance and chance of the next draw."""

    def __init__(self, setting, kgps):
        self.setting, self.kgps = setting, kgps
        self.levels = np.asarray(setting.train["level"])
        self.process_noise = 0.0

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.process_noise += (logs or {}).get("kgps/process_noise", 0.0)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.line(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.setting.regime.snapshot_every == 0:
            self.line(model, state.global_step)

    def line(self, model, step: int) -> None:
        selector = self.kgps.selector
        truth = self.setting.true_success(model, self.setting.train)
        predicted, variance, scores = selector.predicted_success(), selector.variance, selector.scores()
        cells = []
        for level in np.unique(self.levels):
            mask = self.levels == level
            cells.append(
                f"L{level} true {truth[mask].mean():.3f} predicted {predicted[mask].mean():.3f} "
                f"variance {variance[mask].mean():.2f} draw {scores[mask].sum() / scores.sum():.3f}"
            )
        prior = f"residual_prior {selector.residual_prior:.3g} " if selector.shared is not None else ""
        # The process noise logged at a step is applied by the next selection round.
        print(
            f"step {step:3d} | "
            + " | ".join(cells)
            + f" | {prior}nis {selector.last_nis:.2f} Q {self.process_noise:.3g}",
            flush=True,
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regime", default="base", choices=list(setting.REGIMES))
    parser.add_argument("--method", default="kgps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runner._init_worker(threads=1)
    built = setting.build(setting.REGIMES[args.regime])
    result = runner.run(built, args.method, args.seed, observers=[LevelTrace])
    levels = np.asarray(result["levels"])
    times = np.asarray(result["times_selected"])
    print(f"held-out {result['records'][-1]['heldout']:.4f}; draws per level", end=" ")
    print(", ".join(f"L{level} {int(times[levels == level].sum())}" for level in np.unique(levels)))


if __name__ == "__main__":
    main()
