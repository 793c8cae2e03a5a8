"""
Where a run's rollouts went, as a figure: `plot_rollouts` over a difficulty table. matplotlib is imported only when a
figure is drawn, and is optional (`pip install matplotlib`, what the `plots` extra adds).
"""

import logging
import re
from collections.abc import Sequence
from typing import Any


logger = logging.getLogger(__name__)


def pyplot(headless: bool = True):
    """
    `matplotlib.pyplot`, on the non-interactive Agg backend for the commands (`headless`) or on the one already
    chosen (a notebook's inline backend), or None (with a warning) if matplotlib is missing.
    """
    try:
        import matplotlib

        if headless:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no figures (pip install matplotlib).")
        return None
    return plt


def plot_rollouts(
    table: Any,
    groups: Sequence | None = None,
    *,
    group_name: str = "group",
    bins: int = 5,
    title: str = "Where the rollouts went",
):
    """
    Where a run spent its rollouts: the mean number of times each prompt was selected, by group (e.g. difficulty
    level) and by bin of predicted success, against what uniform sampling gives every prompt on the same run (the
    same selections spread evenly over the pool: a dashed line). A selector that favours prompts whose rollouts
    disagree puts its bars above the line where the predicted success is away from 0 and 1, and below it elsewhere.

    Args:
        table: a difficulty table, `KGPSCallback.difficulty_table()` or `trl_kgps.difficulty_table(...)` (a
            `datasets.Dataset`, a pandas `DataFrame` or a dict), with columns `times_selected` and
            `predicted_success` (the prediction at the end of the run), one row per prompt.
        groups (`Sequence`, *optional*): one label per row of the train dataset (e.g. `dataset["level"]`; where rows
            repeat prompts, each prompt's first row's, through the table's `index` column), or one per prompt in the
            table's order: adds a panel by group, in sorted order of the labels.
        group_name (`str`, *optional*, defaults to `"group"`): what the groups are, for the axis label.
        bins (`int`, *optional*, defaults to `5`): equal-width bins of predicted success in `[0, 1]`.
        title (`str`, *optional*): the figure's title.

    Returns:
        `matplotlib.figure.Figure` or `None`: the figure, or `None` without matplotlib.

    Example:

    ```python
    >>> from trl_kgps import plot_rollouts
    >>> plot_rollouts(kgps.difficulty_table(), groups=train_dataset["level"]).savefig("rollouts.png")
    ```
    """
    import numpy as np

    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(
            f"bins={bins!r} must be a positive integer, the number of bins of predicted success (e.g. 5)."
        )
    times = np.asarray(table["times_selected"], dtype=np.float64)  # (P,)
    success = np.asarray(table["predicted_success"], dtype=np.float64)  # (P,), probabilities
    if groups is not None:
        groups = _group_per_prompt(table, groups)
    plt = pyplot(headless=False)
    if plt is None:
        return None
    uniform = times.mean()  # every prompt's count under uniform sampling, the same total spread evenly
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, success, side="right") - 1, 0, bins - 1)  # 5 bins: 0.25 -> 1, 1.0 -> 4
    panels = [
        (
            [f"{edges[b]:.1f}-{edges[b + 1]:.1f}" for b in range(bins)],
            [which == b for b in range(bins)],
            "predicted success at the end of the run",
        )
    ]
    if groups is not None:
        labels = np.asarray([str(label) for label in groups])
        names = sorted(set(labels.tolist()), key=natural_key)
        panels.insert(0, (names, [labels == name for name in names], group_name))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 1, 4.4), squeeze=False)
    for ax, (names, masks, x_label) in zip(axes[0], panels):
        counts = [int(mask.sum()) for mask in masks]
        means = [times[mask].mean() if mask.any() else 0.0 for mask in masks]
        positions = np.arange(len(names))
        ax.bar(positions, means, color="tab:blue", label="this run, mean per prompt (p: mean predicted success)")
        ax.axhline(uniform, color="black", linestyle="--", linewidth=1.2, label="uniform sampling on the same run")
        for x, mask, mean in zip(positions, masks, means):
            if mask.any():  # the group's mean predicted success, which explains its bar
                ax.annotate(f"p={success[mask].mean():.2f}", (x, mean), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(positions, [f"{name}\n{count} prompts" for name, count in zip(names, counts)], fontsize=8)
        ax.set(xlabel=x_label, ylabel="times selected per prompt")
        ax.set_ylim(0, 1.12 * max(max(means), uniform))
    handles, legend_labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, legend_labels, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=2, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.87))
    return fig


def _group_per_prompt(table: Any, groups: Sequence) -> list:
    """
    `groups` as one label per row of `table` (`P` prompts): as they are when they are `P`, else, one per row of the
    train dataset (`N >= P` where rows repeat prompts), each prompt's first row's through the table's `index` column:
    `index` `[0, 1, 3]` and `groups` `["a", "b", "a", "c"]` give `["a", "b", "c"]`.
    """
    size = len(table["times_selected"])
    if len(groups) == size:
        return list(groups)
    if not _has_column(table, "index"):
        raise ValueError(
            f"groups has {len(groups)} labels for a table of {size} prompts, which has no `index` column to find "
            "each prompt's row of the train dataset by: pass one label per prompt, in the table's order."
        )
    index = [int(row) for row in table["index"]]
    if len(groups) <= max(index, default=-1):
        raise ValueError(
            f"groups has {len(groups)} labels for a table of {size} prompts whose `index` reaches row "
            f"{max(index)} of the train dataset: pass the labels of the dataset the table was made from, one per "
            "prompt in the table's order: groups=train_dataset.select(table['index'])['level']."
        )
    return [groups[row] for row in index]


def _has_column(table: Any, name: str) -> bool:
    """Whether `table` (a `datasets.Dataset`, a pandas `DataFrame` or a dict) has the column `name`."""
    columns = getattr(table, "column_names", None)
    return name in (columns if columns is not None else table)


def natural_key(label: str) -> list:
    """Sorts labels with numbers in them by those numbers: "level 2" before "level 10", then as text."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", label)]
