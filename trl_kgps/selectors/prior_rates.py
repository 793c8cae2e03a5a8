r"""
Success rates that ship with a dataset (another model's offline pass rates: Big-Math's `llama8b_solve_rate`,
Polaris's `difficulty`) as a prior that KGPS corrects for the policy it trains.

The rates are binned (`RATE_BINS`: never solved, ten intervals of 0.1, always solved) into a categorical feature of
the shared factor (`shared_factor.design`). Each bin's shared part starts at the logit of its prompts' mean rate
instead of 0, and is learned from the policy's own rollouts like any group's: how far to trust the column is what
the filter learns about each bin, and a column that says nothing about this policy costs what an unrelated label
column costs. A missing rate (None, NaN) puts its prompt in a bin of its own that starts at 0 (p = 0.5).
"""

import numpy as np


# The bins' upper edges: a rate r falls in the first bin whose edge it does not exceed, except that 0 and 1 are bins
# of their own (a prompt the other model never or always solved).
RATE_BINS = (0.0, *np.round(np.arange(0.1, 1.0, 0.1), 1).tolist(), 1.0 - 1e-12, 1.0)
# A bin's mean rate is clipped into this range before its logit: a rate of 0 or 1 starts at logit(0.02) = -3.9.
RATE_CLIP = (0.02, 0.98)
_MISSING = "missing"


class Rates:
    """
    One success rate in `[0, 1]` per prompt, or NaN where the dataset has none.

    Args:
        name (`str`): the dataset column, which names the bins (`"solve_rate=(0.2, 0.3]"`).
        values (`np.ndarray` of shape `(N,)`): the rates; None or NaN where missing.

    Raises:
        `ValueError`: a value that is not a number in `[0, 1]`, naming the column, the value and the fix.
    """

    def __init__(self, name: str, values):
        rates = None
        if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":  # a column read through Arrow: at once
            rates = values.astype(np.float64)
        elif not any(isinstance(v, (str, bytes)) for v in values):  # numpy would read "0.3" as 0.3
            try:
                rates = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
            except (TypeError, ValueError):
                pass
        if rates is None or rates.ndim != 1 or ((rates < 0) | (rates > 1) | np.isinf(rates)).any():
            bad = next((v for v in values if not _is_rate(v)), None)
            raise ValueError(
                f"prior_column {name!r} holds {bad!r}, which is not a success rate in [0, 1]: give the share of "
                "another model's samples that were right (a count of n samples divided by n), None where unknown."
            )
        self.name, self.values = name, rates

    def labels(self) -> np.ndarray:
        """`(N,)` str: each prompt's bin, e.g. `"(0.2, 0.3]"`, `"0"`, `"1"` or `"missing"`."""
        index = np.searchsorted(np.asarray(RATE_BINS), self.values, side="left")
        names = np.array([_bin_name(i) for i in range(len(RATE_BINS))] + [_MISSING])
        return names[np.where(np.isnan(self.values), len(RATE_BINS), index)]

    def logits(self, labels: np.ndarray) -> dict[str, float]:
        """Each bin's starting logit, from its prompts' mean rate (0 for `"missing"`)."""
        start = {}
        for label in np.unique(labels).tolist():
            rates = self.values[labels == label]
            start[label] = 0.0 if label == _MISSING else float(_logit(np.clip(rates.mean(), *RATE_CLIP)))
        return start


def _bin_name(i: int) -> str:
    if i == 0:
        return "0"
    if i == len(RATE_BINS) - 1:
        return "1"
    upper = "1)" if i == len(RATE_BINS) - 2 else f"{RATE_BINS[i]:g}]"
    return f"({RATE_BINS[i - 1]:g}, {upper}"


def _is_rate(value) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    try:
        return value is None or value != value or 0.0 <= float(value) <= 1.0
    except (TypeError, ValueError):
        return False


def _logit(p: float) -> float:
    return float(np.log(p) - np.log1p(-p))
