"""The paper's estimation metrics, with numpy only."""

import numpy as np


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks `0 .. n-1` of `x`, ties given their average rank (e.g. [0.5, 0.2, 0.5] -> [1.5, 0, 1.5])."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size)
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / counts)[group]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation; NaN when either side is constant (the correlation is undefined)."""
    ra, rb = _average_ranks(np.asarray(a, dtype=np.float64)), _average_ranks(np.asarray(b, dtype=np.float64))
    if a.size < 2 or ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])
