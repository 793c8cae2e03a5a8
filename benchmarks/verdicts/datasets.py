"""
What the datasets users bring change: copies of a prompt sharing one belief, and a column of another model's solve
rates as the prior. Each comparison is paired by seed (the mean over seeds of the difference, with its standard error,
SE = std / sqrt(n - 1)), at the suite's tuned learning rate.

Its runs (`benchmarks/results/INDEX.json`, `verdicts.datasets`, in order of precedence):

- `copies_20/`: `copies_20` (the `base` pool with every prompt on 20 shuffled rows), uniform, the one line (copies
  share a belief, the default) and `one_line_by_row` (one belief per row), seeds 0-4; `copies_20_no_metadata/`: the
  same without the `level` column (`one_line_no_metadata`, `one_line_no_metadata_by_row`);
- `prior_0_4/`, `prior_5_9/`: `prior_fresh` (a `solve_rate` column from the warm start's own success, 8 samples a
  prompt) and `prior_stale` (from the other warm start's), uniform, the one line (which leaves the column alone) and
  `one_line_prior` (`KGPSConfig(prior_column="solve_rate")`), seeds 0-4, then 5-9 once.

`prior_residual_0_4/`, a variant measured and left out (each prompt's residual starting at its bin's logit and the
shared part at 0, commit 386d9d0), is read by no verdict.
"""

import numpy as np

from benchmarks.realcpu.report import rollouts_to_reach
from benchmarks.verdicts.one_line import mean_se


# What it reads (INDEX.json lists the files in order of precedence).
ROLES = {"runs": "copies of a prompt and a prior column: uniform, the one line and its variants"}
# (regime, method, its comparison), in the table's order.
COMPARISONS = (
    ("copies_20", "one_line", "one_line_by_row"),
    ("copies_20", "one_line", "uniform"),
    ("copies_20", "one_line_by_row", "uniform"),
    ("copies_20", "one_line_no_metadata", "one_line_no_metadata_by_row"),
    ("copies_20", "one_line_no_metadata", "uniform"),
    ("copies_20", "one_line_no_metadata_by_row", "uniform"),
    ("prior_fresh", "one_line_prior", "one_line"),
    ("prior_fresh", "one_line", "uniform"),
    ("prior_stale", "one_line_prior", "one_line"),
    ("prior_stale", "one_line", "uniform"),
)
EARLY_STEP = 100  # the snapshot at which the prior's head start is read


def compare(mine: dict, theirs: dict) -> dict[str, float]:
    """One seed: the final held-out accuracy and that at `EARLY_STEP` minus the other's, the rollouts saved to reach
    the other's accuracy at `EARLY_STEP` (positive: fewer needed), and the mean absolute error of the predicted
    success against the truth, over every training prompt, before the first step and at `EARLY_STEP`; and the share
    of the run's groups that were unanimous."""
    early = mine["steps"].index(EARLY_STEP)
    target = theirs["heldout_accuracy"][early]
    return dict(
        final=mine["heldout_accuracy"][-1] - theirs["heldout_accuracy"][-1],
        early=mine["heldout_accuracy"][early] - target,
        saved=theirs["rollouts"][early] - rollouts_to_reach(mine["rollouts"], mine["heldout_accuracy"], target),
        error_start=mine["mae_vs_true"][0] - theirs["mae_vs_true"][0],
        error_early=mine["mae_vs_true"][early] - theirs["mae_vs_true"][early],
        unanimous=mine["summary"]["unanimous_share"] - theirs["summary"]["unanimous_share"],
    )


def table(runs: dict) -> str:
    lines = [
        f"| regime | method minus | final held-out | held-out at step {EARLY_STEP} | rollouts saved to reach its "
        f"step-{EARLY_STEP} accuracy | error of predicted success: start | step {EARLY_STEP} | unanimous groups | seeds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for regime, method, other in COMPARISONS:
        mine, theirs = runs.get(regime, {}).get(method, {}), runs.get(regime, {}).get(other, {})
        seeds = sorted(set(mine) & set(theirs), key=int)
        if not seeds:
            continue
        rows = [compare(mine[s], theirs[s]) for s in seeds]
        cells = []
        for key, digits in (
            ("final", 3),
            ("early", 3),
            ("saved", 0),
            ("error_start", 3),
            ("error_early", 3),
            ("unanimous", 3),
        ):
            mean, se = mean_se(np.asarray([row[key] for row in rows], float))
            cells.append(f"{mean:+.{digits}f} ± {se:.{digits}f}".replace("-", "−"))
        lines.append(f"| `{regime}` | `{method}` − `{other}` | " + " | ".join(cells) + f" | {seeds[0]}-{seeds[-1]} |")
    return "\n".join(lines)


def render(runs: dict, command: str) -> tuple[str, dict]:
    """The verdict's markdown from `runs["runs"]` (`runs[regime][method][seed]`), and its figures (none)."""
    return "# The datasets users bring\n\n" + table(runs["runs"]) + "\n", {}
